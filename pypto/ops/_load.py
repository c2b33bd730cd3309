"""Resolving an op given on the command line: a registered name, ``file.py:NAME`` or ``pkg.mod:NAME``.

Loading a user's file or module runs that user's code, by the user's choice on the command line.
Schedule files never do.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys

from ..errors import UnknownOpError
from ._op import Op
from ._registry import get_op


def resolve_op(spec: str) -> Op:
    """The op named by ``spec``; UnknownOpError when it cannot be found.

    ``graph:PATH`` names a traced program written as data by ``pypto.frontend.serial`` (how the
    tuner's workers receive a program); loading it imports only registered ops.
    """
    if spec.startswith("graph:"):
        from ..frontend.serial import load_op   # lazy plug-in point: programs sit above ops

        return load_op(spec[len("graph:"):])
    if ":" not in spec:
        return get_op(spec)
    where, _, name = spec.rpartition(":")
    if where.endswith(".py") or os.sep in where:
        path = os.path.abspath(where)
        if not os.path.isfile(path):
            raise UnknownOpError(f"no file {where!r} (from {spec!r})")
        mod_name = f"pypto_user_{abs(hash(path))}"
        if mod_name not in sys.modules:
            # (A file without a .py name has no loader: importlib failed with "'NoneType' object
            # has no attribute 'loader'".)
            loader = importlib.machinery.SourceFileLoader(mod_name, path)
            loader_spec = importlib.util.spec_from_file_location(mod_name, path, loader=loader)
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[mod_name] = module
            try:
                loader_spec.loader.exec_module(module)
            except BaseException as e:
                del sys.modules[mod_name]
                if isinstance(e, SyntaxError):
                    raise UnknownOpError(f"{where} is not valid Python (line {e.lineno}, column "
                                         f"{e.offset}: {e.msg}); an op file is Python source "
                                         f"declaring ops with @pypto.op") from None
                if not isinstance(e, Exception):    # SystemExit, KeyboardInterrupt
                    raise
                tb, line = e.__traceback__, None
                while tb is not None:          # the op file's own line, where it raised
                    if tb.tb_frame.f_code.co_filename == path:
                        line = tb.tb_lineno
                    tb = tb.tb_next
                at = f" at line {line}" if line else ""
                raise UnknownOpError(f"loading {where} failed{at}: {type(e).__name__}: {e}") from e
        module = sys.modules[mod_name]
    else:
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as e:
            raise UnknownOpError(f"cannot import module {where!r} (from {spec!r}): {e}") from None
    obj = getattr(module, name, None)
    if not isinstance(obj, Op) and not hasattr(obj, "specialize"):   # an op, or a composite op
        raise UnknownOpError(f"{spec!r}: {name!r} is not a pypto op (declare it with @pypto.op)")
    return obj
