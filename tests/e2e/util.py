"""Shared end-to-end checker: build a schedule for every backend, run it on random data, compare.

``check(sched_fn, ref_fn, shapes)``:

- ``sched_fn()`` returns ``(s, args)``: a schedule and the argument list of ``tvm.build``
  (placeholder tensors are inputs, compute tensors outputs, ``te.var`` scalars are passed the
  value bound in ``shapes``);
- ``ref_fn(*inputs)`` returns the numpy result(s), one per output tensor, from the input arrays
  (in argument order); the bound sizes it names (or all, with ``**kwargs``) come as keywords;
- ``shapes``: a list of bindings ``{var_name: value}`` for the symbolic sizes; each backend is
  built ONCE and run for every binding (``[{}]`` / ``None``: static shapes).

Inputs are seeded random data, never zeros (floats uniform in +-[0.25, 2], ints non-zero in a small
range, bools both values); outputs are pre-filled with a sentinel (NaN / -77) so that an element
the kernel forgets to write fails the comparison. Floats compare with ``rtol`` (1e-5 for
float32 by default), ints and bools exactly.
"""

from __future__ import annotations

import inspect
import shutil
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tvmpy as tvm
from tvmpy import te
from tvmpy.arith import simplify
from tvmpy.tir import expr as E
from tvmpy.tir.functor import collect_vars, substitute

HAVE_CC = shutil.which("cc") is not None or shutil.which("gcc") is not None
TARGETS: tuple[str, ...] = ("llvm", "c", "interp") if HAVE_CC else ("llvm", "interp")

Gen = Callable[[np.random.Generator, tuple[int, ...], str], np.ndarray]


def rand(rng: np.random.Generator, shape: Sequence[int], dtype: str) -> np.ndarray:
    """Random non-zero data of ``dtype``: floats +-[0.25, 2], ints in a small non-zero range."""
    shape = tuple(shape)
    if dtype == "bool":
        out = rng.integers(0, 2, size=shape).astype(bool)
        if out.size >= 2:
            out.flat[0], out.flat[1] = True, False
        return out
    if dtype.startswith("float"):
        mag = rng.uniform(0.25, 2.0, size=shape)
        sign = np.where(rng.integers(0, 2, size=shape) == 0, -1.0, 1.0)
        return (mag * sign).astype(dtype)
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -9), min(info.max, 9)
    out = rng.integers(lo, hi + 1, size=shape).astype(dtype)
    out[out == 0] = 3
    return out


def positive(rng: np.random.Generator, shape: Sequence[int], dtype: str) -> np.ndarray:
    """Random strictly positive data (for log/sqrt/...)."""
    return rng.uniform(0.25, 4.0, size=tuple(shape)).astype(dtype)


def _bind(sizes: dict[Any, int], args: Sequence[Any]) -> dict[E.Var, E.PrimExpr]:
    """Map the Var objects reachable from ``args`` (shapes and scalars) to their bound values."""
    by_name = {(k if isinstance(k, str) else k.name): v for k, v in sizes.items()}
    vmap: dict[E.Var, E.PrimExpr] = {}

    def visit(e: Any) -> None:
        if isinstance(e, E.Var) and e.name in by_name:
            vmap[e] = E.const(by_name[e.name], e.dtype)

    for a in args:
        if isinstance(a, te.Tensor):
            for d in a.shape:
                for v in collect_vars(d):
                    visit(v)
        elif isinstance(a, E.Var):
            visit(a)
    return vmap


def concrete_shape(t: te.Tensor, vmap: dict) -> tuple[int, ...]:
    out = []
    for d in t.shape:
        v = simplify(substitute(d, vmap)) if vmap else simplify(d)
        if not isinstance(v, E.IntImm):
            raise ValueError(f"shape {t.shape} of {t.name} is not fixed by the bound sizes")
        out.append(int(v.value))
    return tuple(out)


def _sentinel(dtype: str) -> Any:
    if dtype.startswith("float"):
        return np.nan
    if dtype == "bool":
        return False
    return -77 if dtype.startswith("int") else 77


