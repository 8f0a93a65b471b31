"""Thread and OpenMP settings, in one home.

llama.cpp's OpenMP worker threads spin while idle; on a busy 2-core machine that makes generation
about 10x slower, so every entry point that may load the embedded model (the CLI, eval and
synthesizer drivers, Ray workers, ``agentrag doctor``) calls :func:`passive_openmp` before any
OpenMP runtime starts (torch, onnxruntime and llama.cpp read the variable once, at start). An
explicit ``OMP_WAIT_POLICY`` from the user wins.
"""

from __future__ import annotations

import os


def passive_openmp() -> None:
    """Make OpenMP threads wait passively (``OMP_WAIT_POLICY=PASSIVE``) unless the user set it."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


__all__ = ["passive_openmp"]
