"""The runtime with the real code generators: a hand-written lowered PrimFunc (IR form 2) with
a symbolic size, a 2-D argument, a parallel loop and an assert, built by each backend, called
through Module with checking, exported and loaded in a fresh process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.tir import expr as E
from tvmpy.tir import stmt as S
from tvmpy.tir.buffer import decl_buffer
from tvmpy.tir.function import PrimFunc

BACKENDS = ["llvm", "c"]


def axpy_func() -> PrimFunc:
    """out[i, j] = a[i, j] * 2 + b[j] for a: (n, 3), b: (3,), asserting n <= 1000."""
    n = te.var("n")
    A2, B1, O2 = (decl_buffer((n, 3), "float32", "A"), decl_buffer((3,), "float32", "B"),
                  decl_buffer((n, 3), "float32", "O"))
    a, b, o = (decl_buffer((s,), "float32", nm, data=buf.data)
               for nm, s, buf in (("A", n * 3, A2), ("B", 3, B1), ("O", n * 3, O2)))
    i, j = E.Var("i"), E.Var("j")
    body = S.BufferStore(o, a[i * 3 + j] * E.FloatImm("float32", 2.0) + b[j], [i * 3 + j])
    loop = S.For(i, 0, n, S.ForKind.PARALLEL, S.For(j, 0, 3, S.ForKind.SERIAL, body))
    checked = S.AssertStmt(n <= 1000, "n must be at most 1000", loop)
    return PrimFunc([A2.data, B1.data, O2.data], checked,
                    {A2.data: A2, B1.data: B1, O2.data: O2},
                    {"global_symbol": "axpy", "tir.lowered": True})


def build(backend: str):
    try:
        if backend == "llvm":
            from tvmpy.codegen.llvm import build as b
        else:
            from tvmpy.codegen.c import build as b
    except ImportError as e:  # backend not present in this checkout
        pytest.skip(f"{backend} backend unavailable: {e}")
    return b([axpy_func()], backend)


@pytest.fixture(scope="module", params=BACKENDS)
def mod(request):
    return build(request.param)


@pytest.mark.parametrize("n", [1, 7, 64, 257])
def test_call(mod, n):
    a = np.random.default_rng(n).standard_normal((n, 3)).astype("float32")
    b = np.random.default_rng(n + 1).standard_normal(3).astype("float32")
    o = tvm.nd.empty((n, 3))
    mod(tvm.nd.array(a), tvm.nd.array(b), o)
    np.testing.assert_allclose(o.numpy(), a * 2 + b, rtol=1e-6)
    assert mod.entry_name == "axpy"
    assert mod.get_source()


def test_assert_and_argument_errors(mod):
    with pytest.raises(RuntimeError, match="n must be at most 1000"):
        mod(tvm.nd.empty((1001, 3)), tvm.nd.empty((3,)), tvm.nd.empty((1001, 3)))
    with pytest.raises(ValueError, match=r"argument B must have shape \(3,\), got \(4,\)"):
        mod(tvm.nd.empty((2, 3)), tvm.nd.empty((4,)), tvm.nd.empty((2, 3)))
    with pytest.raises(ValueError, match="argument O dim 0 is 3, but n=2 from argument A dim 0"):
        mod(tvm.nd.empty((2, 3)), tvm.nd.empty((3,)), tvm.nd.empty((3, 3)))


def test_export_load_subprocess(mod, tmp_path):
    path = str(tmp_path / f"axpy_{mod.type_key}.so")
    mod.export_library(path)
    code = textwrap.dedent("""
        import sys, json
        import numpy as np
        import tvmpy as tvm
        m = tvm.runtime.load_module(sys.argv[1])
        a = np.arange(12, dtype="float32").reshape(4, 3); b = np.ones(3, "float32")
        o = tvm.nd.empty((4, 3))
        m(tvm.nd.array(a), tvm.nd.array(b), o)
        try:
            m(tvm.nd.empty((1001, 3)), tvm.nd.empty((3,)), tvm.nd.empty((1001, 3))); err = ""
        except RuntimeError as e:
            err = str(e)
        print(json.dumps({"o": o.numpy().tolist(), "err": err, "type": m.type_key}))
    """)
    proc = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True,
                          timeout=120, env={"PATH": "", "CC": "/nonexistent"})
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["o"] == (np.arange(12, dtype="float32").reshape(4, 3) * 2 + 1).tolist()
    assert "n must be at most 1000" in res["err"]
    assert res["type"] == mod.type_key
