"""Helpers for the loop-IR pass tests: build PrimFuncs by hand, compare printed text, and check
that a pass preserves meaning by running before and after through the interpreter."""

from __future__ import annotations

import textwrap

import numpy as np

from tvmpy import tir
from tvmpy.ir import dtype as dt
from tvmpy.tir import interpreter
from tvmpy.tir.analysis import verify_single_definition
from tvmpy.tir.stmt import ForKind

RNG = np.random.default_rng(1234)


def func(params, body, name="f"):
    """A PrimFunc from a list of Buffers (made parameters) and scalar Vars."""
    handles, bmap = [], {}
    for p in params:
        if isinstance(p, tir.Buffer):
            handles.append(p.data)
            bmap[p.data] = p
        else:
            handles.append(p)
    return tir.PrimFunc(handles, body, bmap, {"global_symbol": name})


def loop(var, extent, body, kind=ForKind.SERIAL, lo=0):
    return tir.For(var, lo, extent, kind, body)


def text(f) -> str:
    """The printed body of ``f`` (without the signature line), dedented."""
    lines = str(f).splitlines()
    body = [ln for ln in lines if not ln.startswith(("def ", "# attrs"))]
    return textwrap.dedent("\n".join(body)).strip()


def expect(f, expected: str) -> None:
    got = text(f)
    want = textwrap.dedent(expected).strip()
    assert got == want, f"--- got\n{got}\n--- expected\n{want}"


def random_args(f, sizes: dict | None = None):
    """Random arrays (never zeros) for ``f``'s buffer params; symbolic dims from ``sizes``
    (var name -> int); scalars from ``sizes`` too."""
    sizes = sizes or {}
    args = []
    for p in f.params:
        b = f.buffer_map.get(p)
        if b is None:
            args.append(sizes[p.name])
            continue
        shape = []
        for s in b.shape:
            shape.append(s.value if isinstance(s, tir.IntImm) else sizes[s.name])
        npd = dt.to_numpy(b.dtype)
        if npd.kind == "f":
            arr = RNG.uniform(0.5, 2.0, shape).astype(npd)
        elif npd.kind == "b":
            arr = RNG.integers(0, 2, shape).astype(bool)
        else:
            arr = RNG.integers(1, 50, shape).astype(npd)
        args.append(arr)
    return args


def run(f, args):
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    interpreter.run(f, copies)
    return copies


def assert_same(before, after, sizes: dict | None = None, rtol=1e-6):
    """``before`` and ``after`` compute the same outputs on random inputs; ``after`` keeps
    single definition of variables."""
    verify_single_definition(after)
    args = random_args(before, sizes)
    want = run(before, args)
    got = run(after, args)
    for w, g in zip(want, got):
        if isinstance(w, np.ndarray):
            np.testing.assert_allclose(g, w, rtol=rtol)
    return got
