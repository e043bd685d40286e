"""``relay.build_module.lower_to_primitives``: the public lowering entry point (graph check,
the graph passes under the target, each distinct primitive function lowered with its chosen
implementation) that relay.build continues from and autotvm task extraction reads."""

import numpy as np

import tvmpy as tvm
from tvmpy import autotvm, relay
from tvmpy.relay.build_module import lower_to_primitives


def _model():
    rng = np.random.default_rng(0)
    x = relay.var("x", shape=(1, 8, 12, 12))
    w = rng.uniform(-1, 1, (16, 8, 3, 3)).astype("float32")
    wd = rng.uniform(-1, 1, (10, 16)).astype("float32")
    y = relay.nn.relu(relay.nn.conv2d(x, relay.var("w", shape=w.shape), padding=(1, 1)))
    y = relay.nn.global_avg_pool2d(y)
    y = relay.nn.dense(relay.nn.batch_flatten(y), relay.const(wd))
    mod = relay.IRModule.from_expr(relay.Function(relay.analysis.free_vars(y), y))
    return mod, {"w": w}


def test_lower_to_primitives_is_what_relay_build_compiles():
    mod, params = _model()
    with tvm.transform.PassContext(opt_level=3):
        prims = lower_to_primitives(mod, "llvm", params)
        lib = relay.build(mod, "llvm", params=params)
    assert str(prims.target) == "llvm" and set(prims.times) == {"optimize", "lower"}
    names = [lf.name for lf in prims.funcs]
    assert names == [f.name for f in lib.lowered_funcs]
    assert any("contrib_conv2d" in n for n in names)  # the x86 layout at opt_level 3
    body = prims.main.body  # main calls the fused primitive functions
    assert isinstance(body, relay.Call) and body.op.attrs.get("Primitive")


def test_task_extraction_reads_the_same_lowering():
    mod, params = _model()
    with tvm.transform.PassContext(opt_level=3):
        with autotvm.task.TaskExtractEnv() as env, tvm.target.Target("llvm"):
            lower_to_primitives(mod, "llvm", params)
        tasks = autotvm.task.extract_from_program(mod, params=params, target="llvm")
    assert [(t.name, t.args) for t in tasks] == env.get_tasks()
    assert "conv2d_NCHWc.x86" in [t.name for t in tasks]
