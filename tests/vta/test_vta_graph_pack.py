"""Graph level VTA (issue 27 point 4): ``vta.top.graph_pack`` packs an int8-quantized relay graph
into VTA's blocked layouts, ``relay.build(..., target=env.target)`` offloads the packed convs
with their ALU epilogue to the simulated VTA and builds the rest for llvm; results equal the
relay interpreter (numpy) on the same graph before packing, bit for bit on int8/int32."""

import numpy as np
import pytest

import tvmpy as tvm
import tvmpy.vta as vta
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay.visitor import dataflow_post_order


def _conv(x, cin, cout, k, s, p, rng):
    w = relay.const(rng.integers(-8, 8, (cout, cin, k, k)).astype("int8"))
    b = relay.const(rng.integers(-300, 300, (cout, 1, 1)).astype("int32"))
    y = relay.nn.conv2d(x, w, strides=(s, s), padding=(p, p), channels=cout, kernel_size=(k, k),
                        out_dtype="int32")
    return relay.add(y, b)


def _requant(y, shift=7):
    y = relay.right_shift(relay.add(y, relay.const(1 << (shift - 1), "int32")),
                          relay.const(shift, "int32"))
    return relay.cast(relay.clip(y, -127, 127), "int8")


def _reference(func, inputs):
    mod = tvm.IRModule.from_expr(func)
    out = relay.create_executor("debug", mod=mod).evaluate()(*inputs.values())
    return [o.numpy() for o in out] if isinstance(out, tuple) else [out.numpy()]


