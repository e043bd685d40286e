"""Tensorize with te.decl_tensor_intrin: the paper's gemm8x8 example and refusals.

Checked against numpy through the loop-IR interpreter (Python implementations of the externs)
and through the LLVM and C builds (the C micro-kernel linked into the module)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, tir
from tvmpy.contrib.microkernel import gemm_intrin
from tvmpy.te.tensorize import TensorizeError
from tvmpy.tir import interpreter

RNG = np.random.default_rng(7)
HAVE_CC = shutil.which("cc") is not None
TARGETS = ["interp", "llvm"] + (["c"] if HAVE_CC else [])


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def matmul(n, m, l, b_layout="nk", reducer=None):
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((m, l) if b_layout == "nk" else (l, m), name="B")
    k = te.reduce_axis((0, l), name="k")
    red = reducer or te.sum
    if b_layout == "nk":
        C = te.compute((n, m), lambda i, j: red(A[i, k] * B[j, k], axis=k), name="C")
    else:
        C = te.compute((n, m), lambda i, j: red(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C, k


def tiled(n, m, l, tile=(8, 8, 8), b_layout="nk", order="xo yo ko", intrin=None):
    A, B, C, k = matmul(n, m, l, b_layout)
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], tile[0], tile[1])
    ko, ki = s[C].split(k, factor=tile[2])
    outer = {"xo": xo, "yo": yo, "ko": ko}
    s[C].reorder(*[outer[x] for x in order.split()], xi, yi, ki)
    s[C].tensorize(xi, intrin or gemm_intrin(*tile, b_layout))
    return s, [A, B, C]


def run(s, args, target, np_args):
    f = tvm.build(s, args, target, name="mm")
    out = [np.array(x) for x in np_args]
    f(*out)
    return out[-1]


def reference(a, b, b_layout):
    return a @ (b.T if b_layout == "nk" else b)


# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS)
def test_paper_gemm8x8_64(target):
    s, args = tiled(64, 64, 64)
    a, b = rand(64, 64), rand(64, 64)
    c = run(s, args, target, [a, b, np.full((64, 64), np.nan, "float32")])
    np.testing.assert_allclose(c, reference(a, b, "nk"), rtol=1e-4, atol=1e-4)


def test_lowered_ir_calls_the_kernels_with_bound_offsets_and_strides():
    s, args = tiled(64, 64, 64)
    text = str(tvm.lower(s, args, name="mm"))
    assert "tvmpy_gemm8x8x8_nk_update" in text and "tvmpy_gemm8x8x8_nk_reset" in text
    # the reset runs in its own loop nest before the outer k loop (TVM's init nest), the
    # update on every iteration without a branch
    assert "ko == 0" not in text.replace("k.outer", "ko")
    assert text.index("tvmpy_gemm8x8x8_nk_reset") < text.index("for k.outer") \
        < text.index("tvmpy_gemm8x8x8_nk_update")
    assert "for i.inner" not in text and "for k.inner" not in text


@pytest.mark.parametrize("target", TARGETS)
def test_kn_layout_8x16_non_square(target):
    s, args = tiled(32, 48, 40, tile=(8, 16, 8), b_layout="kn", order="ko xo yo")
    a, b = rand(32, 40), rand(40, 48)
    c = run(s, args, target, [a, b, np.zeros((32, 48), "float32")])
    np.testing.assert_allclose(c, reference(a, b, "kn"), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", ["interp", "llvm"])
def test_whole_reduction_inside_uses_body(target):
    s, args = tiled(16, 24, 8)
    text = str(tvm.lower(s, args, name="mm"))
    assert "_body" in text and "_reset" not in text
    a, b = rand(16, 8), rand(24, 8)
    c = run(s, args, target, [a, b, np.full((16, 24), 5.0, "float32")])
    np.testing.assert_allclose(c, reference(a, b, "nk"), rtol=1e-4, atol=1e-4)


def test_commuted_operands_match():
    A = te.placeholder((16, 16), name="A")
    B = te.placeholder((16, 16), name="B")
    k = te.reduce_axis((0, 16), name="k")
    C = te.compute((16, 16), lambda i, j: te.sum(B[j, k] * A[i, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
    ko, ki = s[C].split(k, factor=8)
    s[C].reorder(xo, yo, ko, xi, yi, ki)
    s[C].tensorize(xi, gemm_intrin(8, 8, 8, "nk"))
    a, b = rand(16, 16), rand(16, 16)
    c = run(s, [A, B, C], "interp", [a, b, np.zeros((16, 16), "float32")])
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-4, atol=1e-4)


def test_batched_leading_axis_outside_the_region():
    A = te.placeholder((3, 16, 8), name="A")
    B = te.placeholder((3, 8, 8), name="B")
    k = te.reduce_axis((0, 8), name="k")
    C = te.compute((3, 16, 8), lambda b_, i, j: te.sum(A[b_, i, k] * B[b_, j, k], axis=k),
                   name="C")
    s = te.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[1], factor=8)
    s[C].tensorize(ii, gemm_intrin(8, 8, 8, "nk"))
    a, b = rand(3, 16, 8), rand(3, 8, 8)
    for target in ("interp", "llvm"):
        c = run(s, [A, B, C], target, [a, b, np.zeros((3, 16, 8), "float32")])
        np.testing.assert_allclose(c, a @ b.transpose(0, 2, 1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", ["interp", "llvm"])
def test_leading_axis_split_with_remainder_is_guarded(target):
    """A leading axis (one value per call) split by a factor that does not divide it: the
    last outer iteration's surplus calls are guarded; the intrinsic's tiles stay whole."""
    A = te.placeholder((5, 8, 8), name="A")
    B = te.placeholder((5, 8, 8), name="B")
    k = te.reduce_axis((0, 8), name="k")
    C = te.compute((5, 8, 8), lambda b_, i, j: te.sum(A[b_, i, k] * B[b_, j, k], axis=k),
                   name="C")
    s = te.create_schedule(C.op)
    bo, bi = s[C].split(C.op.axis[0], factor=2)
    s[C].tensorize(C.op.axis[1], gemm_intrin(8, 8, 8, "nk"))
    a, b = rand(5, 8, 8), rand(5, 8, 8)
    c = run(s, [A, B, C], target, [a, b, np.zeros((5, 8, 8), "float32")])
    np.testing.assert_allclose(c, a @ b.transpose(0, 2, 1), rtol=1e-4, atol=1e-4)


def test_export_library_is_self_contained(tmp_path):
    s, args = tiled(32, 32, 32)
    f = tvm.build(s, args, "llvm", name="mm")
    path = tmp_path / "mm.so"
    f.export_library(str(path))
    a, b = rand(32, 32), rand(32, 32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    code = textwrap.dedent(f"""
        import numpy as np, tvmpy as tvm
        m = tvm.runtime.load_module({str(path)!r})
        a = np.load({str(tmp_path / 'a.npy')!r}); b = np.load({str(tmp_path / 'b.npy')!r})
        c = np.zeros((32, 32), "float32")
        m(a, b, c)
        np.save({str(tmp_path / 'c.npy')!r}, c)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
    np.testing.assert_allclose(np.load(tmp_path / "c.npy"), a @ b.T, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# refusals
def test_non_multiple_shape_is_refused():
    s, args = tiled(65, 64, 64)
    with pytest.raises(TensorizeError, match="guard"):
        tvm.lower(s, args)


def test_wrong_tile_size_is_refused():
    s, args = tiled(64, 64, 64, tile=(8, 4, 8), intrin=gemm_intrin(8, 8, 8))
    with pytest.raises(TensorizeError, match="256 iterations.*512"):
        tvm.lower(s, args)
    s, args = tiled(64, 64, 64, tile=(4, 16, 8), intrin=gemm_intrin(8, 8, 8))
    with pytest.raises(TensorizeError, match="axis i spans 4 values"):
        tvm.lower(s, args)


def test_min_reduction_with_sum_intrinsic_is_refused():
    A, B, C, k = matmul(16, 16, 16, reducer=te.min)
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
    ko, ki = s[C].split(k, factor=8)
    s[C].reorder(xo, yo, ko, xi, yi, ki)
    s[C].tensorize(xi, gemm_intrin(8, 8, 8))
    with pytest.raises(TensorizeError, match="does not compute the intrinsic's expression"):
        tvm.lower(s, [A, B, C])


def test_transposed_operand_is_refused():
    # the stage reads B[k, j]; the intrinsic expects B stored n x k
    s, args = tiled(16, 16, 16, b_layout="kn", intrin=gemm_intrin(8, 8, 8, "nk"))
    with pytest.raises(TensorizeError, match="does not compute"):
        tvm.lower(s, args)


def test_different_expression_is_refused():
    A = te.placeholder((8, 8), name="A")
    B = te.placeholder((8, 8), name="B")
    k = te.reduce_axis((0, 8), name="k")
    C = te.compute((8, 8), lambda i, j: te.sum(A[i, k] * B[j, k] + 1.0, axis=k), name="C")
    s = te.create_schedule(C.op)
    s[C].tensorize(C.op.axis[0], gemm_intrin(8, 8, 8))
    with pytest.raises(TensorizeError, match="does not compute"):
        tvm.lower(s, [A, B, C])


def test_tensorize_at_an_inner_loop_is_refused():
    s, args = tiled(16, 16, 16)
    A, B, C = args
    st = s[C]
    ki = st.leaf_iter_vars[-1]
    yi = st.leaf_iter_vars[-2]
    st.iter_var_attrs.pop(st.leaf_iter_vars[-3])  # undo the tensorize at xi
    st.tensorize(yi, gemm_intrin(8, 8, 8))
    with pytest.raises(TensorizeError, match="64 iterations"):
        tvm.lower(s, args)
    assert ki is not None


def test_compact_intrinsic_buffer_needs_a_compact_region():
    a = te.placeholder((8, 8), name="a")
    b = te.placeholder((8, 8), name="b")
    r = te.reduce_axis((0, 8), name="r")
    c = te.compute((8, 8), lambda i, j: te.sum(a[i, r] * b[j, r], axis=r), name="c")

    def lower(ins, outs):
        return tir.call_extern("int32", "never_called", outs[0].access_ptr("w"),
                               ins[0].access_ptr("r"), ins[1].access_ptr("r"))

    intrin = te.decl_tensor_intrin(c.op, lower, name="compact")  # default compact buffers
    s, args = tiled(16, 16, 8, intrin=intrin)
    with pytest.raises(TensorizeError, match="strides=\\[te.var"):
        tvm.lower(s, args)


# ---------------------------------------------------------------------------------------------
# other intrinsic shapes: element-wise, IR-level bodies, scalar parameters, offset_factor
def _vadd_intrin(n, offset_factor=1, ir_body=False):
    x = te.placeholder((n,), name="x")
    y = te.placeholder((n,), name="y")
    z = te.compute((n,), lambda i: x[i] + y[i], name="z")
    binds = {t: tir.decl_buffer((n,), "float32", t.op.name, offset_factor=offset_factor)
             for t in (x, y, z)}

    def lower(ins, outs):
        if ir_body:
            v = tir.Var("v")
            return tir.For(v, 0, n, tir.ForKind.SERIAL,
                           tir.BufferStore(outs[0], ins[0][v] + ins[1][v], [v]))
        return tir.call_extern("int32", "test_vadd", outs[0].access_ptr("w"),
                               ins[0].access_ptr("r"), ins[1].access_ptr("r"), n)

    return te.decl_tensor_intrin(z.op, lower, name="vadd", binds=binds)


def _vadd_impl(z, x, y, n):
    z[:n] = x[:n] + y[:n]
    return 0


def _vadd_schedule(rows, cols, factor, intrin):
    X = te.placeholder((rows, cols), name="X")
    Y = te.placeholder((rows, cols), name="Y")
    Z = te.compute((rows, cols), lambda i, j: X[i, j] + Y[i, j], name="Z")
    s = te.create_schedule(Z.op)
    jo, ji = s[Z].split(Z.op.axis[1], factor=factor)
    s[Z].tensorize(ji, intrin)
    return s, [X, Y, Z]


def test_elementwise_intrinsic_with_extern():
    interpreter.register_extern("test_vadd", _vadd_impl)
    s, args = _vadd_schedule(5, 32, 16, _vadd_intrin(16))
    x, y = rand(5, 32), rand(5, 32)
    z = run(s, args, "interp", [x, y, np.zeros((5, 32), "float32")])
    np.testing.assert_array_equal(z, x + y)


@pytest.mark.parametrize("target", ["interp", "llvm"])
def test_ir_level_intrinsic_body_binds_buffers(target):
    s, args = _vadd_schedule(3, 24, 8, _vadd_intrin(8, ir_body=True))
    x, y = rand(3, 24), rand(3, 24)
    z = run(s, args, target, [x, y, np.zeros((3, 24), "float32")])
    np.testing.assert_array_equal(z, x + y)


def test_offset_factor_checked_at_run_time():
    interpreter.register_extern("test_vadd", _vadd_impl)
    # offsets are multiples of 8 (j.outer * 8 + i * 24): not provably multiples of 16
    s, args = _vadd_schedule(2, 24, 8, _vadd_intrin(8, offset_factor=16))
    text = str(tvm.lower(s, args))
    assert "offset_factor 16" in text
    with pytest.raises(RuntimeError, match="offset_factor 16"):
        run(s, args, "interp", [rand(2, 24), rand(2, 24), np.zeros((2, 24), "float32")])
    # provably aligned: no assert
    s, args = _vadd_schedule(2, 32, 16, _vadd_intrin(16, offset_factor=16))
    assert "offset_factor" not in str(tvm.lower(s, args))


def test_scalar_parameter_is_bound_from_the_stage():
    x = te.placeholder((8,), name="x")
    alpha = te.var("alpha", "float32")
    z = te.compute((8,), lambda i: x[i] * alpha, name="z")
    seen = []

    def lower(ins, outs, params):
        return tir.call_extern("int32", "test_scale", outs[0].access_ptr("w"),
                               ins[0].access_ptr("r"), params[0])

    intrin = te.decl_tensor_intrin(z.op, lower, name="scale", scalar_params=[alpha])

    def scale(out, inp, a):
        seen.append(float(a))
        out[:8] = inp[:8] * a
        return 0

    interpreter.register_extern("test_scale", scale)
    X = te.placeholder((4, 8), name="X")
    Z = te.compute((4, 8), lambda i, j: X[i, j] * 2.5, name="Z")
    s = te.create_schedule(Z.op)
    s[Z].tensorize(Z.op.axis[1], intrin)
    xv = rand(4, 8)
    zv = run(s, [X, Z], "interp", [xv, np.zeros((4, 8), "float32")])
    np.testing.assert_allclose(zv, xv * np.float32(2.5), rtol=1e-6)
    assert seen == [2.5] * 4


# ---------------------------------------------------------------------------------------------
# decl_tensor_intrin errors
def test_decl_tensor_intrin_errors():
    a = te.placeholder((4,), name="a")
    b = te.compute((4,), lambda i: a[i] * 2.0, name="b")
    c = te.compute((4,), lambda i: b[i] + 1.0, name="c")
    ok = lambda ins, outs: tir.call_extern("int32", "f", outs[0].access_ptr("w"))  # noqa: E731
    with pytest.raises(TypeError, match="must be a te.placeholder"):
        te.decl_tensor_intrin(c.op, ok)
    with pytest.raises(TypeError, match="dtype int32"):
        te.decl_tensor_intrin(b.op, ok, binds={a: tir.decl_buffer((4,), "int32", "a")})
    with pytest.raises(ValueError, match="extent 5"):
        te.decl_tensor_intrin(b.op, ok, binds={a: tir.decl_buffer((5,), "float32", "a")})
    with pytest.raises(ValueError, match="neither a body nor an update"):
        te.decl_tensor_intrin(b.op, lambda ins, outs: (None, None, None))
    with pytest.raises(TypeError, match="TensorIntrin"):
        s = te.create_schedule(b.op)
        s[b].tensorize(b.op.axis[0], "not an intrinsic")
        tvm.lower(s, [a, b])
    intrin = te.decl_tensor_intrin(b.op, ok, name="dbl")
    assert intrin.name == "dbl" and intrin.body is not None and intrin.update is None


@pytest.mark.parametrize("b_layout", ["nk", "kn"])
def test_odd_tile_sizes(b_layout):
    # 3x5x7: no vector width divides 5 or 7; the kernel falls back to narrow vectors
    s, args = tiled(9, 10, 14, tile=(3, 5, 7), b_layout=b_layout)
    a = rand(9, 14)
    b = rand(10, 14) if b_layout == "nk" else rand(14, 10)
    for target in ("interp", "llvm"):
        c = run(s, args, target, [a, b, np.zeros((9, 10), "float32")])
        np.testing.assert_allclose(c, reference(a, b, b_layout), rtol=1e-4, atol=1e-4)


def test_parallel_outer_loop_with_kernel_calls():
    A, B, C, k = matmul(64, 64, 32, "kn")
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 32)
    ko, ki = s[C].split(k, factor=16)
    s[C].reorder(xo, yo, ko, xi, yi, ki)
    s[C].tensorize(xi, gemm_intrin(8, 32, 16, "kn"))
    s[C].parallel(xo)
    a, b = rand(64, 32), rand(32, 64)
    c = run(s, [A, B, C], "llvm", [a, b, np.zeros((64, 64), "float32")])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_cache_write_compute_at_tensorized_local_tile(target):
    A, B, C, k = matmul(64, 64, 64, "kn")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 16, 32)
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    (kc,) = s[CC].op.reduce_axis
    xco, xci = s[CC].split(xc, factor=8)
    ko, ki = s[CC].split(kc, factor=16)
    s[CC].reorder(ko, xco, xci, yc, ki)
    s[CC].tensorize(xci, gemm_intrin(8, 32, 16, "kn"))
    a, b = rand(64, 64), rand(64, 64)
    c = run(s, [A, B, C], target, [a, b, np.zeros((64, 64), "float32")])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_compute_at_tile_crossing_the_edge_is_refused():
    A, B, C, k = matmul(60, 64, 64, "kn")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 16, 32)  # 60 = 3 * 16 + 12
    s[CC].compute_at(s[C], yo)
    xc, yc = s[CC].op.axis
    xco, xci = s[CC].split(xc, factor=8)
    s[CC].reorder(xco, xci, yc, *s[CC].op.reduce_axis)
    intrin = gemm_intrin(8, 32, 64, "kn")
    s[CC].tensorize(xci, intrin)
    with pytest.raises(TensorizeError, match="guard"):
        tvm.lower(s, [A, B, C])


def test_fused_and_reordered_inner_loops_are_matched():
    A, B, C, k = matmul(32, 32, 32, "nk")
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
    ko, ki = s[C].split(k, factor=8)
    s[C].reorder(xo, yo, ko, yi, xi, ki)  # any order inside the region covers the same box
    fused = s[C].fuse(yi, xi)
    s[C].tensorize(fused, gemm_intrin(8, 8, 8))
    a, b = rand(32, 32), rand(32, 32)
    c = run(s, [A, B, C], "interp", [a, b, np.zeros((32, 32), "float32")])
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-4, atol=1e-4)
