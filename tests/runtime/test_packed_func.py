"""The PackedFunc registry as TVM documents it: ``tvm.register_func`` (direct and decorator
forms, ``override``), ``tvm.get_global_func`` (``allow_missing``), ``tvm.runtime.convert``,
``tvm.runtime.PackedFunc``; C packed functions called from Python with checked arguments."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te, tir


def test_register_forms_and_lookup():
    def add(a, b):
        return a + b

    f = tvm.register_func("test.pf.add", add, override=True)
    assert isinstance(f, tvm.runtime.PackedFunc)
    assert tvm.get_global_func("test.pf.add")(2, 40) == 42

    @tvm.register_func("test.pf.mul", override=True)
    def mul(a, b):
        return a * b

    assert isinstance(mul, tvm.runtime.PackedFunc) and mul(6, 7) == 42
    assert tvm.get_global_func("test.pf.mul")(1.5, 4) == 6.0

    @tvm.register_func
    def test_pf_own_name(x):  # registered under the function's own name
        return -x

    try:
        assert tvm.get_global_func("test_pf_own_name")(3) == -3
        assert "test_pf_own_name" in tvm.list_global_func_names()
    finally:
        tvm.runtime.remove_global_func("test_pf_own_name")
    assert tvm.get_global_func("test_pf_own_name", allow_missing=True) is None


def test_duplicate_needs_override():
    tvm.register_func("test.pf.dup", lambda: 1, override=True)
    with pytest.raises(ValueError, match="already registered.*override=True"):
        tvm.register_func("test.pf.dup", lambda: 2)
    assert tvm.get_global_func("test.pf.dup")() == 1
    tvm.register_func("test.pf.dup", lambda: 2, override=True)
    assert tvm.get_global_func("test.pf.dup")() == 2


def test_bad_registrations_and_lookups():
    with pytest.raises(ValueError, match="Cannot find global function 'test.pf.nowhere'"):
        tvm.get_global_func("test.pf.nowhere")
    assert tvm.get_global_func("test.pf.nowhere", allow_missing=True) is None
    with pytest.raises(TypeError, match="expected a callable"):
        tvm.register_func("test.pf.bad", 3)
    with pytest.raises(ValueError, match="function name"):
        tvm.register_func(3, lambda: 0)
    with pytest.raises(TypeError, match="name"):
        tvm.get_global_func(None)
    with pytest.raises(ValueError, match="Cannot find"):
        tvm.runtime.remove_global_func("test.pf.nowhere")


def test_convert():
    n = tvm.runtime.convert(1024)
    assert isinstance(n, tir.IntImm) and n.dtype == "int32" and n.value == 1024
    assert tvm.runtime.convert(2**40).dtype == "int64"
    x = tvm.runtime.convert(0.5)
    assert isinstance(x, tir.FloatImm) and x.dtype == "float32"
    assert tvm.runtime.convert(np.float64(0.25)).dtype == "float64"
    shape = tvm.runtime.convert((3, 5))
    assert [s.value for s in shape] == [3, 5]
    assert tvm.runtime.convert({"a": [1]})["a"][0].value == 1
    v = te.var("v")
    assert tvm.runtime.convert(v) is v
    assert tvm.runtime.convert("s") == "s" and tvm.runtime.convert(None) is None
    f = tvm.runtime.convert(lambda a: a + 1)
    assert isinstance(f, tvm.runtime.PackedFunc) and f(1) == 2
    with pytest.raises(TypeError, match="convert"):
        tvm.runtime.convert(object())
    # TVM's use: a constant extent in a compute declaration
    A = te.placeholder((n,), name="A")
    assert A.shape[0].value == 1024


def test_c_packed_function_checks_its_arguments():
    f = tvm.get_global_func("tvm.contrib.cblas.matmul")
    assert f.is_c
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (7, 3)).astype("float32")
    b = rng.uniform(-1, 1, (3, 11)).astype("float32")
    c = tvm.nd.empty((7, 11), "float32")
    f(tvm.nd.array(a), tvm.nd.array(b), c, False, False)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5, atol=1e-6)
    # numpy arrays pass too, strided views included (their strides go in the DLTensor)
    big = rng.uniform(-1, 1, (7, 9)).astype("float32")
    out = np.zeros((7, 11), "float32")
    f(big[:, 2:5], b, out, False, False)
    np.testing.assert_allclose(out, big[:, 2:5] @ b, rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="shapes do not match"):
        f(tvm.nd.array(a), tvm.nd.array(a), c, False, False)
    with pytest.raises(RuntimeError, match="argument 1 must be an array"):
        f(tvm.nd.array(a), 3.0, c, False, False)
    with pytest.raises(RuntimeError, match="float32 or float64"):
        f(tvm.nd.array(a.astype("int32")), tvm.nd.array(b), c, False, False)
    with pytest.raises(RuntimeError, match="dtype"):
        f(tvm.nd.array(a), tvm.nd.array(b.astype("float64")), c, False, False)
    with pytest.raises(RuntimeError, match="3 arguments|got 2 arguments"):
        f(tvm.nd.array(a), tvm.nd.array(b))
    with pytest.raises(RuntimeError, match="last axis must be contiguous"):
        f(big[:, ::3], b, out, False, False)
    with pytest.raises(TypeError, match="cannot be passed"):
        f(tvm.nd.array(a), [1, 2], c, False, False)


def test_ffi_spelling():
    """TVM's own files spell the registry ``tvm._ffi.register_func`` / ``get_global_func``."""
    @tvm._ffi.register_func("test.pf.ffi", override=True)
    def ffi(x):
        return x * 3

    assert tvm._ffi.get_global_func("test.pf.ffi")(5) == 15
    assert tvm.get_global_func("test.pf.ffi") is ffi


def test_provider_that_fails_to_load(monkeypatch):
    """A runtime provider that cannot load (e.g. no BLAS): allow_missing gives None, as TVM's
    "not compiled with cblas" check expects, and the error names the cause."""
    from tvmpy.runtime import packed_func

    def broken() -> None:
        raise RuntimeError("no CBLAS library found")

    monkeypatch.setitem(packed_func._BUILTINS, "test.provider.", broken)
    monkeypatch.setattr(packed_func, "_builtin_errors", {})
    assert tvm.get_global_func("test.provider.f", allow_missing=True) is None
    with pytest.raises(ValueError, match="provider failed to load.*no CBLAS library found"):
        tvm.get_global_func("test.provider.f")
