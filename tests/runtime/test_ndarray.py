"""NDArray: allocation, alignment, dtypes, copies, errors."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy.runtime import NDArray

rng = np.random.default_rng(1)
DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "bool"]


def _rand(shape, dtype):
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype.startswith(("int", "uint")):
        return rng.integers(0, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7,), (3, 1, 5), (1,), (0, 4), ()])
def test_array_roundtrip_and_alignment(dtype, shape):
    x = _rand(shape, dtype)
    a = tvm.nd.array(x)
    assert isinstance(a, NDArray)
    assert a.shape == shape and a.dtype == dtype and a.device == tvm.cpu(0)
    assert a.data_ptr % 64 == 0
    y = a.numpy()
    np.testing.assert_array_equal(y, x)
    assert y.dtype == x.dtype
    y[...] = 0 if dtype != "bool" else False
    np.testing.assert_array_equal(a.asnumpy(), x)  # numpy() is a copy


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_alignment(dtype):
    for n in (1, 3, 17, 1000):
        a = tvm.nd.empty((n, 3), dtype)
        assert a.data_ptr % 64 == 0 and a.shape == (n, 3) and a.dtype == dtype


def test_default_dtype_and_dtype_conversion():
    assert tvm.nd.empty((2,)).dtype == "float32"
    a = tvm.nd.array(np.arange(5), dtype="float32")
    assert a.dtype == "float32"
    np.testing.assert_array_equal(a.numpy(), np.arange(5, dtype="float32"))
    b = tvm.nd.array([[1, 2], [3, 4]], dtype="int8")
    assert b.dtype == "int8" and b.shape == (2, 2)
    c = tvm.nd.array(a)  # from an NDArray: a copy
    assert c.data_ptr != a.data_ptr
    np.testing.assert_array_equal(c.numpy(), a.numpy())


def test_copyfrom_copyto_setitem():
    x = _rand((4, 6), "float32")
    a = tvm.nd.empty((4, 6))
    assert a.copyfrom(x) is a
    np.testing.assert_array_equal(a.numpy(), x)
    b = tvm.nd.empty((4, 6))
    a.copyto(b)
    np.testing.assert_array_equal(b.numpy(), x)
    c = a.copyto(tvm.cpu(0))
    assert c.data_ptr != a.data_ptr and c.data_ptr % 64 == 0
    np.testing.assert_array_equal(c.numpy(), x)
    y = _rand((4, 6), "float32")
    a[:] = y
    np.testing.assert_array_equal(a.numpy(), y)
    a[:] = b
    np.testing.assert_array_equal(a.numpy(), x)
    a.copyfrom(np.ones((4, 6), "float64"))  # converted to the array's dtype
    assert a.dtype == "float32" and np.all(a.numpy() == 1)


def test_copy_errors():
    a = tvm.nd.empty((4, 6))
    with pytest.raises(ValueError, match=r"array has shape \(4, 6\), source has \(6, 4\)"):
        a.copyfrom(np.zeros((6, 4), "float32"))
    with pytest.raises(TypeError, match="copyto expects"):
        a.copyto(3)


def test_bad_allocation_requests():
    with pytest.raises(ValueError, match="unsupported dtype 'float8'"):
        tvm.nd.empty((2,), "float8")
    with pytest.raises(ValueError, match="scalar data type"):
        tvm.nd.empty((2,), "float32x4")
    with pytest.raises(TypeError, match="symbolic sizes"):
        tvm.nd.empty((tvm.te.var("n"),))
    with pytest.raises(ValueError, match=">= 0"):
        tvm.nd.empty((-1,))
    with pytest.raises(ValueError, match=r"no memory allocator for metal\(0\)"):
        tvm.nd.empty((2,), device=tvm.device("metal"))  # (cuda: tests/runtime/test_cuda_*.py)
    with pytest.raises(ValueError, match="unknown device"):
        tvm.nd.array(np.zeros(2), device="tpu")
    with pytest.raises(ValueError, match="unsupported dtype 'complex128'"):
        tvm.nd.array(np.zeros(2, complex))


def test_misc_properties():
    a = tvm.nd.array(np.arange(12, dtype="int32").reshape(3, 4))
    assert a.ndim == 2 and a.size == 12 and len(a) == 3
    assert a.strides is None and a.is_contiguous
    assert a.handle.value == a.data_ptr
    assert np.asarray(a).sum() == 66
    assert "NDArray shape=(3, 4), cpu(0)" in repr(a)
    assert tvm.nd.cpu(0) == tvm.cpu(0)
    assert a.same_as(a) and not a.same_as(tvm.nd.array(a))


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                                  "float8_e5m2fnuz", "float4_e2m1fn", "float8_e8m0fnu", "int4",
                                  "uint4", "int2", "uint2"])
def test_low_precision_arrays_round_trip(name):
    """tvm.nd.array of an ml_dtypes array keeps dtype and bits; empty() of the name allocates
    ml_dtypes' storage (one byte per element for the 4- and 2-bit types)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    npd = np.dtype(getattr(ml_dtypes, name))
    src = np.random.default_rng(0).integers(0, 3, (3, 5)).astype(np.float32).astype(npd)
    a = tvm.nd.array(src)
    assert a.dtype == name and a.shape == (3, 5)
    out = a.numpy()
    assert out.dtype == npd and np.array_equal(out.view(np.uint8), src.view(np.uint8))
    e = tvm.nd.empty((7,), name)
    assert e.numpy().dtype == npd and e.numpy().nbytes == 7 * npd.itemsize


