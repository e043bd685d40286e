"""The OpenCL code generator on hand-built IR in the GPU_API form (host launch list + kernels):
the launch plan's lets and asserts, its refusals, kernel codegen errors, and loading an exported
GPU module with the runtime alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy.codegen import opencl
from tvmpy.codegen.gpu_source import GPUCodegenError
from tvmpy.tir import expr as E
from tvmpy.tir import stmt as S
from tvmpy.tir.buffer import decl_buffer
from tvmpy.tir.function import PrimFunc

I32 = "int32"


def _c(v: int) -> E.IntImm:
    return E.IntImm(I32, v)


def _axis(tag: str) -> E.IterVar:
    return E.IterVar(None, E.Var(tag), E.IterVar.ThreadIndex, tag)


def _scale_kernel(name: str, block: int, body_extra=None) -> tuple[PrimFunc, E.Var]:
    """out[i] = x[i] * k for i < m, one thread per element (blocks of ``block``)."""
    m = E.Var("m", I32)
    k = E.Var("k", "float32")
    X, Y = decl_buffer((m,), "float32", "x"), decl_buffer((m,), "float32", "y")
    bx, tx = _axis("blockIdx.x"), _axis("threadIdx.x")
    i = bx.var * block + tx.var
    body: S.Stmt = S.IfThenElse(E.LT(i, m), S.BufferStore(Y, E.BufferLoad(X, [i]) * k, [i]))
    if body_extra is not None:
        body = S.SeqStmt([body_extra, body])
    body = S.AttrStmt(bx, "thread_extent", E.FloorDiv(m + (block - 1), _c(block)),
                      S.AttrStmt(tx, "thread_extent", _c(block), body))
    px, py = E.Var("x", "handle"), E.Var("y", "handle")
    f = PrimFunc([px, py, m, k], body, {px: X, py: Y},
                 {"calling_conv": "device_kernel", "global_symbol": name})
    return f, m


def _host(name: str, body_of) -> PrimFunc:
    n = E.SizeVar("n", I32)
    A, B = decl_buffer((n,), "float32", "A"), decl_buffer((n,), "float32", "B")
    pa, pb, alpha = E.Var("A", "handle"), E.Var("B", "handle"), E.Var("alpha", "float32")
    return PrimFunc([pa, pb, alpha], body_of(A, B, n, alpha), {pa: A, pb: B},
                    {"global_symbol": name})


def _launch(kernel: str, grid: E.PrimExpr, block: int, *args) -> S.Evaluate:
    return S.Evaluate(E.Call(I32, "tir.gpu_launch", [E.StringImm(kernel), grid, _c(1), _c(1),
                                                      _c(block), _c(1), _c(1), _c(0), *args]))


def test_plan_lets_asserts_and_two_launches():
    k1, _ = _scale_kernel("scale_k0", 32)
    k2, _ = _scale_kernel("scale_k1", 16)

    def body(A, B, n, alpha):
        half = E.Var("half", I32)
        launches = S.SeqStmt([
            # first half of B = A * alpha, then the rest (a second kernel, offset-free: whole B)
            _launch("scale_k0", E.FloorDiv(n + 31, _c(32)), 32, A.data, B.data, n, alpha),
            _launch("scale_k1", E.FloorDiv(half + 15, _c(16)), 16, B.data, B.data, half,
                    E.FloatImm("float32", 2.0)),
        ])
        return S.AssertStmt(E.GE(n, _c(2)), E.StringImm("n must be at least 2"),
                            S.LetStmt(half, E.FloorDiv(n, _c(2)), launches))

    mod = opencl.build([_host("twice", body), k1, k2])
    steps = [next(iter(s)) for s in mod.plan["functions"][0]["steps"]]
    assert steps == ["assert", "let", "launch", "launch"]
    dev = tvm.opencl(0)
    rng = np.random.default_rng(3)
    for n in (2, 45, 300):
        a = rng.uniform(-2, 2, n).astype("float32")
        b = tvm.nd.empty((n,), "float32", dev)
        mod(tvm.nd.array(a, dev), b, 1.5)
        want = a * np.float32(1.5)
        want[: n // 2] *= 2
        np.testing.assert_allclose(b.numpy(), want, rtol=1e-6)
    with pytest.raises(RuntimeError, match="n must be at least 2"):
        mod(tvm.nd.array(np.ones(1, "float32"), dev), tvm.nd.empty((1,), "float32", dev), 1.0)
    with pytest.raises(TypeError, match="argument alpha must be a number"):
        mod(tvm.nd.array(np.ones(4, "float32"), dev), tvm.nd.empty((4,), "float32", dev), "x")


def test_host_code_that_is_not_a_launch_list_is_refused():
    k1, _ = _scale_kernel("k0", 32)

    def body(A, B, n, alpha):
        # host code that computes (a store) instead of launching; a serial loop of launches
        # is a plan step now (a scan's time steps)
        return S.SeqStmt([S.BufferStore(B, alpha, [_c(0)]),
                          _launch("k0", _c(1), 32, A.data, B.data, n, alpha)])

    with pytest.raises(GPUCodegenError, match="plain launch list .* a BufferStore statement"):
        opencl.build([_host("bad", body), k1])

    def body2(A, B, n, alpha):
        return _launch("nope", _c(1), 32, A.data, B.data, n, alpha)

    with pytest.raises(GPUCodegenError, match="launches kernel 'nope'"):
        opencl.build([_host("bad2", body2), k1])


def test_kernel_codegen_errors():
    x = decl_buffer((_c(8),), "float32", "buf")
    j = E.Var("j", I32)
    par = S.For(j, _c(0), _c(4), S.ForKind.PARALLEL, S.BufferStore(x, E.FloatImm("float32", 1.0), [j]))
    k, _ = _scale_kernel("kp", 32, body_extra=S.Allocate(x, par))
    with pytest.raises(GPUCodegenError, match="loop j is PARALLEL inside a OpenCL kernel"):
        opencl.opencl_source([k])
    big = decl_buffer((_c(1 << 20),), "float32", "big", scope="local")
    k2, _ = _scale_kernel("kb", 32, body_extra=S.Allocate(
        big, S.BufferStore(big, E.FloatImm("float32", 1.0), [_c(0)])))
    with pytest.raises(GPUCodegenError, match="local allocation big needs 4194304 bytes"):
        opencl.opencl_source([k2])
    k3, _ = _scale_kernel("ka", 32, body_extra=S.AssertStmt(E.LT(_c(0), _c(1)), E.StringImm("x"),
                                                              S.Evaluate(_c(0))))
    with pytest.raises(GPUCodegenError, match="cannot report failures"):
        opencl.opencl_source([k3])


def test_exported_module_loads_with_the_runtime_alone(tmp_path):
    k1, _ = _scale_kernel("scale_k0", 32)

    def body(A, B, n, alpha):
        return _launch("scale_k0", E.FloorDiv(n + 31, _c(32)), 32, A.data, B.data, n, alpha)

    path = str(tmp_path / "scale.so")
    opencl.build([_host("scale", body), k1]).export_library(path)
    script = textwrap.dedent(f"""
        import sys, numpy as np
        import tvmpy.runtime as rt
        m = rt.load_module({path!r})
        dev = rt.opencl(0)
        a = np.arange(1, 71, dtype="float32")
        b = rt.ndarray.empty((70,), "float32", dev)
        m(rt.ndarray.array(a, dev), b, 0.5)
        assert np.allclose(b.numpy(), a * 0.5), b.numpy()
        bad = [n for n in sys.modules if n.startswith("tvmpy.") and n != "tvmpy.ir" and not
               n.startswith(("tvmpy.runtime", "tvmpy.ir.dtype", "tvmpy.config"))]
        assert not bad, bad
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]


def test_program_build_error_carries_the_log():
    # a kernel calling an external function the OpenCL compiler does not know
    m = E.Var("m", I32)
    X = decl_buffer((m,), "float32", "x")
    tx = _axis("threadIdx.x")
    call = E.Call("float32", "call_pure_extern", [E.StringImm("no_such_fn"), E.BufferLoad(X, [tx.var])])
    body = S.AttrStmt(tx, "thread_extent", _c(4), S.BufferStore(X, call, [tx.var]))
    px = E.Var("x", "handle")
    k = PrimFunc([px, m], body, {px: X}, {"calling_conv": "device_kernel", "global_symbol": "kx"})
    host = PrimFunc([px], _launch("kx", _c(1), 4, X.data, _c(4)), {px: X},
                    {"global_symbol": "callx"})
    mod = opencl.build([host, k])
    with pytest.raises(RuntimeError, match="(?s)OpenCL program build failed.*no_such_fn"):
        mod(np.ones(4, "float32"))
