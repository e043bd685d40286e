"""numpy's OpenBLAS on one thread while the simulator runs.

A GEMM instruction's products are small matrices (hundreds of rows, BLOCK_OUT columns): on a
busy machine, OpenBLAS's worker threads spin and make each product ~100x slower than one thread
does. :func:`single_thread` sets the thread count of numpy's bundled scipy-openblas to 1 and
restores it after; where that library cannot be found it does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import glob
import os
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

_lock = threading.Lock()
_depth = 0


@functools.cache
def _functions() -> tuple[Any, Any] | None:
    pattern = os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs",
                           "libscipy_openblas*.so*")
    for path in glob.glob(pattern):
        try:
            lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 0))
        except OSError:
            continue
        for suffix in ("64_", ""):
            get = getattr(lib, f"scipy_openblas_get_num_threads{suffix}", None)
            put = getattr(lib, f"scipy_openblas_set_num_threads{suffix}", None)
            if get is not None and put is not None:
                return get, put
    return None


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    global _depth
    fns = _functions()
    if fns is None:
        yield
        return
    get, put = fns
    with _lock:
        _depth += 1
        if _depth == 1:
            single_thread.saved = int(get())  # type: ignore[attr-defined]
            put(ctypes.c_int(1))
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                put(ctypes.c_int(single_thread.saved))  # type: ignore[attr-defined]
