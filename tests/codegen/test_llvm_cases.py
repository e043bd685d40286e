"""The LLVM backend on the backend-independent codegen cases (tests/codegen/cases.py), the same
ones the C backend passes."""

from __future__ import annotations

import pytest

from tests.codegen import cases
from tvmpy.codegen.llvm import compile_funcs
from tvmpy.tir.function import PrimFunc


def make_lib(funcs: list[PrimFunc], extra_c: str = "") -> cases.CtypesLib:
    c = compile_funcs(funcs)
    objects = [c.object] + ([cases.compile_extra_c(extra_c)] if extra_c else [])
    return cases.CtypesLib(funcs, objects, c.link_libs)


@pytest.fixture(scope="module")
def all_cases() -> dict[str, cases.Case]:
    return {name: cases.make_case(name) for name in cases.CASE_NAMES}


@pytest.fixture(scope="module")
def batch_lib(all_cases):
    """Every case in one LLVM module and one library; None when that fails (each case then
    builds alone, to point at the one that breaks)."""
    funcs = [f for c in all_cases.values() for f in (c.func, *c.extra_funcs)]
    extra = "\n".join(dict.fromkeys(c.extra_c for c in all_cases.values() if c.extra_c))
    try:
        return make_lib(funcs, extra)
    except Exception:  # noqa: BLE001 - reported by the per-case builds
        return None


@pytest.mark.parametrize("name", cases.CASE_NAMES)
def test_case(name, all_cases, batch_lib):
    case = all_cases[name]
    cases.run_case(case, (lambda funcs, extra: batch_lib) if batch_lib is not None else make_lib)


def test_batch_builds(batch_lib):
    assert batch_lib is not None, "the module of all cases together did not build"
