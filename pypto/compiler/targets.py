"""Targets: short names, Halide target strings, and the target of the current context."""

from __future__ import annotations

import contextlib
import contextvars
import re

import halide as hl

from ..errors import TargetError

#: Short names accepted wherever a target is asked for. Full Halide target strings work as well.
SHORT_NAMES = {
    "host": "host",
    "x86-64-avx2": "x86-64-linux-avx-avx2-f16c-fma-sse41",
    "x86-64-avx512": "x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41",
    "arm-64-linux": "arm-64-linux",
    "arm-64-android": "arm-64-android",
    "cuda": "host-cuda-cuda_capability_70",
    "opencl": "host-opencl-cl_doubles",
    "vulkan": "host-vulkan-vk_int8-vk_int16-vk_int64-vk_float16-vk_float64-vk_v13",
    "metal": "host-metal",
    "wasm": "wasm-32-wasmrt",
}

_current: contextvars.ContextVar[hl.Target | None] = contextvars.ContextVar("pypto_target",
                                                                            default=None)
_host: hl.Target | None = None


def host() -> hl.Target:
    """The JIT target of this machine (from HL_JIT_TARGET if set)."""
    global _host
    if _host is None:
        _host = hl.get_jit_target_from_environment()
    return _host


def parse(name: str | hl.Target) -> hl.Target:
    """A Halide Target from a short name or a full target string; TargetError if unknown."""
    if isinstance(name, hl.Target):
        return name
    if not isinstance(name, str) or not name.strip():
        raise TargetError(f"a target must be a name, got {name!r}; known: {', '.join(SHORT_NAMES)}")
    text = SHORT_NAMES.get(name.strip(), name.strip())
    if text == "host":
        return host()
    if text.startswith("host-") and "jit" not in text:
        text = str(host()).replace("-jit", "") + text[4:]
    if not re.fullmatch(r"[a-z0-9_\-]+", text) or not hl.Target.validate_target_string(text):
        raise TargetError(f"unknown target {name!r}; use a short name ({', '.join(SHORT_NAMES)}) "
                          "or a Halide target string such as 'x86-64-linux-avx2'")
    return hl.Target(text)


def family(target: hl.Target) -> str:
    """The database folder a target's schedules live in, e.g. ``x86-64-avx2`` or ``host-opencl``.

    The family holds the architecture, bit width and the features that change which schedule wins
    (vector ISA, GPU API); OS and tuning hints are left out.
    """
    arch = {hl.TargetArch.X86: "x86", hl.TargetArch.ARM: "arm"}.get(target.arch,
                                                                    str(target.arch).split(".")[-1].lower())
    base = f"{arch}-{target.bits}"
    if target.arch == hl.TargetArch.X86:
        for feat, tag in ((hl.TargetFeature.AVX512_Skylake, "avx512"), (hl.TargetFeature.AVX2, "avx2"),
                          (hl.TargetFeature.SSE41, "sse41")):
            if target.has_feature(feat):
                base += f"-{tag}"
                break
    for feat, tag in ((hl.TargetFeature.CUDA, "cuda"), (hl.TargetFeature.OpenCL, "opencl"),
                      (hl.TargetFeature.Vulkan, "vulkan"), (hl.TargetFeature.Metal, "metal")):
        if target.has_feature(feat):
            base += f"-{tag}"
    return base


def current() -> hl.Target:
    """The target that ``pypto.ops`` calls compile for right now."""
    return _current.get() or host()


@contextlib.contextmanager
def target(name: str | hl.Target):
    """``with pypto.target("opencl"):`` makes op calls inside compile for and run on that target."""
    t = parse(name)
    if t.has_gpu_feature() and "jit" not in str(t):
        t = t.with_feature(hl.TargetFeature.JIT)
    token = _current.set(t)
    try:
        yield t
    finally:
        _current.reset(token)
