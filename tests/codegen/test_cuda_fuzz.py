"""The GPU schedule fuzzer's random schedules (tests/test_schedule_fuzz.py: bindings, vthreads,
shared/local cache stages, cooperative fetching, cross-thread reductions) built for target
"cuda" (NVRTC + ptxas) or "nvptx" (LLVM + ptxas), and the generated CUDA C / LLVM IR run on the
host (tvmpy.testing.cuda_fake: threads of a block as OS threads, barriers and warp shuffles
emulated) against numpy."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, reject, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import te  # noqa: E402
from tvmpy.runtime import cuda_module  # noqa: E402
from tvmpy.testing.cuda_fake import FakeDriver, HostKernels  # noqa: E402
from tvmpy.tir.transform.lower_warp_memory import WarpMemoryError  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("gpu_fuzz_source",
                                               os.path.join(_ROOT, "test_schedule_fuzz.py"))
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)


@settings(max_examples=int(os.environ.get("CUDA_FUZZ_EXAMPLES", "12")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.filter_too_much])
@given(data=st.data())
def test_random_gpu_schedules_as_cuda_on_host(data, tmp_path):
    workload = data.draw(st.sampled_from(fuzz.GPU_WORKLOADS), label="workload")
    n = data.draw(st.sampled_from([1, 2, 5, 7]), label="n")
    m = data.draw(st.sampled_from([1, 3, 4, 8, 11]), label="m")
    inputs, outputs, ref = workload(n, m)
    s = te.create_schedule([t.op for t in outputs])
    log: list[str] = []
    fuzz.apply_random_gpu_schedule(data.draw, s, inputs, outputs, log)
    rng = np.random.default_rng(0)
    args_np = [rng.uniform(-1, 1, [int(d) for d in t.shape]).astype(t.dtype) for t in inputs]
    expected = ref(*args_np)
    backend = data.draw(st.sampled_from(["cuda", "nvptx"]), label="backend")
    try:
        f = tvm.build(s, inputs + outputs, target=f"{backend} -arch=sm_90")
    except WarpMemoryError:  # warp memory whose lanes CUDA's shuffles cannot serve: refused
        assert any("warp" in x for x in log)
        reject()
    src = f.imported_modules[0].get_source()
    host = (HostKernels(src, f.plan["kernels"], str(tmp_path)) if backend == "cuda"
            else HostKernels.from_nvptx(src, f.plan["kernels"], str(tmp_path)))
    out = np.full([int(d) for d in outputs[0].shape], np.nan, outputs[0].dtype)
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    try:
        f(*args_np, out)
    finally:
        cuda_module.set_driver(prev)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5,
                               err_msg=f"{backend} schedule: " + "; ".join(log))
