"""vta.top.conv2d_packed / dense_packed with their VTA schedules, run on the simulator (and on
the tests' independent reference queue) against numpy: int32 convolution, then the same shift,
bias, clip and narrowing. Shapes: ResNet-18 layers at small spatial sizes and awkward ones."""

import numpy as np
import pytest

import tvmpy.vta as vta
from tvmpy.autotvm.space import OtherOptionEntity, SplitEntity
from tvmpy.vta.top import workloads as W

W2 = W.Conv2DWorkload


def _run_conv(wkl, config=None, seed=0):
    env = vta.get_env()
    f = W.build_conv2d(wkl, config)
    inp = W.conv2d_inputs(wkl, seed)
    packed = W.pack_conv2d_inputs(wkl, inp)
    oh, ow = wkl.out_hw()
    out_shape = (packed[0].shape[0], packed[1].shape[0], oh, ow, env.BATCH, env.BLOCK_OUT)
    out, stats = W.run_module(f, packed, out_shape)
    _, want = W.conv2d_reference(wkl, inp)
    return W.unpack_conv2d_out(wkl, out), want, stats


RESNET_SMALL = [  # ResNet-18 conv layers, spatial size cut to 8/7 so the simulator is quick
    W2(1, 8, 8, 64, 64, 3, 3, 1, 1, 1, 1),
    W2(1, 8, 8, 64, 128, 3, 3, 1, 1, 2, 2),
    W2(1, 8, 8, 64, 128, 1, 1, 0, 0, 2, 2),
    W2(1, 7, 7, 256, 256, 3, 3, 1, 1, 1, 1),
]
AWKWARD = [
    W2(1, 7, 5, 3, 5, 3, 3, 1, 1, 1, 1),      # prime channels rounded up to the blocks
    W2(1, 9, 11, 17, 31, 3, 3, 0, 0, 2, 2),   # stride 2, no padding, odd H/W
    W2(1, 11, 13, 16, 16, 7, 7, 3, 3, 2, 2),  # the stem's 7x7 pad 3 stride 2
    W2(1, 13, 7, 32, 48, 1, 1, 0, 0, 1, 1),   # 1x1
    W2(1, 1, 1, 16, 16, 1, 1, 0, 0, 1, 1),    # size 1
]


@pytest.mark.parametrize("wkl", RESNET_SMALL + AWKWARD, ids=str)
def test_conv2d_packed_default_config(vta_queue, wkl):
    got, want, _ = _run_conv(wkl)
    np.testing.assert_array_equal(got, want)


def _cfg(h, w, ci, co, oc_nt, h_nt, b=1):
    from tvmpy.autotvm.space import ConfigEntity

    m = {k: SplitEntity([-1, v]) for k, v in (("tile_b", b), ("tile_h", h), ("tile_w", w),
                                              ("tile_ci", ci), ("tile_co", co))}
    m["oc_nthread"] = OtherOptionEntity(oc_nt)
    m["h_nthread"] = OtherOptionEntity(h_nt)
    return ConfigEntity(-1, None, m)


@pytest.mark.parametrize("tiles", [(3, 5, 1, 1), (4, 4, 2, 2), (5, 3, 3, 3)])
def test_conv2d_tiles_not_dividing(vta_queue, tiles):
    """Tiles that do not divide H/W/channels: guarded remainders, same result."""
    wkl = W2(1, 9, 10, 48, 48, 3, 3, 1, 1, 1, 1)
    got, want, _ = _run_conv(wkl, _cfg(*tiles, 1, 1))
    np.testing.assert_array_equal(got, want)


def test_virtual_threads_same_result_fewer_cycles():
    """1, 2 and 4 virtual threads (oc x h) give bit-identical results; 2 and 4 take fewer
    cycles than 1 (loads of one thread overlap the GEMMs of the other)."""
    from tvmpy.vta.build import use_command_queue

    use_command_queue(None)
    wkl = W2(1, 8, 8, 64, 64, 3, 3, 1, 1, 1, 1)
    outs, cycles = {}, {}
    for nt, (oc, h) in {1: (1, 1), 2: (2, 1), 4: (2, 2)}.items():
        got, want, stats = _run_conv(wkl, _cfg(2, 8, 2, 1, oc, h), seed=7)
        np.testing.assert_array_equal(got, want)
        outs[nt], cycles[nt] = got, stats["cycle_count"]
    assert np.array_equal(outs[1], outs[2]) and np.array_equal(outs[1], outs[4])
    assert cycles[2] < cycles[1] and cycles[4] < cycles[1], cycles


