"""``nn.attention`` (scaled dot-product attention as one operator: topi.nn.attention with the
x86 schedule per block of query rows) against numpy, and the FuseAttention rewrite: the forms
transformers export become one call, the others are left alone."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay, te
from tvmpy.relay.testing import compare
from tvmpy.runtime import vm as rvm
from tvmpy.topi.nn.attention import attention
from tvmpy.topi.x86.attention import schedule_attention

RNG = np.random.default_rng(2511)


def _rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def _reference(q, k, v, bias=None, scale=1.0, k_transposed=False, heads=1):  # noqa: ANN001
    """softmax(q k^T * scale + bias) v in float64, written out here (not the op's FNumpy)."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    kt = k if k_transposed else k.transpose(0, 2, 1)
    s = np.einsum("bmd,bdn->bmn", q, kt) * scale
    if bias is not None:
        b = q.shape[0]
        s = (s.reshape(b // heads, heads, *s.shape[1:]) + bias).reshape(s.shape)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bmn,bne->bme", p / p.sum(-1, keepdims=True), v)


def _kernel(shapes: dict, **attrs):  # noqa: ANN003, ANN202
    ph = {k: te.placeholder(s, name=k) for k, s in shapes.items()}
    with tvm.target.Target("llvm"):
        out = attention(ph["q"], ph["k"], ph["v"], ph.get("bias"), **attrs)
        f = tvm.build(schedule_attention([out]), [*ph.values(), out], target="llvm")
    return f, out


def _run(f, arrays: list, out_shape: tuple) -> np.ndarray:  # noqa: ANN001
    dev = tvm.cpu(0)
    o = tvm.nd.array(np.zeros(out_shape, "float32"), dev)
    f(*[tvm.nd.array(a, dev) for a in arrays], o)
    return o.numpy()


@pytest.mark.parametrize("b, m, n, d, e, heads, bias, kt", [
    (1, 1, 1, 1, 1, 1, None, False),                 # a single query, key and feature
    (2, 7, 13, 5, 3, 1, None, True),                 # nothing divides a tile
    (3, 97, 101, 64, 33, 3, (1, 3, 97, 101), False),  # primes; a per-head full bias
    (4, 19, 41, 16, 64, 2, (2, 1, 1, 41), True),     # a key mask per group
    (6, 40, 1, 8, 8, 6, (1, 1, 40, 1), False),       # one key
])
def test_kernel_matches_numpy(b, m, n, d, e, heads, bias, kt):
    q, k, v = _rand(b, m, d), _rand(b, d, n) if kt else _rand(b, n, d), _rand(b, n, e)
    shapes = {"q": q.shape, "k": k.shape, "v": v.shape}
    arrays = [q, k, v]
    if bias is not None:
        bv = np.where(RNG.uniform(size=bias) < 0.2, -1e4, RNG.standard_normal(bias))
        bv = bv.astype("float32")
        shapes["bias"] = bias
        arrays.append(bv)
    scale = 1 / np.sqrt(d)
    f, out = _kernel(shapes, scale=scale, k_transposed=kt, heads=heads)
    got = _run(f, arrays, (b, m, e))
    want = _reference(q, k, v, arrays[3] if bias else None, scale, kt, heads)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_kernel_keeps_no_whole_score_tensor():
    """The x86 schedule computes the scores per block of query rows: no buffer of the lowered
    kernel holds B x M x N scores."""
    b, m, n = 2, 200, 300
    q, k, v = (te.placeholder(s, name=x) for s, x in (((b, m, 64), "q"), ((b, n, 64), "k"),
                                                       ((b, n, 64), "v")))
    with tvm.target.Target("llvm"):
        out = attention(q, k, v, None, 0.125)
        text = str(tvm.lower(schedule_attention([out]), [q, k, v, out], simple_mode=True))
    sizes = {}
    for line in text.splitlines():
        if "= allocate((" in line:
            name, rest = line.strip().split(" = allocate((")
            sizes[name] = int(rest.split(",")[0])
    scores = {k: v for k, v in sizes.items() if k.startswith(("T_attn_scores", "T_attn_exp"))}
    assert scores and max(scores.values()) < b * m * n // 8, sizes


def test_symbolic_lengths_in_the_kernel():
    """One kernel for every query / key count (a relay.Any sequence), 1 and primes included."""
    mm, nn = te.var("m"), te.var("n")
    q, k, v = (te.placeholder(s, name=x) for s, x in (((2, mm, 8), "q"), ((2, nn, 8), "k"),
                                                       ((2, nn, 5), "v")))
    bias = te.placeholder((1, 2, 1, nn), name="bias")
    with tvm.target.Target("llvm"):
        out = attention(q, k, v, bias, 0.5, heads=2)
        f = tvm.build(schedule_attention([out]), [q, k, v, bias, out], target="llvm")
    for m, n in ((1, 1), (3, 37), (41, 2)):
        a = [_rand(2, m, 8), _rand(2, n, 8), _rand(2, n, 5), _rand(1, 2, 1, n)]
        np.testing.assert_allclose(_run(f, a, (2, m, 5)), _reference(*a, 0.5, heads=2),
                                   rtol=1e-4, atol=1e-5)


def test_bad_shapes_are_named():
    with pytest.raises(ValueError, match="feature size of q and k"):
        attention(te.placeholder((2, 3, 4)), te.placeholder((2, 5, 6)),
                  te.placeholder((2, 5, 7)))
    with pytest.raises(ValueError, match="not a multiple of heads"):
        attention(te.placeholder((6, 3, 4)), te.placeholder((6, 5, 4)),
                  te.placeholder((6, 5, 7)), heads=4)
    with pytest.raises(ValueError, match="does not broadcast"):
        attention(te.placeholder((6, 3, 4)), te.placeholder((6, 5, 4)),
                  te.placeholder((6, 5, 7)), te.placeholder((1, 2, 3, 5)), heads=3)
    x = relay.var("x", shape=(2, 3, 4))
    with pytest.raises(Exception, match="key count of k and v"):
        relay.transform.InferType()(tvm.IRModule.from_expr(relay.Function(
            [x], relay.nn.attention(x, x, relay.var("v", shape=(2, 5, 4))))))


# ---- the rewrite ---------------------------------------------------------------------------
def _chain(b=2, h=3, m=11, n=11, d=8, e=8, mask=None, scale_after=False, kt=False,  # noqa: ANN001, ANN202
           axis=-1, extra_use=False, k_batch=None, divide_first=False, vector_scale=False):
    """An exported attention block: bmm(Q, K^T) -> reshape to [b, h, m, n] -> * scale ->
    (+ mask) -> softmax -> reshape -> bmm(., V)."""
    q = relay.var("q", shape=(b * h, m, d))
    k = relay.var("k", shape=(k_batch or b * h, *((d, n) if kt else (n, d))))
    v = relay.var("v", shape=(b * h, n, e))
    args = [q, k, v]
    s = relay.nn.batch_matmul(q, k, transpose_b=not kt)
    s = relay.reshape(s, (b, h, m, n))
    sc = relay.const(np.full((n,) if vector_scale else (), 0.25, "float32"))
    if divide_first:
        s = relay.divide(sc, s)
    elif not scale_after:
        s = relay.multiply(s, sc)
    if mask is not None:
        mv = relay.var("mask", shape=mask)
        args.append(mv)
        s = relay.add(s, mv)
    if scale_after:
        s = relay.multiply(s, sc)
    p = relay.nn.softmax(s, axis=axis)
    out = relay.nn.batch_matmul(relay.reshape(p, (b * h, m, n)), v, transpose_b=False)
    if extra_use:
        out = relay.Tuple([out, p])
    return tvm.IRModule.from_expr(relay.Function(args, out))


def _fused(mod):  # noqa: ANN001, ANN202
    with tvm.transform.PassContext(opt_level=3):
        return relay.transform.FuseAttention()(relay.transform.InferType()(mod))


def _feeds(mod) -> dict:  # noqa: ANN001
    feeds = {}
    for p in mod["main"].params:
        shape = tuple(int(d) for d in p.type_annotation.shape)
        feeds[p.name_hint] = (np.where(RNG.uniform(size=shape) < 0.3, -1e4, 0).astype("float32")
                              if p.name_hint == "mask" else _rand(*shape))
    return feeds


def _assert_same_values(mod) -> None:  # noqa: ANN001
    """relay.build at opt_level 3 (FuseAttention on) equals the unfused module's reference
    interpreter."""
    feeds = _feeds(mod)
    want = relay.create_executor("debug", mod=mod).evaluate()(*feeds.values())
    lib, _ = compare.build(mod, {}, opt_level=3)
    got = compare.tvm_runner(lib)(feeds)
    want = want if isinstance(want, (list, tuple)) else [want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w.numpy() if hasattr(w, "numpy") else w),
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kw", [
    {},                                              # BERT / ViT without a mask
    {"mask": (2, 1, 1, 11)},                         # a key mask per batch entry
    {"mask": (1, 1, 11, 11)},                        # GPT-2's causal mask
    {"mask": (1, 3, 11, 11), "scale_after": True},   # T5's bias; a scale after the bias
    {"kt": True, "m": 1, "n": 7},                    # K^T as the export gives it; one query
])
def test_exported_forms_become_one_call(kw):
    mod = _chain(**kw)
    text = str(_fused(mod))
    assert text.count("nn.attention(") == 1 and "nn.softmax" not in text, text
    _assert_same_values(mod)


@pytest.mark.parametrize("kw", [
    {"axis": 2},                  # softmax over the queries
    {"extra_use": True},          # the probabilities are an output too
    {"k_batch": 1},               # K broadcast over the batch
    {"divide_first": True},       # c / scores: not a scale
    {"vector_scale": True},       # a per-key scale, not a scalar
])
def test_other_forms_are_left_alone(kw):
    mod = _chain(**kw)
    text = str(_fused(mod))
    assert "nn.attention" not in text and "nn.softmax" in text, text


def test_swin_window_bias_and_shift_mask():
    """Swin: a relative position bias [h, n, n] in the [G, h, n, n] view, then a shift mask
    [W, 1, n, n] added in a 5-D [G / W, W, h, n, n] view: both become one 4-D bias."""
    windows, h, n, d = 4, 2, 9, 8
    q = relay.var("q", shape=(windows * h, n, d))
    k = relay.var("k", shape=(windows * h, n, d))
    v = relay.var("v", shape=(windows * h, n, d))
    rel = relay.const(_rand(h, n, n))
    shift = relay.const(np.where(RNG.uniform(size=(windows, 1, n, n)) < 0.3, -100.0,
                                 0.0).astype("float32"))
    s = relay.reshape(relay.nn.batch_matmul(q, k), (windows, h, n, n))
    s = relay.add(relay.multiply(s, relay.const(np.float32(d ** -0.5))), rel)
    s = relay.add(relay.reshape(s, (1, windows, h, n, n)), shift)
    p = relay.nn.softmax(relay.reshape(s, (windows, h, n, n)))
    out = relay.nn.batch_matmul(relay.reshape(p, (windows * h, n, n)), v, transpose_b=False)
    mod = tvm.IRModule.from_expr(relay.Function([q, k, v], out))
    text = str(_fused(mod))
    assert text.count("nn.attention(") == 1 and "nn.softmax" not in text, text
    _assert_same_values(mod)


def test_symbolic_sequence_through_the_vm():
    """A relay.Any sequence length: the chain is rewritten and the VM runs the one kernel at
    every length, 1 and primes included."""
    h, d = 3, 16
    s_ = relay.Any()
    q = relay.var("q", shape=(h, s_, d))
    k = relay.var("k", shape=(h, s_, d))
    v = relay.var("v", shape=(h, s_, d))
    sc = relay.multiply(relay.nn.batch_matmul(q, k), relay.const(np.float32(0.25)))
    out = relay.nn.batch_matmul(relay.nn.softmax(sc), v, transpose_b=False)
    mod = tvm.IRModule.from_expr(relay.Function([q, k, v], out))
    assert "nn.attention(" in str(_fused(mod))
    with tvm.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, "llvm")
    vm = rvm.VirtualMachine(exe, tvm.cpu())
    for n in (1, 2, 37):
        a = [_rand(h, n, d) for _ in range(3)]
        np.testing.assert_allclose(vm.run(*a).numpy(), _reference(*a, scale=0.25), rtol=1e-4,
                                   atol=1e-5)


