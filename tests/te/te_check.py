"""Shared checker for the schedule tests: lower a schedule, run it, compare with numpy.

``check(s, args, ref, sizes={n: 13})`` draws random inputs for the placeholder args, computes the
expected outputs with ``ref(*inputs)`` and runs the schedule through every backend that exists:
the loop-IR interpreter on the schedule-lowering output (IR form 1, always), and the LLVM and C
builds (``tvm.build(..., "llvm")`` / ``"c"``) when those backends are available in the tree.
"""

from __future__ import annotations

import importlib.util

import numpy as np

import tvmpy as tvm
from tvmpy import te
from tvmpy.te.schedule_ops import schedule_to_primfunc
from tvmpy.tir import expr as E
from tvmpy.tir.functor import substitute
from tvmpy.tir.interpreter import run as interp_run


def _backend_available(target: str) -> bool:
    return all(importlib.util.find_spec(m) is not None
               for m in ("tvmpy.tir.pipeline", f"tvmpy.codegen.{target}", "tvmpy.runtime.ndarray"))


def _shape(t, sizes):
    out = []
    for d in t.shape:
        v = substitute(d, sizes) if sizes else d
        from tvmpy.arith import simplify

        v = simplify(v)
        if not isinstance(v, E.IntImm):
            raise ValueError(f"shape {t.shape} of {t.name} is not fixed by sizes={sizes}")
        out.append(v.value)
    return out


def check(s, args, ref, sizes=None, rtol=1e-4, atol=1e-5, seed=0, backends=("interp", "llvm", "c"),
          int_range=(-5, 6)):
    """Run ``s`` on random inputs and compare each output arg with ``ref``'s result."""
    sizes = sizes or {}
    rng = np.random.default_rng(seed)
    tensors = [a for a in args if isinstance(a, te.Tensor)]
    inputs = [t for t in tensors if isinstance(t.op, te.PlaceholderOp)]
    outputs = [t for t in tensors if not isinstance(t.op, te.PlaceholderOp)]
    in_np = []
    for t in inputs:
        shp = _shape(t, sizes)
        if t.dtype.startswith("float"):
            in_np.append(rng.uniform(-1, 1, shp).astype(t.dtype))
        else:
            in_np.append(rng.integers(*int_range, size=shp).astype(t.dtype))
    expected = ref(*in_np)
    if not isinstance(expected, (list, tuple)):
        expected = [expected]
    assert len(expected) == len(outputs), "ref must return one array per output arg"
    results = {}
    if "interp" in backends:
        func = schedule_to_primfunc(s, args, "f")
        arrays = _arrays(args, inputs, in_np, outputs, sizes)
        interp_run(func, arrays)
        results["interp"] = [arrays[args.index(t)] for t in outputs]
    for target in ("llvm", "c"):
        if target in backends and _backend_available(target):
            f = tvm.build(s, args, target=target)
            arrays = _arrays(args, inputs, in_np, outputs, sizes)
            nds = [tvm.nd.array(a) if isinstance(a, np.ndarray) else a for a in arrays]
            f(*nds)
            results[target] = [nds[args.index(t)].numpy() for t in outputs]
    for name, outs in results.items():
        for t, got, exp in zip(outputs, outs, expected):
            np.testing.assert_allclose(got, exp, rtol=rtol, atol=atol,
                                       err_msg=f"backend {name}, output {t.name}")
    return results


def _arrays(args, inputs, in_np, outputs, sizes):
    out = []
    for a in args:
        if isinstance(a, te.Tensor):
            if a in inputs:
                out.append(in_np[inputs.index(a)].copy())
            else:
                shp = _shape(a, sizes)
                fill = np.nan if a.dtype.startswith("float") else 0
                out.append(np.full(shp, fill, dtype=a.dtype))
        else:
            out.append(sizes[a])
    return out


def lower_text(s, args, name="f"):
    """The printed schedule-lowering output (IR form 1)."""
    return str(schedule_to_primfunc(s, args, name))
