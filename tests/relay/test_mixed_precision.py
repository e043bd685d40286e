"""ToMixedPrecision (issue 29 point 1): TVM's graph-level mixed precision pass. Its rules on small
graphs (ALWAYS ops in the mixed precision type with float32 accumulation, FOLLOW ops take their
operands' type, NEVER ops in float32; casts cached, constants cast once, no cast chains,
outputs and signatures kept, idempotent, the registration hook), a hypothesis search over
random graphs, and the three showcase models on llvm and on the CUDA target (NVRTC + ptxas,
run host-emulated) within the accuracy bounds a mixed-precision user accepts (float16: max
|diff| <= 1e-2 of the float32 model's max |output|; bfloat16: <= 4e-2; bench/RESULTS.md)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.relay.op.registry import (
    _REGISTRY,
    MIXED_PRECISION_CONVERSION,
    Op,
    register_mixed_precision_conversion,
)
from tvmpy.relay.testing import compare, onnx_models
from tvmpy.relay.transform import InferType, ToMixedPrecision
from tvmpy.relay.transform import mixed_precision as mpx

F32 = "float32"
TYPES = ["float16", "bfloat16"]
# the accepted error of each mixed precision type: max |mixed - float32| / max |float32|
BOUND = {"float16": 1e-2, "bfloat16": 4e-2}


def _mod(params: list, body: relay.Expr) -> tvm.IRModule:
    return InferType()(tvm.IRModule.from_expr(relay.Function(params, body)))


def _calls(mod: tvm.IRModule, name: str | None = None) -> list:
    out: list = []

    def f(e):
        if isinstance(e, relay.Call) and isinstance(e.op, Op) and \
                (name is None or e.op.name == name):
            out.append(e)

    relay.analysis.post_order_visit(mod["main"], f)
    return out


def _dt(e) -> str:
    return str(e.checked_type.dtype)


def _assert_clean(mod: tvm.IRModule) -> None:
    """No cast of a cast, no cast of a constant (constants are cast at once)."""
    for c in _calls(mod, "cast"):
        a = c.args[0]
        assert not (isinstance(a, relay.Call) and getattr(a.op, "name", "") == "cast"), \
            f"cast chain: {c}"
        assert not isinstance(a, relay.Constant), f"cast of a constant: {c}"


def _convert(mod: tvm.IRModule, mp: str, **kw) -> tvm.IRModule:
    out = ToMixedPrecision(mp, **kw)(mod)
    _assert_clean(out)
    again = ToMixedPrecision(mp, **kw)(out)
    tvm.ir.assert_structural_equal(again, out)  # idempotent
    assert tvm.ir.structural_equal(out["main"].checked_type, mod["main"].checked_type)  # signature kept
    return out


# ---- the rules on small graphs ------------------------------------------------------------------
@pytest.mark.parametrize("mp", TYPES)
def test_always_follow_never_on_conv_relu_softmax(mp):
    x = relay.var("x", shape=(1, 4, 7, 7))
    w = relay.var("w", shape=(6, 4, 3, 3))
    y = relay.nn.relu(relay.nn.conv2d(x, w, padding=(1, 1)))
    z = relay.nn.softmax(relay.reshape(y, (1, -1)))
    out = _convert(_mod([x, w], relay.Tuple([z, y])), mp)
    print(out)
    (conv,) = _calls(out, "nn.conv2d")
    assert [_dt(a) for a in conv.args] == [mp, mp]
    assert conv.attrs.out_dtype == F32 and _dt(conv) == F32  # float32 accumulation
    (relu,) = _calls(out, "nn.relu")
    assert _dt(relu) == mp and _calls(out, "reshape")[0].checked_type.dtype == mp
    (sm,) = _calls(out, "nn.softmax")
    assert _dt(sm.args[0]) == F32 and _dt(sm) == F32
    # x, w to mp; the accumulator to mp once; reshape and relu back to float32
    assert len(_calls(out, "cast")) == 5
    assert [str(t.dtype) for t in out["main"].checked_type.ret_type.fields] == [F32, F32]


@pytest.mark.parametrize("mp", TYPES)
def test_never_ops_stay_float32(mp):
    x = relay.var("x", shape=(2, 3, 5, 5))
    w = relay.var("w", shape=(3, 3, 1, 1))
    c = relay.nn.conv2d(x, w)
    g = relay.var("g", shape=(5,))
    never = [relay.exp(c), relay.erf(c), relay.log(relay.abs(c) + relay.const(1.0)),
             relay.nn.layer_norm(c, g, g), relay.mean(c, axis=[1]), relay.sum(c, axis=[2]),
             relay.variance(c, relay.mean(c, axis=[3], keepdims=True), axis=[3]), relay.nn.global_avg_pool2d(c),
             relay.nn.softmax(c), relay.power(c, relay.const(2.0))]
    out = _convert(_mod([x, w, g], relay.Tuple(never)), mp)
    names = ["exp", "erf", "log", "nn.layer_norm", "mean", "sum", "variance",
             "nn.global_avg_pool2d", "nn.softmax", "power"]
    for name in names:
        for call in _calls(out, name):
            assert all(_dt(a) == F32 for a in call.args), (name, call)
            assert _dt(call) == F32
    # the float32 accumulator feeds them directly (one cast of it: to mp for abs, a FOLLOW op)
    (conv,) = _calls(out, "nn.conv2d")
    assert _dt(conv) == F32
    assert sum(1 for cst in _calls(out, "cast") if cst.args[0] is conv) == 1
    assert _calls(out, "exp")[0].args[0] is conv


@pytest.mark.parametrize("mp", TYPES)
def test_follow_takes_its_operands_type(mp):
    a = relay.var("a", shape=(4, 8))
    w1 = relay.var("w1", shape=(8, 8))
    w2 = relay.var("w2", shape=(8, 8))
    d1, d2 = relay.nn.dense(a, w1), relay.nn.dense(a, w2)
    low = relay.nn.relu(relay.add(d1, d2))            # both mp: mp
    mixed = relay.multiply(low, relay.exp(d2))         # mp x float32: float32
    scaled = relay.divide(low, relay.const(3.0))       # mp x constant: mp
    out = _convert(_mod([a, w1, w2], relay.Tuple([mixed, scaled])), mp)
    (add,) = _calls(out, "add")
    assert _dt(add) == mp and _dt(_calls(out, "nn.relu")[0]) == mp
    (mul,) = _calls(out, "multiply")
    assert _dt(mul) == F32 and all(_dt(x) == F32 for x in mul.args)
    (div,) = _calls(out, "divide")
    assert _dt(div) == mp and isinstance(div.args[1], relay.Constant)
    assert div.args[1].data.dtype == str(tvm.ir.dtype.to_numpy(mp))
    # each value cast once per dtype: a, w1, w2 and the two accumulators to mp, relu (for
    # multiply) and divide (an output) to float32; exp reads dense 2's accumulator itself
    assert len(_calls(out, "cast")) == 7
    assert _calls(out, "exp")[0].args[0] is _calls(out, "nn.dense")[1] or \
        _calls(out, "exp")[0].args[0] is _calls(out, "nn.dense")[0]


@pytest.mark.parametrize("mp", TYPES)
def test_constants_cast_once_and_overflow_stays_float32(mp):
    x = relay.var("x", shape=(1, 3, 6, 6))
    rng = np.random.default_rng(0)
    w = relay.const(rng.standard_normal((3, 3, 3, 3)).astype(F32))
    a = relay.nn.conv2d(x, w, padding=(1, 1))
    b = relay.nn.conv2d(relay.nn.relu(a), w, padding=(1, 1))  # the same weight again
    masked = relay.add(b, relay.const(np.full((1, 1, 1, 6), -1e9, F32)))  # an attention mask
    out = _convert(_mod([x], masked), mp)
    convs = _calls(out, "nn.conv2d")
    assert convs[0].args[1] is convs[1].args[1]  # one cast constant, shared
    assert convs[0].args[1].data.dtype == str(tvm.ir.dtype.to_numpy(mp))
    (add,) = _calls(out, "add")
    # -1e9 overflows float16 (kept float32), fits bfloat16 (its exponent range is float32's)
    assert _dt(add) == (F32 if mp == "float16" else mp)


def test_outputs_signature_lets_ifs_and_functions():
    x = relay.var("x", shape=(3, 4))
    w = relay.var("w", shape=(5, 4))
    v = relay.var("v")
    d = relay.nn.dense(x, w)
    inner_p = relay.var("p", shape=(3, 5))
    inner = relay.Function([inner_p], relay.nn.relu(relay.nn.dense(inner_p, relay.ones((5, 5), F32))))
    cond = relay.less(relay.sum(x), relay.const(0.0))
    body = relay.Let(v, relay.nn.relu(d), relay.If(cond, relay.Call(inner, [v]), relay.tanh(v)))
    mod = _mod([x, w], body)
    out = _convert(mod, "float16")
    print(out)
    assert tvm.ir.structural_equal(out["main"].checked_type, mod["main"].checked_type)
    dense = _calls(out, "nn.dense")
    assert all(str(c.checked_type.dtype) == F32 and c.attrs.out_dtype == F32 for c in dense)
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal((3, 4)).astype(F32),
             "w": rng.standard_normal((5, 4)).astype(F32)}
    for f in (feeds, {k: -v for k, v in feeds.items()}):  # both branches
        want = relay.create_executor("debug", mod).evaluate()(**f).numpy()
        got = relay.create_executor("debug", out).evaluate()(**f).numpy()
        assert got.dtype == np.float32
        assert compare.errors(got, want)[1] <= 1e-2


def test_model_casts_float64_and_integers_kept():
    x = relay.var("x", shape=(2, 6))
    w = relay.var("w", shape=(4, 6))
    d = relay.nn.dense(x, w)
    as_half = relay.cast(d, "float16")          # the model's own cast to float16: dropped
    same = relay.cast(relay.nn.relu(d), F32)    # a no-op cast: dropped
    ints = relay.cast(d, "int32")               # to int32: from the float32 accumulator
    x64 = relay.var("x64", shape=(2, 6), dtype="float64")
    w64 = relay.var("w64", shape=(4, 6), dtype="float64")
    d64 = relay.nn.dense(x64, w64)              # float64 stays float64
    out = _convert(_mod([x, w, x64, w64], relay.Tuple([as_half, same, ints, d64])), "float16")
    print(out)
    dense = _calls(out, "nn.dense")
    assert [_dt(c) for c in dense] == [F32, "float64"]
    assert all(_dt(a) == "float64" for a in dense[1].args)
    to_int = [c for c in _calls(out, "cast") if c.attrs.dtype == "int32"]
    assert len(to_int) == 1 and to_int[0].args[0] is dense[0]
    # casts: x, w, the accumulator to f16 (shared by the model's cast and relu), relu back to
    # float32 for the output, the accumulator to int32
    assert len(_calls(out, "cast")) == 5


def test_registration_hook_overrides_and_missing_ops(caplog):
    x = relay.var("x", shape=(2, 8))
    w = relay.var("w", shape=(8, 8))
    body = relay.nn.softmax(relay.nn.relu(relay.nn.dense(x, w)))
    mod = _mod([x, w], body)
    entry = _REGISTRY["nn.softmax"].attrs
    saved = {k: entry[k] for k in (MIXED_PRECISION_CONVERSION,
                                   "__level__" + MIXED_PRECISION_CONVERSION)}
    try:
        @register_mixed_precision_conversion("nn.softmax", level=11)
        def follow(call, mp):
            return [mpx.MIXED_PRECISION_FOLLOW, mp, mp]

        assert _dt(_calls(ToMixedPrecision()(mod), "nn.softmax")[0]) == "float16"
        # a lower level does not replace it
        register_mixed_precision_conversion("nn.softmax", mpx.generic_never_op, level=5)
        assert _dt(_calls(ToMixedPrecision()(mod), "nn.softmax")[0]) == "float16"
    finally:
        entry.update(saved)
    assert _dt(_calls(ToMixedPrecision()(mod), "nn.softmax")[0]) == F32

    relu = _REGISTRY["nn.relu"].attrs
    saved = {k: relu.pop(k) for k in (MIXED_PRECISION_CONVERSION,
                                      "__level__" + MIXED_PRECISION_CONVERSION)}
    try:
        with caplog.at_level(logging.WARNING):
            out = ToMixedPrecision(missing_op_mode=1)(mod)
        assert "nn.relu" in caplog.text
        assert _dt(_calls(out, "nn.relu")[0]) == "float16"  # a missing op is FOLLOW
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            ToMixedPrecision(missing_op_mode=2)(mod)
        assert "nn.relu" not in caplog.text
        with pytest.raises(ValueError, match="nn.relu"):
            ToMixedPrecision(missing_op_mode=0)(mod)
    finally:
        relu.update(saved)
    with pytest.raises(ValueError, match="mixed_precision_type"):
        ToMixedPrecision("float64")


def test_default_lists_name_registered_operators():
    import tvmpy.relay.qnn  # noqa: F401  (the quantized operators)

    mpx._register_pending()
    lists = mpx.DEFAULT_ALWAYS_LIST + mpx.DEFAULT_FOLLOW_LIST + mpx.DEFAULT_NEVER_LIST
    assert len(lists) == len(set(lists))
    for name in lists:
        assert name in _REGISTRY, name
        assert _REGISTRY[name].attrs.get(MIXED_PRECISION_CONVERSION) is not None, name
    assert not mpx._PENDING
    # every operator has one (cast: the pass itself handles the model's casts; "test." ones
    # are registered by other tests of the same process, as in the other registry-wide tests)
    assert [n for n in _REGISTRY if _REGISTRY[n].attrs.get(MIXED_PRECISION_CONVERSION) is None
            and n != "cast" and not n.startswith("test.")] == []


# ---- numerics on small graphs -------------------------------------------------------------------
@pytest.mark.parametrize("mp", TYPES)
def test_small_network_on_llvm_against_float32(mp):
    rng = np.random.default_rng(3)
    x = relay.var("x", shape=(2, 5, 11, 13))
    params = {"w1": rng.standard_normal((7, 5, 3, 3)).astype(F32) * 0.3,
              "b1": rng.standard_normal(7).astype(F32),
              "w2": rng.standard_normal((10, 7)).astype(F32) * 0.3}
    w1, b1, w2 = (relay.var(k, shape=v.shape) for k, v in params.items())
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w1, strides=(2, 2)), b1))
    y = relay.nn.max_pool2d(y, (2, 2))
    y = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(y))
    y = relay.nn.softmax(relay.nn.dense(y, w2))
    mod = _mod([x, w1, b1, w2], y)
    feeds = {"x": rng.standard_normal((2, 5, 11, 13)).astype(F32)}
    want = compare.tvm_runner(compare.build(mod, params)[0])(feeds)[0]
    out = _convert(mod, mp)
    got = compare.tvm_runner(compare.build(out, params)[0])(feeds)[0]
    assert got.dtype == np.float32
    assert compare.errors(got, want)[1] <= BOUND[mp] / 4


# ---- random graphs (hypothesis) -----------------------------------------------------------------
def _random_graph(draw, st):
    """A random graph over [4, 6] tensors: dense / batch_matmul (ALWAYS), elementwise and
    shape ops (FOLLOW), exp / softmax / mean / erf (NEVER), casts of the model."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    x = relay.var("x", shape=(4, 6))
    vals = [x]
    params = [x]
    for k in range(draw(st.integers(1, 9))):
        a = vals[draw(st.integers(0, len(vals) - 1))]
        b = vals[draw(st.integers(0, len(vals) - 1))]
        op = draw(st.sampled_from(["dense", "bmm", "add", "mul", "relu", "tanh", "exp",
                                   "softmax", "mean", "erf", "transpose2", "const", "cast",
                                   "concat", "var"]))
        if op == "dense":
            v = relay.nn.dense(a, relay.const(rng.standard_normal((6, 6)).astype(F32)))
        elif op == "bmm":
            a3, b3 = relay.reshape(a, (1, 4, 6)), relay.reshape(b, (1, 4, 6))
            s = relay.nn.batch_matmul(a3, b3)  # [1, 4, 4]
            v = relay.reshape(relay.nn.batch_matmul(s, a3, transpose_b=False), (4, 6))
        elif op == "add":
            v = relay.add(a, b)
        elif op == "mul":
            v = relay.multiply(a, b)
        elif op == "relu":
            v = relay.nn.relu(a)
        elif op == "tanh":
            v = relay.tanh(a)
        elif op == "exp":
            v = relay.exp(relay.tanh(a))
        elif op == "softmax":
            v = relay.nn.softmax(a)
        elif op == "mean":
            v = relay.add(a, relay.mean(a, axis=[1], keepdims=True))
        elif op == "erf":
            v = relay.erf(a)
        elif op == "transpose2":
            v = relay.transpose(relay.transpose(a))
        elif op == "const":
            big = draw(st.sampled_from([0.5, 3.0, 1e5]))
            v = relay.add(a, relay.const(np.full((4, 6), big, F32)))
        elif op == "cast":
            v = relay.cast(relay.cast(a, draw(st.sampled_from(["float16", F32, "float64"]))),
                           F32)
        elif op == "concat":
            v = relay.reshape(relay.concatenate([a, b], axis=0), (4, 12))
            v = relay.strided_slice(v, [0, 0], [4, 6])
        else:
            p = relay.var(f"p{k}", shape=(4, 6))
            params.append(p)
            v = relay.subtract(a, p)
        vals.append(v)
    outs = vals[-draw(st.integers(1, min(3, len(vals)))):]
    return params, relay.Tuple(outs) if len(outs) > 1 else outs[0]


