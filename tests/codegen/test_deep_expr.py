"""Expression chains far deeper than Python's recursion limit (the 10,000-term Add of an unrolled
reduction) lower, print and compile on the llvm and c back ends: the functors evaluate deep
chains with an explicit stack (ir.functor.ChainFunctor), no recursion-limit workaround."""

import sys

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.codegen import c as cgen_c
from tvmpy.codegen import llvm as cgen_llvm

TERMS = 10_000


def _sum_chain(n: int):
    A = te.placeholder((n,), name="A")
    B = te.compute((1,), lambda i: sum((A[j] for j in range(1, n)), A[0]), name="B")
    s = te.create_schedule(B.op)
    return s, [A, B]


@pytest.fixture(scope="module")
def lowered():
    s, args = _sum_chain(TERMS)
    return tvm.lower(s, args)


def _run(mod, n: int) -> None:
    a = np.random.default_rng(0).random(n).astype("float32")
    b = tvm.nd.array(np.zeros(1, "float32"))
    mod(tvm.nd.array(a), b)
    np.testing.assert_allclose(b.numpy()[0], a.astype("float64").sum(), rtol=1e-4)


def test_deeper_than_the_recursion_limit():
    assert TERMS > 5 * sys.getrecursionlimit()


def test_lower_and_print(lowered):
    text = str(lowered)
    assert text.count(" + ") == TERMS - 1
    assert f"A[{TERMS - 1}]" in text


def test_llvm_ir(lowered):
    ir = cgen_llvm.emit_llvm_ir([lowered])
    assert ir.count("fadd") >= TERMS - 1


def test_c_build_and_run(lowered):
    assert cgen_c.emit_c([lowered]).count(" + ") >= TERMS - 1
    _run(tvm.build(lowered, target="c"), TERMS)


def test_llvm_build_and_run():
    n = 3_000  # LLVM's own optimiser is slow on 10,000-instruction blocks (not recursion)
    s, args = _sum_chain(n)
    _run(tvm.build(s, args, "llvm"), n)
