"""libgomp is not fork-safe: a child forked after a parallel region ran hangs in its next
parallel region (the pool's threads do not exist in the child). After a fork, the child's
OpenMP parallel loops are made to run on one thread (correct, not parallel).

This matters for the C backend (``#pragma omp parallel for``) and for LLVM modules built with
``PARALLEL_RUNTIME=gomp``. The LLVM backend's default runtime, tvmpy's own pool
(runtime/parallel_pool.py), needs no guard: a fork child restarts it and its loops stay parallel.

Installed by every loader of compiled code: the code generators' ``build`` and ``load_module``.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["install_fork_guard"]

_installed = False


def _serial_openmp_in_child() -> None:
    try:
        gomp = ctypes.CDLL("libgomp.so.1", mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
    except OSError:  # libgomp not loaded in this process: nothing to do
        return
    gomp.omp_set_num_threads(1)


def install_fork_guard() -> None:
    global _installed
    if _installed:
        return
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_serial_openmp_in_child)
    _installed = True
