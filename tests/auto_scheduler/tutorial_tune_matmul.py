"""TVM's auto-scheduler tutorial ("Auto-scheduling a Neural Network ... / matmul"), written as
the tutorial writes it: at module top level, no ``if __name__ == "__main__"`` guard.
tests/auto_scheduler/test_tutorial.py runs it as a script (a handful of trials)."""

import os
import sys

import numpy as np

import tvmpy as tvm
from tvmpy import auto_scheduler, te


@auto_scheduler.register_workload
def matmul_add(N, L, M, dtype):
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    C = te.placeholder((N, M), name="C", dtype=dtype)
    k = te.reduce_axis((0, L), name="k")
    matmul = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="matmul",
                        attrs={"layout_free_placeholders": [B]})
    out = te.compute((N, M), lambda i, j: matmul[i, j] + C[i, j], name="out")
    return [A, B, C, out]


target = tvm.target.Target("llvm")
N = L = M = 64
task = tvm.auto_scheduler.SearchTask(func=matmul_add, args=(N, L, M, "float32"), target=target)
print("Computational DAG:")
print(task.compute_dag)

log_file = sys.argv[1] if len(sys.argv) > 1 else "matmul.json"
tune_option = auto_scheduler.TuningOptions(
    num_measure_trials=int(os.environ.get("TRIALS", "10")),
    num_measures_per_round=4,
    measure_callbacks=[auto_scheduler.RecordToFile(log_file)],
    verbose=2,
)
task.tune(tune_option)
sch, args = task.apply_best(log_file)

print("Lowered TIR:")
print(tvm.lower(sch, args, simple_mode=True))

func = tvm.build(sch, args, target)
a_np = np.random.uniform(size=(N, L)).astype(np.float32)
b_np = np.random.uniform(size=(L, M)).astype(np.float32)
c_np = np.random.uniform(size=(N, M)).astype(np.float32)
out_np = a_np.dot(b_np) + c_np

dev = tvm.cpu()
a_tvm = tvm.nd.array(a_np, device=dev)
b_tvm = tvm.nd.array(b_np, device=dev)
c_tvm = tvm.nd.array(c_np, device=dev)
out_tvm = tvm.nd.empty(out_np.shape, device=dev)
func(a_tvm, b_tvm, c_tvm, out_tvm)
np.testing.assert_allclose(out_np, out_tvm.numpy(), rtol=1e-3)

evaluator = func.time_evaluator(func.entry_name, dev, min_repeat_ms=50)
print("Execution time of this operator: %.3f ms"
      % (np.median(evaluator(a_tvm, b_tvm, c_tvm, out_tvm).results) * 1000))
print("Equivalent python schedule:")
print(task.print_best(log_file))
print("TUTORIAL OK")
