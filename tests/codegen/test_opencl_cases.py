"""The CPU backends' expression and statement cases (tests/codegen/cases.py) on OpenCL: each case's
function runs as a one-work-item kernel behind a one-launch host function, so the OpenCL dialect
of the shared kernel emitter prints every intrinsic, cast, wrap-around and vector form the C
backend does, checked against the same numpy results on PoCL. Cases a kernel cannot express
(failure returns, heap allocations, external C, float16 without cl_khr_fp16) must be refused at
build time with a clear error."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tvmpy.codegen import abi, opencl
from tvmpy.codegen.gpu_source import GPUCodegenError
from tvmpy.ir import dtype as dt
from tvmpy.tir import expr as E
from tvmpy.tir import stmt as S
from tvmpy.tir.function import PrimFunc
from tvmpy.tir.functor import post_order_visit

from . import cases

I32 = "int32"


def _as_gpu(func: PrimFunc) -> tuple[PrimFunc, PrimFunc]:
    """(host, kernel) running ``func`` as one work-item (its shape vars become kernel scalars)."""
    sig = abi.signature(func)
    shape_vars = sig.vars[len(func.params):]
    tx = E.IterVar(None, E.Var("threadIdx.x"), E.IterVar.ThreadIndex, "threadIdx.x")
    kname = f"{func.name}_kernel"
    kernel = PrimFunc([*func.params, *shape_vars],
                      S.AttrStmt(tx, "thread_extent", E.IntImm(I32, 1), func.body),
                      func.buffer_map, {"calling_conv": "device_kernel", "global_symbol": kname})
    one = E.IntImm(I32, 1)
    args = [func.buffer_map[p].data if p in func.buffer_map else p for p in func.params]
    launch = E.Call(I32, "tir.gpu_launch", [E.StringImm(kname), one, one, one, one, one, one,
                                             E.IntImm(I32, 0), *args, *shape_vars])
    host = PrimFunc(func.params, S.Evaluate(launch), func.buffer_map,
                    {"global_symbol": func.name})
    return host, kernel


class _Lib:
    def __init__(self, funcs: list[PrimFunc]):
        pairs = [_as_gpu(f) for f in funcs]
        self.mod = opencl.build([x for pair in pairs for x in pair])

    def __call__(self, name: str, *args: Any) -> int:
        self.mod[name](*args)
        return 0

    def last_error(self) -> str:
        return ""


def _refusal(case: cases.Case) -> str | None:
    """Why ``case`` cannot run as a kernel (it must then be refused), or None."""
    if case.ret != 0 or case.extra_c or case.extra_funcs:
        return "failure return or external C"
    found: list[str] = []

    def visit(n: Any) -> None:
        d = getattr(n, "dtype", None)
        if isinstance(d, str) and dt.element_of(d) == "float16":
            found.append("float16")
        if isinstance(n, S.AssertStmt):
            found.append("assert")
        if isinstance(n, S.Allocate) and not E.is_const_int(n.buffer.shape[0]):
            found.append("heap allocation")
        if isinstance(n, S.For) and n.kind == S.ForKind.PARALLEL:
            found.append("parallel loop")
        if isinstance(n, E.Call) and n.op in ("call_extern", "call_pure_extern"):
            found.append("external call")

    post_order_visit(case.func.body, visit)
    if any(dt.element_of(b.dtype) == "float16" for b in case.func.buffer_map.values()):
        found.append("float16")
    return found[0] if found else None


ALL = {name: cases.make_case(name) for name in cases.CASE_NAMES}
RUNNABLE = [n for n, c in ALL.items() if _refusal(c) is None]
REFUSED = [n for n, c in ALL.items() if _refusal(c) is not None]


@pytest.fixture(scope="module")
def batch() -> _Lib:
    return _Lib([ALL[n].func for n in RUNNABLE])  # one OpenCL program for all cases


@pytest.mark.parametrize("name", RUNNABLE)
def test_case_on_opencl(name: str, batch: _Lib) -> None:
    cases.run_case(ALL[name], lambda funcs, extra: batch)


@pytest.mark.parametrize("name", REFUSED)
def test_case_refused_clearly(name: str) -> None:
    case = ALL[name]
    why = _refusal(case)
    if why in ("failure return or external C", "external call"):
        return  # the runtime contract differs (no error channel, no C linking): not a kernel
    if why == "float16":  # half: built, then run only where the device has cl_khr_fp16
        lib = _Lib([case.func])
        import tvmpy as tvm
        import tvmpy.runtime.gpu_module as gm

        cl_dev = gm.device_api(tvm.opencl(0)).context(0)[2]
        if "cl_khr_fp16" in cl_dev.extensions:
            cases.run_case(case, lambda funcs, extra: lib)
        else:
            with pytest.raises(RuntimeError, match="lacks the cl_khr_fp16 extension"):
                cases.run_case(case, lambda funcs, extra: lib)
        return
    with pytest.raises(GPUCodegenError, match="cannot report failures|PARALLEL|symbolic|bytes per"):
        _Lib([case.func])


def test_most_cases_run():
    assert len(RUNNABLE) > 0.6 * len(ALL), (len(RUNNABLE), len(ALL), REFUSED)
    assert np.isfinite(len(RUNNABLE))
