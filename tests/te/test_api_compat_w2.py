"""TVM 0.8 API forms: ``tvm.build`` of an IRModule of PrimFuncs (what ``tvm.lower`` returns in
TVM 0.8) and ``te.decl_tensor_intrin(..., default_buffer_params=...)``; checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te

RNG = np.random.default_rng(8)


def _add_one(n: int, name: str):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    return tvm.lower(s, [A, B], name=name)[name]


def test_build_irmodule_of_primfuncs():
    f = _add_one(13, "add_one")
    g = _add_one(7, "other")
    mod = tvm.IRModule({"add_one": f, "other": g})
    lib = tvm.build(mod, target="llvm")
    for name, n in (("add_one", 13), ("other", 7)):
        a = RNG.standard_normal(n).astype("float32")
        out = tvm.nd.empty((n,), "float32")
        lib[name](tvm.nd.array(a), out)
        tvm.testing.assert_allclose(out.numpy(), a + 1)


def test_build_irmodule_names_functions_by_their_global_var():
    low = _add_one(5, "default_function")
    f = tvm.tir.PrimFunc(low.params, low.body, low.buffer_map)  # no global_symbol
    lib = tvm.build(tvm.IRModule({"renamed": f}), target="llvm")
    a = RNG.standard_normal(5).astype("float32")
    out = tvm.nd.empty((5,), "float32")
    lib["renamed"](tvm.nd.array(a), out)
    tvm.testing.assert_allclose(out.numpy(), a + 1)


def test_build_irmodule_rejects_relay_functions():
    from tvmpy import relay

    x = relay.var("x", shape=(3,))
    with pytest.raises(TypeError, match="relay.build"):
        tvm.build(tvm.IRModule.from_expr(relay.Function([x], x)), target="llvm")


def _vadd_intrin(n: int, **kw):
    x = te.placeholder((n,), name="x")
    y = te.placeholder((n,), name="y")
    z = te.compute((n,), lambda i: x[i] + y[i], name="z")

    def fintrin(ins, outs):
        ib = tvm.tir.ir_builder.create()
        xx, yy = (ib.buffer_ptr(b) for b in ins)
        zz = ib.buffer_ptr(outs[0])
        with ib.for_range(0, n, name="j") as j:
            zz[j] = xx[j] + yy[j]
        return ib.get()

    return te.decl_tensor_intrin(z.op, fintrin, **kw)


def test_decl_tensor_intrin_default_buffer_params():
    intrin = _vadd_intrin(16, default_buffer_params={"offset_factor": 16})
    assert all(b.offset_factor == 16 for b in intrin.buffers)
    assert all(b.offset_factor == 1 for b in _vadd_intrin(16).buffers)
    n = 16 * 5
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    _, xi = s[C].split(C.op.axis[0], factor=16)
    s[C].tensorize(xi, intrin)
    f = tvm.build(s, [A, B, C], target="llvm")
    a, b = (RNG.standard_normal(n).astype("float32") for _ in range(2))
    out = tvm.nd.empty((n,), "float32")
    f(tvm.nd.array(a), tvm.nd.array(b), out)
    tvm.testing.assert_allclose(out.numpy(), a + b)
    with pytest.raises(TypeError, match="default_buffer_params"):
        _vadd_intrin(16, default_buffer_params={"offset": 16})