def test_random_graphs_keep_the_rules():
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies

    @hypothesis.settings(max_examples=60, deadline=None, derandomize=True)
    @hypothesis.given(st.data(), st.sampled_from(TYPES))
    def check(data, mp):
        params, body = _random_graph(data.draw, st)
        mod = _mod(params, body)
        out = ToMixedPrecision(mp)(mod)
        for c in _calls(out, "cast"):  # no chain the pass made (the model's own may stay)
            a = c.args[0]
            if isinstance(a, relay.Call) and getattr(a.op, "name", "") == "cast":
                assert any(str(o.attrs.dtype) == str(a.attrs.dtype)
                           for o in _calls(mod, "cast")), f"cast chain {c}"
            assert not isinstance(a, relay.Constant)
        tvm.ir.assert_structural_equal(ToMixedPrecision(mp)(out), out)
        assert tvm.ir.structural_equal(out["main"].checked_type, mod["main"].checked_type)
        for c in _calls(out):
            name = c.op.name
            if name in ("nn.dense", "nn.batch_matmul"):
                assert c.attrs.out_dtype == F32 and all(_dt(a) == mp for a in c.args)
            elif name in ("exp", "nn.softmax", "mean", "erf"):
                assert _dt(c) == F32 and all(_dt(a) == F32 for a in c.args)
            elif name in ("add", "multiply", "subtract", "nn.relu", "tanh", "transpose"):
                dts = {_dt(a) for a in c.args}
                assert len(dts) == 1 and _dt(c) in dts  # one type per call
        feeds = {p.name_hint: np.random.default_rng(7).uniform(-1, 1, (4, 6)).astype(F32)
                 for p in params}
        want = relay.create_executor("debug", mod).evaluate()(**feeds)
        got = relay.create_executor("debug", out).evaluate()(**feeds)
        wl = [w.numpy() for w in want] if isinstance(want, (list, tuple)) else [want.numpy()]
        gl = [g.numpy() for g in got] if isinstance(got, (list, tuple)) else [got.numpy()]
        for g, w in zip(gl, wl):
            assert g.dtype == w.dtype
            if np.isfinite(w).all() and np.abs(w).max() < 1e4:
                assert np.isfinite(g).all()

    check()