def test_default_tiles_fit_buffers_and_use_threads():
    from tvmpy.vta.top.common import default_tiles

    env = vta.get_env()
    for wkl in W.RESNET18_CONVS.values():
        oh, ow = wkl.out_hw()
        t = default_tiles(env, b=1, co=wkl.out_filter // 16, oh=oh, ow=ow, ci=wkl.in_filter // 16,
                          kh=wkl.hkernel, kw=wkl.wkernel, stride=wkl.hstride)
        nt = t["oc_nthread"] * t["h_nthread"]
        assert nt == 2
        win = ((t["h"] - 1) * wkl.hstride + wkl.hkernel) * ((t["w"] - 1) * wkl.wstride + wkl.wkernel)
        assert t["ci"] * win * nt <= env.INP_BUFF_SIZE // env.INP_ELEM_BYTES


def test_conv2d_bad_input_named():
    from tvmpy import te
    from tvmpy.vta.top import conv2d_packed_compute

    env = vta.get_env()
    d = te.placeholder((1, 2, 8, 8, env.BATCH, env.BLOCK_IN), dtype="int8", name="d")
    k = te.placeholder((2, 3, 3, 3, env.BLOCK_OUT, env.BLOCK_IN), dtype="int8", name="k")
    with pytest.raises(ValueError, match="do not match"):
        conv2d_packed_compute(d, k, (1, 1), (1, 1))
    kf = te.placeholder((2, 2, 3, 3, env.BLOCK_OUT, env.BLOCK_IN), dtype="float32", name="k")
    with pytest.raises(ValueError, match="int8"):
        conv2d_packed_compute(d, kf, (1, 1), (1, 1))
    with pytest.raises(ValueError, match="dilation"):
        conv2d_packed_compute(d, k.__class__ and te.placeholder(
            (2, 2, 3, 3, env.BLOCK_OUT, env.BLOCK_IN), dtype="int8", name="k2"), (1, 1), (1, 1), (2, 2))


@pytest.mark.parametrize("wkl", [W.DenseWorkload(1, 512, 1000), W.DenseWorkload(1, 37, 19),
                                 W.DenseWorkload(1, 64, 64)], ids=str)
def test_dense_packed(vta_queue, wkl):
    env = vta.get_env()
    f = W.build_dense(wkl)
    inp = W.dense_inputs(wkl, 3)
    packed = W.pack_dense_inputs(wkl, inp)
    out_shape = (packed[0].shape[0], packed[1].shape[0], env.BATCH, env.BLOCK_OUT)
    out, _ = W.run_module(f, packed, out_shape)
    _, want = W.dense_reference(wkl, inp)
    np.testing.assert_array_equal(W.unpack_dense_out(wkl, out), want)


def test_epilogue_runs_in_place_one_alu_pass_per_stage():
    """shift, bias add, min and max each take one ALU pass over the output tiles (the stages
    write in place: no reset + copy per stage), and only the accumulator of the result and the
    bias are allocated."""
    from tvmpy.vta.build import use_command_queue

    use_command_queue(None)
    wkl = W2(1, 6, 6, 32, 32, 3, 3, 1, 1, 1, 1)
    got, want, stats = _run_conv(wkl)
    np.testing.assert_array_equal(got, want)
    tiles = 6 * 6 * 2
    assert stats["alu_counter"] == 4 * tiles


