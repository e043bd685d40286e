"""Bad schedules and bad calls fail with clear Python exceptions, on every backend.

Illegal schedules name the offending axis and stage; calls with a wrong argument count, shape,
ndim, dtype, kind or device name the argument, what was expected and what was got.
"""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.runtime.device import Device

from .util import TARGETS


def _mm():
    A = te.placeholder((8, 8), name="A")
    B = te.placeholder((8, 8), name="B")
    k = te.reduce_axis((0, 8), name="k")
    C = te.compute((8, 8), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C, k


def _chain():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((8,), lambda i: B[i] * 2.0, name="C")
    D = te.compute((8,), lambda i: A[i] - 1.0, name="D")
    return A, B, C, D


# ---- illegal schedules -----------------------------------------------------------------------
def test_compute_at_onto_non_consumer():
    A, B, C, D = _chain()
    s = te.create_schedule([C.op, D.op])
    with pytest.raises(ValueError, match="stage D does not consume B"):
        s[B].compute_at(s[D], D.op.axis[0])


def test_reorder_axes_of_another_stage():
    A, B, C, D = _chain()
    s = te.create_schedule(C.op)
    with pytest.raises(ValueError, match=r"axis i is not an axis of stage B \(it belongs to stage C\)"):
        s[B].reorder(C.op.axis[0])


def test_split_of_fused_away_axis():
    A, B, C, k = _mm()
    s = te.create_schedule(C.op)
    s[C].fuse(*C.op.axis)
    with pytest.raises(ValueError, match=r"split: axis i of stage C is no longer a leaf.*i\.j\.fused"):
        s[C].split(C.op.axis[0], factor=2)


def test_split_of_split_away_axis():
    A, B, C, k = _mm()
    s = te.create_schedule(C.op)
    s[C].split(k, factor=2)
    with pytest.raises(ValueError, match="axis k of stage C is no longer a leaf"):
        s[C].split(k, factor=4)


@pytest.mark.parametrize("prim", ["vectorize", "parallel"])
def test_vectorize_or_parallel_of_reduction_axis(prim):
    A, B, C, k = _mm()
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(k, factor=4)
    with pytest.raises(ValueError, match=f"{prim}: cannot {prim} the reduction axis k.inner of C"):
        getattr(s[C], prim)(ki)


def test_fuse_of_non_adjacent_axes():
    A, B, C, k = _mm()
    s = te.create_schedule(C.op)
    ko, ki = s[C].split(k, factor=4)
    with pytest.raises(ValueError, match="fuse: axes must be adjacent.*i is loop 0 and k.outer is loop 2"):
        s[C].fuse(C.op.axis[0], ko)


def test_compute_inline_of_reduction_and_of_output():
    A, B, C, k = _mm()
    D = te.compute((8, 8), lambda i, j: C[i, j] + 1.0, name="D")
    s = te.create_schedule(D.op)
    with pytest.raises(ValueError, match="cannot inline the reduction C"):
        s[C].compute_inline()
    with pytest.raises(ValueError, match="cannot inline D, an output"):
        s[D].compute_inline()


def test_rfactor_of_spatial_axis():
    A, B, C, k = _mm()
    s = te.create_schedule(C.op)
    with pytest.raises(ValueError, match="rfactor: i is not a reduction axis of C"):
        s.rfactor(C, C.op.axis[0])


def test_cache_write_after_split():
    A, B, C, D = _chain()
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[0], factor=2)
    with pytest.raises(ValueError, match="cache_write: stage C is already scheduled"):
        s.cache_write(C, "local")


def test_split_factor_not_positive():
    A, B, C, D = _chain()
    s = te.create_schedule(C.op)
    with pytest.raises(ValueError, match="factor must be positive, got 0"):
        s[C].split(C.op.axis[0], factor=0)


def test_missing_input():
    A, B, C, D = _chain()
    s = te.create_schedule(C.op)
    with pytest.raises(ValueError, match="placeholder A is read by the computation but is not in args"):
        tvm.build(s, [C])


@pytest.mark.parametrize("target", [t for t in TARGETS if t != "interp"])
@pytest.mark.parametrize("tag", ["threadIdx.x", "blockIdx.y"])
def test_cpu_codegen_refuses_thread_axes(target, tag):
    A, B, C, D = _chain()
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[C].bind(xo, te.thread_axis(tag))
    assert "thread_extent" in str(tvm.lower(s, [A, C]))
    with pytest.raises(Exception, match=f"thread_extent.*{tag.replace('.', '[.]')}") as info:
        tvm.build(s, [A, C], target=target)
    assert "bind" in str(info.value)


def test_unknown_target():
    A, B, C, D = _chain()
    with pytest.raises(ValueError, match="unknown target kind 'rocm'.*llvm, c"):
        tvm.build(te.create_schedule(C.op), [A, C], target="rocm")


def test_bool_of_symbolic_expression():
    n = te.var("n")
    with pytest.raises(TypeError, match=r"`n > 3` as a Python bool.*tir\.all/any.*Select.*can_prove"):
        bool(n > 3)
    with pytest.raises(TypeError, match="as a Python bool"):
        if n:  # noqa: SIM108
            pass
    with pytest.raises(TypeError, match="cannot be used as a Python integer"):
        range(n)


# ---- bad calls, every backend ----------------------------------------------------------------
_MODS: dict[str, object] = {}


