"""topi transforms against numpy: reshape, transpose, concatenate, split, strided_slice, take,
squeeze, expand_dims, flatten, cast, tile, repeat, stack; bad arguments."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.topi.testing import common_ref as ref

from .topi_util import rand, run


@pytest.mark.parametrize("shape,newshape", [
    ((2, 3, 4), (6, 4)), ((2, 3, 4), (-1,)), ((2, 3, 4), (0, -1)), ((2, 3, 4), (4, 0, 2)),
    ((7,), (1, 7, 1)), ((5, 1, 3), (3, -1)), ((), (1, 1)), ((6, 5), ()) if False else ((1,), ()),
])
def test_reshape(shape, newshape):
    A = te.placeholder(shape, "float32", name="A")
    a = rand(shape)
    (b,) = run([A], topi.reshape(A, newshape), [a])
    np.testing.assert_array_equal(b, ref.reshape_ref(a, newshape))


@pytest.mark.parametrize("shape,newshape", [
    ((64, 56, 56), (64, 3136)), ((3, 7, 13), (273,)), ((5, 17), (85,)), ((2, 3, 5, 7), (6, 35)),
    ((7, 11, 3), (3, 77)), ((1, 13, 1), (13,)), ((4, 9, 10), (36, 10)), ((17,), (1, 17)),
    ((3, 19), (19, 3)),
])
def test_reshape_copy_reads_contiguous_vectors(shape, newshape):
    """A reshape of a contiguous tensor is a copy: its vectorized read index folds back to a
    dense ramp (``(p // w) * w + p % w == p``), so the kernel loads whole vectors (no gather)."""
    A = te.placeholder(shape, "float32", name="A")
    B = topi.reshape(A, newshape)
    with tvm.target.Target("llvm"):
        s = topi.x86.schedule_injective([B])
        f = tvm.build(s, [A, B], "llvm")
    assert "gather" not in f.get_source("ll")
    a = rand(shape, rng=np.random.default_rng(len(shape)))
    b = tvm.nd.empty(newshape, "float32")
    f(tvm.nd.array(a), b)
    np.testing.assert_array_equal(b.numpy(), a.reshape(newshape))


@pytest.mark.parametrize("shape,axes", [((2, 3, 4), None), ((2, 3, 4), (1, 0, 2)),
                                        ((2, 3, 5, 7), (0, 2, 3, 1)), ((5, 1), (-1, -2)),
                                        ((13,), None)])
def test_transpose(shape, axes):
    A = te.placeholder(shape, "float32", name="A")
    a = rand(shape)
    (b,) = run([A], topi.transpose(A, axes), [a])
    np.testing.assert_array_equal(b, np.transpose(a, axes))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenate(axis):
    shapes = [(3, 5, 2), (3, 5, 2), (3, 5, 2)]
    shapes = [tuple(s[k] + (i if k == axis % 3 else 0) for k in range(3))
              for i, s in enumerate(shapes)]
    ts = [te.placeholder(s, "float32", name=f"A{i}") for i, s in enumerate(shapes)]
    arrs = [rand(s, rng=np.random.default_rng(i)) for i, s in enumerate(shapes)]
    (b,) = run(ts, topi.concatenate(ts, axis), arrs)
    np.testing.assert_array_equal(b, np.concatenate(arrs, axis))


def test_concatenate_int8_stack():
    ts = [te.placeholder((2, 7), "int8", name=f"A{i}") for i in range(2)]
    arrs = [rand((2, 7), "int8", rng=np.random.default_rng(i)) for i in range(2)]
    c, s = run(ts, [topi.concatenate(ts, 0), topi.stack(ts, 1)], arrs)
    np.testing.assert_array_equal(c, np.concatenate(arrs, 0))
    np.testing.assert_array_equal(s, np.stack(arrs, 1))


@pytest.mark.parametrize("ios,axis", [(3, 1), ([2, 5], 1), ([0, 4], -1), (1, 0)])
def test_split(ios, axis):
    A = te.placeholder((4, 9), "float32", name="A")
    a = rand((4, 9))
    outs = topi.split(A, ios, axis)
    res = run([A], outs, [a])
    exp = np.split(a, ios, axis)
    assert len(res) == len(exp)
    for r, e in zip(res, exp):
        np.testing.assert_array_equal(r, e)


@pytest.mark.parametrize("begin,end,strides,axes", [
    ([1, 0], [4, 7], None, None),
    ([-3, 2], [100, -1], [1, 2], None),
    ([5, -1], [0, -100], [-2, -3], None),
    ([None], [None], [-1], [1]),
    ([1], [3], None, [-1]),
    ([0, 0, 0], [1, 1, 1], None, None),
    ([4], [2], None, None),  # empty
])
def test_strided_slice(begin, end, strides, axes):
    A = te.placeholder((6, 7, 3), "float32", name="A")
    a = rand((6, 7, 3))
    B = topi.strided_slice(A, begin, end, strides, axes=axes)
    e = ref.strided_slice_ref(a, begin, end, strides, axes)
    if 0 in e.shape:
        assert tuple(int(s.value) for s in B.shape) == e.shape
        return
    (b,) = run([A], B, [a])
    np.testing.assert_array_equal(b, e)


@pytest.mark.parametrize("mode", ["clip", "wrap"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_take(mode, axis):
    A = te.placeholder((4, 5, 3), "float32", name="A")
    idx_shape = (2, 3)
    I = te.placeholder(idx_shape, "int32", name="I")
    a = rand((4, 5, 3))
    n = a.size if axis is None else a.shape[axis]
    i = np.random.default_rng(3).integers(-n - 3, n + 3, idx_shape).astype("int32")
    (b,) = run([A, I], topi.take(A, I, axis=axis, mode=mode), [a, i])
    np.testing.assert_array_equal(b, ref.take_ref(a, i, axis=axis, mode=mode))


def test_take_int64_indices_and_scalar_index():
    A = te.placeholder((6, 4), "int32", name="A")
    I = te.placeholder((5,), "int64", name="I")
    a = rand((6, 4), "int32")
    i = np.array([0, 5, 2, 2, 1], "int64")
    b, c = run([A, I], [topi.take(A, I, axis=0), topi.take(A, 3, axis=1)], [a, i])
    np.testing.assert_array_equal(b, np.take(a, i, axis=0))
    np.testing.assert_array_equal(c, a[:, 3])


def test_squeeze_expand_flatten():
    A = te.placeholder((1, 3, 1, 5), "float32", name="A")
    a = rand((1, 3, 1, 5))
    outs = [topi.squeeze(A), topi.squeeze(A, axis=(0, -2)), topi.squeeze(A, 2),
            topi.expand_dims(A, 1), topi.expand_dims(A, -1, 2), topi.flatten(A),
            topi.flatten(A, 3), topi.flatten(A, 0)]
    res = run([A], outs, [a])
    exp = [np.squeeze(a), np.squeeze(a, (0, 2)), np.squeeze(a, 2), np.expand_dims(a, 1),
           a.reshape(1, 3, 1, 5, 1, 1), a.reshape(1, 15), a.reshape(3, 5), a.reshape(1, 15)]
    for r, e in zip(res, exp):
        np.testing.assert_array_equal(r, e)


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("int32", "float32"),
                                     ("float32", "bool"), ("int8", "int32"), ("bool", "float32"),
                                     ("int32", "int8")])
def test_cast(src, dst):
    A = te.placeholder((3, 17), src, name="A")
    a = rand((3, 17), src)
    (b,) = run([A], topi.cast(A, dst), [a])
    np.testing.assert_array_equal(b, a.astype(dst))


def test_tile_repeat_c_target():
    A = te.placeholder((2, 3), "float32", name="A")
    a = rand((2, 3))
    t, r = run([A], [topi.tile(A, (2, 1, 3)), topi.repeat(A, 3, axis=-1)], [a], target="c")
    np.testing.assert_array_equal(t, np.tile(a, (2, 1, 3)))
    np.testing.assert_array_equal(r, np.repeat(a, 3, axis=-1))


def test_transform_chain_generic_schedule():
    A = te.placeholder((4, 6), "float32", name="A")
    a = rand((4, 6))
    out = topi.transpose(topi.reshape(topi.strided_slice(A, [0, 1], [4, 6], [2, 1]), (5, 2)))
    (b,) = run([A], out, [a], schedule="generic")
    np.testing.assert_array_equal(b, a[0:4:2, 1:6].reshape(5, 2).T)


def test_symbolic_reshape_transpose():
    n = te.var("n")
    A = te.placeholder((n, 6), "float32", name="A")
    B = topi.transpose(topi.reshape(A, (0, 2, 3)), (0, 2, 1))
    assert str(B.shape[0]) == "n"


@pytest.mark.parametrize("inline", [False, True])
def test_symbolic_reshape_checks_element_count_at_run_time(inline):
    """(n, m) -> (-1, 6): the sizes are unknown at compile time, so the kernel asserts that the
    counts agree (n * m divisible by 6) instead of computing on inconsistent shapes; the check
    survives inlining the reshape into its consumer."""
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), "float32", name="A")
    R = topi.reshape(A, (-1, 6))
    B = te.compute(R.shape, lambda i, j: R[i, j] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    if inline:
        s[R].compute_inline()
    f = tvm.build(s, [A, B], "llvm")
    for shape in [(4, 3), (1, 6), (7, 12)]:
        a = rand(shape)
        b = tvm.nd.empty((a.size // 6, 6), "float32")
        f(tvm.nd.array(a), b)
        np.testing.assert_allclose(b.numpy(), a.reshape(-1, 6) * 2.0 + 1.0, rtol=1e-6)
    with pytest.raises(RuntimeError, match=r"reshape: cannot reshape \(n, m\) .* element counts "
                                           r"differ \(the -1 of newshape \(-1, 6\) needs a "
                                           r"divisible size\)"):
        f(tvm.nd.array(rand((5, 3))), tvm.nd.empty((2, 6), "float32"))


def test_bad_arguments():
    A = te.placeholder((2, 3, 4), name="A")
    with pytest.raises(ValueError, match=r"cannot reshape \(2, 3, 4\) \(24 elements\) into "
                                         r"\(5, 5\) \(25 elements\)"):
        topi.reshape(A, (5, 5))
    with pytest.raises(ValueError, match="more than one -1"):
        topi.reshape(A, (-1, -1))
    with pytest.raises(ValueError, match="cannot reshape"):
        topi.reshape(A, (5, -1))
    with pytest.raises(ValueError, match="not a permutation"):
        topi.transpose(A, (0, 0, 1))
    with pytest.raises(ValueError, match="axes .* has 2 entries"):
        topi.transpose(A, (0, 1))
    with pytest.raises(ValueError, match="stride 0 on axis 1"):
        topi.strided_slice(A, [0, 0], [1, 1], [1, 0])
    with pytest.raises(ValueError, match="differ in dimension 1"):
        topi.concatenate([A, te.placeholder((2, 4, 4), name="B")], axis=0)
    with pytest.raises(ValueError, match="does not divide into 2 equal sections"):
        topi.split(A, 2, axis=1)
    with pytest.raises(ValueError, match="axis 1 of shape .* has size 3, not 1"):
        topi.squeeze(A, 1)
    with pytest.raises(ValueError, match="axis 3 is out of range"):
        topi.take(A, 0, axis=3)
    with pytest.raises(ValueError, match="mode must be"):
        topi.take(A, 0, axis=0, mode="raise")
    with pytest.raises(TypeError, match="indices must be integers"):
        topi.take(A, te.placeholder((2,), "float32"), axis=0)


def test_full_arange_flip_one_hot():
    A = te.placeholder((3, 4), "float32", name="A")
    I = te.placeholder((2, 3), "int32", name="I")
    a = rand((3, 4))
    i = np.array([[0, 3, -1], [2, 1, 0]], "int32")
    outs = [topi.full((2, 5), "int32", 7), topi.full_like(A, 1.5), topi.arange(2, 11, 3, "int32"),
            topi.arange(1.0, -1.0, -0.5), topi.flip(A, 1), topi.flip(A, (0, 1)),
            topi.one_hot(I, 1.0, 0.0, 4), topi.one_hot(I, 5, -1, 4, axis=0, dtype="int32")]
    res = run([A, I], outs, [a, i])
    eye = np.eye(4, dtype="float32")[i % 4]
    exp = [np.full((2, 5), 7, "int32"), np.full((3, 4), 1.5, "float32"),
           np.arange(2, 11, 3, dtype="int32"), np.arange(1.0, -1.0, -0.5, dtype="float32"),
           a[:, ::-1], a[::-1, ::-1], eye, np.moveaxis(np.where(eye > 0, 5, -1), -1, 0)]
    for r, e in zip(res, exp):
        np.testing.assert_array_equal(r, e)


def test_gather_and_gather_nd():
    A = te.placeholder((4, 5), "float32", name="A")
    I = te.placeholder((4, 3), "int64", name="I")
    J = te.placeholder((2, 3), "int32", name="J")
    a = rand((4, 5))
    i = np.random.default_rng(1).integers(-5, 5, (4, 3)).astype("int64")
    j = np.array([[0, 3, -1], [4, 0, 2]], "int32")
    g, gn = run([A, I, J], [topi.gather(A, 1, I), topi.gather_nd(A, J)], [a, i, j])
    np.testing.assert_array_equal(g, np.take_along_axis(a, i % 5, axis=1))
    np.testing.assert_array_equal(gn, a[j[0] % 4, j[1] % 5])


@pytest.mark.parametrize("src,dst,shape", [("NCHW", "NCHW16c", (1, 32, 3, 5)),
                                           ("NCHW8c", "NCHW", (2, 3, 4, 5, 8)),
                                           ("NCHW4c", "NCHW16c", (1, 8, 2, 3, 4)),
                                           ("NCHW", "NHWC", (2, 3, 4, 5))])
def test_layout_transform(src, dst, shape):
    A = te.placeholder(shape, "float32", name="A")
    a = rand(shape)
    (b,) = run([A], topi.layout_transform(A, src, dst), [a])
    # the reference goes through plain NCHW
    if src == "NCHW8c":
        nchw = a.transpose(0, 1, 4, 2, 3).reshape(2, 24, 4, 5)
    elif src == "NCHW4c":
        nchw = a.transpose(0, 1, 4, 2, 3).reshape(1, 32, 2, 3)
    else:
        nchw = a
    n, c, h, w = nchw.shape
    if dst == "NCHW16c":
        e = nchw.reshape(n, c // 16, 16, h, w).transpose(0, 1, 3, 4, 2)
    elif dst == "NHWC":
        e = nchw.transpose(0, 2, 3, 1)
    else:
        e = nchw
    np.testing.assert_array_equal(b, e)


def test_layout_transform_errors():
    A = te.placeholder((1, 20, 3, 3), name="A")
    with pytest.raises(ValueError, match="axis C of size 20 does not split evenly by 16"):
        topi.layout_transform(A, "NCHW", "NCHW16c")
    with pytest.raises(ValueError, match="different primal axes"):
        topi.layout_transform(A, "NCHW", "NCDW")
    with pytest.raises(ValueError, match="has 3 axes"):
        topi.layout_transform(A, "NCH", "NHC")


def test_interpreter_agrees():
    # the loop-IR interpreter (the written definition of the IR) on a chain of transforms and a
    # reduction, scheduled with the x86 schedules
    A = te.placeholder((3, 20), "float32", name="A")
    I = te.placeholder((4,), "int32", name="I")
    a, i = rand((3, 20)), np.array([2, -1, 0, 7], "int32")
    T = topi.take(topi.transpose(topi.concatenate([A, A], 0)), I, axis=1, mode="wrap")
    (t,) = run([A, I], T, [a, i], target="interp")
    np.testing.assert_array_equal(t, np.take(np.concatenate([a, a], 0).T, i, axis=1, mode="wrap"))
    (r,) = run([A], topi.max(topi.exp(A), axis=1), [a], target="interp", schedule="reduce")
    np.testing.assert_allclose(r, np.exp(a).max(1), rtol=1e-6)


def test_vector_paths_on_wide_innermost_axes():
    # innermost extents >= the vector lanes: the x86 schedule vectorizes them (selects across
    # a vector, reversed and strided ramps, gathers)
    A = te.placeholder((3, 20), "float32", name="A")
    B = te.placeholder((3, 23), "float32", name="B")
    I = te.placeholder((37,), "int32", name="I")
    a, b = rand((3, 20)), rand((3, 23), rng=np.random.default_rng(2))
    i = np.random.default_rng(3).integers(0, 20, 37).astype("int32")
    outs = [topi.concatenate([A, B], -1), topi.strided_slice(B, [0, 22], [3, None], [1, -1]),
            topi.strided_slice(topi.tile(A, (1, 4)), [0, 1], [3, 80], [1, 3]),
            topi.take(A, I, axis=1), topi.transpose(topi.tile(A, (7, 1)))]
    c, r, s, t, tr = run([A, B, I], outs, [a, b, i])
    np.testing.assert_array_equal(c, np.concatenate([a, b], -1))
    np.testing.assert_array_equal(r, b[:, 22::-1])
    np.testing.assert_array_equal(s, np.tile(a, (1, 4))[:, 1:80:3])
    np.testing.assert_array_equal(t, np.take(a, i, axis=1))
    np.testing.assert_array_equal(tr, np.tile(a, (7, 1)).T)