def compare(got: np.ndarray, exp: np.ndarray, dtype: str, rtol: float, atol: float, msg: str) -> None:
    exp = np.asarray(exp)
    assert got.shape == exp.shape, f"{msg}: shape {got.shape} != expected {exp.shape}"
    if dtype.startswith("float"):
        np.testing.assert_allclose(got.astype("float64"), exp.astype("float64"), rtol=rtol,
                                   atol=atol, err_msg=msg)
    else:
        np.testing.assert_array_equal(got, exp.astype(dtype), err_msg=msg)


def default_rtol(dtype: str) -> float:
    return {"float16": 1e-3, "float32": 1e-5, "float64": 1e-12}.get(dtype, 0.0)


def build_all(s: Any, args: Sequence[Any], targets: Sequence[str] = TARGETS, name: str = "f") -> dict:
    """``{target: Module}`` for every target."""
    return {t: tvm.build(s, list(args), target=t, name=name) for t in targets}


def check(sched_fn: Callable[[], tuple[Any, list]], ref_fn: Callable[..., Any],
          shapes: Sequence[dict] | None = None, targets: Sequence[str] = TARGETS,
          rtol: float | None = None, atol: float | None = None, seed: int = 0,
          gens: dict[str, Gen] | None = None, modules: dict | None = None) -> dict:
    """Build ``sched_fn()`` for each target, run on random data for each binding, compare.

    ``gens`` maps an input tensor's name to a data generator ``(rng, shape, dtype) -> array``.
    ``modules`` may pass already built modules (``build_all``) to share builds between tests.
    Returns ``{target: module}``.
    """
    s, args = sched_fn()
    shapes = list(shapes) if shapes else [{}]
    gens = gens or {}
    mods = modules if modules is not None else build_all(s, args, targets)
    tensors = [a for a in args if isinstance(a, te.Tensor)]
    inputs = [t for t in tensors if isinstance(t.op, te.PlaceholderOp)]
    outputs = [t for t in tensors if not isinstance(t.op, te.PlaceholderOp)]
    for case, sizes in enumerate(shapes):
        rng = np.random.default_rng(seed + case)
        vmap = _bind(sizes, args)
        in_np = [gens.get(t.name, rand)(rng, concrete_shape(t, vmap), t.dtype) for t in inputs]
        expected = ref_fn(*[a.copy() for a in in_np], **_kwargs_for(ref_fn, sizes))
        if not isinstance(expected, (list, tuple)):
            expected = [expected]
        assert len(expected) == len(outputs), "ref_fn must return one array per output"
        for target in targets:
            call = []
            for a in args:
                if isinstance(a, te.Tensor) and a in inputs:
                    call.append(tvm.nd.array(in_np[inputs.index(a)].copy()))
                elif isinstance(a, te.Tensor):
                    shp = concrete_shape(a, vmap)
                    call.append(tvm.nd.array(np.full(shp, _sentinel(a.dtype), dtype=a.dtype)))
                else:
                    call.append(sizes[a.name])
            mods[target](*call)
            for t, exp in zip(outputs, expected):
                got = call[args.index(t)].numpy()
                r = default_rtol(t.dtype) if rtol is None else rtol
                at = (r if atol is None else atol)
                compare(got, exp, t.dtype, r, at,
                        f"target {target}, output {t.name}, sizes {sizes}")
    return mods


def _kwargs_for(fn: Callable, sizes: dict) -> dict:
    """The bound sizes ``fn`` takes by name (all of them if it has ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return dict(sizes)
    return {k: v for k, v in sizes.items() if k in params}


def lowered(s: Any, args: Sequence[Any]) -> str:
    """Printed ``tvm.lower`` output."""
    return str(tvm.lower(s, list(args), simple_mode=True))


def run_in_threads(work: Callable[[int], list[str]], threads: int) -> list[str]:
    """``work(k)`` for k in range(threads), on that many threads started together; the problems
    they report, plus any exception one raised (reported, not lost in the thread). Fails when a
    thread is still running after 300 s."""
    start = threading.Barrier(threads)
    problems: list[str] = []

    def body(k: int) -> None:
        try:
            start.wait()
            problems.extend(work(k))
        except Exception as e:
            problems.append(f"thread {k}: {type(e).__name__}: {e}")

    started = [threading.Thread(target=body, args=(k,)) for k in range(threads)]
    for t in started:
        t.start()
    for t in started:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in started), "a thread hangs"
    return problems