def _axpb(target):
    if target not in _MODS:
        n = te.var("n")
        A = te.placeholder((n, 4), name="A")
        B = te.placeholder((n,), "int32", name="B")
        alpha = te.var("alpha", "float32")
        C = te.compute((n, 4), lambda i, j: A[i, j] * alpha + B[i].astype("float32"), name="C")
        s = te.create_schedule(C.op)
        _MODS[target] = tvm.build(s, [A, B, alpha, C], target=target, name="axpb")
    return _MODS[target]


def _good():
    return (tvm.nd.array(np.full((3, 4), 1.5, "float32")), tvm.nd.array(np.arange(1, 4, dtype="int32")),
            2.0, tvm.nd.empty((3, 4)))


@pytest.fixture(params=TARGETS)
def axpb(request):
    return _axpb(request.param)


def test_good_call(axpb):
    a, b, alpha, c = _good()
    axpb(a, b, alpha, c)
    np.testing.assert_allclose(c.numpy(), 1.5 * 2 + np.arange(1, 4)[:, None] + np.zeros((3, 4)))


def test_wrong_argument_count(axpb):
    a, b, alpha, c = _good()
    with pytest.raises(TypeError, match=r"takes 4 argument.*\(A, B, alpha, C\), got 3"):
        axpb(a, b, c)
    with pytest.raises(TypeError, match="got 5"):
        axpb(a, b, alpha, c, c)


def test_wrong_shape(axpb):
    a, b, alpha, c = _good()
    with pytest.raises(ValueError, match=r"argument C.*\(n, 4\).*got \(3, 5\)"):
        axpb(a, b, alpha, tvm.nd.empty((3, 5)))


def test_inconsistent_symbolic_size(axpb):
    a, b, alpha, c = _good()
    with pytest.raises(ValueError, match=r"argument B.*(is 4, but n=3|dim 0 = 3\), got \(4,\))"):
        axpb(a, tvm.nd.array(np.ones(4, "int32")), alpha, c)


def test_wrong_ndim(axpb):
    a, b, alpha, c = _good()
    with pytest.raises(ValueError, match=r"argument C.*2 dimension.*got shape \(12,\)"):
        axpb(a, b, alpha, tvm.nd.empty((12,)))


def test_wrong_dtype(axpb):
    a, b, alpha, c = _good()
    # the interpreter raises TypeError, the compiled modules ValueError: both name all three
    with pytest.raises((TypeError, ValueError), match="argument B.*dtype int32, got int64"):
        axpb(a, tvm.nd.array(np.ones(3, "int64")), alpha, c)
    with pytest.raises((TypeError, ValueError), match="argument C.*dtype float32, got float64"):
        axpb(a, b, alpha, tvm.nd.empty((3, 4), "float64"))


def test_wrong_scalar_and_argument_kind(axpb):
    a, b, alpha, c = _good()
    with pytest.raises(TypeError, match="argument alpha.*float32.*got str"):
        axpb(a, b, "x", c)
    with pytest.raises(TypeError, match="argument alpha.*float32.*got NDArray"):
        axpb(a, b, a, c)
    with pytest.raises(TypeError, match="argument A.*got list"):
        axpb([[1.0] * 4] * 3, b, alpha, c)


def test_wrong_device(axpb):
    a, b, alpha, c = _good()
    fake = tvm.nd.NDArray(np.zeros((3, 4), "float32"), Device(2, 0))  # as if it lived on cuda(0)
    with pytest.raises(ValueError, match=r"argument C is on cuda\(0\), but .* runs on cpu\(0\)"):
        axpb(a, b, alpha, fake)


def test_numpy_and_noncontiguous_arguments_work(axpb):
    a = np.ones((3, 8), "float32")[:, ::2] * 1.5
    c = np.zeros((3, 4), "float32")
    axpb(a, np.arange(1, 4, dtype="int32"), 2.0, c)
    np.testing.assert_allclose(c, 3.0 + np.arange(1, 4)[:, None] + np.zeros((3, 4)))


@pytest.mark.parametrize("target", TARGETS)
def test_shape_var_only_inside_an_expression(target):
    n = te.var("n")
    A = te.placeholder((n + 1,), name="A")
    B = te.compute((n + 1,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(ValueError, match="shape variable n of buffer A appears only inside an "
                                         "expression; pass it as an explicit scalar argument"):
        tvm.build(s, [A, B], target=target)(np.ones(4, "float32"), np.ones(4, "float32"))


@pytest.mark.parametrize("target", TARGETS)
def test_in_place_call(target):
    A = te.placeholder((13,), name="A")
    B = te.compute((13,), lambda i: A[i] * 2.0, name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], target=target)
    a = tvm.nd.array(np.arange(13, dtype="float32"))
    f(a, a)
    np.testing.assert_array_equal(a.numpy(), np.arange(13) * 2)


def test_tensorize_needs_a_tensor_intrin():
    A, B, C, D = _chain()
    s = te.create_schedule(C.op)
    with pytest.raises(TypeError, match="tensorize: expected a te.decl_tensor_intrin.*got NoneType"):
        s[C].tensorize(C.op.axis[0], None)


def test_nested_reduction_is_refused():
    A = te.placeholder((8, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    k2 = te.reduce_axis((0, 8), name="k2")
    with pytest.raises(ValueError, match="must be the top-level expression of the compute"):
        te.compute((8,), lambda i: te.sum(A[i, k], axis=k) + 1.0, name="R")
    R = te.compute((8,), lambda i: te.sum(A[i, k] * te.sum(A[k2, i], axis=k2), axis=k), name="R")
    with pytest.raises(ValueError, match="reduction nested inside an expression cannot be lowered"):
        tvm.lower(te.create_schedule(R.op), [A, R])
