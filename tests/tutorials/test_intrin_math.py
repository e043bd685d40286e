"""The steps of TVM's tutorial "Intrinsics and Math Functions", in our own code: an external math
function called directly, the unified intrinsic (``te.exp``) per target, a target's lowering of
it overridden with ``register_intrin_lowering``, and a custom intrinsic declared with
``register_op_attr``. CUDA is checked as generated source that NVRTC compiles; llvm runs."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.contrib import nvcc
from tvmpy.ir import op as irop
from tvmpy.target import intrin as tintrin


@pytest.fixture
def registry():
    """Registrations are process-global: undo this test's."""
    saved = ({k: dict(v) for k, v in tintrin.RULES.items()}, dict(tintrin._LEVELS),
             {k: dict(v) for k, v in irop._ATTRS.items()}, set(irop._DECLARED))
    yield
    for live, old in zip((tintrin.RULES, tintrin._LEVELS, irop._ATTRS), saved):
        live.clear()
        live.update(old)  # type: ignore[attr-defined]
    irop._DECLARED.clear()
    irop._DECLARED.update(saved[3])


def _unary_schedule(fcompute, gpu: bool):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute(A.shape, lambda i: fcompute(A[i]), name="B")
    s = te.create_schedule(B.op)
    if gpu:
        bx, tx = s[B].split(B.op.axis[0], factor=64)
        s[B].bind(bx, te.thread_axis("blockIdx.x"))
        s[B].bind(tx, te.thread_axis("threadIdx.x"))
    return s, A, B


def _cuda_source(fcompute, name: str) -> str:
    s, A, B = _unary_schedule(fcompute, gpu=True)
    f = tvm.build(s, [A, B], "cuda", name=name)
    src = f.imported_modules[0].get_source()
    assert nvcc.compile_cuda(src)  # the generated CUDA C compiles (NVRTC)
    return src


def _run_llvm(fcompute, x: np.ndarray) -> np.ndarray:
    s, A, B = _unary_schedule(fcompute, gpu=False)
    f = tvm.build(s, [A, B], "llvm")
    b = tvm.nd.empty(x.shape, "float32")
    f(tvm.nd.array(x), b)
    return b.numpy()


X = np.random.default_rng(26).uniform(0.25, 3.0, 37).astype("float32")  # n=37: not a block multiple


def test_direct_extern_call():
    src = _cuda_source(lambda a: tvm.tir.call_pure_extern("float32", "__expf", a), "myexp")
    assert "__expf(" in src
    out = _run_llvm(lambda a: tvm.tir.call_pure_extern("float32", "expf", a), X)
    tvm.testing.assert_allclose(out, np.exp(X), rtol=1e-6)


def test_unified_intrinsic_per_target():
    src = _cuda_source(te.exp, "myexp")
    assert "exp" in src
    s, A, B = _unary_schedule(te.exp, gpu=True)
    ocl = tvm.build(s, [A, B], "opencl", name="myexp").imported_modules[0].get_source()
    assert "exp" in ocl
    tvm.testing.assert_allclose(_run_llvm(te.exp, X), np.exp(X), rtol=1e-6)


def test_override_cuda_lowering(registry):
    seen = []

    def my_cuda_math_rule(call):
        name = call.op.name
        assert isinstance(call, tvm.tir.Call) and name.startswith("tir.")
        seen.append(name)
        if call.dtype == "float32":
            return tvm.tir.call_pure_extern("float32", f"{name[4:]}f", call.args[0])
        return call

    tvm.ir.register_intrin_lowering("tir.exp", target="cuda", f=my_cuda_math_rule, level=99)
    src = _cuda_source(te.exp, "myexp")
    assert seen == ["tir.exp"] and " expf(" in src
    # llvm is untouched by a cuda rule
    tvm.testing.assert_allclose(_run_llvm(te.exp, X), np.exp(X), rtol=1e-6)


def test_custom_intrinsic(registry):
    def mylog(x):
        return tvm.tir.call_intrin(x.dtype, "tir.mylog", x)

    def my_mylog_rule(call):
        if call.dtype == "float32":
            return tvm.tir.call_pure_extern("float32", "logf", call.args[0])
        return call

    tvm.ir.register_op_attr("tir.mylog", "TCallEffectKind", tvm.tir.CallEffectKind.Pure)
    tvm.ir.register_intrin_lowering("tir.mylog", target="cuda", f=my_mylog_rule, level=99)
    src = _cuda_source(mylog, "mylog")
    assert "logf(" in src
    with pytest.raises(ValueError, match="no lowering rule for target 'llvm'"):
        _run_llvm(mylog, X)
    tvm.ir.register_intrin_lowering("tir.mylog", target="llvm", f=my_mylog_rule, level=99)
    tvm.testing.assert_allclose(_run_llvm(mylog, X), np.log(X), rtol=1e-6)
