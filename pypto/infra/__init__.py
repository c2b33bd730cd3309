"""Shared infrastructure: the one low layer that the compiler, the bench and the tuner all stand on.

It holds what more than one layer needs and that needs nothing above :mod:`pypto.errors` and
:mod:`pypto.dtypes`: the version (:mod:`.version`), the profiling switch the compiler reads
(:mod:`.profiling`), input generation (:mod:`.inputs`), the timing protocol (:mod:`.timing`) and
the output check (:mod:`.verify`). Nothing here imports another part of PyPTO; the layer order is
pinned by ``tests/test_layers.py``.
"""