def test_one_aligned_allocator():
    """Every host buffer the runtime allocates comes from ndarray.aligned_empty (issue 30): the
    alignment is one constant, and the VM's fast NDArray is the same as ``nd.empty``'s."""
    from tvmpy.runtime import function, ndarray, vm
    from tvmpy.runtime.graph_executor import storage

    assert function.ALIGNMENT is vm.ALIGNMENT is storage.ALIGNMENT is ndarray.ALIGNMENT
    for shape, dtype, zero in [((0,), "float32", False), ((7, 3), "int8", True),
                               ((1, 5, 1), "float64", False), ((13,), "uint8", True)]:
        a = ndarray.aligned_empty(shape, dtype, zero=zero)
        assert a.shape == shape and a.dtype == np.dtype(dtype) and a.flags.c_contiguous
        assert a.ctypes.data % ndarray.ALIGNMENT == 0 and a.flags.writeable
        if zero:
            assert not a.any()
        f = ndarray.fresh_ndarray(shape, dtype, tvm.cpu(0))
        e = tvm.nd.empty(shape, dtype)
        assert (f.shape, f.dtype, f.device) == (e.shape, e.dtype, e.device)
        assert (f._ptr, f._compact_aligned) == (f._arr.ctypes.data, e._compact_aligned)


def _huge_page_regions() -> list[tuple[int, int]]:
    """Address ranges of this process's mappings that hold transparent huge pages."""
    regions, cur = [], None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and not head[0].endswith(":"):
                cur = tuple(int(v, 16) for v in head[0].split("-"))
            elif head and head[0] == "AnonHugePages:" and int(head[1]) > 0:
                regions.append(cur)
    return regions


@pytest.mark.parametrize("shape,dtype", [((1024, 512), "float32"), ((3, 700_001), "int8"),
                                         ((2 << 20,), "uint8"), ((524_289,), "float32")])
def test_large_buffers_start_on_huge_pages(shape, dtype):
    """Buffers of at least 2 MiB (weights, the arena) start on a 2 MiB boundary with their whole
    huge pages advised, zeroed when asked, and hold what is written even after the array that
    owned the mapping is gone (a view keeps it); HUGE_PAGES=0 gives plain 64-byte-aligned ones."""
    import sys

    from tvmpy import config
    from tvmpy.runtime import ndarray

    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    assert nbytes >= ndarray.HUGE_PAGE_BYTES
    a = ndarray.aligned_empty(shape, dtype, zero=True)
    assert a.shape == shape and a.dtype == np.dtype(dtype) and a.flags.c_contiguous
    assert a.flags.writeable and not a.any()
    if sys.platform.startswith("linux"):
        assert a.ctypes.data % ndarray.HUGE_PAGE_BYTES == 0
    x = _rand(shape, dtype)
    a[...] = x
    view = a[1:]
    del a
    np.testing.assert_array_equal(view, x[1:])
    nd = tvm.nd.array(x)
    np.testing.assert_array_equal(nd.numpy(), x)
    with config.config(HUGE_PAGES=0):
        b = ndarray.aligned_empty(shape, dtype, zero=True)
    assert b.ctypes.data % ndarray.ALIGNMENT == 0 and not b.any()


def test_huge_pages_taken_where_the_os_offers_them():
    """Where Linux offers transparent huge pages (THP mode ``always`` or ``madvise``), a touched
    8 MiB buffer lies in a mapping that holds some: the advice took effect, not only the
    alignment. (With THP ``never`` or off Linux only the alignment can be checked.)"""
    import os

    from tvmpy.runtime import ndarray

    a = ndarray.aligned_empty((8 << 20,), np.uint8)
    a[:] = 1  # huge pages are placed at first touch
    p = a.ctypes.data
    mode_file = "/sys/kernel/mm/transparent_hugepage/enabled"
    if not os.path.exists(mode_file) or "[never]" in open(mode_file).read():
        assert p % ndarray.ALIGNMENT == 0
        return
    assert p % ndarray.HUGE_PAGE_BYTES == 0
    assert any(lo <= p < hi for lo, hi in _huge_page_regions()), "no huge page behind the buffer"


def test_prefix_view():
    """ndarray.prefix_view (the VM's exact outputs of an upper-bound kernel): the first elements
    of a compact array at the same aligned address, the array itself at its own shape."""
    from tvmpy.runtime import ndarray

    a = ndarray.fresh_ndarray((4, 6), np.dtype("float32"), tvm.cpu(0))
    a.copyfrom(np.arange(24, dtype="float32").reshape(4, 6))
    assert ndarray.prefix_view(a, (4, 6)) is a
    v = ndarray.prefix_view(a, (3, 5))
    np.testing.assert_array_equal(v.numpy(), np.arange(15, dtype="float32").reshape(3, 5))
    assert v.data_ptr == a.data_ptr and v.device == a.device and v._compact_aligned
    v[...] = 0  # a view: writes reach ``a``
    assert not a.numpy().reshape(-1)[:15].any() and a.numpy().reshape(-1)[15] == 15
    e = ndarray.prefix_view(a, (0, 6))
    assert e.shape == (0, 6) and not e._compact_aligned
    with pytest.raises(ValueError, match="not a prefix"):
        ndarray.prefix_view(a, (5, 5))
    with pytest.raises(ValueError, match="not a prefix"):
        ndarray.prefix_view(NDArray(np.zeros((4, 6), "float32")[:, ::2]), (2,))
