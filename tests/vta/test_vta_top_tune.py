"""The AutoTVM template ``conv2d_packed.vta`` measured by simulated cycles: every point of the
space computes the same (numpy's) result; XGB and random tuning run through the in-process
simulator runner (TVM's LocalSession fallback) and through a tracker with a
``--device vta`` fleet device (RPCRunner, key "vta"); records apply to vta.top.conv2d_packed."""

import numpy as np
import pytest

import tvmpy.vta as vta
from tvmpy import autotvm, te
from tvmpy.vta.measure import SimulatorRunner, VTABuilder, cycles, vta_measure_option
from tvmpy.vta.top import workloads as W

WKL = W.Conv2DWorkload(1, 6, 5, 32, 48, 3, 3, 1, 1, 1, 1)


def _task(env, wkl=WKL):
    data = te.placeholder((1, wkl.in_filter // 16, wkl.height, wkl.width, env.BATCH, env.BLOCK_IN),
                          dtype="int8", name="data")
    kernel = te.placeholder((wkl.out_filter // 16, wkl.in_filter // 16, wkl.hkernel, wkl.wkernel,
                             env.BLOCK_OUT, env.BLOCK_IN), dtype="int8", name="kernel")
    return autotvm.task.create(
        "conv2d_packed.vta", (data, kernel, (wkl.hstride, wkl.wstride), (wkl.hpad, wkl.wpad),
                              (1, 1), f"NCHW{env.BATCH}n{env.BLOCK_IN}c", "int32"), target=env.target)


def _reference(wkl, inp):
    acc, _ = W.conv2d_reference(wkl, inp)
    return np.clip(acc >> 8, 0, 127).astype(np.int8)


def test_template_space_and_every_config_same_result():
    env = vta.get_env()
    task = _task(env)
    names = set(task.config_space.space_map)
    assert {"tile_b", "tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread", "h_nthread"} <= names
    inp = W.conv2d_inputs(WKL, 5)
    d, k, _ = W.pack_conv2d_inputs(WKL, inp)
    want = _reference(WKL, inp)
    rng = np.random.default_rng(0)
    n = len(task.config_space)
    idx = sorted(set([0, n - 1] + [int(i) for i in rng.integers(0, n, 10)]))
    for i in idx:
        cfg = task.config_space.get(i)
        with env.target:
            s, args = task.instantiate(cfg)
        f = vta.build(s, args, "ext_dev", env.target_host)
        out = np.zeros([int(x) for x in args[-1].shape], np.int8)
        f(d, k, out)
        np.testing.assert_array_equal(W.unpack_conv2d_out(WKL, out), want, err_msg=str(cfg))


@pytest.mark.parametrize("tuner", ["xgb", "random"])
def test_tune_few_trials_local(tuner, tmp_path):
    from tvmpy.autotvm.tuner import RandomTuner, XGBTuner

    env = vta.get_env()
    task = _task(env)
    opt = vta_measure_option()
    t = (XGBTuner if tuner == "xgb" else RandomTuner)(task)
    log = str(tmp_path / "vta.log")
    got = []
    t.tune(n_trial=6, measure_option=opt,
           callbacks=[autotvm.callback.log_to_file(log),
                      lambda _t, inps, res: got.extend(r for r in res)])
    ok = [cycles(r) for r in got if r.error_no == 0]
    assert len(got) == 6 and ok and all(c > 0 for c in ok)
    # the best record drives vta.top.conv2d_packed (the relay implementation's compute)
    with autotvm.apply_history_best(log):
        with env.target:
            f = W.build_conv2d(WKL, _best_config(log))
    inp = W.conv2d_inputs(WKL, 2)
    packed = W.pack_conv2d_inputs(WKL, inp)
    oh, ow = WKL.out_hw()
    out, st = W.run_module(f, packed, (1, 3, oh, ow, 1, 16))
    np.testing.assert_array_equal(W.unpack_conv2d_out(WKL, out), W.conv2d_reference(WKL, inp)[1])


def _best_config(log):
    from tvmpy.autotvm.record import load_from_file

    recs = [(i, r) for i, r in load_from_file(log) if r.error_no == 0]
    return min(recs, key=lambda x: np.mean(x[1].costs))[0].config


def test_simulated_time_is_cycles_over_clock():
    env = vta.get_env()
    task = _task(env)
    cfg = task.config_space.get(0)
    from tvmpy.autotvm.measure import MeasureInput

    b = VTABuilder()
    try:
        (bres,) = b.build([MeasureInput(env.target, task, cfg)])
        assert bres.error_no == 0, bres.error
        mod = vta.load_vta_module(bres.filename)
        args = [np.ones(s, d) for s, d in bres.arg_info]
        vta.simulator.clear_stats()
        mod(*args)
        want = vta.simulator.stats()["cycle_count"]
        (res,) = SimulatorRunner().run([MeasureInput(env.target, task, cfg)], [bres])
        assert res.error_no == 0 and cycles(res) == want
    finally:
        b.close()


def test_tune_through_fleet_device_vta():
    """RPCRunner on key "vta": a ``--device vta`` fleet device measures by simulated cycles."""
    from tvmpy.autotvm.tuner import RandomTuner
    from tvmpy.rpc.tracker import DeviceWorker, Tracker

    env = vta.get_env()
    task = _task(env)
    tracker = Tracker(port=0)
    worker = None
    try:
        worker = DeviceWorker(tracker.address, "vta", device="vta", name="vta-0")
        opt = vta_measure_option(tracker=("127.0.0.1", tracker.port), timeout=60)
        got = []
        RandomTuner(task).tune(n_trial=3, measure_option=opt,
                               callbacks=[lambda _t, i, r: got.extend(r)])
        ok = [r for r in got if r.error_no == 0]
        assert ok, [r.costs for r in got]
        # same cycle count as the in-process simulator for the same candidate
        inp = [autotvm.MeasureInput(env.target, task, task.config_space.get(0))]
        b = VTABuilder()
        local = SimulatorRunner().run(inp, b.build(inp))[0]
        remote = opt["runner"].run(inp, b.build(inp))[0]
        b.close()
        assert local.error_no == 0 and remote.error_no == 0, (local, remote)
        assert cycles(local) == cycles(remote)
    finally:
        if worker is not None:
            worker.terminate()
        tracker.terminate()