def build_and_run(packed, inputs):
    """relay.build a packed graph for VTA and run it once (simulator stats cleared first):
    (the factory, the outputs)."""
    env = vta.get_env()
    with tvm.transform.PassContext(opt_level=3, disabled_pass={"AlterOpLayout"}):
        lib = relay.build(packed, target=env.target, target_host=env.target_host)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    for k, v in inputs.items():
        m.set_input(k, v)
    vta.simulator.clear_stats()
    m.run()
    return lib, [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


def _run_packed(func, inputs, **pack_kw):
    env = vta.get_env()
    packed = vta.top.graph_pack(func, env.BATCH, env.BLOCK_OUT, env.WGT_WIDTH, **pack_kw)
    lib, outs = build_and_run(packed, inputs)
    return lib, outs, packed


@pytest.mark.parametrize("cin,cout,hw,k,s,p", [
    (20, 24, 7, 3, 1, 1),   # channels padded to blocks, odd spatial size
    (3, 16, 9, 3, 2, 1),    # 3 input channels (13 zero channels), stride 2
    (40, 8, 6, 1, 2, 0),    # 1x1 stride-2 shortcut, fewer outputs than a block
    (64, 64, 8, 3, 1, 1),   # a ResNet-18 stage-1 layer (smaller image)
])
def test_conv_bias_relu_shift_clip_offloaded(cin, cout, hw, k, s, p):
    rng = np.random.default_rng(cin * 100 + cout)
    x = relay.var("x", shape=(1, cin, hw, hw), dtype="int8")
    f = relay.Function([x], _requant(relay.nn.relu(_conv(x, cin, cout, k, s, p, rng))))
    xin = {"x": rng.integers(-128, 128, (1, cin, hw, hw)).astype("int8")}
    ref = _reference(f, xin)[0]
    lib, (out,), packed = _run_packed(f, xin)
    assert lib.vta_functions and not lib.vta_cpu_functions
    assert vta.simulator.stats()["gemm_count"] > 0  # the conv ran on the simulated VTA
    convs = [e for e in dataflow_post_order(packed.body)
             if isinstance(e, relay.Call) and getattr(e.op, "name", "") == "nn.conv2d"]
    assert [c.attrs.data_layout for c in convs] == ["NCHW1n16c"]
    np.testing.assert_array_equal(out, ref)


def _numpy_conv_requant(x, w, b, s, p, shift=7):
    """numpy: int conv2d NCHW/OIHW + bias + relu + rounding shift + clip, as _conv/_requant."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (p, p), (p, p)))
    oh, ow = (h + 2 * p - kh) // s + 1, (wd + 2 * p - kw) // s + 1
    y = np.zeros((n, o, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            win = xp[:, :, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s]
            y += np.einsum("nchw,oc->nohw", win, w[:, :, i, j].astype(np.int64))
    y = np.maximum(y + b.astype(np.int64)[None], 0)
    y = (y + (1 << (shift - 1))) >> shift
    return np.clip(y, -127, 127).astype(np.int8)


@pytest.mark.parametrize("h,w,s", [(1, 1, 1), (1, 1, 2), (2, 2, 1), (2, 2, 2), (3, 3, 1),
                                   (3, 3, 2), (1, 3, 1), (3, 1, 2), (1, 2, 1)])
def test_padded_conv_on_tiny_maps(h, w, s):
    """A padded 3x3 conv on a map of 1-3 pixels (a ResNet at 32x32 reaches 1x1): padding a
    dimension of extent 1 leaves one valid DRAM row/tile (its index folds to a constant); the
    DMA load still pads it. 20 input channels: two channel blocks, one partly zero."""
    rng = np.random.default_rng(h * 10 + w + s)
    cin, cout = 20, 24
    wt = rng.integers(-8, 8, (cout, cin, 3, 3)).astype("int8")
    bias = rng.integers(-300, 300, (cout, 1, 1)).astype("int32")
    x = relay.var("x", shape=(1, cin, h, w), dtype="int8")
    y = relay.nn.conv2d(x, relay.const(wt), strides=(s, s), padding=(1, 1), channels=cout,
                        kernel_size=(3, 3), out_dtype="int32")
    f = relay.Function([x], _requant(relay.nn.relu(relay.add(y, relay.const(bias)))))
    xin = rng.integers(-128, 128, (1, cin, h, w)).astype("int8")
    lib, (out,), _ = _run_packed(f, {"x": xin})
    assert len(lib.vta_functions) == 1 and vta.simulator.stats()["gemm_count"] > 0
    np.testing.assert_array_equal(out, _numpy_conv_requant(xin, wt, bias, s, 1))


def test_residual_add_offloaded():
    rng = np.random.default_rng(5)
    x = relay.var("x", shape=(1, 24, 6, 6), dtype="int8")
    r = relay.var("r", shape=(1, 24, 6, 6), dtype="int32")
    y = _requant(relay.nn.relu(relay.add(_conv(x, 24, 24, 3, 1, 1, rng), r)))
    f = relay.Function([x, r], y)
    xin = {"x": rng.integers(-128, 128, (1, 24, 6, 6)).astype("int8"),
           "r": rng.integers(-2000, 2000, (1, 24, 6, 6)).astype("int32")}
    ref = _reference(f, xin)[0]
    lib, (out,), _ = _run_packed(f, xin)
    assert len(lib.vta_functions) == 1
    np.testing.assert_array_equal(out, ref)


def test_residual_add_untuned_tiles_leave_room_for_the_residual():
    """The untuned tiles count the residual's accumulator tiles beside the output's: at 16x16
    with 64 channels the conv alone fills half the accumulator per virtual thread."""
    rng = np.random.default_rng(6)
    x = relay.var("x", shape=(1, 64, 16, 16), dtype="int8")
    r = relay.var("r", shape=(1, 64, 16, 16), dtype="int32")
    f = relay.Function([x, r], _requant(relay.nn.relu(relay.add(
        _conv(x, 64, 64, 3, 1, 1, rng), r))))
    xin = {"x": rng.integers(-128, 128, (1, 64, 16, 16)).astype("int8"),
           "r": rng.integers(-2000, 2000, (1, 64, 16, 16)).astype("int32")}
    ref = _reference(f, xin)[0]
    lib, (out,), _ = _run_packed(f, xin)
    assert len(lib.vta_functions) == 1
    np.testing.assert_array_equal(out, ref)


def test_two_packed_convs_chain_without_layout_round_trip():
    """conv -> requant -> conv stays packed between the two (no unpack/pack in between)."""
    rng = np.random.default_rng(9)
    x = relay.var("x", shape=(1, 16, 5, 5), dtype="int8")
    y = _requant(relay.nn.relu(_conv(x, 16, 32, 3, 1, 1, rng)))
    y = _requant(_conv(y, 32, 20, 3, 1, 1, rng), shift=6)
    f = relay.Function([x], y)
    xin = {"x": rng.integers(-128, 128, (1, 16, 5, 5)).astype("int8")}
    ref = _reference(f, xin)[0]
    lib, (out,), packed = _run_packed(f, xin)
    ops = [e.op.name for e in dataflow_post_order(packed.body)
           if isinstance(e, relay.Call) and hasattr(e.op, "name")]
    assert ops.count("transpose") == 2  # one pack at the input, one unpack at the output
    assert len(lib.vta_functions) == 2
    np.testing.assert_array_equal(out, ref)


def test_int32_result_conv_stays_unpacked():
    """VTA stores int8 only: graph_pack leaves a conv whose fused result stays int32 in NCHW
    (llvm int8 kernel), and packs the one whose result is int8."""
    rng = np.random.default_rng(3)
    x = relay.var("x", shape=(1, 16, 6, 6), dtype="int8")
    wide = relay.right_shift(_conv(x, 16, 16, 3, 1, 1, rng), relay.const(3, "int32"))
    narrow = _requant(_conv(x, 16, 16, 1, 1, 0, rng))
    f = relay.Function([x], relay.Tuple([wide, narrow]))
    xin = {"x": rng.integers(-128, 128, (1, 16, 6, 6)).astype("int8")}
    ref = _reference(f, xin)
    lib, out, packed = _run_packed(f, xin)
    layouts = [e.attrs.data_layout for e in dataflow_post_order(packed.body)
               if isinstance(e, relay.Call) and getattr(e.op, "name", "") == "nn.conv2d"]
    assert sorted(layouts) == ["NCHW", "NCHW1n16c"]
    assert len(lib.vta_functions) == 1 and not lib.vta_cpu_functions
    for o, r in zip(out, ref):
        np.testing.assert_array_equal(o, r)


def test_packed_int32_result_builds_for_cpu():
    """A packed conv handed to relay.build whose result is int32 (not through graph_pack's
    check) runs on the CPU from the same packed compute, still exact."""
    env = vta.get_env()
    rng = np.random.default_rng(8)
    x = relay.var("x", shape=(1, 2, 5, 5, 1, 16), dtype="int8")
    w = rng.integers(-8, 8, (1, 2, 3, 3, 16, 16)).astype("int8")
    y = relay.nn.conv2d(x, relay.const(w), padding=(1, 1), channels=16, kernel_size=(3, 3),
                        data_layout="NCHW1n16c", kernel_layout="OIHW16o16i", out_dtype="int32")
    f = relay.Function([x], relay.right_shift(y, relay.const(2, "int32")))
    xin = rng.integers(-128, 128, (1, 2, 5, 5, 1, 16)).astype("int8")
    lib = relay.build(f, target=env.target)
    assert not lib.vta_functions and len(lib.vta_cpu_functions) == 1
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("x", xin)
    m.run()
    # numpy: unpack, convolve, shift
    d = xin.transpose(0, 4, 1, 5, 2, 3).reshape(1, 32, 5, 5).astype(np.int64)
    k = w.transpose(0, 4, 1, 5, 2, 3).reshape(16, 32, 3, 3).astype(np.int64)
    dp = np.pad(d, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((1, 16, 5, 5), np.int64)
    for i in range(3):
        for j in range(3):
            ref += np.einsum("nchw,oc->nohw", dp[:, :, i:i + 5, j:j + 5], k[:, :, i, j])
    ref = (ref >> 2).astype(np.int32).reshape(1, 1, 16, 1, 5, 5).transpose(0, 1, 4, 5, 3, 2)
    np.testing.assert_array_equal(m.get_output(0).numpy(), ref)


def test_graph_pack_errors():
    env = vta.get_env()
    x = relay.var("x", shape=(1, 16, 4, 4), dtype="int8")
    f = relay.Function([x], _requant(_conv(x, 16, 16, 3, 1, 1, np.random.default_rng(0))))
    with pytest.raises(vta.top.GraphPackError, match="weight_bits"):
        vta.top.graph_pack(f, env.BATCH, env.BLOCK_OUT, 4)
    with pytest.raises(vta.top.GraphPackError, match="batch 1 is not a multiple"):
        vta.top.graph_pack(f, 2, env.BLOCK_OUT, 8)
    with pytest.raises(vta.top.GraphPackError, match="start_name_idx"):
        vta.top.graph_pack(f, 1, 16, 8, start_name="nn.conv2d", start_name_idx=3)


def test_float_conv_and_region_edges_stay_on_cpu():
    """Outside start..stop nothing is packed; a float conv is never packed."""
    rng = np.random.default_rng(4)
    x = relay.var("x", shape=(1, 3, 8, 8), dtype="float32")
    y = relay.nn.conv2d(x, relay.const(rng.standard_normal((16, 3, 3, 3)).astype("float32")),
                        padding=(1, 1), channels=16, kernel_size=(3, 3))
    y = relay.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2))
    q = relay.cast(relay.clip(relay.round(y), -127, 127), "int8")
    z = _requant(relay.nn.relu(_conv(q, 16, 16, 3, 1, 1, rng)))
    z = relay.nn.global_avg_pool2d(relay.cast(z, "float32"))
    f = relay.Function([x], z)
    xin = {"x": rng.standard_normal((1, 3, 8, 8)).astype("float32")}
    ref = _reference(f, xin)[0]
    lib, (out,), packed = _run_packed(f, xin)
    convs = [e for e in dataflow_post_order(packed.body)
             if isinstance(e, relay.Call) and getattr(e.op, "name", "") == "nn.conv2d"]
    assert [c.attrs.data_layout for c in convs] == ["NCHW", "NCHW1n16c"]
    assert len(lib.vta_functions) == 1
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def _quantized_resnet18(size, **cfg):
    from tvmpy.relay import testing

    mod, params = testing.resnet.get_workload(num_layers=18, batch_size=1,
                                              image_shape=(3, size, size), num_classes=10)
    with relay.quantize.qconfig(calibrate_mode="global_scale", global_scale=8.0,
                                skip_conv_layers=[0], **cfg):
        return relay.transform.InferType()(relay.quantize.quantize(mod, params=params))


def test_resnet18_quantized_end_to_end():
    """Quantized ResNet-18 (first conv and classifier on the CPU): the packed and offloaded
    build equals the relay interpreter on the graph before packing: bit-exact on the last
    int32 tensor before the global pool, float rounding on the logits."""
    size = 56
    qmod = _quantized_resnet18(size)
    main = qmod["main"]
    order = dataflow_post_order(main.body)
    stop = next(k for k, e in enumerate(order)
                if getattr(getattr(e, "op", None), "name", "") == "nn.global_avg_pool2d")
    last_int = [e for e in order[:stop] if isinstance(e, relay.Call)
                and str(e.checked_type.dtype).startswith("int")][-1]
    f = relay.Function(main.params, relay.Tuple([last_int, main.body]))
    x = {"data": np.random.default_rng(0).standard_normal((1, 3, size, size)).astype("float32")}
    ref = _reference(f, x)
    lib, out, packed = _run_packed(f, x)
    convs = [e for e in dataflow_post_order(packed.body)
             if isinstance(e, relay.Call) and getattr(e.op, "name", "") == "nn.conv2d"]
    layouts = [c.attrs.data_layout for c in convs]
    # the first conv (float) stays on the CPU; so do the convs whose fused result relay.quantize
    # keeps in int32 (residual branches, float requantization): VTA stores int8 only
    assert layouts[0] == "NCHW" and layouts.count("NCHW1n16c") >= 7
    assert len(lib.vta_functions) >= 7 and not lib.vta_cpu_functions
    np.testing.assert_array_equal(out[0], ref[0])
    np.testing.assert_allclose(out[1], ref[1], rtol=1e-5, atol=1e-4)


def test_resnet18_vta_qconfig_offloads_every_conv():
    """``qconfig(residual_dtype="int8")`` (VTA's quantization): every tensor between two convs
    is int8, so all 19 convs between the max-pool and the global pool run on VTA (the 16 3x3
    and the 3 1x1 shortcuts); only the first (float) conv and the classifier stay on the CPU.
    32x32 input: stage 4 runs its padded 3x3 convs on 1x1 maps. Equal to the relay interpreter
    on the same quantized graph: bit-exact on the last integer tensor, float rounding on the
    logits."""
    size = 32
    main = _quantized_resnet18(size, residual_dtype="int8")["main"]
    order = dataflow_post_order(main.body)
    names = [getattr(getattr(e, "op", None), "name", "") for e in order]
    lo, hi = names.index("nn.max_pool2d"), names.index("nn.global_avg_pool2d")
    assert names[lo:hi].count("nn.conv2d") == 19
    last_int = [e for e in order[:hi] if isinstance(e, relay.Call)
                and str(e.checked_type.dtype).startswith("int")][-1]
    f = relay.Function(main.params, relay.Tuple([last_int, main.body]))
    x = {"data": np.random.default_rng(1).standard_normal((1, 3, size, size)).astype("float32")}
    ref = _reference(f, x)
    lib, out, packed = _run_packed(f, x)
    layouts = [e.attrs.data_layout for e in dataflow_post_order(packed.body)
               if isinstance(e, relay.Call) and getattr(e.op, "name", "") == "nn.conv2d"]
    assert layouts == ["NCHW"] + ["NCHW1n16c"] * 19
    assert not lib.vta_cpu_functions  # every packed function stores int8: all offloaded
    vta_calls = [n for n in _graph_nodes(lib) if n in set(lib.vta_functions)]
    assert len(vta_calls) == 19  # one VTA call per conv (epilogue and residual add fused)
    np.testing.assert_array_equal(out[0], ref[0])
    np.testing.assert_allclose(out[1], ref[1], rtol=1e-5, atol=1e-4)


def _graph_nodes(lib):
    import json

    graph = json.loads(lib.get_graph_json())
    return [n["attrs"]["func_name"] for n in graph["nodes"]
            if n["op"] == "tvm_op" and "func_name" in n.get("attrs", {})]


def test_rpc_local_session_and_server(tmp_path):
    """TVM's deploy tutorial: export, upload, load_module, run on ``remote.ext_dev(0)``, both
    in-process (LocalSession) and on a real ``--device vta`` server."""
    from tvmpy import rpc

    env = vta.get_env()
    rng = np.random.default_rng(2)
    x = relay.var("x", shape=(1, 20, 7, 7), dtype="int8")
    f = relay.Function([x], _requant(relay.nn.relu(_conv(x, 20, 24, 3, 1, 1, rng))))
    xin = rng.integers(-128, 128, (1, 20, 7, 7)).astype("int8")
    ref = _reference(f, {"x": xin})[0]
    lib = relay.build(vta.top.graph_pack(f, env.BATCH, env.BLOCK_OUT, env.WGT_WIDTH),
                      target=env.target, target_host=env.target_host)
    path = str(tmp_path / "graphlib.tar")
    lib.export_library(path)
    srv = rpc.Server(port=0, silent=True, start_timeout=60, device="vta")
    try:
        for remote in (rpc.LocalSession(),
                       rpc.connect("127.0.0.1", srv.port, timeout=30, call_timeout=120,
                                   token=srv.token)):
            remote.upload(path)
            rlib = remote.load_module("graphlib.tar")
            m = graph_executor.GraphModule(rlib["default"](remote.ext_dev(0)))
            m.set_input("x", xin)
            m.run()
            np.testing.assert_array_equal(m.get_output(0).numpy(), ref)
    finally:
        srv.terminate()
