"""Targets: short names, Halide target strings, and the target of the current context.

Short names (:data:`SHORT_NAMES`) cover the usual CPUs and the four GPU APIs. A CUDA target may
name its compute capability: ``cuda-sm80``, ``cuda-sm_80``, ``cuda:80`` and ``cuda80`` all mean
the host CPU plus CUDA with Halide's ``cuda_capability_80`` feature. Halide 21 knows the
capabilities in :data:`CUDA_CAPABILITIES`; any other (``cuda-sm90``, a typo like ``cuda-sm99``) is
a TargetError listing them, rather than a silent build for another one. For a newer GPU name the
newest known (``cuda-sm86``): code for an older capability runs on newer devices. Plain ``cuda``
is capability 7.0. Any full Halide target string (``host-opencl``, ``x86-64-linux-avx2-cuda``) works too.
"""

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

#: CUDA compute capabilities Halide 21 has a target feature for (``cuda_capability_XX``).
CUDA_CAPABILITIES = (30, 32, 35, 50, 61, 70, 75, 80, 86)
_CUDA_RE = re.compile(r"^cuda(?:[-:_]?(?:sm_?)?(\d{2,3}))?$")

_current: contextvars.ContextVar[hl.Target | None] = contextvars.ContextVar("pypto_target",
                                                                            default=None)
_host: hl.Target | None = None


def host() -> hl.Target:
    """The JIT target of this machine (from HL_JIT_TARGET if set)."""
    global _host
    if _host is None:
        _host = hl.get_jit_target_from_environment()
    return _host


def host_cpu(target: hl.Target) -> bool:
    """Whether this machine's CPU runs ``target``'s host code and its C compiler links it: the
    same architecture, bit width and operating system."""
    h = host()
    return (target.arch, target.bits, target.os) == (h.arch, h.bits, h.os)


def _known() -> str:
    return ", ".join(SHORT_NAMES) + ", cuda-smXX (XX in " + "/".join(map(str, CUDA_CAPABILITIES)) + ")"


def cuda_target_string(capability: int | None = None) -> str:
    """The target string of the host CPU plus CUDA at ``capability`` (e.g. 80 for sm_80).

    Raises:
        TargetError: Halide has no feature for ``capability``; the message lists those it has.
    """
    if capability is None:
        return SHORT_NAMES["cuda"]
    if capability not in CUDA_CAPABILITIES:
        known = ", ".join(map(str, CUDA_CAPABILITIES))
        why = "too old" if capability < CUDA_CAPABILITIES[0] else "unknown to this Halide"
        newest = CUDA_CAPABILITIES[-1]
        raise TargetError(f"CUDA compute capability {capability} is {why}; known: {known} "
                          f"(e.g. 'cuda-sm80'). For a newer GPU use 'cuda-sm{newest}': code built "
                          "for an older capability runs on newer devices")
    return f"host-cuda-cuda_capability_{capability}"


def _expand(name: str) -> str:
    """A short name's target string (``name`` itself when it is not a short name)."""
    key = name.lower()
    if key in SHORT_NAMES:
        return SHORT_NAMES[key]
    m = _CUDA_RE.match(key)
    if m:
        return cuda_target_string(int(m.group(1)) if m.group(1) else None)
    return name


def parse(name: str | hl.Target) -> hl.Target:
    """A Halide Target from a short name or a full target string; TargetError if unknown.

    >>> parse("cuda-sm80").has_feature(hl.TargetFeature.CUDACapability80)
    True
    """
    if isinstance(name, hl.Target):
        return name
    if not isinstance(name, str) or not name.strip():
        raise TargetError(f"a target must be a name, got {name!r}; known: {_known()}")
    text = _expand(name.strip())
    if text == "host":
        return host()
    if text.startswith("host-") and "jit" not in text:
        text = str(host()).replace("-jit", "") + text[4:]
    if not re.fullmatch(r"[a-z0-9_\-]+", text) or not hl.Target.validate_target_string(text):
        raise TargetError(f"unknown target {name!r}; use a short name ({_known()}) "
                          "or a Halide target string such as 'x86-64-linux-avx2'")
    try:
        return hl.Target(text)
    except hl.HalideError as e:   # well-formed, but its features do not go together
        why = str(e).strip().splitlines()[-1] if str(e).strip() else "Halide refused it"
        raise TargetError(f"target {name!r} is not one Halide can build for: {why}; drop the "
                          f"features that conflict") from None


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


#: Target-string pieces for the tags of a database family (see :func:`family`).
_FAMILY_TAGS = {
    "avx512": SHORT_NAMES["x86-64-avx512"].split("-linux-")[1],
    "avx2": SHORT_NAMES["x86-64-avx2"].split("-linux-")[1],
    "sse41": "sse41",
    "cuda": SHORT_NAMES["cuda"].split("host-")[1],
    "opencl": SHORT_NAMES["opencl"].split("host-")[1],
    "vulkan": SHORT_NAMES["vulkan"].split("host-")[1],
    "metal": "metal",
}


def for_family(name: str) -> hl.Target:
    """A target whose :func:`family` is ``name``: the host's own when it matches, else Linux.

    It is what the schedules stored under that family are compiled for when they are checked.

    >>> family(for_family("x86-64-avx2-cuda"))
    'x86-64-avx2-cuda'
    """
    if name == family(host()):
        return host()
    arch, _, rest = name.partition("-")
    bits, _, tags = rest.partition("-")
    pieces = [_FAMILY_TAGS.get(t) for t in tags.split("-")] if tags else []
    arch = {"webassembly": "wasm"}.get(arch, arch)  # family() spells out Halide's arch name
    os_name = "wasmrt" if arch == "wasm" else "linux"
    text = "-".join([arch, bits, os_name, *(p for p in pieces if p)])
    if None in pieces or not hl.Target.validate_target_string(text):
        raise TargetError(f"unknown target family {name!r}; families look like 'x86-64-avx2' or "
                          f"'arm-64-cuda' (tags: {', '.join(_FAMILY_TAGS)})")
    return hl.Target(text)


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