# ---- the showcase models ------------------------------------------------------------------------
MODELS = {
    "resnet18": lambda: onnx_models.resnet18(image=32, classes=10),
    "mobilenet_v2": lambda: onnx_models.mobilenet_v2(image=32, classes=10),
    "bert_encoder": lambda: onnx_models.bert_encoder(layers=1, hidden=64, heads=4, seq=16),
}
_cache: dict = {}


def _model(name: str):
    if name not in _cache:
        m = MODELS[name]()
        feeds = onnx_models.input_feeds(m)
        mod, params = compare.import_onnx(m, {k: v.shape for k, v in feeds.items()})
        want = compare.ort_runner(m)(feeds)[0]
        _cache[name] = mod, params, feeds, want
    return _cache[name]


@pytest.mark.parametrize("mp", TYPES)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_showcase_model_on_llvm(name, mp):
    mod, params, feeds, want = _model(name)
    out = _convert(mod, mp)
    heavy = [c for n in ("nn.conv2d", "nn.dense", "nn.batch_matmul") for c in _calls(out, n)]
    assert heavy and all(_dt(a) == mp for c in heavy for a in c.args)
    # bound weights: every cast of a weight is folded in the pass
    bound = InferType()(tvm.IRModule.from_expr(
        relay.build_module.bind_params_by_name(mod["main"], params)))
    _assert_clean(ToMixedPrecision(mp)(bound))
    got = compare.tvm_runner(compare.build(out, params, target="llvm")[0])(feeds)[0]
    assert got.dtype == np.float32
    rel = compare.errors(got, want)[1]
    print(name, mp, "relative error", rel)
    assert 0 < rel <= BOUND[mp]


