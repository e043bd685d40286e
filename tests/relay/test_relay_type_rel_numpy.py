"""Type relations agree with numpy: the inferred shape of each shape-changing operator equals the
shape numpy produces on a random array of the input shape (random shapes, fixed seed)."""

import numpy as np
import pytest

from tvmpy import relay
from tvmpy.relay import RelayTypeError
from tvmpy.relay.transform import infer_type

rng = np.random.default_rng(1234)
N_CASES = 60


def _shape(e):
    return tuple(infer_type(e).checked_type.shape)


def _rand_shape(lo=0, hi=4, max_dim=7):
    return tuple(int(d) for d in rng.integers(1, max_dim + 1, size=rng.integers(lo, hi + 1)))


def _arr(shape):
    return rng.standard_normal(shape).astype("float32")


def _v(shape, dtype="float32"):
    return relay.var("x", shape=shape, dtype=dtype)


def test_broadcast_matches_numpy():
    for _ in range(N_CASES):
        a = _rand_shape()
        # b: a suffix of a, with some dims set to 1, sometimes extra leading dims
        b = list(a[rng.integers(0, len(a) + 1):])
        b = [1 if rng.random() < 0.3 else d for d in b]
        if rng.random() < 0.3:
            b = [int(rng.integers(1, 4))] + b
        b = tuple(b)
        try:
            want = (np.asarray(_arr(a)) + _arr(b)).shape
        except ValueError:
            with pytest.raises(RelayTypeError, match="do not broadcast"):
                _shape(relay.add(_v(a), _v(b)))
            continue
        assert _shape(relay.add(_v(a), _v(b))) == want
        assert _shape(relay.where(_v(a, "bool"), _v(a), _v(b))) == want


def test_reshape_transpose_squeeze_expand_match_numpy():
    for _ in range(N_CASES):
        s = _rand_shape(1, 4)
        x = _arr(s)
        perm = tuple(int(p) for p in rng.permutation(len(s)))
        assert _shape(relay.transpose(_v(s), perm)) == np.transpose(x, perm).shape
        assert _shape(relay.transpose(_v(s))) == np.transpose(x).shape
        new = list(np.transpose(x, perm).shape)
        new[int(rng.integers(len(new)))] = -1
        assert _shape(relay.reshape(_v(s), new)) == x.reshape(new).shape
        assert _shape(relay.squeeze(_v(s))) == np.squeeze(x).shape
        ax = int(rng.integers(-len(s) - 1, len(s) + 1))
        assert _shape(relay.expand_dims(_v(s), ax)) == np.expand_dims(x, ax).shape
        assert _shape(relay.broadcast_to(_v(s), (3, *s))) == np.broadcast_to(x, (3, *s)).shape


def test_slicing_and_gather_match_numpy():
    for _ in range(N_CASES):
        s = _rand_shape(1, 4)
        x = _arr(s)
        begin, end, strides, sl = [], [], [], []
        for d in s:
            st = int(rng.choice([1, 2, 3, -1, -2]))
            b = int(rng.integers(-d, d))
            e = int(rng.integers(-d - 1, d + 2))
            begin.append(b)
            end.append(e)
            strides.append(st)
            sl.append(slice(b, e, st))
        assert _shape(relay.strided_slice(_v(s), begin, end, strides)) == x[tuple(sl)].shape
        ax = int(rng.integers(len(s)))
        idx = rng.integers(0, s[ax], size=_rand_shape(0, 2)).astype("int32")
        assert _shape(relay.take(_v(s), relay.const(idx), axis=ax)) == np.take(x, idx, axis=ax).shape
        assert _shape(relay.take(_v(s), relay.const(idx))) == np.take(x, idx).shape


