"""Helpers of the VTA compiler tests: the matrix multiply of TVM's tutorial (its compute,
before any schedule), and the tutorials' deploy steps (save, upload, load on the remote) and
packing of a 2-D matrix into VTA's (outer, inner, BATCH, BLOCK) tiles."""

from __future__ import annotations

import numpy as np

from tvmpy import te
from tvmpy.contrib import utils


def gemm_compute(env, o: int, n: int, m: int):
    """A (o, n, BATCH, BLOCK_IN) x B (m, n, BLOCK_OUT, BLOCK_IN) -> C int8 through the
    A_buf / B_buf / C_buf stages the schedules put in VTA's scopes."""
    A = te.placeholder((o, n, env.BATCH, env.BLOCK_IN), name="A", dtype=env.inp_dtype)
    B = te.placeholder((m, n, env.BLOCK_OUT, env.BLOCK_IN), name="B", dtype=env.wgt_dtype)
    A_buf = te.compute((o, n, env.BATCH, env.BLOCK_IN), lambda *i: A(*i), "A_buf")
    B_buf = te.compute((m, n, env.BLOCK_OUT, env.BLOCK_IN), lambda *i: B(*i), "B_buf")
    ko = te.reduce_axis((0, n), name="ko")
    ki = te.reduce_axis((0, env.BLOCK_IN), name="ki")
    C_buf = te.compute(
        (o, m, env.BATCH, env.BLOCK_OUT),
        lambda bo, co, bi, ci: te.sum(
            A_buf[bo, ko, bi, ki].astype(env.acc_dtype)
            * B_buf[co, ko, ci, ki].astype(env.acc_dtype), axis=[ko, ki]),
        name="C_buf")
    C = te.compute((o, m, env.BATCH, env.BLOCK_OUT),
                   lambda *i: C_buf(*i).astype(env.inp_dtype), name="C")
    return A, B, A_buf, B_buf, C_buf, C


def deploy(remote, mod, fname: str):
    """Save ``mod`` as ``fname``, upload it and load it on ``remote`` (the tutorials' steps)."""
    temp = utils.tempdir()
    mod.save(temp.relpath(fname))
    remote.upload(temp.relpath(fname))
    return remote.load_module(fname)


def pack(mat: np.ndarray, batch: int, block: int) -> np.ndarray:
    """(outer0 * batch, outer1 * block) -> (outer0, outer1, batch, block), as the tutorials."""
    rows, cols = mat.shape
    return mat.reshape(rows // batch, batch, cols // block, block).transpose((0, 2, 1, 3))