def _run_cuda(lib, feeds: dict, workdir: str) -> np.ndarray:
    from tvmpy.contrib import graph_executor
    from tvmpy.runtime import cuda_module
    from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

    glib = lib.get_lib()
    host = HostKernels(glib.imported_modules[0].get_source(), glib.plan["kernels"], workdir)
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        g = graph_executor.GraphModule(lib["default"](tvm.cuda(0)))
        g.set_input(**feeds)
        g.run()
        return g.get_output(0).numpy()
    finally:
        cuda_module.set_driver(prev)


@pytest.mark.parametrize("mp", TYPES)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_showcase_model_for_cuda_runs_host_emulated(name, mp, tmp_path):
    """target cuda: every kernel through NVRTC and ptxas (float16 / bfloat16 operands of the
    conv2d, depthwise, dense and batch_matmul templates with float32 accumulators), run on the
    host emulation behind the graph executor; the CNNs in bfloat16 are built only (each
    emulated CNN takes ~10 s)."""
    mod, params, feeds, want = _model(name)
    out = ToMixedPrecision(mp)(mod)
    lib, _ = compare.build(out, params, target="cuda -max_num_threads=64")
    dev = lib.get_lib().imported_modules[0]
    assert dev.ptxas_info
    src = dev.get_source()
    assert ("tvmpy_half" if mp == "float16" else "uint16_t") in src
    if mp == "bfloat16" and name != "bert_encoder":
        return
    got = _run_cuda(lib, feeds, str(tmp_path))
    rel = compare.errors(got, want)[1]
    print(name, mp, "relative error", rel)
    assert 0 < rel <= BOUND[mp]