@pytest.mark.parametrize("same_batch", [True, False])
def test_symbolic_batch_mask(same_batch):
    """A mask over a run-time batch: fused when its batch is the scores' own (the VM then
    runs it at every batch), left alone when it is another run-time size (it may be 1 and
    broadcast)."""
    b_ = relay.Any()
    q = relay.var("q", shape=(b_, 5, 8))
    k = relay.var("k", shape=(b_, 7, 8))
    v = relay.var("v", shape=(b_, 7, 4))
    mask = relay.var("mask", shape=(b_ if same_batch else relay.Any(), 5, 7))
    s = relay.add(relay.multiply(relay.nn.batch_matmul(q, k), relay.const(np.float32(0.3))),
                  mask)
    out = relay.nn.batch_matmul(relay.nn.softmax(s), v, transpose_b=False)
    mod = tvm.IRModule.from_expr(relay.Function([q, k, v, mask], out))
    assert ("nn.attention(" in str(_fused(mod))) == same_batch
    with tvm.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, "llvm")
    vm = rvm.VirtualMachine(exe, tvm.cpu())
    for n in (1, 3):
        a = [_rand(n, 5, 8), _rand(n, 7, 8), _rand(n, 7, 4)]
        m = np.where(RNG.uniform(size=(n, 5, 7)) < 0.3, -1e4, 0).astype("float32")
        want = _reference(*a, m[:, None], scale=0.3, heads=1)
        np.testing.assert_allclose(vm.run(*a, m).numpy(), want, rtol=1e-4, atol=1e-5)


