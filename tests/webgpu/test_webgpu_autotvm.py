"""AutoTVM on target webgpu: relay extracts the GPU (topi.cuda) templates, and LocalBuilder /
LocalRunner measure configs on tvm.webgpu(0) (wgpu-py), flagging configs over the limits."""

from __future__ import annotations

import numpy as np

import tvmpy as tvm
from tvmpy import autotvm, relay
from tvmpy.autotvm.measure import MeasureErrorNo, MeasureInput
from tvmpy.autotvm.space import SplitEntity


def test_relay_extracts_gpu_templates_for_webgpu():
    x = relay.var("x", shape=(1, 4, 9, 9))
    w = relay.var("w", shape=(8, 4, 3, 3))
    d = relay.var("d", shape=(10, 8 * 81))
    y = relay.nn.dense(relay.nn.batch_flatten(relay.nn.conv2d(x, w, padding=(1, 1))), d)
    mod = tvm.IRModule.from_expr(relay.Function([x, w, d], y))
    params = {"w": np.ones((8, 4, 3, 3), "float32"), "d": np.ones((10, 648), "float32")}
    tasks = autotvm.task.extract_from_program(mod, target="webgpu", params=params)
    names = sorted(t.name for t in tasks)
    # a 3x3 stride-1 conv lists both algorithms' tasks (direct and Winograd) for tuning to compare
    assert names == ["conv2d_nchw.cuda", "conv2d_nchw_winograd.cuda", "dense.cuda"], names
    assert all(str(t.target).startswith("webgpu") for t in tasks)


def test_builder_and_runner_measure_on_webgpu():
    args = (("TENSOR", (1, 8, 9, 9), "float32"), ("TENSOR", (16, 8, 3, 3), "float32"), 1, 1, 1)
    task = autotvm.task.create("conv2d_nchw.cuda", args, target="webgpu")

    def config(**sizes):
        cfg = task.config_space.get(0)
        for name, size in sizes.items():
            cfg._entity_map[name] = SplitEntity(size)
        return cfg

    good = config(tile_f=[-1, 1, 4, 2], tile_y=[-1, 1, 3, 1], tile_x=[-1, 1, 9, 1],
                  tile_rc=[-1, 4])
    bad = config(tile_f=[-1, 1, 16, 1], tile_y=[-1, 1, 9, 1], tile_x=[-1, 1, 9, 1])
    opt = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=1, timeout=120),
                                 runner=autotvm.LocalRunner(number=2, repeat=1, timeout=120,
                                                            check_correctness=True))
    try:
        batch = autotvm.measure.create_measure_batch(task, opt)
        res = batch([MeasureInput(task.target, task, c) for c in (good, bad)])
    finally:
        opt["builder"].close()
        opt["runner"].close()
    assert res[0].error_no == MeasureErrorNo.NO_ERROR, res[0]
    assert all(isinstance(c, float) and c > 0 for c in res[0].costs)
    assert res[1].error_no == MeasureErrorNo.INSTANTIATION_ERROR  # 1296 threads > 256
