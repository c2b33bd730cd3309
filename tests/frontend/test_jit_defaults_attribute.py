"""``@pypto.jit def f(x, k=2.0)`` then ``f.__defaults__ = (5.0,)``: the attribute was set on the
jit wrapper, where nothing read it, and calls kept the old default with no word. The wrapper's
``__defaults__`` and ``__kwdefaults__`` are the function's own, as on a plain function (a
changed default of the function is then the replay guard's business)."""
import numpy as np

import pypto


def test_defaults_set_on_the_decorated_function_are_the_functions():
    @pypto.jit
    def f(x, k=2.0, *, b=1.0):
        return x * k + b

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert f.__defaults__ == (2.0,) and f.__kwdefaults__ == {"b": 1.0}
    f.__defaults__ = (5.0,)
    f.__kwdefaults__ = {"b": -1.0}
    assert f.__wrapped__.__defaults__ == (5.0,)
    assert f.__wrapped__.__kwdefaults__ == {"b": -1.0}
    np.testing.assert_allclose(f(x), x * 5 - 1)
    np.testing.assert_allclose(f.__wrapped__(x), x * 5 - 1)     # the plain function agrees
