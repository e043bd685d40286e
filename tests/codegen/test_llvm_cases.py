"""The LLVM backend on the backend-independent codegen cases (tests/codegen/cases.py), the same
ones the C backend passes."""

from __future__ import annotations

from tests.codegen import cases
from tvmpy.codegen.llvm import compile_funcs
from tvmpy.tir.function import PrimFunc


def make_lib(funcs: list[PrimFunc], extra_c: str = "") -> cases.CtypesLib:
    c = compile_funcs(funcs)
    objects = [c.object] + ([cases.compile_extra_c(extra_c)] if extra_c else [])
    return cases.CtypesLib(funcs, objects, c.link_libs)


all_cases, batch_lib, test_case, test_batch_builds = cases.backend_suite(make_lib, "LLVM module")
