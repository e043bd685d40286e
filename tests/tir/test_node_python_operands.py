"""tir node constructors take Python numbers as TVM's do (its FFI converts int -> int32,
float -> float32, bool -> bool): ``tvm.tir.Add(i, 1)``, ``LT(1, i)``, ``Cast("float32", 0)``,
``Let(v, 1, ...)``; a dtype mismatch stays a clear TypeError. Used by a custom pass (built and
run against numpy)."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, tir


def test_constructors_convert_python_numbers():
    i = te.var("i")
    f = te.var("f", "float32")
    for node, dtype in ((tir.Add(i, 1), "int32"), (tir.Sub(7, i), "int32"),
                        (tir.FloorDiv(i, 3), "int32"), (tir.Max(f, 0.5), "float32"),
                        (tir.LT(1, i), "bool"), (tir.And(i > 1, True), "bool"),
                        (tir.Cast("float32", 3), "float32"), (tir.Let(i, 2, i + 1), "int32")):
        assert node.dtype == dtype, node
    assert tvm.ir.structural_equal(tir.Add(i, 1), i + 1)
    with pytest.raises(TypeError, match="differ in dtype: float32 vs int32"):
        tir.Add(f, 1)


def test_custom_pass_building_nodes_from_python_numbers():
    n = 11
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda k: A[k] * 2.0, name="B")
    s = te.create_schedule(B.op)
    loops = []

    def clamp_tail(f, mod, ctx):
        def pre(stmt):
            if isinstance(stmt, tir.For):
                loops.append(stmt.loop_var)
            return None

        def post(stmt):
            if isinstance(stmt, tir.BufferStore) and loops:
                k = loops[-1]
                keep = tir.LT(tir.Mul(k, 2), 13)  # k < 6.5
                return tir.BufferStore(stmt.buffer, tir.Select(keep, stmt.value,
                                                               tir.Cast("float32", 0)),
                                       stmt.indices)
            return None

        return f.with_body(tvm.tir.stmt_functor.ir_transform(f.body, pre, post,
                                                             ["tir.For", "tir.BufferStore"]))

    with tvm.transform.PassContext(config={"tir.add_lower_pass": [
            (1, tvm.tir.transform.prim_func_pass(clamp_tail, opt_level=0))]}):
        fn = tvm.build(s, [A, B], target="llvm")
    a = np.random.default_rng(1).standard_normal(n).astype("float32")
    out = tvm.nd.empty((n,), "float32")
    fn(tvm.nd.array(a), out)
    want = np.where(np.arange(n) * 2 < 13, a * 2, 0)
    tvm.testing.assert_allclose(out.numpy(), want)
