"""AutoTVM measuring on the Vulkan device: LocalBuilder builds (spirv-val checks each shader,
TVMPY_SPIRV_VALIDATE=1), LocalRunner times on tvm.vulkan(0); a few trials of the conv2d GPU
template; the best record builds a correct kernel."""

from __future__ import annotations

import numpy as np
import pytest
from vkt_common import vulkan_device

import tvmpy as tvm
from tvmpy import autotvm, te
from tvmpy.autotvm.measure import MeasureErrorNo, MeasureInput
from tvmpy.target import Target
from tvmpy.topi import cuda, testing


@pytest.fixture(scope="module")
def dev():
    return vulkan_device()


TARGET = "vulkan"
DATA, WEIGHT = (1, 8, 9, 9), (16, 8, 3, 3)


def _conv_task():
    args = (("TENSOR", DATA, "float32"), ("TENSOR", WEIGHT, "float32"), 1, 1, 1)
    return autotvm.task.create("conv2d_nchw.cuda", args, target=TARGET)


@pytest.fixture(scope="module")
def measure(dev):
    opt = autotvm.measure_option(
        builder=autotvm.LocalBuilder(n_parallel=2, timeout=60),
        runner=autotvm.LocalRunner(number=2, repeat=1, timeout=60))
    yield opt
    opt["builder"].close()
    opt["runner"].close()


def test_tuning_conv2d_on_vulkan(measure, dev, tmp_path):
    task = _conv_task()
    log = tmp_path / "conv.log"
    tuner = autotvm.tuner.RandomTuner(task)
    tuner.tune(n_trial=6, measure_option=measure,
               callbacks=[autotvm.callback.log_to_file(str(log))])
    records = list(autotvm.record.load_from_file(str(log)))
    assert len(records) == 6
    ok = [r for _, r in records if r.error_no == MeasureErrorNo.NO_ERROR]
    assert ok, [r.costs[0] for _, r in records]
    assert all(isinstance(c, float) and c > 0 for r in ok for c in r.costs)

    a = np.random.default_rng(3).uniform(-1, 1, DATA).astype("float32")
    w = np.random.default_rng(4).uniform(-1, 1, WEIGHT).astype("float32")
    data = te.placeholder(DATA, name="data")
    weight = te.placeholder(WEIGHT, name="weight")
    autotvm.task.dispatcher.clear_fallback_cache()
    with autotvm.apply_history_best(str(log)), Target(TARGET):
        out = cuda.conv2d_nchw(data, weight, 1, 1, 1)
        s = cuda.schedule_conv2d_nchw([out])
    assert not autotvm.task.dispatcher.FALLBACK.fallback_workloads  # the record was applied
    f = tvm.build(s, [data, weight, out], target=TARGET)
    o = tvm.nd.empty(tuple(int(d) for d in out.shape), "float32", dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(w, dev), o)
    np.testing.assert_allclose(o.numpy(), testing.conv2d_nchw_python(a, w, 1, 1),
                               atol=1e-4, rtol=1e-4)


def test_too_many_threads_is_an_instantiation_error(measure):
    task = _conv_task()
    from tvmpy.autotvm.space import SplitEntity

    bad = task.config_space.get(0)
    for name, size in (("tile_f", [-1, 1, 16, 1]), ("tile_y", [-1, 1, 9, 1]),
                       ("tile_x", [-1, 1, 9, 1])):
        bad._entity_map[name] = SplitEntity(size)  # 16 x 9 x 9 threads > 256
    res = autotvm.measure.create_measure_batch(task, measure)(
        [MeasureInput(task.target, task, bad)])[0]
    assert res.error_no == MeasureErrorNo.INSTANTIATION_ERROR, res
