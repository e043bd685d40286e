"""Auto-scheduler end to end: tune every fused subgraph of a small CNN (conv + relu, depthwise,
1x1 conv, pooling, dense, softmax) for a few minutes with the task scheduler, then time the
auto-scheduled build, the untuned build and onnxruntime in the same run (interleaved rounds),
at 1 and at 2 threads (each in a subprocess: TVM_NUM_THREADS is read once per process).

    PYTHONPATH=. python bench/auto_scheduler_e2e.py --minutes 4 [--log as_e2e.json]

An existing log is resumed. Prints per thread count the medians and the ratios
tuned/untuned and tuned/onnxruntime (< 1: the tuned build is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def make_model(c: int = 32, hw: int = 28):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def init(name, shape, scale=0.2):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)
    inits = [init("w1", (c, 16, 3, 3)), init("b1", (c,)), init("wd", (c, 1, 3, 3)),
             init("w2", (2 * c, c, 1, 1)), init("fw", (10, 2 * c)), init("fb", (10,))]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "wd"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         group=c),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w2"], ["c3"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["c3"], ["r3"]),
        helper.make_node("GlobalAveragePool", ["r3"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["g"], transB=1),
        helper.make_node("Softmax", ["g"], ["out"], axis=1),
    ]
    g = helper.make_graph(nodes, "as_e2e",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, hw, hw])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 10])],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


class _TimeUp(Exception):
    pass


def tune(log: str, minutes: float, per_round: int) -> None:
    from tvmpy import auto_scheduler
    from tvmpy.auto_scheduler.task_scheduler import PrintTableInfo
    from tvmpy.relay.testing import compare

    mod, params = compare.import_onnx(make_model(), {"x": (1, 16, 28, 28)})
    tasks, weights = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    print(f"{len(tasks)} tasks:", ", ".join(f"{t.desc} x{w}" for t, w in zip(tasks, weights)))
    deadline = time.time() + minutes * 60

    class Clock(PrintTableInfo):
        def post_round(self, s, task_id):
            super().post_round(s, task_id)
            if time.time() > deadline:
                raise _TimeUp

    sched = auto_scheduler.TaskScheduler(tasks, weights, load_log_file=log, callbacks=[Clock()])
    opts = auto_scheduler.TuningOptions(
        num_measure_trials=100000, num_measures_per_round=per_round, verbose=1,
        builder=auto_scheduler.LocalBuilder(timeout=60, n_parallel=2),
        runner=auto_scheduler.LocalRunner(number=5, repeat=3, min_repeat_ms=20),
        measure_callbacks=[auto_scheduler.RecordToFile(log)])
    t0 = time.time()
    try:
        sched.tune(opts)
    except _TimeUp:
        pass
    print(f"tuned {sched.ct} trials in {time.time() - t0:.0f} s; estimated total latency "
          f"{sched.objective_func(sched.best_costs) * 1e3:.4g} ms")


def measure(log: str, threads: int, rounds: int) -> dict:
    from common import interleaved_samples, ort_bound_runner, ort_session

    import tvmpy as tvm
    from tvmpy import auto_scheduler, relay
    from tvmpy.contrib import graph_executor
    from tvmpy.relay.testing import compare

    model = make_model()
    mod, params = compare.import_onnx(model, {"x": (1, 16, 28, 28)})
    x = np.random.default_rng(1).standard_normal((1, 16, 28, 28)).astype(np.float32)

    def runner(lib):
        m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
        m.set_input("x", x)
        m.run()
        return m.run, m

    with tvm.transform.PassContext(opt_level=3):
        untuned = relay.build(mod, "llvm", params=params)
    with auto_scheduler.ApplyHistoryBest(log):
        with tvm.transform.PassContext(opt_level=3,
                                       config={"relay.backend.use_auto_scheduler": True}):
            tuned = relay.build(mod, "llvm", params=params)
    run_u, mu = runner(untuned)
    run_t, mt = runner(tuned)
    sess = ort_session(model, threads)
    run_o, outs = ort_bound_runner(sess, {"x": x})
    run_o()
    want = outs[0].numpy()
    np.testing.assert_allclose(mt.get_output(0).numpy(), want, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(mu.get_output(0).numpy(), want, rtol=1e-3, atol=1e-4)
    s = interleaved_samples({"tuned": run_t, "untuned": run_u, "onnxruntime": run_o}, rounds)
    return {k: float(np.median(v)) for k, v in s.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=4.0)
    ap.add_argument("--log", default="as_e2e.json")
    ap.add_argument("--per-round", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--measure-threads", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure_threads:
        print("RESULT " + json.dumps(measure(args.log, args.measure_threads, args.rounds)))
        return
    if args.minutes > 0:
        tune(args.log, args.minutes, args.per_round)
    from common import machine_description

    print(f"machine: {machine_description()} (shared: figures under load)")
    for t in (1, 2):
        env = {**os.environ, "TVM_NUM_THREADS": str(t)}
        p = subprocess.run([sys.executable, __file__, "--log", args.log, "--rounds",
                            str(args.rounds), "--measure-threads", str(t)], env=env,
                           capture_output=True, text=True)
        line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
        if p.returncode or not line:
            print(p.stdout[-2000:], p.stderr[-3000:])
            raise SystemExit(f"measurement at {t} thread(s) failed")
        r = json.loads(line[0][7:])
        print(f"{t} thread(s): tuned {r['tuned'] * 1e3:.3f} ms, untuned {r['untuned'] * 1e3:.3f} ms, "
              f"onnxruntime {r['onnxruntime'] * 1e3:.3f} ms; tuned/untuned "
              f"{r['tuned'] / r['untuned']:.2f}x, tuned/onnxruntime "
              f"{r['tuned'] / r['onnxruntime']:.2f}x, untuned/onnxruntime "
              f"{r['untuned'] / r['onnxruntime']:.2f}x")


if __name__ == "__main__":
    main()
