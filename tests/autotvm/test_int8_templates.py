"""The x86 int8 kernels as AutoTVM templates (``conv2d_NCHWc_int8.x86``, ``dense_int8.x86``):
relay's strategies go through them (task extraction from an int8 graph), random configs
compute the exact result, and a short tuning run drives relay.build under
``apply_history_best``."""

from __future__ import annotations

import numpy as np

import tvmpy as tvm
from tvmpy import autotvm, relay
from tvmpy.autotvm.tuner import RandomTuner
from tvmpy.contrib import graph_executor
from tvmpy.topi import testing
from tvmpy.topi.x86 import conv2d_int8 as C
from tvmpy.topi.x86 import dense_int8 as D

TARGET = "llvm"  # this machine: the kernels use its best int8 instruction set (and run here)
RNG = np.random.default_rng(12)



def _net():
    x = relay.var("x", shape=(1, 8, 9, 11), dtype="uint8")
    w = RNG.integers(-128, 128, (32, 8, 3, 3)).astype("int8")
    y = relay.nn.conv2d(x, relay.const(w), padding=(1, 1), out_dtype="int32")
    y = relay.cast(relay.clip(relay.right_shift(y, relay.const(8)), 0, 255), "uint8")
    y = relay.reshape(y, (1, -1))
    wd = RNG.integers(-128, 128, (20, 32 * 9 * 11)).astype("int8")
    z = relay.nn.dense(y, relay.const(wd), out_dtype="int32")
    xin = RNG.integers(0, 256, (1, 8, 9, 11)).astype("uint8")
    conv = testing.group_conv2d_nchw_python(xin.astype(np.int64), w.astype(np.int64), (1, 1),
                                            (1, 1, 1, 1), (1, 1), 1)
    mid = np.clip(conv >> 8, 0, 255).reshape(1, -1)
    return tvm.IRModule.from_expr(relay.Function([x], z)), xin, mid @ wd.astype(np.int64).T


def _tasks(mod):
    with tvm.transform.PassContext(opt_level=3):
        tasks = autotvm.task.extract_from_program(mod, {}, TARGET)
    return {t.name: t for t in tasks if "int8" in t.name}


def test_extract_int8_tasks():
    mod, _, _ = _net()
    tasks = _tasks(mod)
    assert set(tasks) == {"conv2d_NCHWc_int8.x86", "dense_int8.x86"}
    conv = tasks["conv2d_NCHWc_int8.x86"]
    assert conv.args[0][1] == (1, 1, 9, 11, 8) and conv.args[1][1] == (2, 1, 3, 3, 2, 16, 4)
    assert all(len(t.config_space) > 1 and t.flop > 0 for t in tasks.values())


def test_random_conv_configs_are_exact():
    task = autotvm.task.create("conv2d_NCHWc_int8.x86", (
        ("TENSOR", (1, 2, 9, 13, 8), "uint8"), ("TENSOR", (2, 2, 3, 3, 2, 16, 4), "int8"),
        (2, 1), (1, 1), (1, 1), "NCHW8c", "NCHW16c", "int32"), TARGET)
    w = RNG.integers(-128, 128, (32, 16, 3, 3)).astype("int8")
    x = RNG.integers(0, 256, (1, 16, 9, 13)).astype("uint8")
    xb = np.ascontiguousarray(x.reshape(1, 2, 8, 9, 13).transpose(0, 1, 3, 4, 2))
    want = testing.group_conv2d_nchw_python(x.astype(np.int64), w.astype(np.int64), (2, 1),
                                            (1, 1, 1, 1), (1, 1), 1)
    idx = RNG.choice(len(task.config_space), size=4, replace=False)
    for i in idx:
        with tvm.target.Target(TARGET):
            s, args = task.instantiate(task.config_space.get(int(i)))
            f = tvm.build(s, args, TARGET)
        out = tvm.nd.array(np.zeros([int(d) for d in args[2].shape], "int32"))
        f(tvm.nd.array(xb), tvm.nd.array(C.pack_kernel_int8_np(w, 8)), out)
        got = out.numpy().transpose(0, 1, 4, 2, 3).reshape(1, 32, *out.shape[2:4])
        np.testing.assert_array_equal(got, want)


def test_random_dense_configs_are_exact():
    m, n, k = 19, 40, 30
    a = RNG.integers(0, 256, (m, k)).astype("uint8")
    w = RNG.integers(-128, 128, (n, k)).astype("int8")
    wp = D.pack_weight_int8_np(w)
    task = autotvm.task.create("dense_int8.x86", (
        ("TENSOR", (m, k), "uint8"), ("TENSOR", wp.shape, "int8"), n, "int32"), TARGET)
    for i in range(len(task.config_space)):
        with tvm.target.Target(TARGET):
            s, args = task.instantiate(task.config_space.get(i))
            f = tvm.build(s, args, TARGET)
        out = tvm.nd.array(np.zeros((m, n), "int32"))
        f(tvm.nd.array(a), tvm.nd.array(wp), out)
        np.testing.assert_array_equal(out.numpy(), a.astype(np.int64) @ w.astype(np.int64).T)


def test_tune_then_build_with_history_best(tmp_path):
    mod, xin, want = _net()
    task = _tasks(mod)["conv2d_NCHWc_int8.x86"]
    log = tmp_path / "int8.log"
    option = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=1),
                                    runner=autotvm.LocalRunner(number=1, repeat=1))
    RandomTuner(task, seed=3).tune(3, option, callbacks=[autotvm.callback.log_to_file(str(log))])
    recs = autotvm.record.load_from_file(str(log))
    assert len(recs) == 3 and any(res.error_no == 0 for _, res in recs), recs
    with autotvm.apply_history_best(str(log)):
        with tvm.transform.PassContext(opt_level=3):
            lib = relay.build(mod, target=TARGET)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input("x", xin)
    m.run()
    np.testing.assert_array_equal(m.get_output(0).numpy(), want)
