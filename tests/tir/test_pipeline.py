"""lower_pipeline end to end: te schedules -> form 1 -> passes -> form 2, checked against numpy
with the loop-IR interpreter; DUMP_IR files and DEBUG timing lines."""

from __future__ import annotations

import os

import numpy as np
import pytest
from tir_pass_helpers import RNG

import tvmpy as tvm
from tvmpy import config, te, tir
from tvmpy.te.schedule_ops import schedule_to_primfunc
from tvmpy.tir import interpreter
from tvmpy.tir.analysis import lowered_errors, verify_single_definition
from tvmpy.tir.pipeline import PASSES, lower_pipeline


def _lower_and_run(s, tensors, inputs, out_shapes, sizes=None, dtype="float32"):
    f1 = schedule_to_primfunc(s, tensors, "k")
    f2 = lower_pipeline(f1)
    assert f2.attrs["tir.lowered"] is True
    assert not lowered_errors(f2), lowered_errors(f2)
    verify_single_definition(f2)
    outs = [RNG.uniform(-1, 1, sh).astype(dtype) for sh in out_shapes]
    args = [*inputs, *outs]
    interpreter.run(f2, args)
    ref_outs = [o.copy() for o in outs]
    interpreter.run(f1, [*inputs, *ref_outs])
    for o, r in zip(outs, ref_outs):
        np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-6)
    return f2, outs


def _rand(*shape):
    return RNG.uniform(-1, 1, shape).astype("float32")