def _head_split_block(b, t, h, d, form, mask=False, dyn_batch=False):  # noqa: ANN001, ANN202
    """Q, K, V projected as ``[b, t, h * d]`` rows and split into heads as exports write it;
    K^T in the given ``form``: "t5" (one transpose [0, 2, 3, 1]), "vit" (heads [0, 2, 1, 3],
    then [0, 1, 3, 2] and a scalar factor on K), "divided" (K^T divided by a constant),
    "vector" (K^T times a per-key vector: not a scalar, K stays transposed)."""
    bb = relay.Any() if dyn_batch else b
    x = relay.var("x", shape=(bb, t, h * d))
    args = [x]

    def heads(y):  # noqa: ANN001, ANN202
        return relay.transpose(relay.reshape(y, (-1, t, h, d)), (0, 2, 1, 3))

    q = relay.reshape(heads(relay.multiply(x, relay.const(np.float32(0.7)))), (-1, t, d))
    kx = relay.sigmoid(x)
    if form == "t5":
        kt = relay.transpose(relay.reshape(kx, (-1, t, h, d)), (0, 2, 3, 1))
    else:
        kt = relay.transpose(heads(kx), (0, 1, 3, 2))
        if form == "vit":
            kt = relay.multiply(kt, relay.const(np.float32(0.35)))
        elif form == "divided":
            kt = relay.divide(kt, relay.const(np.float32(3.0)))
        elif form == "vector":
            kt = relay.multiply(kt, relay.const(_rand(t)))
    kt = relay.reshape(kt, (-1, d, t))
    v = relay.reshape(heads(relay.tanh(x)), (-1, t, d))
    s = relay.reshape(relay.nn.batch_matmul(q, kt, transpose_b=False), (-1, h, t, t))
    if mask:
        mv = relay.var("mask", shape=(1, 1, 1, t))
        args.append(mv)
        s = relay.add(s, mv)
    p = relay.reshape(relay.nn.softmax(s), (-1, t, t))
    out = relay.nn.batch_matmul(p, v, transpose_b=False)
    return tvm.IRModule.from_expr(relay.Function(args, out))