@pytest.mark.parametrize("mp", TYPES)
def test_every_always_op_for_cuda_and_llvm(mp, tmp_path):
    """Every ALWAYS operator (awkward sizes: primes, a group count, stride 2) with mixed
    precision operands and a float32 accumulator, through target cuda (NVRTC + ptxas, run
    host-emulated) and llvm, against the float32 model."""
    rng = np.random.default_rng(5)
    shapes = {"x1": (2, 3, 11), "w1": (5, 3, 3), "x2": (1, 6, 7, 9), "wg": (4, 3, 3, 3),
              "wt": (6, 5, 3, 3), "x3": (1, 2, 5, 4, 3), "w3": (3, 2, 2, 3, 2),
              "a": (3, 13), "b": (13, 7)}
    v = {k: relay.var(k, shape=s) for k, s in shapes.items()}
    outs = [relay.nn.conv1d(v["x1"], v["w1"], padding=1),
            relay.nn.conv2d(v["x2"], v["wg"], groups=2, strides=(2, 2), padding=(1, 1)),
            relay.nn.conv2d_transpose(v["x2"], v["wt"], strides=(2, 2), padding=(1, 1)),
            relay.nn.conv3d(v["x3"], v["w3"]),
            relay.nn.matmul(v["a"], v["b"])]
    mod = _mod(list(v.values()), relay.Tuple([relay.nn.relu(o) for o in outs]))
    out = _convert(mod, mp)
    for c in _calls(out):
        if c.op.name in mpx.DEFAULT_ALWAYS_LIST:
            assert c.attrs.out_dtype == F32 and all(_dt(a) == mp for a in c.args), c.op.name
    feeds = {k: rng.standard_normal(s).astype(F32) for k, s in shapes.items()}
    want = relay.create_executor("debug", mod).evaluate()(**feeds)
    want = [w.numpy() for w in want]
    lib, _ = compare.build(out, {}, target="cuda -max_num_threads=64")
    assert lib.get_lib().imported_modules[0].ptxas_info
    from tvmpy.contrib import graph_executor
    from tvmpy.runtime import cuda_module
    from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

    glib = lib.get_lib()
    host = HostKernels(glib.imported_modules[0].get_source(), glib.plan["kernels"],
                       str(tmp_path))
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        g = graph_executor.GraphModule(lib["default"](tvm.cuda(0)))
        g.set_input(**feeds)
        g.run()
        got_cuda = [g.get_output(i).numpy() for i in range(len(outs))]
    finally:
        cuda_module.set_driver(prev)
    got_cpu = compare.tvm_runner(compare.build(out, {})[0])(feeds)
    for got in (got_cuda, got_cpu):
        for gv, w in zip(got, want):
            assert gv.dtype == np.float32
            # one rounding of each operand and of the result: within a few units of mp
            assert compare.errors(gv, w)[1] <= BOUND[mp] / 2


