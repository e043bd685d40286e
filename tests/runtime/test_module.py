"""Module: calls through the ABI, argument checking, errors, imports, export/load round trip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy.runtime import Module, load_module
from tvmpy.runtime.device import Device

from . import kernels

rng = np.random.default_rng(0)


def rand(*shape, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


# ---- calls -------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 7, 97, 1024])
def test_vadd_symbolic_n(kmod, n):
    a, b = rand(n), rand(n)
    A, B, C = tvm.nd.array(a), tvm.nd.array(b), tvm.nd.empty((n,))
    kmod(A, B, C)
    np.testing.assert_allclose(C.numpy(), a + b, rtol=1e-6)
    assert kmod.entry_name == "vadd"
    assert kmod.type_key == "c"


def test_vadd_size_zero(kmod):
    A, B, C = (tvm.nd.empty((0,)) for _ in range(3))
    kmod(A, B, C)
    assert C.shape == (0,)


@pytest.mark.parametrize("n,k,m", [(1, 1, 1), (5, 3, 7), (13, 1, 31)])
def test_matmul_three_shape_vars(kmod, n, k, m):
    a, b = rand(n, k, dtype="float64"), rand(k, m, dtype="float64")
    c = tvm.nd.empty((n, m), "float64")
    kmod["mm"](tvm.nd.array(a), tvm.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-12)


def test_composite_dim(kmod):
    a = rng.integers(-100, 100, 11).astype("int32")
    B = tvm.nd.empty((22,), "int32")
    kmod.get_function("repeat2")(tvm.nd.array(a), B)
    np.testing.assert_array_equal(B.numpy(), np.repeat(a, 2))
    with pytest.raises(ValueError, match=r"argument B dim 0 must be n \* 2 = 22, got 21"):
        kmod["repeat2"](tvm.nd.array(a), tvm.nd.empty((21,), "int32"))


def test_scalar_params(kmod):
    a = rand(4, 5)
    B = tvm.nd.empty((4, 5))
    kmod["axpk"](tvm.nd.array(a), B, 1.5, 3)
    np.testing.assert_allclose(B.numpy(), a * 1.5 + 3, rtol=1e-6)
    kmod["axpk"](tvm.nd.array(a), B, np.float32(2), np.int64(-1))
    np.testing.assert_allclose(B.numpy(), a * 2 - 1, rtol=1e-6)
    with pytest.raises(TypeError, match="argument k must be an integer"):
        kmod["axpk"](tvm.nd.array(a), B, 1.5, 3.5)
    with pytest.raises(ValueError, match="k=4294967296 does not fit int32"):
        kmod["axpk"](tvm.nd.array(a), B, 1.5, 2**32)
    with pytest.raises(TypeError, match="argument alpha must be a number"):
        kmod["axpk"](tvm.nd.array(a), B, "x", 1)


def test_scalar_param_binds_shape(kmod):
    A = tvm.nd.empty((9,), "int64")
    kmod["iota"](A, 9)
    np.testing.assert_array_equal(A.numpy(), np.arange(9))
    with pytest.raises(ValueError, match="argument A dim 0 is 9, but n=8 from scalar argument n"):
        kmod["iota"](A, 8)


def test_declared_strides_copy_in_and_out(kmod):
    a = rand(3, 4)
    B = tvm.nd.empty((3, 4))
    kmod["strided_double"](tvm.nd.array(a), B)  # compact input: copied into the row-stride-8 layout
    np.testing.assert_allclose(B.numpy(), a * 2)
    wide = tvm.nd.array(rand(3, 8))
    view = tvm.nd.from_dlpack(wide.numpy()[:, :4])  # already has strides (8, 1)
    kmod["strided_double"](view, B)
    np.testing.assert_allclose(B.numpy(), view.numpy() * 2)


def test_bool_and_float16(kmod):
    n = 37
    a = rng.random(n) > 0.5
    c = rand(n).astype("float16")
    B, D = tvm.nd.empty((n,), "bool"), tvm.nd.empty((n,), "float16")
    kmod["not_and_copy16"](tvm.nd.array(a), B, tvm.nd.array(c), D)
    np.testing.assert_array_equal(B.numpy(), ~a)
    np.testing.assert_array_equal(D.numpy(), c)
    assert B.dtype == "bool" and D.dtype == "float16"


# ---- numpy arguments, non-contiguous and unaligned memory --------------------------------------
def _alignment_seen(kmod, arr):
    out = np.zeros(1, "int64")
    kmod["misalign"](arr, out)
    return int(out[0])


def test_numpy_arguments_written_back(kmod):
    a, b = rand(50), rand(50)
    c = np.zeros(50, "float32")
    kmod(a, b, c)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)


def test_pointers_are_always_aligned(kmod):
    raw = np.zeros(65, "float32")
    unaligned = raw[1:]
    assert unaligned.ctypes.data % 64 != 0
    assert _alignment_seen(kmod, unaligned) == 0
    assert _alignment_seen(kmod, tvm.nd.empty((64,))) == 0
    assert _alignment_seen(kmod, tvm.nd.from_dlpack(unaligned)) == 0


def test_noncontiguous_inputs_and_outputs(kmod):
    base_a, base_b = rand(40), rand(40)
    out = np.zeros(40, "float32")
    a, b, c = base_a[::2], base_b[::2], out[1::2]
    kmod(a, b, c)  # strided numpy views: copied compact, output copied back
    np.testing.assert_allclose(out[1::2], a + b, rtol=1e-6)
    assert np.all(out[0::2] == 0)
    A = tvm.nd.from_dlpack(base_a[::2])
    assert not A.is_contiguous and A.strides == (2,)
    C = tvm.nd.empty((20,))
    kmod(A, tvm.nd.array(b), C)
    np.testing.assert_allclose(C.numpy(), a + b, rtol=1e-6)


def test_read_only_input(kmod):
    a = rand(8)
    a.flags.writeable = False
    c = np.zeros(8, "float32")
    kmod(a, a, c)
    np.testing.assert_allclose(c, 2 * a)


def test_in_place_on_copied_array(kmod):
    raw = rand(41)
    x = raw[1:]  # unaligned: copied once, even though it is passed for both parameters
    expect = x * 3
    kmod["triple_into"](x, x)
    np.testing.assert_allclose(x, expect, rtol=1e-6)
    y = rand(40)[::-1]  # a strided view, twice
    expect = y * 3
    kmod["triple_into"](y, y)
    np.testing.assert_allclose(y, expect, rtol=1e-6)


def test_read_only_memory_never_written(kmod, tmp_path):
    path = tmp_path / "ro.npy"
    np.save(path, np.ones(64, "float32"))
    ro = np.load(path, mmap_mode="r")  # a read-only mapping: a write there would crash
    assert not ro.flags.writeable
    kmod["triple_into"](ro, np.ones(64, "float32"))  # the kernel writes into a scratch copy
    np.testing.assert_array_equal(ro, 1)
    ro_nd = tvm.nd.from_dlpack(ro)
    kmod["triple_into"](ro_nd, np.ones(64, "float32"))
    np.testing.assert_array_equal(ro, 1)
    del ro, ro_nd


# ---- argument errors ---------------------------------------------------------------------------
def test_wrong_argument_count(kmod):
    A = tvm.nd.empty((4,))
    with pytest.raises(TypeError, match=r"vadd\(\) takes 3 argument\(s\) \(A, B, C\), got 2"):
        kmod(A, A)
    with pytest.raises(TypeError, match="got 4"):
        kmod(A, A, A, A)


def test_wrong_shape(kmod):
    with pytest.raises(ValueError, match=r"argument C dim 0 is 5, but n=4 from argument A dim 0"):
        kmod(tvm.nd.empty((4,)), tvm.nd.empty((4,)), tvm.nd.empty((5,)))
    with pytest.raises(ValueError, match=r"argument A must have shape \(4, 5\), got \(5, 4\)"):
        kmod["axpk"](tvm.nd.empty((5, 4)), tvm.nd.empty((4, 5)), 1.0, 1)


def test_wrong_ndim(kmod):
    with pytest.raises(ValueError, match=r"argument A must have 1 dimension\(s\) \(n,\), got shape \(2, 2\)"):
        kmod(tvm.nd.empty((2, 2)), tvm.nd.empty((4,)), tvm.nd.empty((4,)))


def test_wrong_dtype(kmod):
    with pytest.raises(ValueError, match="argument B must have dtype float32, got float64"):
        kmod(tvm.nd.empty((4,)), tvm.nd.empty((4,), "float64"), tvm.nd.empty((4,)))
    with pytest.raises(ValueError, match="argument A must have dtype float32, got int32"):
        kmod(np.zeros(4, "int32"), np.zeros(4, "float32"), np.zeros(4, "float32"))


def test_wrong_argument_kind(kmod):
    with pytest.raises(TypeError, match="argument A must be a tvm.nd.NDArray or numpy.ndarray"):
        kmod([1.0, 2.0], tvm.nd.empty((2,)), tvm.nd.empty((2,)))


def test_wrong_device(kmod):
    A = tvm.nd.empty((4,))
    fake = tvm.nd.NDArray(np.zeros(4, "float32"), Device(2, 0))  # as if it lived on cuda(0)
    with pytest.raises(ValueError, match=r"argument B is on cuda\(0\), but vadd runs on cpu\(0\)"):
        kmod(A, fake, A)


def test_failed_assert_raises_with_message(kmod):
    f = kmod["check_positive"]
    f(tvm.nd.array(np.abs(rand(3))))
    with pytest.raises(RuntimeError, match=r"check_positive failed \(returned -1\): Assert fail: A\[0\] >= 0f"):
        f(tvm.nd.array(-np.abs(rand(3))))


def test_error_message_not_stale(kmod):
    with pytest.raises(RuntimeError, match="Assert fail"):
        kmod["check_positive"](-np.ones(2, "float32"))
    with pytest.raises(RuntimeError, match=r"^fail_silently failed \(returned -2\)$"):
        kmod["fail_silently"](np.ones(2, "float32"))


def test_unknown_function(kmod):
    with pytest.raises(AttributeError, match="no function 'nope'; functions: vadd, check_positive"):
        kmod.get_function("nope")
    assert "mm" in kmod and "nope" not in kmod


# ---- construction errors -----------------------------------------------------------------------
def test_bad_objects_and_compile_errors():
    with pytest.raises(ValueError, match="ELF"):
        Module.from_objects([b"not an object"], [], "f")
    with pytest.raises(RuntimeError, match="compiling C source failed"):
        Module.from_c_source("int f( {", [], "f")


def test_missing_symbol_is_reported():
    sig = {"name": "ghost", "params": [], "shape_vars": []}
    m = Module.from_c_source("int other(void) { return 0; }", [sig], "ghost")
    with pytest.raises(RuntimeError, match="ghost is in the module metadata but not in its library"):
        m()


def test_get_source(kmod):
    assert "int32_t vadd" in kmod.get_source()
    assert kmod.get_source("c") == kmod.get_source("")
    with pytest.raises(ValueError, match="no 'll' source"):
        kmod.get_source("ll")


# ---- imports -----------------------------------------------------------------------------------
EXTERN_SRC = "int32_t sq_kernel(float* a, int n) { for (int i = 0; i < n; ++i) a[i] *= a[i]; return 0; }"
CALLER_SRC = r"""
#include <stdint.h>
int32_t sq_kernel(float* a, int n);  /* defined in the imported module */
int32_t square(void* A, int32_t n) { return sq_kernel((float*)A, n); }
"""


def _square_sig():
    return {"name": "square", "params": [{"name": "A", "kind": "buffer", "dtype": "float32",
                                          "shape": ["n"], "strides": None}],
            "shape_vars": [{"name": "n", "dtype": "int32", "arg_index": 0, "dim": 0}]}


def test_imports_link_external_kernel():
    ext = Module.from_c_source("#include <stdint.h>\n" + EXTERN_SRC, [], "")
    m = Module.from_c_source(CALLER_SRC, [_square_sig()], "square", imports=[ext])
    a = rand(10)
    A = tvm.nd.array(a)
    m(A)
    np.testing.assert_allclose(A.numpy(), a * a, rtol=1e-6)
    assert m.imported_modules == [ext]


def test_import_module_lookup_and_duplicates(kmod):
    ext = Module.from_c_source("#include <stdint.h>\n" + EXTERN_SRC, [], "")
    m = Module.from_c_source(CALLER_SRC, [_square_sig()], "square", imports=[ext])
    m.import_module(kmod)
    assert m.get_function("vadd") is kmod.get_function("vadd")
    with pytest.raises(ValueError, match="cannot import itself"):
        m.import_module(m)
    with pytest.raises(TypeError):
        m.import_module("vadd")


# ---- export / load -----------------------------------------------------------------------------
LOADER = textwrap.dedent("""
    import sys, json
    import numpy as np
    from tvmpy.runtime import load_module
    import tvmpy as tvm
    m = load_module(sys.argv[1])
    a = np.arange(7, dtype="float32"); b = np.ones(7, "float32")
    c = tvm.nd.empty((7,))
    m(tvm.nd.array(a), tvm.nd.array(b), c)
    r = m["repeat2"](np.arange(3, dtype="int32"), out := np.zeros(6, "int32"))
    try:
        m["check_positive"](-np.ones(2, "float32"))
        err = None
    except RuntimeError as e:
        err = str(e)
    sq = None
    if "square" in m:
        x = np.full(4, 3.0, "float32"); m["square"](x); sq = x.tolist()
    print(json.dumps({"c": c.numpy().tolist(), "out": out.tolist(), "err": err,
                      "entry": m.entry_name, "sq": sq,
                      "compiler_modules": sorted(k for k in sys.modules
                                                 if k.startswith(("tvmpy.codegen", "llvmlite")))}))
