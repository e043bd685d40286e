"""TVM's tune_relay_vta flow at a small size: ``autotvm.task.extract_from_program`` on a
``graph_pack``-ed quantized graph for VTA's target yields the ``conv2d_packed.vta`` tasks of
the offloaded convs; they tune on the simulator (cycles); ``apply_history_best(log)`` builds
the graph with the tuned configs, bit-exact with the relay interpreter."""

import numpy as np
import pytest

import tvmpy as tvm
import tvmpy.vta as vta
from tvmpy import autotvm, relay
from tvmpy.autotvm.record import load_from_file
from tvmpy.autotvm.tuner import RandomTuner
from tvmpy.vta.measure import default_config_index, vta_measure_option

from .test_vta_graph_pack import _conv, _reference, _requant, build_and_run


def _graph(rng):
    x = relay.var("x", shape=(1, 20, 7, 7), dtype="int8")
    y = _requant(relay.nn.relu(_conv(x, 20, 32, 3, 1, 1, rng)))       # channels padded
    y = _requant(relay.nn.relu(_conv(y, 32, 48, 3, 2, 1, rng)))       # stride 2, odd map
    y = _requant(_conv(y, 48, 16, 1, 1, 0, rng))                      # 1x1
    f = relay.Function([x], y)
    return f, {"x": rng.integers(-128, 128, (1, 20, 7, 7)).astype("int8")}


def _extract(packed, ops=(relay.op.get("nn.conv2d"),)):
    env = vta.get_env()
    return autotvm.task.extract_from_program(
        tvm.IRModule.from_expr(packed), params={}, ops=ops, target=env.target,
        target_host=env.target_host)


def _build_and_run(packed, inputs):
    _, (out,) = build_and_run(packed, inputs)
    return out, vta.simulator.stats()


def test_extract_tune_and_apply_history_best(tmp_path):
    env = vta.get_env()
    rng = np.random.default_rng(27)
    f, inputs = _graph(rng)
    ref = _reference(f, inputs)[0]
    packed = vta.top.graph_pack(f, env.BATCH, env.BLOCK_OUT, env.WGT_WIDTH)
    tasks = _extract(packed)
    # one task per distinct offloaded conv, all VTA templates on the VTA target
    assert [t.name for t in tasks] == ["conv2d_packed.vta"] * 3
    assert all(t.target.kind == "ext_dev" for t in tasks)
    kernels = [t.args[1][1] for t in tasks]
    assert kernels == [(2, 2, 3, 3, 16, 16), (3, 2, 3, 3, 16, 16), (1, 3, 1, 1, 16, 16)]

    log = str(tmp_path / "vta_relay.log")
    for i, task in enumerate(tasks):
        RandomTuner(task, seed=i).tune(
            n_trial=4, measure_option=vta_measure_option(),
            callbacks=[autotvm.callback.log_to_file(log)])
    recs = [(inp, res) for inp, res in load_from_file(log) if res.error_no == 0]
    assert {inp.task.workload for inp, _ in recs} == {t.workload for t in tasks}

    untuned, st0 = _build_and_run(packed, inputs)
    np.testing.assert_array_equal(untuned, ref)
    with autotvm.apply_history_best(log):
        tuned, st1 = _build_and_run(packed, inputs)
    np.testing.assert_array_equal(tuned, ref)

    # the configs are applied: a log holding, per task, one record other than the default
    # changes the instruction stream relay.build emits (same result)
    other = tmp_path / "other.log"
    with open(other, "w") as out:
        for task in tasks:
            d = default_config_index(task)
            pick = [(i, r) for i, r in recs if i.task.workload == task.workload
                    and i.config.index != d]
            if pick:
                out.write(autotvm.record.encode(*pick[0]) + "\n")
    assert other.read_text(), "every tuned record was the default configuration"
    with autotvm.apply_history_best(str(other)):
        forced, st2 = _build_and_run(packed, inputs)
    np.testing.assert_array_equal(forced, ref)
    assert (st2["insn_count"], st2["cycle_count"]) != (st0["insn_count"], st0["cycle_count"])


def test_extract_ops_filter_and_cpu_only_graph(caplog):
    """Without ``ops=`` the tasks are still VTA's only (the host functions are not lowered);
    ``ops=`` of another operator selects nothing (with the usual warning); a graph with no
    packed conv has no VTA task."""
    env = vta.get_env()
    rng = np.random.default_rng(3)
    f, _ = _graph(rng)
    packed = vta.top.graph_pack(f, env.BATCH, env.BLOCK_OUT, env.WGT_WIDTH)
    assert [t.workload for t in _extract(packed, ops=None)] == [
        t.workload for t in _extract(packed)]
    env_tasks = autotvm.task.extract_from_program(
        tvm.IRModule.from_expr(packed), params={}, ops=(relay.op.get("nn.dense"),),
        target=env.target)
    assert env_tasks == []
    assert "found no tunable task" in caplog.text
    x = relay.var("x", shape=(1, 4, 5, 5), dtype="float32")
    w = relay.const(rng.standard_normal((8, 4, 3, 3)).astype("float32"))
    cpu = relay.Function([x], relay.nn.conv2d(x, w, padding=(1, 1)))
    assert autotvm.task.extract_from_program(tvm.IRModule.from_expr(cpu), params={},
                                             target=env.target) == []


@pytest.mark.parametrize("target", ["ext_dev -device=vta", {"ext_dev": "ext_dev -device=vta"}])
def test_extract_for_vta_target_string(target):
    """The target as a string (what tutorials print) extracts the same tasks."""
    env = vta.get_env()
    f, _ = _graph(np.random.default_rng(27))
    packed = vta.top.graph_pack(f, env.BATCH, env.BLOCK_OUT, env.WGT_WIDTH)
    got = autotvm.task.extract_from_program(tvm.IRModule.from_expr(packed), params={},
                                            ops=(relay.op.get("nn.conv2d"),), target=target)
    assert [t.workload for t in got] == [t.workload for t in _extract(packed)]


def test_extracted_task_tunes_through_fleet_device_vta(tmp_path):
    """The tutorial's remote path: an extracted task measured by RPCRunner on key "vta" (a
    ``--device vta`` fleet device, as a PYNQ board behind the tracker), same cycles as the
    in-process simulator for the same config."""
    from tvmpy.rpc.tracker import DeviceWorker, Tracker
    from tvmpy.vta.measure import SimulatorRunner, VTABuilder, cycles

    env = vta.get_env()
    f, _ = _graph(np.random.default_rng(27))
    packed = vta.top.graph_pack(f, env.BATCH, env.BLOCK_OUT, env.WGT_WIDTH)
    task = _extract(packed)[1]
    tracker = Tracker(port=0)
    worker = None
    try:
        worker = DeviceWorker(tracker.address, "vta", device="vta", name="vta-0")
        opt = vta_measure_option(tracker=("127.0.0.1", tracker.port), timeout=60)
        inp = [autotvm.MeasureInput(env.target, task,
                                    task.config_space.get(default_config_index(task)))]
        b = VTABuilder()
        try:
            remote = opt["runner"].run(inp, b.build(inp))[0]
            local = SimulatorRunner().run(inp, b.build(inp))[0]
        finally:
            b.close()
        assert remote.error_no == 0 and local.error_no == 0, (remote, local)
        assert cycles(remote) == cycles(local) > 0
    finally:
        if worker is not None:
            worker.terminate()
        tracker.terminate()