@pytest.mark.parametrize("n,factor", [(37, 8), (16, 4), (1, 4), (13, 16)])
def test_split_vectorize_elementwise(n, factor):
    A = te.placeholder((n, 7), name="A")
    B = te.compute((n, 7), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    fused = s[B].fuse(*B.op.axis)
    xo, xi = s[B].split(fused, factor=factor)
    s[B].vectorize(xi)
    a = _rand(n, 7)
    f, (b,) = _lower_and_run(s, [A, B], [a], [(n, 7)])
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


def test_symbolic_size_split_partitioned():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 3.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(xi)
    f1 = schedule_to_primfunc(s, [A, B], "k")
    f2 = lower_pipeline(f1)
    assert "ramp(" in str(f2)
    for size in (1, 8, 13, 64, 67):
        a = _rand(size)
        b = np.zeros(size, "float32")
        interpreter.run(f2, [a, b])
        np.testing.assert_allclose(b, a + 3, rtol=1e-6)


def test_tiled_matmul_cache_write_unroll_vectorize_parallel():
    N, K, M = 19, 7, 24
    A = te.placeholder((N, K), name="A")
    B = te.placeholder((K, M), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    s[C].parallel(io)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (kk,) = s[CC].op.reduce_axis
    s[CC].reorder(kk, ci, cj)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    s[C].vectorize(ji)
    a, b = _rand(N, K), _rand(K, M)
    f, (c,) = _lower_and_run(s, [A, B, C], [a, b], [(N, M)])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    assert "ramp(" in str(f) and "parallel(" in str(f)


def test_pragma_auto_unroll_and_padding_inline():
    n = 10
    A = te.placeholder((n,), name="A")
    P = te.compute((n + 2,), lambda i: te.if_then_else(
        tir.all(i >= 1, i < n + 1), A[i - 1], 0.0), name="P")
    B = te.compute((n,), lambda i: P[i] + P[i + 1] + P[i + 2], name="B")
    s = te.create_schedule(B.op)
    s[P].compute_inline()
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    s[B].pragma(xo, "auto_unroll_max_step", 16)
    a = _rand(n)
    f, (b,) = _lower_and_run(s, [A, B], [a], [(n,)])
    p = np.concatenate([[0], a, [0]])
    np.testing.assert_allclose(b, p[:-2] + p[1:-1] + p[2:], rtol=1e-5)
    assert "pragma_auto_unroll_max_step" not in str(f)


def test_vthread_binding():
    n = 16
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 3.0, name="B")
    C = te.compute((n,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], nparts=2)
    s[C].bind(xo, te.thread_axis("vthread"))
    s[B].compute_at(s[C], xo)
    a = _rand(n)
    f, (c,) = _lower_and_run(s, [A, C], [a], [(n,)])
    np.testing.assert_allclose(c, a * 3 + 1, rtol=1e-6)
    assert "virtual_thread" not in str(f)


def test_double_buffer_schedule():
    N, M = 6, 8
    A = te.placeholder((N, M), name="A")
    B = te.compute((N, M), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    AA = s.cache_read(A, "local", [B])
    s[AA].compute_at(s[B], B.op.axis[0])
    s[AA].double_buffer()
    a = _rand(N, M)
    f, (b,) = _lower_and_run(s, [A, B], [a], [(N, M)])
    np.testing.assert_allclose(b, a * 2, rtol=1e-6)
    assert "double_buffer_write" in str(f)


def test_storage_align_and_reuse_between_stages():
    N = 9
    A = te.placeholder((N, N), name="A")
    B = te.compute((N, N), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((N, N), lambda i, j: B[i, j] * 2.0, name="C")
    D = te.compute((N, N), lambda i, j: C[i, j] - 3.0, name="D")
    E_ = te.compute((N, N), lambda i, j: D[i, j] * D[i, j], name="E")
    s = te.create_schedule(E_.op)
    s[B].storage_align(B.op.axis[0], 16, 0)
    a = _rand(N, N)
    f, (e,) = _lower_and_run(s, [A, E_], [a], [(N, N)])
    np.testing.assert_allclose(e, ((a + 1) * 2 - 3) ** 2, rtol=1e-5)


def test_tvm_lower_uses_pipeline():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    f = tvm.lower(s, [A, B], name="addone")
    assert f.attrs.get("tir.lowered") is True


def test_dump_ir_writes_numbered_files(tmp_path, capsys):
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    f1 = schedule_to_primfunc(s, [A, B], "dumped")
    with config.config(DUMP_IR=str(tmp_path), DEBUG=1):
        lower_pipeline(f1)
    files = sorted(os.listdir(tmp_path))
    names = ["00_input.txt"] + [f"{i:02d}_{p.name}.txt" for i, p in
                                enumerate(PASSES, start=1)]
    assert files == sorted(names)
    assert "def dumped(" in (tmp_path / "02_StorageFlatten.txt").read_text()
    out = capsys.readouterr().out
    assert "StorageFlatten" in out and "ms" in out


def test_bad_input():
    with pytest.raises(TypeError, match="PrimFunc"):
        lower_pipeline("not a function")


def test_custom_passes_run_in_their_phase(tmp_path):
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    f1 = schedule_to_primfunc(s, [A, B], "custom")
    seen = []

    def record_phase1(f):
        seen.append(("p1", len(f.body.body.buffer.shape)))
        return f

    def record_phase3(f):
        seen.append(("p3", f.attrs.get("tir.lowered")))
        return f

    with config.config(DUMP_IR=str(tmp_path)):
        lower_pipeline(f1, "llvm", custom_passes=[(3, record_phase3), (1, record_phase1)])
    assert seen == [("p1", 1), ("p3", None)]
    assert (tmp_path / "04_record_phase1.txt").exists()
    with pytest.raises(ValueError, match="phase in 0..3"):
        lower_pipeline(f1, None, custom_passes=[(7, record_phase1)])


def test_two_vthreads_with_local_cache_interleave():
    N = 16
    A = te.placeholder((N, N), name="A")
    B = te.placeholder((N, N), name="B")
    k = te.reduce_axis((0, N), name="k")
    C = te.compute((N, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    i, j = C.op.axis
    io, ii = s[C].split(i, nparts=2)
    vi, ii2 = s[C].split(ii, nparts=2)
    jo, ji = s[C].split(j, nparts=2)
    vj, ji2 = s[C].split(ji, nparts=2)
    s[C].reorder(io, jo, vi, vj, ii2, ji2)
    s[C].bind(vi, te.thread_axis("vthread", name="vx"))
    s[C].bind(vj, te.thread_axis("vthread", name="vy"))
    s[CL].compute_at(s[C], vj)
    a, b = _rand(N, N), _rand(N, N)
    f, (c,) = _lower_and_run(s, [A, B, C], [a, b], [(N, N)])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    text = str(f)
    # one local buffer with a vthread dimension (4 x 16 elements), updates interleaved in k
    assert "C.local = allocate((64,)" in text and "virtual_thread" not in text
    k_loop = [ln for ln in text.splitlines() if "for k.c in" in ln]
    assert len(k_loop) == 1


def test_symbolic_conv_padding_tails():
    # non-divisible splits of symbolic axes + inlined padding: partition tails for tiny sizes
    n = te.var("n")
    data = te.placeholder((2, n, n), name="data")
    w = te.placeholder((3, 2, 3, 3), name="w")
    pad = te.compute((2, n + 2, n + 2), lambda c, y, x: te.if_then_else(
        tir.all(y >= 1, y <= n, x >= 1, x <= n), data[c, y - 1, x - 1], 0.0), name="pad")
    rc = te.reduce_axis((0, 2), name="rc")
    ry = te.reduce_axis((0, 3), name="ry")
    rx = te.reduce_axis((0, 3), name="rx")
    out = te.compute((3, n, n), lambda f, y, x: te.sum(
        pad[rc, y + ry, x + rx] * w[f, rc, ry, rx], axis=[rc, ry, rx]), name="out")
    s = te.create_schedule(out.op)
    f, y, x = s[out].op.axis
    yo, yi = s[out].split(y, factor=3)
    xo, xi = s[out].split(x, factor=4)
    s[out].reorder(f, yo, xo, rc, ry, yi, rx, xi)
    s[pad].compute_inline()
    s[out].vectorize(xi)
    s[out].unroll(rx)
    f1 = schedule_to_primfunc(s, [data, w, out], "conv")
    f2 = lower_pipeline(f1)
    assert not lowered_errors(f2)
    for size in (1, 2, 4, 5, 7):
        d, ww = _rand(2, size, size), _rand(3, 2, 3, 3)
        got = np.full((3, size, size), np.nan, "float32")
        want = got.copy()
        interpreter.run(f1, [d, ww, want])
        interpreter.run(f2, [d, ww, got])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