def test_virtual_threads_overlap_loads_with_several_weight_blocks():
    """With 4 output-channel blocks per tile the weight load is a loop of DMAs; each thread's
    data and weight loads stay together in the load queue, so the two threads' loads and GEMMs
    overlap (the load queue does not wait on one thread's compute with the other's loads)."""
    from tvmpy.vta.build import use_command_queue

    use_command_queue(None)
    wkl = W2(1, 7, 7, 128, 128, 3, 3, 1, 1, 1, 1)
    cycles = {}
    for nt in (1, 2):
        got, want, stats = _run_conv(wkl, _cfg(7, 7, 1, 4, nt, 1), seed=nt)
        np.testing.assert_array_equal(got, want)
        cycles[nt] = stats
    # with overlap, the total approaches the busier module instead of the sum of both
    c1, c2 = cycles[1], cycles[2]
    assert c1["cycle_count"] >= 0.95 * (c1["compute_busy_cycles"] + c1["load_busy_cycles"])
    assert c2["cycle_count"] < 0.75 * c1["cycle_count"], (c1, c2)


@pytest.mark.parametrize("cfg", [{"LOG_BLOCK": 3, "LOG_ACC_BUFF_SIZE": 15, "LOG_INP_BUFF_SIZE": 13,
                                  "LOG_WGT_BUFF_SIZE": 16},
                                 {"LOG_BATCH": 1, "LOG_BLOCK": 4},
                                 {"LOG_BLOCK": 5}], ids=["block8-small", "batch2", "block32"])
def test_conv2d_and_dense_other_hardware_configs(cfg):
    """Other designs: blocks, batch and buffer sizes come from the environment (default tiles
    fit the smaller buffers)."""
    from tvmpy.vta.build import use_command_queue
    from tvmpy.vta.hw_config import HardwareConfig

    use_command_queue(None)
    env = vta.Environment(HardwareConfig.from_dict(cfg))
    with env:
        wkl = W2(2, 6, 5, 24, 40, 3, 3, 1, 1, 2, 1)
        got, want, _ = _run_conv(wkl, seed=4)
        np.testing.assert_array_equal(got, want)
        dw = W.DenseWorkload(2, 40, 24)
        f = W.build_dense(dw)
        inp = W.dense_inputs(dw, 1)
        packed = W.pack_dense_inputs(dw, inp)
        out, _ = W.run_module(f, packed, (packed[0].shape[0], packed[1].shape[0], env.BATCH,
                                          env.BLOCK_OUT))
        np.testing.assert_array_equal(W.unpack_dense_out(dw, out), W.dense_reference(dw, inp)[1])


def test_epilogue_reading_the_result_twice_is_not_aliased():
    """``a = res >> 4; b = a + res``: res is read after a's stage, so a must not take res's
    storage (the in-place rewrite applies only where the source dies)."""
    from tvmpy import autotvm, te, topi
    from tvmpy.autotvm.space import FallbackConfigEntity
    from tvmpy.vta.build import use_command_queue
    from tvmpy.vta.top import conv2d_packed, schedule_conv2d_packed

    use_command_queue(None)
    env = vta.get_env()
    wkl = W2(1, 5, 4, 16, 32, 3, 3, 1, 1, 1, 1)
    data = te.placeholder((1, 1, 5, 4, 1, 16), dtype="int8", name="data")
    kernel = te.placeholder((2, 1, 3, 3, 16, 16), dtype="int8", name="kernel")
    with autotvm.ApplyConfig(FallbackConfigEntity()):
        res = conv2d_packed(data, kernel, (1, 1), (1, 1), (1, 1), "NCHW1n16c", "int32")
        a = topi.right_shift(res, 4)
        b = topi.add(a, res)
        out = topi.cast(topi.right_shift(b, 8), "int8")
        s = schedule_conv2d_packed([out])
    f = vta.build(s, [data, kernel, out], "ext_dev", env.target_host)
    inp = W.conv2d_inputs(wkl, 9)
    d, k, _ = W.pack_conv2d_inputs(wkl, inp)
    o = np.zeros((1, 2, 5, 4, 1, 16), np.int8)
    f(d, k, o)
    acc, _ = W.conv2d_reference(wkl, inp)
    want = (((acc >> 4) + acc) >> 8).astype(np.int8)
    np.testing.assert_array_equal(W.unpack_conv2d_out(wkl, o), want)
