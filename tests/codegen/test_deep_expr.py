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


pytestmark = pytest.mark.usefixtures("default_recursion_limit")  # tests/conftest.py


def _sum_chain(n: int):
    A = te.placeholder((n,), name="A")
    B = te.compute((1,), lambda i: sum((A[j] for j in range(1, n)), A[0]), name="B")
    s = te.create_schedule(B.op)
    return s, [A, B]


@pytest.fixture(scope="module")
def lowered(default_recursion_limit):
    s, args = _sum_chain(TERMS)
    return tvm.lower(s, args)["main"]


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


def test_tir_functors_on_deep_chains():
    from tvmpy.tir import expr as E
    from tvmpy.tir.functor import ir_transform, post_order_visit, substitute

    x, y = E.Var("x", "float32"), E.Var("y", "float32")
    e = x
    for _ in range(TERMS):
        e = e * y + x
    nodes = []
    post_order_visit(e, nodes.append)
    assert len(nodes) == 4 * TERMS + 1 and nodes[-1] is e  # every occurrence, children first
    swapped = substitute(e, {x: y})
    seen = []
    post_order_visit(swapped, lambda n: seen.append(n) if n is x else None)
    assert not seen and swapped.b is y
    pre = []
    out = ir_transform(e, lambda n: pre.append(n), lambda n: y if n is x else None)
    assert len(pre) == 4 * TERMS + 1  # preorder once per node, deep chains included
    assert out.b is y and out.a.b is y
