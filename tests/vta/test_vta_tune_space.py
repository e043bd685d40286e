"""The tuning space of ``conv2d_packed.vta`` (issue 27 5(c)): the untuned default is a point of
the space (so a tuner can be seeded with it), and configurations whose tiles overflow an
on-chip buffer are refused at instantiation, consistently with what the lowering accepts."""

import numpy as np
import pytest

import tvmpy.vta as vta
from tvmpy import autotvm, te
from tvmpy.autotvm.measure import MeasureInput
from tvmpy.autotvm.space import FallbackConfigEntity, InstantiationError
from tvmpy.vta.build import use_command_queue
from tvmpy.vta.hw_config import HardwareConfig
from tvmpy.vta.measure import SimulatorRunner, VTABuilder, cycles, default_config_index
from tvmpy.vta.top import vta_conv2d
from tvmpy.vta.top import workloads as W

WKL = W.Conv2DWorkload(1, 6, 5, 32, 48, 3, 3, 1, 1, 1, 1)
# small buffers: 128 input, 64 weight, 128 accumulator tiles, so many tilings overflow
SMALL = HardwareConfig(log_inp_buff_size=11, log_wgt_buff_size=14, log_acc_buff_size=13)


def _task(env, wkl=WKL):
    data = te.placeholder((1, wkl.in_filter // 16, wkl.height, wkl.width, 1, 16), dtype="int8",
                          name="data")
    kernel = te.placeholder((wkl.out_filter // 16, wkl.in_filter // 16, wkl.hkernel,
                             wkl.wkernel, 16, 16), dtype="int8", name="kernel")
    return autotvm.task.create(
        "conv2d_packed.vta", (data, kernel, (wkl.hstride, wkl.wstride), (wkl.hpad, wkl.wpad),
                              (1, 1), "NCHW1n16c", "int32"), target=env.target)


def _measure(task, cfg):
    env = vta.get_env()
    inp = [MeasureInput(env.target, task, cfg)]
    b = VTABuilder()
    try:
        (res,) = SimulatorRunner().run(inp, b.build(inp))
    finally:
        b.close()
    return res


@pytest.mark.parametrize("hw", [None, SMALL], ids=["default", "small-buffers"])
def test_default_config_is_a_point_of_the_space(hw):
    use_command_queue(None)
    with vta.Environment(hw):
        env = vta.get_env()
        task = _task(env)
        index = default_config_index(task)
        cfg = task.config_space.get(index)
        fb = FallbackConfigEntity()
        task.instantiate(fb)
        for name in task.config_space.space_map:
            assert str(cfg[name]) == str(fb[name]), name
        a, b = _measure(task, cfg), _measure(task, FallbackConfigEntity())
        assert a.error_no == 0 and b.error_no == 0, (a.costs, b.costs)
        assert cycles(a) == cycles(b)


def test_overflowing_configs_refused_consistently_with_the_lowering(monkeypatch):
    """Every configuration the check lets through builds and computes numpy's result; one it
    refuses is refused by the lowering as well (check bypassed), except for the accumulator's
    bias-tile margin."""
    use_command_queue(None)
    inp = W.conv2d_inputs(WKL, 5)
    d, k, _ = W.pack_conv2d_inputs(WKL, inp)
    want = np.clip(W.conv2d_reference(WKL, inp)[0] >> 8, 0, 127).astype(np.int8)
    with vta.Environment(SMALL) as env:
        task = _task(env)
        n = len(task.config_space)
        rng = np.random.default_rng(0)
        idx = sorted(set(int(i) for i in rng.integers(0, n, 24)))
        refused = accepted = 0
        for i in idx:
            cfg = task.config_space.get(i)
            try:
                with env.target:
                    s, args = task.instantiate(cfg)
            except InstantiationError as e:
                assert "buffer holds" in str(e)
                refused += 1
                with monkeypatch.context() as m:  # bypassed: the lowering refuses it too,
                    m.setattr(vta_conv2d, "_check_fits", lambda *a, **k: None)  # but for the
                    with env.target:  # accumulator's bias margin (this template has no bias)
                        s, args = task.instantiate(cfg)
                    try:
                        vta.build(s, args, "ext_dev", env.target_host)
                    except Exception:  # noqa: BLE001 - the lowering's overflow error
                        continue
                    assert "accumulator" in str(e), (str(cfg), str(e))
                continue
            accepted += 1
            f = vta.build(s, args, "ext_dev", env.target_host)
            out = np.zeros([int(x) for x in args[-1].shape], np.int8)
            f(d, k, out)
            np.testing.assert_array_equal(W.unpack_conv2d_out(WKL, out), want, err_msg=str(cfg))
        assert refused and accepted, (refused, accepted)