""")


def _run_loader(path):
    env = dict(os.environ, CC="/nonexistent/cc")  # loading needs no compiler
    proc = subprocess.run([sys.executable, "-c", LOADER, path], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_export_and_load_in_fresh_process(kmod, tmp_path):
    path = str(tmp_path / "kernels.so")
    kmod.export_library(path)
    res = _run_loader(path)
    assert res["c"] == (np.arange(7) + 1.0).tolist()
    assert res["out"] == [0, 0, 1, 1, 2, 2]
    assert res["err"] == "check_positive failed (returned -1): Assert fail: A[0] >= 0f"
    assert res["entry"] == "vadd"
    assert res["compiler_modules"] == []


def test_export_with_imports_and_reexport(kmod, tmp_path):
    ext = Module.from_c_source("#include <stdint.h>\n" + EXTERN_SRC, [], "")
    m = Module.from_c_source(CALLER_SRC, [_square_sig()], "square", imports=[ext])
    kmod2 = kernels.build()
    kmod2.import_module(m)
    path = str(tmp_path / "all.so")
    kmod2.export_library(path)
    res = _run_loader(path)
    assert res["sq"] == [9.0] * 4
    # a loaded module re-exports by copying its file; a loaded module's functions work here too
    loaded = load_module(path)
    assert [len(x.imported_modules) for x in (loaded,)] == [1]
    copy = str(tmp_path / "copy.so")
    loaded.export_library(copy)
    assert _run_loader(copy)["sq"] == [9.0] * 4
    # but its code cannot be linked into another library
    fresh = kernels.build()
    fresh.import_module(loaded)
    with pytest.raises(RuntimeError, match="no object code to link"):
        fresh.export_library(str(tmp_path / "x.so"))


def test_export_duplicate_function_names(kmod, tmp_path):
    other = kernels.build()
    other.import_module(kmod)
    with pytest.raises(ValueError, match="'vadd' is defined by two modules"):
        other.export_library(str(tmp_path / "dup.so"))


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_module(str(tmp_path / "missing.so"))
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"garbage")
    with pytest.raises(RuntimeError, match="cannot load shared library"):
        load_module(str(bad))


def test_reexport_over_loaded_file(kmod, tmp_path):
    path = str(tmp_path / "k.so")
    kmod.export_library(path)
    loaded = load_module(path)
    kmod.export_library(path)  # replacing a file this process has mapped must not break it
    c = np.zeros(3, "float32")
    loaded(np.ones(3, "float32"), np.ones(3, "float32"), c)
    assert c.tolist() == [2.0, 2.0, 2.0]


def test_save_object_and_source(kmod, tmp_path):
    kmod.save(str(tmp_path / "k.c"))
    assert (tmp_path / "k.c").read_text() == kmod.get_source("c")
    kmod.save(str(tmp_path / "k.o"))
    assert (tmp_path / "k.o").read_bytes()[:4] == b"\x7fELF"
    from tvmpy.runtime.linker import compile_c

    two = Module.from_objects([compile_c("#include <stdint.h>\n" + EXTERN_SRC), compile_c(CALLER_SRC)],
                              [_square_sig()], "square")
    two.save(str(tmp_path / "two.o"))  # merged into one relocatable object
    again = Module.from_objects([(tmp_path / "two.o").read_bytes()], [_square_sig()], "square")
    x = np.full(3, 2.0, "float32")
    again(x)
    assert x.tolist() == [4.0] * 3
    with pytest.raises(ValueError, match="no 'll' source"):
        kmod.save(str(tmp_path / "k.ll"))


def test_load_rejects_newer_metadata(tmp_path):
    from tvmpy.runtime.linker import link_shared

    path = str(tmp_path / "v2.so")
    link_shared([], json.dumps({"version": 2, "functions": []}), path)
    with pytest.raises(ValueError, match="metadata version 2 is not supported"):
        load_module(path)


def test_reload_after_reexport_to_same_path(tmp_path):
    sig = {"name": "k", "params": [{"name": "A", "kind": "buffer", "dtype": "int32", "shape": [1],
                                    "strides": None}], "shape_vars": []}
    path = str(tmp_path / "same.so")
    for value in (1, 2, 3):
        m = Module.from_c_source(f"int k(int* a) {{ a[0] = {value}; return 0; }}", [sig], "k")
        m.export_library(path)
        a = np.zeros(1, "int32")
        load_module(path)(a)
        assert a[0] == value  # not the library loaded from this path before


def test_unloaded_module_exports(tmp_path):
    from tvmpy.runtime.linker import compile_c

    m = Module.from_objects([compile_c(kernels.C_SOURCE)], kernels.signatures(), "vadd",
                            load=False)
    assert "vadd" in m
    with pytest.raises(RuntimeError, match="was not loaded"):
        m(np.ones(2, "float32"), np.ones(2, "float32"), np.ones(2, "float32"))
    path = str(tmp_path / "unloaded.so")
    m.export_library(path)
    assert _run_loader(path)["c"] == (np.arange(7) + 1.0).tolist()
