"""The CPU backends' expression and statement cases (tests/codegen/cases.py) as one-thread CUDA
kernels (the wrapping of test_opencl_cases.py), compiled without a GPU: every intrinsic, cast,
wrap-around and vector form the C backend prints must go through NVRTC (target "cuda") and
LLVM's NVPTX back end with libdevice (target "nvptx"), and the PTX through ptxas for sm_80 and
sm_90. (Running them needs a GPU: bench/gpu_check.py.)"""

from __future__ import annotations

import pytest

from tvmpy.codegen import cuda, nvptx

from . import cases
from .test_opencl_cases import ALL, _as_gpu, _refusal

# on CUDA float16 is supported; what no GPU kernel can express stays refused
COMPILABLE = [n for n, c in ALL.items() if _refusal(c) in (None, "float16")]


def _pairs(names):
    return [x for n in names for x in _as_gpu(ALL[n].func)]


_BUILT: dict[str, object] = {}


def _built(backend):
    """One module with every compilable case per backend, built once for the whole file."""
    if backend not in _BUILT:
        _BUILT[backend] = (cuda if backend == "cuda" else nvptx).build(_pairs(COMPILABLE))
    return _BUILT[backend]


@pytest.mark.parametrize("backend", ["cuda", "nvptx"])
def test_all_cases_compile(backend):
    mod = _built(backend)
    dm = mod.imported_modules[0]
    kernels = {f"{ALL[n].func.name}_kernel" for n in COMPILABLE}
    for arch in ("sm_80", "sm_90"):
        assert set(dm.ptxas_info[arch]) == kernels
        assert all(i.spill_stores == 0 for i in dm.ptxas_info[arch].values())
    assert set(mod.function_names()) == {ALL[n].func.name for n in COMPILABLE}


def test_enough_cases():
    assert len(COMPILABLE) > 0.75 * len(ALL), len(COMPILABLE)


@pytest.fixture(scope="module")
def host_emulated(tmp_path_factory):
    """The CUDA module of every compilable case, its CUDA C compiled for the host and run
    through the real launch plans on the fake driver (one thread per kernel)."""
    from tvmpy.runtime import cuda_module
    from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

    mod = _built("cuda")
    host = HostKernels(mod.imported_modules[0].get_source(), mod.plan["kernels"],
                       str(tmp_path_factory.mktemp("cuda_host")))
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    yield mod
    cuda_module.set_driver(prev)


class _Lib:
    def __init__(self, mod):
        self.mod = mod

    def __call__(self, name, *args):
        self.mod[name](*args)
        return 0

    def last_error(self):
        return ""


@pytest.mark.parametrize("name", COMPILABLE)
def test_case_semantics_host_emulated(name, host_emulated):
    """The CUDA dialect's text (casts, wrap-around, lets as lambdas, bit casts, half, popcount,
    INFINITY ...) against the cases' numpy results, with the kernels compiled by g++."""
    cases.run_case(ALL[name], lambda funcs, extra: _Lib(host_emulated))


@pytest.fixture(scope="module")
def host_emulated_nvptx(tmp_path_factory):
    """The nvptx module of every compilable case, its LLVM IR JIT-compiled for the host."""
    from tvmpy.runtime import cuda_module
    from tvmpy.testing.cuda_fake import FakeDriver, HostKernels

    mod = _built("nvptx")
    host = HostKernels.from_nvptx(mod.imported_modules[0].get_source(), mod.plan["kernels"],
                                  str(tmp_path_factory.mktemp("nvptx_host")))
    prev = cuda_module.set_driver(FakeDriver(host.kernels))
    yield mod
    cuda_module.set_driver(prev)


@pytest.mark.parametrize("name", COMPILABLE)
def test_case_semantics_nvptx_host_emulated(name, host_emulated_nvptx):
    """The nvptx code generator's IR (thread indices, parameters, lane-wise vector math ...)
    against the cases' numpy results, JIT-compiled for the host."""
    cases.run_case(ALL[name], lambda funcs, extra: _Lib(host_emulated_nvptx))
