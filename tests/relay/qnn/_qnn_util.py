"""Shared by the QNN tests: run a relay function three ways (the reference interpreter on the QNN
ops, the interpreter after CanonicalizeOps, and compiled by relay.build) and random data."""

from __future__ import annotations

import numpy as np

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay.interpreter import evaluate
from tvmpy.relay.qnn import transform as qnn_transform


def rand_q(rng: np.random.Generator, shape, dtype: str) -> np.ndarray:
    """Random integers over the whole range of ``dtype`` (non-zero mostly, extremes included)."""
    info = np.iinfo(np.dtype(dtype))
    return rng.integers(int(info.min), int(info.max) + 1, size=shape).astype(dtype)


def build_run(mod: tvm.IRModule, inputs: dict, params: dict | None = None) -> list[np.ndarray]:
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    for k, v in inputs.items():
        m.set_input(k, v)
    m.run()
    return [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


def run_three(func: relay.Function, *args: np.ndarray) -> tuple[np.ndarray, ...]:
    """(interpreter on the QNN ops, interpreter after CanonicalizeOps, compiled)."""
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(func))
    ref = np.asarray(evaluate(mod["main"], *args))
    canon = qnn_transform.CanonicalizeOps()(mod)
    text = str(canon)
    assert "qnn." not in text, text
    lowered = np.asarray(evaluate(canon["main"], *args))
    (compiled,) = build_run(mod, {p.name_hint: a for p, a in zip(func.params, args)})
    return ref, lowered, compiled


def assert_all_equal(expected: np.ndarray, *got: np.ndarray) -> None:
    for g in got:
        assert g.dtype == expected.dtype, (g.dtype, expected.dtype)
        np.testing.assert_array_equal(g, expected)
