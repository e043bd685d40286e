"""``tvm.lower`` returns an IRModule, as TVM 0.7+ does (``tvm.lower(s, args, name="f")["f"]``,
``mod["main"]``, ``mod.functions``, ``print(mod)``, ``tvm.build(mod, target=...)``), which with
one function also reads as that function (TVM 0.6's ``lower`` returned it: ``f.body``);
``tvm.build`` takes an IRModule of one or several PrimFuncs."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay, te, tir

RNG = np.random.default_rng(7)


def _elementwise(name, fn):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: fn(A[i], B[i]), name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)  # 8 divides none of the sizes below
    s[C].vectorize(xi)
    return tvm.lower(s, [A, B, C], name=name)


def _inputs(n):
    return (RNG.uniform(-2, 2, n).astype("float32"), RNG.uniform(-2, 2, n).astype("float32"),
            np.zeros(n, "float32"))


def test_lower_returns_an_irmodule_keyed_by_name():
    mod = _elementwise("vadd", lambda a, b: a + b)
    assert isinstance(mod, tvm.IRModule)
    assert [g.name_hint for g in mod.functions] == ["vadd"] and "vadd" in mod and len(mod) == 1
    func = mod["vadd"]
    assert isinstance(func, tir.PrimFunc) and func.attrs["global_symbol"] == "vadd"
    assert mod["main"] is func  # TVM 0.8's default name; here the module's one function
    assert mod[mod.get_global_var("vadd")] is func
    text = str(mod)
    assert text == str(func) and "def vadd(" in text and "ramp(" in text
    with pytest.raises(KeyError, match="no function @other"):
        mod["other"]
    named_main = tvm.lower(te.create_schedule(te.compute((3,), lambda i: 1.0).op), [], name="main")
    assert named_main["main"].attrs["global_symbol"] == "main"


def test_build_of_the_lowered_module_runs():
    mod = _elementwise("vadd", lambda a, b: a + b)
    f = tvm.build(mod, target="llvm")
    assert f.entry_name == "vadd"
    for n in (1, 8, 37):
        a, b, c = _inputs(n)
        f(a, b, c)
        tvm.testing.assert_allclose(c, a + b)
    # the function taken out of the module, as TVM 0.7 code writes it
    g = tvm.build(mod["vadd"], target="llvm")
    a, b, c = _inputs(13)
    g(a, b, c)
    tvm.testing.assert_allclose(c, a + b)


def test_build_of_a_module_of_several_functions():
    add = _elementwise("vadd", lambda a, b: a + b)["vadd"]
    mul = _elementwise("vmul", lambda a, b: a * b)["vmul"]
    mod = tvm.IRModule({"vadd": add, "vmul": mul})
    for built in (tvm.build(mod, target="llvm"), tvm.build(tvm.lower(mod), target="llvm"),
                  tvm.build([_elementwise("vadd", lambda a, b: a + b),
                             _elementwise("vmul", lambda a, b: a * b)], target="llvm")):
        a, b, c = _inputs(29)
        built["vadd"](a, b, c)
        tvm.testing.assert_allclose(c, a + b)
        built["vmul"](a, b, c)
        tvm.testing.assert_allclose(c, a * b)
    both = tvm.lower(mod)
    assert [g.name_hint for g in both.functions] == ["vadd", "vmul"]
    with pytest.raises(KeyError):
        both["main"]  # two functions: no default
    with pytest.raises(AttributeError, match="no attribute 'body'"):
        _ = both.body
    # a function without a symbol is built under its name in the module
    bare = tir.PrimFunc(add.params, add.body, add.buffer_map,
                        {k: v for k, v in add.attrs.items() if k != "global_symbol"})
    renamed = tvm.build(tvm.IRModule({"renamed": bare}), target="llvm")
    assert renamed.entry_name == "renamed"
    a, b, c = _inputs(5)
    renamed(a, b, c)
    tvm.testing.assert_allclose(c, a + b)


def test_tvm_06_style_use_of_the_result():
    f = _elementwise("vsub", lambda a, b: a - b)
    assert f.body is f["vsub"].body and [p.name for p in f.params] == ["A", "B", "C"]
    built = tvm.build(f)  # TVM 0.6: build(lowered_func)
    a, b, c = _inputs(11)
    built(a, b, c)
    tvm.testing.assert_allclose(c, a - b)


def test_build_of_a_module_for_a_gpu_target():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 3.0, name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=16)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    f = tvm.build(tvm.lower(s, [A, B], name="triple"), target="opencl")
    dev = tvm.opencl(0)
    assert dev.exist, "no OpenCL device (install pyopencl + pocl-opencl-icd)"
    x = RNG.uniform(-1, 1, 37).astype("float32")
    out = tvm.nd.empty((37,), "float32", dev)
    f(tvm.nd.array(x, dev), out)
    tvm.testing.assert_allclose(out.numpy(), x * 3.0)


def test_bad_modules_are_refused():
    x = relay.var("x", shape=(2,))
    with pytest.raises(TypeError, match="@main is a Function.*relay.build"):
        tvm.build(tvm.IRModule.from_expr(relay.Function([x], x)), target="llvm")
    with pytest.raises(ValueError, match="no functions to build"):
        tvm.build(tvm.IRModule(), target="llvm")
