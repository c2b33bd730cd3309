"""Deterministic inputs for an op at a concrete shape (for tuning, checking and benchmarks)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import ShapeError


_MAX_EXTENT = (1 << 31) - 1


def parse_shape(text: str) -> dict[str, int]:
    """``"M=1024,N=1024,K=1024"`` -> ``{"M": 1024, "N": 1024, "K": 1024}``."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        name = name.strip().upper()
        if not sep or not name.isidentifier():
            raise ShapeError(f"shape item {part!r} must look like NAME=INT (e.g. M=1024)")
        try:
            n = int(value)
        except ValueError:
            raise ShapeError(f"shape item {part!r}: {value!r} is not an integer") from None
        if n < 1:
            raise ShapeError(f"shape item {part!r}: extents must be >= 1")
        if n > _MAX_EXTENT:
            # Halide's buffer extents are 32-bit: a larger one cannot describe any array.
            raise ShapeError(f"shape item {name}={n}: extents must be at most {_MAX_EXTENT} "
                             f"(2**31 - 1, Halide's buffer extents are 32-bit)")
        if name in out:
            raise ShapeError(f"shape names {name} twice ({name}={out[name]} and {part!r}); "
                             f"give each dim once")
        out[name] = n
    return out


def complete_dims(op, shape: Mapping[str, int], params: Mapping) -> dict[str, int]:
    """Checks that ``shape`` names every input dim of ``op`` and adds the derived output dims."""
    need = op.input_dims
    missing = [d for d in need if d not in shape]
    extra = [d for d in shape if d not in op.dims]
    if missing or extra:
        raise ShapeError(f"{op.name}: shape must name {', '.join(need)}"
                         + (f"; missing {', '.join(missing)}" if missing else "")
                         + (f"; unknown {', '.join(extra)}" if extra else "")
                         + f" (e.g. --shape {','.join(f'{d}={v}' for d, v in (op.example or {d: 64 for d in need}).items())})")
    dims = {d: int(shape[d]) for d in need}
    if op.derive is not None:
        for d, n in op.derive(dict(dims), dict(params)).items():
            if n < 1:
                raise ShapeError(f"{op.name}: output dim {d} would be {n}; inputs too small")
            dims[d] = int(n)
    return dims


#: Inputs larger than this (in all) are refused before any is made: a shape typed with a zero
#: too many ended in NumPy's MemoryError or "array is too big" traceback.
MAX_INPUT_BYTES = 1 << 36


def check_size(op, dtypes, dims: Mapping[str, int]) -> None:
    """A ShapeError when the op's inputs at ``dims`` would take more than MAX_INPUT_BYTES or
    more than the memory available now: one line where NumPy would fail with a traceback."""
    from ..errors import ShapeError

    total = 0
    for spec, dt in zip(op.inputs, dtypes):
        n = 1
        for d in spec.dims:
            n *= int(dims.get(d, 1))
        total += n * np.dtype(dt).itemsize
    if total > MAX_INPUT_BYTES:
        raise ShapeError(f"{op.name}: inputs of {dict(dims)} would take {total / 2**30:.1f} GiB "
                         f"(at most {MAX_INPUT_BYTES / 2**30:.0f} GiB are made); pick a "
                         f"smaller shape")
    avail = _available_memory()
    if avail is not None and total > avail:
        raise ShapeError(f"{op.name}: inputs of {dict(dims)} would take {total / 2**30:.1f} GiB, "
                         f"more than the {avail / 2**30:.1f} GiB of free memory; pick a "
                         f"smaller shape")


def _available_memory() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (free memory plus what the page cache would give
    back), or None where there is no such file."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def make_inputs(op, dtypes, dims: Mapping[str, int], params: Mapping, seed: int = 0) -> list[np.ndarray]:
    """Random inputs in the op's canonical form; ops with constraints supply ``make_inputs``."""
    check_size(op, dtypes, dims)
    rng = np.random.default_rng(seed)
    hook = getattr(op, "make_inputs", None)
    if hook is not None:
        return list(hook(dims, dtypes, params, rng))
    out = []
    for spec, dt in zip(op.inputs, dtypes):
        shape = tuple(dims[d] for d in spec.dims)
        kind = np.dtype(dt).kind
        if kind == "f":
            a = rng.uniform(-1.0, 1.0, size=shape).astype(dt)
        elif kind == "b":
            a = rng.integers(0, 2, size=shape).astype(bool)
        else:
            info = np.iinfo(dt)
            a = rng.integers(max(info.min, -50), min(info.max, 50) + 1, size=shape).astype(dt)
        out.append(a)
    return out
