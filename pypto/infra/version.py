"""Versions and the machine: what every cache key, manifest and provenance record names.

Kept at the bottom of the package so that the compiler, the database and the bench can all say
which PyPTO and Halide made a result without importing ``pypto`` (the public face, which imports
everything).
"""

from __future__ import annotations

import platform

__version__ = "0.1.0"


def halide_version() -> str:
    """The installed Halide wheel's version, or ``"unknown"`` when the metadata cannot be read."""
    try:
        from importlib.metadata import version

        return version("halide")
    except Exception:  # a source build without metadata still runs; the key then says so
        return "unknown"


def cpu_model() -> str:
    """The CPU's model name (Linux ``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
