"""The VTA op strategy (relay/op/strategy/vta.py): packed int8 conv2d/dense on a "vta" target
take the VTA implementations, whose compute + schedule build with vta.build and match numpy;
anything else falls back to the CPU strategies."""

from types import SimpleNamespace

import numpy as np

import tvmpy.vta as vta
from tvmpy import relay, te
from tvmpy.autotvm import ApplyConfig
from tvmpy.autotvm.space import FallbackConfigEntity
from tvmpy.relay.op.strategy import select_implementation
from tvmpy.vta.top import workloads as W


def _conv_attrs(env, layout_packed=True, padding=(1, 1, 1, 1), strides=(1, 1)):
    return SimpleNamespace(
        strides=strides, padding=padding, dilation=(1, 1), groups=1, channels=None,
        kernel_size=(3, 3), out_dtype="int32",
        data_layout=f"NCHW{env.BATCH}n{env.BLOCK_IN}c" if layout_packed else "NCHW",
        kernel_layout=f"OIHW{env.BLOCK_OUT}o{env.BLOCK_IN}i" if layout_packed else "OIHW",
        out_layout="")


def test_packed_conv2d_takes_vta_and_runs(vta_queue):
    env = vta.get_env()
    wkl = W.Conv2DWorkload(1, 6, 6, 32, 32, 3, 3, 1, 1, 1, 1)
    data = te.placeholder((1, 2, 6, 6, env.BATCH, env.BLOCK_IN), dtype="int8", name="data")
    kernel = te.placeholder((2, 2, 3, 3, env.BLOCK_OUT, env.BLOCK_IN), dtype="int8", name="kernel")
    bias = te.placeholder((1, 2, 1, 1, env.BATCH, env.BLOCK_OUT), dtype="int32", name="bias")
    attrs = _conv_attrs(env)
    out_type = SimpleNamespace(dtype="int32", shape=(1, 2, 6, 6, 1, 16))
    impl = select_implementation(relay.op.get("nn.conv2d"), attrs, [data, kernel], out_type,
                                 env.target)
    assert impl.name == "conv2d_packed.vta"
    clip = select_implementation(relay.op.get("clip"), SimpleNamespace(a_min=0, a_max=127),
                                 [data], out_type, env.target)
    assert clip.name == "clip.vta"
    with ApplyConfig(FallbackConfigEntity()):
        (res,) = impl.compute(attrs, [data, kernel], out_type)
        from tvmpy import topi

        r = topi.add(topi.right_shift(res, 8), bias)
        (r,) = clip.compute(SimpleNamespace(a_min=0, a_max=127), [r], out_type)
        out = topi.cast(r, "int8")
        s = impl.schedule(attrs, [out], env.target)
    f = vta.build(s, [data, kernel, bias, out], "ext_dev", env.target_host)
    inp = W.conv2d_inputs(wkl, 11)
    packed = W.pack_conv2d_inputs(wkl, inp)
    got, _ = W.run_module(f, packed, (1, 2, 6, 6, env.BATCH, env.BLOCK_OUT))
    np.testing.assert_array_equal(W.unpack_conv2d_out(wkl, got), W.conv2d_reference(wkl, inp)[1])


def test_unpacked_or_float_falls_back_to_cpu():
    env = vta.get_env()
    data = te.placeholder((1, 32, 6, 6), dtype="float32", name="data")
    kernel = te.placeholder((32, 32, 3, 3), dtype="float32", name="kernel")
    out_type = SimpleNamespace(dtype="float32", shape=(1, 32, 6, 6))
    attrs = _conv_attrs(env, layout_packed=False)
    attrs.out_dtype = ""
    impl = select_implementation(relay.op.get("nn.conv2d"), attrs, [data, kernel], out_type,
                                 env.target)
    assert "vta" not in impl.name
    d2 = te.placeholder((4, 32), dtype="float32", name="d")
    w2 = te.placeholder((8, 32), dtype="float32", name="w")
    impl = select_implementation(relay.op.get("nn.dense"), SimpleNamespace(units=8, out_dtype=""),
                                 [d2, w2], SimpleNamespace(dtype="float32", shape=(4, 8)),
                                 env.target)
    assert "vta" not in impl.name


def test_packed_dense_takes_vta():
    env = vta.get_env()
    d = te.placeholder((1, 4, env.BATCH, env.BLOCK_IN), dtype="int8", name="d")
    w = te.placeholder((3, 4, env.BLOCK_OUT, env.BLOCK_IN), dtype="int8", name="w")
    impl = select_implementation(relay.op.get("nn.dense"), SimpleNamespace(units=None, out_dtype="int32"),
                                 [d, w], SimpleNamespace(dtype="int32", shape=(1, 3, 1, 16)),
                                 env.target)
    assert impl.name == "dense_packed.vta"
