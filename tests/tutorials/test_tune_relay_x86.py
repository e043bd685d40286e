"""Tutorial check: TVM's "Auto-tuning a Convolutional Network for x86 CPU"
(tutorials/autotvm/tune_relay_x86.py), in our own words, with a small network and a few
trials per task.

Steps: a network and its parameters; the conv2d tasks (extract_from_program with ops=);
kernel tuning of each task into a log; the graph tuner (DPTuner: layout transforms timed,
run, the chosen records written); a build under apply_graph_best; the output against an
independent reference (eager torch) and the tuned module timed."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, relay
from tvmpy.autotvm.graph_tuner import DPTuner
from tvmpy.contrib import graph_executor

torch = pytest.importorskip("torch")

INPUT = "data"
DSHAPE = (1, 3, 14, 14)


def get_network():
    """conv 3x3 (3->8) + bias + relu, conv 3x3 stride 2 (8->16) + relu, depthwise 3x3, global
    average pool, dense 16 -> 10."""
    rng = np.random.default_rng(0)
    shapes = {"w1": (8, 3, 3, 3), "b1": (8,), "w2": (16, 8, 3, 3), "w3": (16, 1, 3, 3),
              "wd": (10, 16)}
    params = {k: (rng.standard_normal(v) * 0.3).astype("float32") for k, v in shapes.items()}
    x = relay.var(INPUT, shape=DSHAPE)
    v = {k: relay.var(k, shape=s) for k, s in shapes.items()}
    y = relay.nn.conv2d(x, v["w1"], padding=(1, 1), channels=8, kernel_size=(3, 3))
    y = relay.nn.relu(relay.nn.bias_add(y, v["b1"]))
    y = relay.nn.relu(relay.nn.conv2d(y, v["w2"], strides=(2, 2), padding=(1, 1), channels=16,
                                      kernel_size=(3, 3)))
    y = relay.nn.conv2d(y, v["w3"], padding=(1, 1), channels=16, kernel_size=(3, 3), groups=16)
    y = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(y))
    y = relay.nn.dense(y, v["wd"])
    func = relay.Function([x] + list(v.values()), y)
    return tvm.IRModule.from_expr(func), params


def torch_reference(params, data):
    F = torch.nn.functional
    t = {k: torch.from_numpy(v) for k, v in params.items()}
    y = F.relu(F.conv2d(torch.from_numpy(data), t["w1"], t["b1"], padding=1))
    y = F.relu(F.conv2d(y, t["w2"], stride=2, padding=1))
    y = F.conv2d(y, t["w3"], padding=1, groups=16)
    y = y.mean(dim=(2, 3))
    return (y @ t["wd"].T).numpy()


def tune_kernels(tasks, log_file, n_trial=3):
    option = autotvm.measure_option(
        builder=autotvm.LocalBuilder(),
        runner=autotvm.LocalRunner(number=2, repeat=1, min_repeat_ms=0,
                                   enable_cpu_cache_flush=True))
    for i, task in enumerate(tasks):
        prefix = f"[Task {i + 1:2d}/{len(tasks):2d}] "
        tuner = autotvm.tuner.XGBTuner(task, loss_type="rank") if i % 2 == 0 \
            else autotvm.tuner.RandomTuner(task)
        trials = min(n_trial, len(task.config_space))
        tuner.tune(n_trial=trials, early_stopping=None, measure_option=option,
                   callbacks=[autotvm.callback.progress_bar(trials, prefix=prefix),
                              autotvm.callback.log_to_file(log_file)])


def test_tune_relay_x86(tmp_path):
    mod, params = get_network()
    target = "llvm"
    log_file = str(tmp_path / "kernels.log")
    opt_file = str(tmp_path / "graph_opt.log")

    tasks = autotvm.task.extract_from_program(mod["main"], target=target, params=params,
                                              ops=(relay.op.get("nn.conv2d"),))
    names = {t.name for t in tasks}
    assert {"conv2d_NCHWc.x86", "depthwise_conv2d_NCHWc.x86"} <= names, names
    tune_kernels(tasks, log_file)
    assert autotvm.record.load_from_file(log_file)

    executor = DPTuner(mod["main"], {INPUT: DSHAPE}, log_file, [relay.op.get("nn.conv2d")],
                       target)
    executor.benchmark_layout_transform(min_exec_num=5)
    executor.run()
    executor.write_opt_sch2record_file(opt_file)
    chosen = autotvm.record.load_from_file(opt_file)
    assert len(chosen) == 3  # one record per convolution

    data = np.random.default_rng(1).standard_normal(DSHAPE).astype("float32")
    with autotvm.apply_graph_best(opt_file):
        with tvm.transform.PassContext(opt_level=3):
            lib = relay.build_module.build(mod, target=target, params=params)
    dev = tvm.cpu()
    module = graph_executor.GraphModule(lib["default"](dev))
    module.set_input(INPUT, data)
    module.run()
    out = module.get_output(0).numpy()
    tvm.testing.assert_allclose(out, torch_reference(params, data), rtol=1e-4, atol=1e-4)
    timing = module.benchmark(dev, number=5, repeat=2)
    assert timing.mean > 0