@pytest.mark.parametrize("b,t,h,d,form,mask", [
    (1, 13, 3, 8, "t5", True),       # T5: K^T one transpose of the projected rows
    (2, 17, 2, 5, "vit", False),     # ViT: K^T a transpose of K's heads times a scalar
    (1, 1, 1, 24, "t5", False),      # one token, one head
    (3, 7, 4, 19, "divided", True),  # head size 19; K^T / 3
])
def test_exported_k_transpose_is_undone(b, t, h, d, form, mask):
    mod = _head_split_block(b, t, h, d, form, mask)
    text = str(_fused(mod))
    assert text.count("nn.attention(") == 1, text
    assert "k_transposed=True" not in text, text  # (False, the default, is not printed)
    _assert_same_values(mod)


def test_vector_factor_on_k_keeps_it_transposed():
    mod = _head_split_block(1, 9, 2, 8, "vector")
    text = str(_fused(mod))
    assert text.count("nn.attention(") == 1 and "k_transposed=True" in text, text
    _assert_same_values(mod)


def test_undone_k_transpose_with_a_runtime_batch():
    mod = _head_split_block(2, 11, 3, 8, "vit", dyn_batch=True)
    text = str(_fused(mod))
    assert "nn.attention(" in text and "k_transposed=True" not in text, text
    with tvm.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, "llvm")
    vm = rvm.VirtualMachine(exe, tvm.cpu())
    ref = relay.create_executor("debug", mod=mod)
    for b in (1, 3):
        x = _rand(b, 11, 24)
        want = ref.evaluate()(x)
        np.testing.assert_allclose(vm.run(x).numpy(), want.numpy(), rtol=1e-4, atol=1e-5)


