"""The pass decorators' arguments as TVM checks them: ``module_pass`` / ``relay.transform.
function_pass`` / ``tir.transform.prim_func_pass`` require ``opt_level`` (ValueError without
it, bare or as a decorator) and take ``required`` only as a list or tuple; with ``opt_level``
the pass runs only under a PassContext whose opt_level reaches it."""

from __future__ import annotations

import pytest

import tvmpy as tvm
from tvmpy import relay, te

DECORATORS = {
    "module pass": (tvm.transform.module_pass, lambda m, ctx: m),
    "function pass": (relay.transform.function_pass, lambda f, m, ctx: f),
    "prim_func pass": (tvm.tir.transform.prim_func_pass, lambda f, m, ctx: f),
}


@pytest.mark.parametrize("kind", DECORATORS)
def test_opt_level_is_required(kind):
    deco, fn = DECORATORS[kind]
    with pytest.raises(ValueError, match=f"Please provide opt_level for the {kind}"):
        deco(fn)
    with pytest.raises(ValueError, match="opt_level"):
        deco()  # @deco() with no arguments
    with pytest.raises(ValueError, match="opt_level"):
        deco(name="x")
    with pytest.raises(TypeError, match="opt_level .* must be an int"):
        deco(fn, opt_level="2")
    with pytest.raises(TypeError, match="required .* list/tuple"):
        deco(fn, opt_level=1, required="FoldConstant")
    p = deco(fn, opt_level=2, required=("InferType",))
    assert p.info.opt_level == 2 and list(p.info.required) == ["InferType"]


def test_opt_level_gates_the_pass():
    seen = []

    @tvm.transform.module_pass(opt_level=3)
    def count(mod, ctx):
        seen.append(ctx.opt_level)
        return mod

    x = relay.var("x", shape=(2,))
    mod = tvm.IRModule.from_expr(relay.Function([x], x))
    seq = tvm.transform.Sequential([count])
    with tvm.transform.PassContext(opt_level=2):
        seq(mod)
    assert seen == []
    with tvm.transform.PassContext(opt_level=3):
        seq(mod)
    assert seen == [3]


def test_prim_func_pass_decorator_with_opt_level_runs():
    A = te.placeholder((5,), name="A")
    B = te.compute((5,), lambda i: A[i] + 1, name="B")
    mod = tvm.lower(te.create_schedule(B.op), [A, B])
    names = []

    @tvm.tir.transform.prim_func_pass(opt_level=0)
    def record(f, m, ctx):
        names.append(f.attrs["global_symbol"] if f.attrs else None)
        return f

    record(mod)
    assert len(names) == 1
