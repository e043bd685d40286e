"""x86 NCHW{c}c -> NCHW layout transforms through a local tile (``_schedule_unblock`` in
topi/x86/injective.py): rows that vectors divide, of at most a vector, with a divisor
from 4 to half a vector, or else of at most two vectors; with a crop,
bias and relu fused as AlterOpLayout's graphs have them; compared with numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.topi.x86 import injective

# the tiling rules count vectors: the cases below are stated for 16 float lanes (AVX-512), so
# their schedules are made for it whatever the host; the code is built for, and run on, the host
WIDE = "llvm -mcpu=skylake-avx512"


def _graph(shape, crop=None, epilogue=True):
    n, cb, h, w, bn = shape
    x = te.placeholder(shape, name="x")
    y = topi.layout_transform(x, f"NCHW{bn}c", "NCHW")
    c = crop or cb * bn
    if crop:
        y = topi.strided_slice(y, [0, 0, 0, 0], [n, crop, h, w])
    b = te.placeholder((c, 1, 1), name="b")
    if epilogue:
        y = topi.nn.relu(topi.add(y, b))
    return x, b, y


@pytest.mark.parametrize("shape,crop,tiled", [
    ((1, 4, 32, 32, 16), None, True),     # rows of two vectors
    ((2, 3, 7, 7, 8), 19, True),          # batch 2, 7-wide rows, cropped channels
    ((1, 4, 7, 7, 16), 57, True),
    ((1, 2, 5, 5, 3), None, True),        # block 3, 5-wide rows
    ((1, 3, 6, 48, 16), 40, True),
    ((1, 4, 6, 56, 16), 57, True),        # 56-wide rows: tiles of 8 columns
    ((1, 2, 5, 28, 12), None, True),      # tiles of 7
    ((1, 2, 13, 13, 12), None, True),     # 13-wide rows: one tile per row
    ((1, 4, 9, 17, 16), 57, True),        # 17 (prime, under two vectors): one tile per row
    ((1, 2, 3, 31, 8), 13, True),
    ((1, 2, 3, 37, 16), None, False),     # prime, over two vectors: the gather schedule
])
def test_unblock_matches_numpy(shape, crop, tiled):
    x, b, y = _graph(shape, crop)
    with tvm.target.Target(WIDE):
        s = injective.schedule_injective([y])
    assert ("local" in str(tvm.lower(s, [x, b, y], simple_mode=True))) == tiled
    f = tvm.build(s, [x, b, y], target="llvm")
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, shape).astype("float32")
    bias = rng.uniform(-1, 1, tuple(int(d) for d in b.shape)).astype("float32")
    out = tvm.nd.empty(tuple(int(d) for d in y.shape), "float32")
    f(tvm.nd.array(a), tvm.nd.array(bias), out)
    n, cb, h, w, bn = shape
    want = a.transpose(0, 1, 4, 2, 3).reshape(n, cb * bn, h, w)[:, :crop or cb * bn]
    np.testing.assert_allclose(out.numpy(), np.maximum(want + bias, 0), rtol=1e-6, atol=1e-6)


def test_plain_transform_and_other_directions():
    """The transform alone (no epilogue) is tiled; NCHW -> NCHW16c is not this schedule (it is
    _schedule_block's)."""
    x, _, y = _graph((1, 2, 8, 16, 16), epilogue=False)
    with tvm.target.Target("llvm"):
        s = injective.schedule_injective([y])
    f = tvm.build(s, [x, y], target="llvm")
    a = np.random.default_rng(2).uniform(-1, 1, (1, 2, 8, 16, 16)).astype("float32")
    out = tvm.nd.empty((1, 32, 8, 16), "float32")
    f(tvm.nd.array(a), out)
    np.testing.assert_array_equal(out.numpy(), a.transpose(0, 1, 4, 2, 3).reshape(1, 32, 8, 16))
    z = topi.layout_transform(te.placeholder((1, 32, 8, 16), name="z"), "NCHW", "NCHW16c")
    assert injective._unblock_source(z) is None


@pytest.mark.parametrize("shape,bn,tiled", [
    ((1, 64, 13, 13), 16, True),    # a whole row per tile
    ((1, 57, 17, 17), 3, True),     # block 3, 17-wide rows
    ((2, 24, 6, 56), 12, True),     # batch 2, 8-column tiles
    ((1, 32, 5, 32), 16, True),     # rows of two vectors
    ((1, 16, 3, 37), 8, False),     # prime over two vectors: the generic schedule
])
def test_block_matches_numpy(shape, bn, tiled):
    """NCHW -> NCHW{c}c (the input side of a blocked convolution) through a local tile whose
    strided reads are register shuffles (``_schedule_block``); compared with numpy."""
    x = te.placeholder(shape, name="x")
    y = topi.layout_transform(x, "NCHW", f"NCHW{bn}c")
    with tvm.target.Target(WIDE):
        s = injective.schedule_injective([y])
        f = tvm.build(s, [x, y], target="llvm")
    assert ("local" in str(tvm.lower(s, [x, y], simple_mode=True))) == tiled
    ir = f.get_source("ll")
    assert ("llvm.masked.gather" in ir) == (not tiled)
    n, c, h, w = shape
    a = np.random.default_rng(3).uniform(-1, 1, shape).astype("float32")
    out = tvm.nd.empty((n, c // bn, h, w, bn), "float32")
    f(tvm.nd.array(a), out)
    want = a.reshape(n, c // bn, bn, h, w).transpose(0, 1, 3, 4, 2)
    np.testing.assert_array_equal(out.numpy(), want)


def test_block_of_a_computed_source_is_not_tiled():
    """A transform of a value computed in the same stage (an inlined elementwise op) keeps the
    generic schedule, and stays right."""
    x = te.placeholder((1, 32, 5, 9), name="x")
    y = topi.layout_transform(topi.nn.relu(x), "NCHW", "NCHW16c")
    assert injective._block_source(y) is None
    with tvm.target.Target("llvm"):
        s = injective.schedule_injective([y])
        f = tvm.build(s, [x, y], target="llvm")
    a = np.random.default_rng(4).uniform(-1, 1, (1, 32, 5, 9)).astype("float32")
    out = tvm.nd.empty((1, 2, 5, 9, 16), "float32")
    f(tvm.nd.array(a), out)
    want = np.maximum(a, 0).reshape(1, 2, 16, 5, 9).transpose(0, 1, 3, 4, 2)
    np.testing.assert_array_equal(out.numpy(), want)


def _concat_unblock(shape):
    """Two blocked halves concatenated (an injective stage, inlined), then NCHW{c}c -> NCHW."""
    n, cb, h, w, bn = shape
    a, b = te.placeholder(shape, name="a"), te.placeholder(shape, name="b")
    cat = topi.concatenate([a, b], axis=1)
    return a, b, topi.layout_transform(cat, f"NCHW{bn}c", "NCHW")


def _run(s, args, shapes_out, feeds):
    f = tvm.build(s, args, target="llvm")
    outs = [tvm.nd.empty(sh, "float32") for sh in shapes_out]
    f(*[tvm.nd.array(v) for v in feeds], *outs)
    return [o.numpy() for o in outs]


@pytest.mark.parametrize("split", [False, True])
def test_unblock_of_an_inlined_concatenate(split):
    """The transform's 5-D source is itself injective (a concatenate inlined into it, as the
    channel shuffles of ShuffleNetV2 fuse): there is no buffer to cache a tile from, so the
    generic schedule runs (it raised 'cache_read: layout_transform does not read
    concatenate'); split into two outputs that both read the transform, neither takes the
    tile (one cached inside the first output's loops does not cover the second: bound
    inference refused it)."""
    shape = (1, 2, 5, 16, 8)
    a, b, y = _concat_unblock(shape)
    outs = topi.split(y, 2, axis=1) if split else [y]
    with tvm.target.Target("llvm"):
        s = injective.schedule_injective(list(outs))
    rng = np.random.default_rng(4)
    va, vb = (rng.uniform(-1, 1, shape).astype("float32") for _ in range(2))
    got = _run(s, [a, b, *outs], [tuple(int(d) for d in o.shape) for o in outs], [va, vb])
    want = np.concatenate([va, vb], 1).transpose(0, 1, 4, 2, 3).reshape(1, 32, 5, 16)
    np.testing.assert_array_equal(np.concatenate(got, 1), want)


def test_producer_ops_walk_is_the_schedules_walk():
    """te.schedule.producer_ops (issue 30: inline_injective and x86's _resize_rows walked the
    producer graph each their own way): every op once, depth first (a stack) from the last
    output; a diamond's shared producer once."""
    from tvmpy.te.schedule import producer_ops

    x = te.placeholder((4, 5), name="x")
    a = te.compute((4, 5), lambda i, j: x[i, j] + 1, name="a")
    b = te.compute((4, 5), lambda i, j: a[i, j] * 2, name="b")
    c = te.compute((4, 5), lambda i, j: a[i, j] - 3, name="c")
    d = te.compute((4, 5), lambda i, j: b[i, j] + c[i, j], name="d")
    e = te.compute((4, 5), lambda i, j: x[i, j] * 5, name="e")
    names = [op.name for op in producer_ops([d, e])]
    assert names == ["e", "x", "d", "c", "a", "b"]  # the stack order both walks had


@pytest.mark.parametrize("shape,bn,tiled", [
    ((1, 256, 56, 56), 16, True),   # 8-column tiles
    ((1, 48, 17, 17), 16, True),    # prime width under two vectors: a whole row per tile
    ((1, 24, 13, 13), 8, True),
    ((1, 32, 3, 3), 16, True),      # a 3x3 map
    ((1, 32, 5, 37), 16, False),    # prime over two vectors: the generic schedule
])
def test_block_of_a_matmul_output_reshape_is_tiled(shape, bn, tiled):
    """NCHW -> NCHW{c}c of ``reshape([C, H*W] -> [1, C, H, W])`` (a 1x1 convolution computed
    as a matmul, feeding a blocked convolution; with a residual add and relu fused): the
    reshape is computed into the local tile with contiguous row loads instead of a gather of
    stride H*W per output vector; compared with numpy."""
    n, c, h, w = shape
    m = te.placeholder((c, h * w), name="m")
    y = topi.layout_transform(topi.reshape(m, shape), "NCHW", f"NCHW{bn}c")
    res = te.placeholder((n, c // bn, h, w, bn), name="res")
    y = topi.nn.relu(topi.add(y, res))
    assert injective._block_source(y) is not None
    with tvm.target.Target(WIDE):
        s = injective.schedule_injective([y])
        f = tvm.build(s, [m, res, y], target="llvm")
    assert ("local" in str(tvm.lower(s, [m, res, y], simple_mode=True))) == tiled
    assert ("llvm.masked.gather" in f.get_source("ll")) == (not tiled)
    rng = np.random.default_rng(5)
    a = rng.uniform(-1, 1, (c, h * w)).astype("float32")
    r = rng.uniform(-1, 1, (n, c // bn, h, w, bn)).astype("float32")
    out = tvm.nd.empty((n, c // bn, h, w, bn), "float32")
    f(tvm.nd.array(a), tvm.nd.array(r), out)
    want = a.reshape(n, c // bn, bn, h, w).transpose(0, 1, 3, 4, 2) + r
    np.testing.assert_allclose(out.numpy(), np.maximum(want, 0), rtol=1e-6, atol=1e-6)


def test_reshape_of_other_shapes_is_not_a_row_reshape():
    """Only a [C, H*W] -> [1, C, H, W] reshape of a function input is computed into the tile."""
    assert not injective._is_row_reshape(topi.reshape(te.placeholder((4, 8, 9)), (1, 4, 8, 9)))
    assert not injective._is_row_reshape(topi.reshape(te.placeholder((8, 36)), (2, 4, 6, 6)))
    assert not injective._is_row_reshape(topi.reshape(te.placeholder((36, 8)), (1, 8, 6, 6)))
    assert injective._is_row_reshape(topi.reshape(te.placeholder((8, 36)), (1, 8, 6, 6)))


def _shuffle_graph(n, c1, c2, h, w, bn, blocked_first, crop):
    """ShuffleNetV2's unit tail: concatenate(first half, cropped unblocked conv output + bias,
    relu) along channels, then the channel shuffle reshape -> transpose -> reshape (2 groups).
    The first half is NCHW (a slice of the block's input) or itself blocked (a stride-2 unit:
    both branches end in a blocked convolution)."""
    def unblocked(name, c):
        cb = -(-c // bn) if crop else c // bn
        x = te.placeholder((n, cb, h, w, bn), name=name)
        y = topi.strided_slice(topi.layout_transform(x, f"NCHW{bn}c", "NCHW"),
                               [0, 0, 0, 0], [n, c, h, w])
        b = te.placeholder((c, 1, 1), name=name + "_b")
        return [x, b], topi.nn.relu(topi.add(y, b))

    if blocked_first:
        args1, first = unblocked("x1", c1)
    else:
        first = te.placeholder((n, c1, h, w), name="x1")
        args1 = [first]
    args2, second = unblocked("x2", c2)
    cat = topi.concatenate([first, second], axis=1)
    c = c1 + c2
    y = topi.reshape(topi.transpose(topi.reshape(cat, (n, 2, c // 2, h, w)), (0, 2, 1, 3, 4)),
                     (n, c, h, w))
    return [*args1, *args2], y


def _shuffle_ref(vals, args, n, c1, c2, h, w, bn):
    def unb(x, b, c):
        v = x.transpose(0, 1, 4, 2, 3).reshape(n, -1, h, w)[:, :c]
        return np.maximum(v + b, 0)

    if len(args) == 4:
        first = unb(vals[0], vals[1], c1)
        second = unb(vals[2], vals[3], c2)
    else:
        first, second = vals[0], unb(vals[1], vals[2], c2)
    cat = np.concatenate([first, second], 1)
    c = c1 + c2
    return cat.reshape(n, 2, c // 2, h, w).transpose(0, 2, 1, 3, 4).reshape(n, c, h, w)


@pytest.mark.parametrize("n,c1,c2,h,w,bn,blocked_first,crop", [
    (1, 58, 58, 28, 28, 16, False, True),   # 28-wide rows (16 + 12), cropped 64 -> 58
    (1, 116, 116, 14, 14, 16, True, True),  # both halves blocked and cropped
    (1, 232, 232, 7, 7, 8, False, False),   # 29 blocks of 8 (prime), 7x7
    (2, 13, 13, 5, 11, 4, True, True),      # batch 2, prime channels and width
    (1, 6, 6, 3, 17, 4, False, True),       # 17-wide rows (prime, under two vectors)
])
def test_unblock_through_a_channel_shuffle(n, c1, c2, h, w, bn, blocked_first, crop):
    """An NCHW{c}c -> NCHW transform read through a concatenation and a channel shuffle
    (``_keeps_channels`` false) is computed on its own through the register tile
    (``_schedule_unblock_staged``): each local tile is one block of ``w`` columns (bound
    inference cached the blocks 0 .. b/2 for output block b when the tile sat inside the
    shuffled output's loops); compared with numpy."""
    args, y = _shuffle_graph(n, c1, c2, h, w, bn, blocked_first, crop)
    with tvm.target.Target(WIDE):
        s = injective.schedule_injective([y])
        text = str(tvm.lower(s, [*args, y], simple_mode=True))
        f = tvm.build(s, [*args, y], target="llvm")
    import re

    tiles = [int(m) for m in re.findall(r"\.local = allocate\(\((\d+),\)", text)]
    assert tiles and all(t <= bn * w for t in tiles), text
    rng = np.random.default_rng(6)
    vals = [rng.uniform(-1, 1, tuple(int(d) for d in a.shape)).astype("float32") for a in args]
    out = tvm.nd.empty((n, c1 + c2, h, w), "float32")
    f(*[tvm.nd.array(v) for v in vals], out)
    want = _shuffle_ref(vals, args, n, c1, c2, h, w, bn)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6, atol=1e-6)


def test_keeps_channels():
    """A crop, bias and relu keep the channel index; a concatenation does not."""
    x, b, y = _graph((1, 4, 7, 7, 16), 57)
    lt = injective._unblock_source(y)[0]
    assert injective._keeps_channels(y, lt)
    args, z = _shuffle_graph(1, 8, 8, 3, 7, 4, False, False)
    lt = injective._unblock_source(z)[0]
    assert not injective._keeps_channels(z, lt)


@pytest.mark.parametrize("w", [56, 21, 40])
def test_reblock_to_a_short_block_is_vectorized(w):
    """NCHW16c -> (crop, bias, relu) -> NCHW2c, rows that 16 lanes do not divide: the row is
    split by a power of two that divides it (56 -> 8) so no guarded tail sits in the fused
    loop, and the stride-2 stores are vectors; compared with numpy."""
    shape = (1, 4, 3, w, 16)
    x = te.placeholder(shape, name="x")
    u = topi.strided_slice(topi.layout_transform(x, "NCHW16c", "NCHW"), [0, 0, 0, 0],
                           [1, 58, 3, w])
    b = te.placeholder((58, 1, 1), name="b")
    y = topi.layout_transform(topi.nn.relu(topi.add(u, b)), "NCHW", "NCHW2c")
    with tvm.target.Target("llvm"):
        s = injective.schedule_injective([y])
        text = str(tvm.lower(s, [x, b, y], simple_mode=True))
        f = tvm.build(s, [x, b, y], target="llvm")
    if w % 8 == 0:
        assert "ramp(" in text, text
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, shape).astype("float32")
    bias = rng.uniform(-1, 1, (58, 1, 1)).astype("float32")
    out = tvm.nd.empty((1, 29, 3, w, 2), "float32")
    f(tvm.nd.array(a), tvm.nd.array(bias), out)
    plain = np.maximum(a.transpose(0, 1, 4, 2, 3).reshape(1, 64, 3, w)[:, :58] + bias, 0)
    want = plain.reshape(1, 29, 2, 3, w).transpose(0, 1, 3, 4, 2)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6, atol=1e-6)