def test_follow_without_float_result_takes_operands_as_they_are():
    x = relay.var("x", shape=(3, 4))
    w = relay.var("w", shape=(4, 4))
    d = relay.nn.dense(x, w)
    from tvmpy.relay.op.dyn.shape import shape_of

    outs = [shape_of(x),                      # an input: no cast for its shape
            relay.argmax(relay.nn.relu(d), axis=[1]),  # an mp value: compared in mp
            relay.less(relay.exp(d), relay.const(1.0))]  # float32 (NEVER) value: in float32
    out = _convert(_mod([x, w], relay.Tuple(outs)), "float16")
    (shp,) = _calls(out, "shape_of")
    assert shp.args[0] is out["main"].params[0]
    (am,) = _calls(out, "argmax")
    assert _dt(am.args[0]) == "float16"
    (ls,) = _calls(out, "less")
    assert all(_dt(a) == F32 for a in ls.args)
    assert len(_calls(out, "cast")) == 3  # x, w, the accumulator to mp for relu


def test_symbolic_shapes_on_the_vm():
    """A BERT encoder with symbolic batch and sequence: the pass types the new calls with
    symbolic dims; the VM runs it at two sizes within the float16 bound."""
    from tvmpy.relay.testing import zoo

    m = onnx_models.bert_encoder(layers=1, hidden=64, heads=4, seq="S", batch="N",
                                 embeddings=False)
    mod, params = compare.import_onnx(m, None)
    out = _convert(mod, "float16")
    c = zoo.build(out, params, vm=True)
    ort = compare.ort_runner(m)
    for n, s in ((1, 7), (3, 16)):
        feeds = onnx_models.input_feeds(m, dims={"N": n, "S": s})
        got = c.run(feeds)[0]
        assert got.shape == (n, s, 64) and got.dtype == np.float32
        assert compare.errors(got, ort(feeds)[0])[1] <= BOUND["float16"]