def _projected_block(b, t, h, d, causal=False, key_mask=False, q_scale=None, v_fn=None):  # noqa: ANN001, ANN202
    """Q, K, V as three slices of one projection ``[b, t, 3 * h * d]`` (a function input),
    each split into heads (``reshape -> transpose -> reshape``), Q maybe scaled by a constant
    before its split, V maybe through ``v_fn``; K transposed with the batch_matmul's
    ``transpose_b``; a causal mask [1, 1, t, t] and / or a key mask [b, 1, 1, t]."""
    x = relay.var("x", shape=(b, t, 3 * h * d))
    args = [x]
    parts = relay.split(x, 3, axis=2)

    def heads(y):  # noqa: ANN001, ANN202
        return relay.reshape(relay.transpose(relay.reshape(y, (b, t, h, d)), (0, 2, 1, 3)),
                             (b * h, t, d))

    q = parts[0] if q_scale is None else relay.multiply(parts[0], relay.const(np.float32(q_scale)))
    v = parts[2] if v_fn is None else v_fn(parts[2])
    s = relay.nn.batch_matmul(heads(q), heads(parts[1]), transpose_b=True)
    s = relay.multiply(relay.reshape(s, (b, h, t, t)), relay.const(np.float32(d ** -0.5)))
    if causal:
        tri = np.triu(np.full((t, t), -1e4, "float32"), 1).reshape(1, 1, t, t)
        s = relay.add(s, relay.const(tri))
    if key_mask:
        mv = relay.var("mask", shape=(b, 1, 1, t))
        args.append(mv)
        s = relay.add(s, mv)
    p = relay.reshape(relay.nn.softmax(s), (b * h, t, t))
    out = relay.nn.batch_matmul(p, heads(v), transpose_b=False)
    out = relay.reshape(relay.transpose(relay.reshape(out, (b, h, t, d)), (0, 2, 1, 3)),
                        (b, t, h * d))
    return tvm.IRModule.from_expr(relay.Function(args, out))


@pytest.mark.parametrize("b,t,h,d,kw", [
    (1, 13, 3, 8, {}),                                   # prime length
    (2, 1, 2, 5, {"key_mask": True}),                    # one token
    (1, 37, 1, 19, {"causal": True}),                    # one head; keys past a vector
    (3, 17, 5, 16, {"causal": True, "key_mask": True}),  # 17 keys: one vector and a tail
    (1, 7, 4, 1, {"q_scale": 0.6}),                      # head size 1; Q scaled before its split
    (2, 11, 3, 6, {"v_fn": relay.tanh}),                 # a vector-math producer of V
    (1, 1031, 2, 64, {"causal": True}),                  # a V head over V_VIEW_MAX_BYTES
])
def test_head_splits_read_through_in_the_kernel(b, t, h, d, kw):
    """The head splits of Q/K/V fuse into the attention kernel (no kernel of their own), which
    reads the projection through them; values equal the interpreter's on the unfused graph."""
    mod = _projected_block(b, t, h, d, **kw)
    text = str(_fused(mod))
    assert text.count("nn.attention(") == 1, text
    if "q_scale" in kw:  # the factor on Q is in the attention's scale, not a multiply
        assert text.count("multiply(") == 0, text
    _assert_same_values(mod)
    with tvm.transform.PassContext(opt_level=3):
        fused = relay.transform.FuseOps(3)(relay.transform.InferType()(_fused(mod)))
    names = []
    relay.post_order_visit(fused["main"].body, lambda e: names.append(e.op.attrs["Name"]) if (
        isinstance(e, relay.Call) and isinstance(e.op, relay.Function)) else None)
    assert not any(n.startswith("fused_reshape_transpose_reshape") for n in names[:-1]), names