def test_concat_split_stack_pad_match_numpy():
    for _ in range(N_CASES):
        s = _rand_shape(1, 4)
        ax = int(rng.integers(len(s)))
        t = list(s)
        t[ax] = int(rng.integers(1, 5))
        x, y = _arr(s), _arr(t)
        got = _shape(relay.concatenate([_v(s), _v(tuple(t))], axis=ax))
        assert got == np.concatenate([x, y], axis=ax).shape
        assert _shape(relay.stack([_v(s), _v(s)], axis=ax)) == np.stack([x, x], axis=ax).shape
        cuts = sorted(int(c) for c in rng.integers(0, s[ax] + 1, size=2))
        parts = relay.split(_v(s), cuts, axis=ax).astuple()
        want = [p.shape for p in np.split(x, cuts, axis=ax)]
        assert [tuple(f.shape) for f in infer_type(parts).checked_type.fields] == want
        pw = [(int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in s]
        assert _shape(relay.nn.pad(_v(s), pw)) == np.pad(x, pw).shape


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod"])
def test_reductions_match_numpy(name):
    for _ in range(N_CASES // 4):
        s = _rand_shape(1, 4)
        x = _arr(s)
        k = int(rng.integers(0, len(s) + 1))
        axes = tuple(sorted(int(a) for a in rng.choice(len(s), size=k, replace=False)))
        keep = bool(rng.random() < 0.5)
        want = getattr(np, name)(x, axis=axes or None, keepdims=keep).shape
        got = _shape(getattr(relay, name)(_v(s), axis=axes or None, keepdims=keep))
        assert got == want, (s, axes, keep)
        if len(s) > 1:
            excl = tuple(i for i in range(len(s)) if i not in axes)
            got = _shape(getattr(relay, name)(_v(s), axis=axes, keepdims=keep, exclude=True))
            assert got == getattr(np, name)(x, axis=excl, keepdims=keep).shape
        ax = int(rng.integers(len(s)))
        assert _shape(relay.argmax(_v(s), axis=ax)) == np.argmax(x, axis=ax).shape


def _conv_ref_shape(x_shape, w_shape, stride, pad, dil, groups):
    """Output extent by enumerating every window position that fits the padded input."""
    n, c, h, w = x_shape
    o, _, kh, kw = w_shape

    def extent(size, k, p0, p1, s, d):
        span = (k - 1) * d + 1
        return len([i for i in range(0, size + p0 + p1, s) if i + span <= size + p0 + p1])

    return (n, o, extent(h, kh, pad[0], pad[2], stride[0], dil[0]),
            extent(w, kw, pad[1], pad[3], stride[1], dil[1]))


def test_conv_and_pool_shapes_match_window_count():
    for _ in range(N_CASES):
        groups = int(rng.choice([1, 2, 3]))
        c = groups * int(rng.integers(1, 3))
        o = groups * int(rng.integers(1, 3))
        kh, kw = (int(k) for k in rng.integers(1, 4, size=2))
        stride = tuple(int(v) for v in rng.integers(1, 4, size=2))
        dil = tuple(int(v) for v in rng.integers(1, 3, size=2))
        pad = tuple(int(v) for v in rng.integers(0, 3, size=4))
        h = int(rng.integers((kh - 1) * dil[0] + 1, 12))
        w = int(rng.integers((kw - 1) * dil[1] + 1, 12))
        xs, ws = (2, c, h, w), (o, c // groups, kh, kw)
        conv = relay.nn.conv2d(_v(xs), _v(ws), strides=stride, padding=pad, dilation=dil,
                               groups=groups)
        assert _shape(conv) == _conv_ref_shape(xs, ws, stride, pad, dil, groups)
        pool = relay.nn.max_pool2d(_v(xs), pool_size=(kh, kw), strides=stride, padding=pad,
                                   dilation=dil)
        assert _shape(pool) == _conv_ref_shape(xs, (c, c, kh, kw), stride, pad, dil, 1)


def test_matmul_family_matches_numpy():
    for _ in range(N_CASES // 2):
        b, m, k, n = (int(v) for v in rng.integers(1, 6, size=4))
        x, y = _arr((b, m, k)), _arr((b, n, k))
        want = np.matmul(x, np.swapaxes(y, 1, 2)).shape
        assert _shape(relay.nn.batch_matmul(_v((b, m, k)), _v((b, n, k)))) == want
        assert _shape(relay.nn.batch_matmul(_v((b, m, k)), _v((1, k, n)), transpose_b=False)) == want
        assert _shape(relay.nn.dense(_v((b, m, k)), _v((n, k)))) == (x @ _arr((k, n))).shape
        assert _shape(relay.nn.matmul(_v((m, k)), _v((k, n)))) == (m, n)
        assert _shape(relay.nn.matmul(_v((k, m)), _v((n, k)), transpose_a=True, transpose_b=True)) == (m, n)
