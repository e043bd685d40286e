"""The build a candidate is measured with is the build ``relay.build`` deploys (issue 28 point 5):
the LocalBuilder's workers compile under the PassContext of the tuning process, as
``relay.build`` compiles its kernels under its own, so one context gives the same machine code
in both. Compared by the sizes of the kernel's functions in the two shared libraries (``nm``)."""

from __future__ import annotations

import shutil
import subprocess
import time

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import auto_scheduler, relay
from tvmpy.auto_scheduler.measure import MeasureInput, MeasureResult, _MeasureTask
from tvmpy.autotvm.measure import measure as atm

pytestmark = pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm")


def _sizes(path: str, prefix: str) -> dict[str, int]:
    """``{suffix: size}`` of the defined functions named ``prefix...`` in a shared library."""
    out = subprocess.run(["nm", "-S", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    sizes = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "Tt" and parts[3].startswith(prefix):
            sizes[parts[3][len(prefix):]] = int(parts[1], 16)
    return sizes


def _model():
    x = relay.var("x", shape=(1, 8, 10, 10))
    w = relay.var("w", shape=(8, 8, 3, 3))
    b = relay.var("b", shape=(8,))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.conv2d(x, w, padding=(1, 1)), b))
    mod = tvm.IRModule.from_expr(relay.Function([x, w, b], y))
    rng = np.random.default_rng(0)
    params = {"w": rng.uniform(-1, 1, (8, 8, 3, 3)).astype("float32"),
              "b": rng.uniform(-1, 1, (8,)).astype("float32")}
    return mod, params


def test_measured_build_is_the_deployed_build(tmp_path):
    mod, params = _model()
    tasks, _ = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    (task,) = [t for t in tasks if "conv2d" in t.workload_key]
    states = auto_scheduler.sample_initial_population(task, 8, seed=0)
    mtask = _MeasureTask(task)
    builder = auto_scheduler.LocalBuilder(timeout=300, n_parallel=1)
    contexts = {"default": {}, "no LoopPartition": {"disabled_pass": ["LoopPartition"]}}
    measured: dict[str, list[dict[str, int]]] = {c: [] for c in contexts}
    try:
        for k, state in enumerate(states):
            steps = [s.to_record() for s in state.transform_steps]
            for c, kw in contexts.items():
                with tvm.transform.PassContext(**kw):
                    (bres,) = builder.build([atm.MeasureInput("llvm", mtask, steps)])
                assert bres.error_no == 0, bres.error
                got = _sizes(bres.filename, "default_function")
                measured[c].append(got)
                if k >= 2:
                    continue  # relay.build for the first states only (each takes seconds)
                record = (MeasureInput(task, state),
                          MeasureResult((1e-3,), 0, "", 0.0, time.time()))
                with auto_scheduler.ApplyHistoryBest([record]):
                    with tvm.transform.PassContext(
                            opt_level=3, config={"relay.backend.use_auto_scheduler": True}, **kw):
                        lib = relay.build(mod, "llvm", params=params)
                path = str(tmp_path / f"deployed_{k}_{len(measured[c])}.so")
                lib.export_library(path)
                kernel = [n for n in _sizes(path, "fused_") if "conv2d" in n and "_par" not in n]
                deployed = _sizes(path, "fused_" + kernel[0])
                assert deployed == got, (c, k)
    finally:
        builder.close()
    # the test can fail: the context changes the code of some candidate (its padding guards are
    # partitioned away or not), so a worker ignoring the context would not match relay.build
    assert any(a != b for a, b in zip(measured["default"], measured["no LoopPartition"]))


def test_batch_is_built_in_parallel_then_measured_with_the_reference_check():
    import as_workloads as W

    from tvmpy.auto_scheduler.measure import ProgramMeasurer

    task = W.make_task(W.matmul, (17, 9, 23))  # primes: tails in every tiled loop
    states = auto_scheduler.sample_initial_population(task, 4, seed=3)
    builder = auto_scheduler.LocalBuilder(timeout=300, n_parallel=2)
    m = ProgramMeasurer(task, builder, auto_scheduler.LocalRunner(timeout=60))
    try:
        res = m.measure(None, states)
    finally:
        m.close()
    assert [r.error_no for r in res] == [0] * len(states)
    (batch,) = m.batches
    assert (batch.n, batch.built) == (len(states), len(states))
    assert batch.build_wall > 0 and batch.run_wall > 0
    # the candidates and the reference (the untransformed schedule) the runner checks them with
    assert len(builder.cpu_times) == len(states) + 1 and sum(builder.cpu_times) > 0
    assert builder.n_parallel == 2
