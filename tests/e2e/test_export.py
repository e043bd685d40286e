"""export_library -> load_module in a fresh process, for both compiled backends, with the features
that need more than the kernel itself: a parallel loop (thread pool), a tensorized micro-kernel
(extern C linked in), float16 vector code and a symbolic size."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import tvmpy as tvm
from tvmpy import te

from .util import TARGETS

_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import tvmpy.runtime as rt

    mm = rt.load_module(sys.argv[1])
    ex = rt.load_module(sys.argv[2])
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (16, 24)).astype("float32")
    b = rng.uniform(-1, 1, (8, 24)).astype("float32")
    c = np.full((16, 8), np.nan, "float32")
    mm(a, b, c)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-4, atol=1e-4)
    for n in (1, 13, 40):
        x = rng.uniform(-2, 2, n).astype("float16")
        y = np.full(n, np.nan, "float16")
        ex(x, y)
        np.testing.assert_allclose(y.astype("float32"), np.exp(x.astype("float32")), rtol=2e-3)
    print("ok", "llvmlite" in sys.modules)
""")


def _schedules():
    from tvmpy.contrib.microkernel import gemm_intrin

    A = te.placeholder((16, 24), name="A")
    B = te.placeholder((8, 24), name="B")
    k = te.reduce_axis((0, 24), name="k")
    C = te.compute((16, 8), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
    ko, ki = s[C].split(k, factor=8)
    s[C].reorder(xo, yo, ko, xi, yi, ki)
    s[C].tensorize(xi, gemm_intrin(8, 8, 8, "nk"))
    s[C].parallel(xo)
    n = te.var("n")
    X = te.placeholder((n,), "float16", name="X")
    Y = te.compute((n,), lambda i: te.exp(X[i]), name="Y")
    s2 = te.create_schedule(Y.op)
    o, i_ = s2[Y].split(Y.op.axis[0], 8)
    s2[Y].vectorize(i_)
    s2[Y].parallel(o)
    return (s, [A, B, C]), (s2, [X, Y])


@pytest.mark.parametrize("target", [t for t in TARGETS if t != "interp"])
def test_export_load_in_fresh_process(target, tmp_path):
    (s, args), (s2, args2) = _schedules()
    mm_path, ex_path = tmp_path / "mm.so", tmp_path / "ex.so"
    tvm.build(s, args, target=target, name="mm").export_library(str(mm_path))
    tvm.build(s2, args2, target=target, name="ex").export_library(str(ex_path))
    out = subprocess.run([sys.executable, "-c", _CHILD, str(mm_path), str(ex_path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ok", "False"], out.stdout  # no compiler needed to load


def test_interp_module_cannot_export(tmp_path):
    (s, args), _ = _schedules()
    with pytest.raises(NotImplementedError, match="build with target='llvm' or 'c'"):
        tvm.build(s, args, target="interp").export_library(str(tmp_path / "x.so"))
