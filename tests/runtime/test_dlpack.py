"""DLPack both ways: numpy always, torch when installed. Memory is shared, owners stay alive,
nothing leaks (the exporter's live table returns to its size), capsules are consumed once."""

import gc
import threading
import weakref

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy.runtime import dlpack

rng = np.random.default_rng(2)
DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "uint64", "bool"]


def _rand(shape, dtype):
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype.startswith(("int", "uint")):
        return rng.integers(0, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.fixture
def no_leak():
    gc.collect()
    before = len(dlpack._LIVE)
    yield
    gc.collect()
    assert len(dlpack._LIVE) == before, "exported DLPack tensors were not released"


# ---- numpy -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_from_ndarray_shares_memory(dtype, no_leak):
    x = _rand((3, 5), dtype)
    a = tvm.nd.array(x)
    v = np.from_dlpack(a)
    assert v.dtype == x.dtype and v.shape == (3, 5)
    np.testing.assert_array_equal(v, x)
    assert v.ctypes.data == a.data_ptr
    v[1, 2] = not v[1, 2] if dtype == "bool" else 7
    assert a.numpy()[1, 2] == v[1, 2]


def test_owner_kept_alive(no_leak):
    a = tvm.nd.array(np.arange(1000, dtype="float32"))
    ref = weakref.ref(a)
    v = np.from_dlpack(a)
    del a
    gc.collect()
    assert ref() is not None  # the consumer keeps the NDArray alive
    np.testing.assert_array_equal(v, np.arange(1000, dtype="float32"))
    del v
    gc.collect()
    assert ref() is None


def test_unconsumed_capsule_is_freed(no_leak):
    a = tvm.nd.array(np.ones(4, "float32"))
    ref = weakref.ref(a)
    cap = a.__dlpack__()
    cap2 = a.__dlpack__(max_version=(1, 0))
    assert type(cap).__name__ == "PyCapsule"
    del a, cap, cap2
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("versioned", [False, True])
def test_capsule_roundtrip_and_single_use(versioned, no_leak):
    a = tvm.nd.array(_rand((4, 3), "float32"))
    cap = a.__dlpack__(max_version=(1, 0) if versioned else None)
    b = tvm.nd.from_dlpack(cap)
    assert b.data_ptr == a.data_ptr
    np.testing.assert_array_equal(b.numpy(), a.numpy())
    with pytest.raises(BufferError, match="consumed only once"):
        tvm.nd.from_dlpack(cap)
    del b, cap


@pytest.mark.parametrize("dtype", DTYPES)
def test_ndarray_from_numpy_shares_memory(dtype):
    x = _rand((6, 2), dtype)
    a = tvm.nd.from_dlpack(x)
    assert a.dtype == dtype and a.shape == (6, 2)
    assert a.data_ptr == x.ctypes.data
    a[0, 0] = x[1, 1]
    assert x[0, 0] == x[1, 1]
    np.testing.assert_array_equal(a.numpy(), x)


def test_from_ndarray_to_ndarray(no_leak):
    a = tvm.nd.array(_rand((5,), "int32"))
    b = tvm.nd.from_dlpack(a)
    assert b.data_ptr == a.data_ptr and b.device == a.device


@pytest.mark.parametrize("view", [lambda x: x[::2, 1:], lambda x: x.T, lambda x: x[::-1],
                                  lambda x: x[2:3, :], lambda x: x[:, 3]])
def test_noncontiguous_numpy_views(view):
    x = _rand((6, 5), "float64")
    v = view(x)
    a = tvm.nd.from_dlpack(v)
    assert a.shape == v.shape
    np.testing.assert_array_equal(a.numpy(), v)
    assert a.data_ptr == v.ctypes.data  # a view, not a copy
    back = np.from_dlpack(a)  # re-exported with its strides
    np.testing.assert_array_equal(back, v)
    c = tvm.nd.array(a)  # compact copy
    assert c.is_contiguous and c.data_ptr % 64 == 0
    np.testing.assert_array_equal(c.numpy(), v)


def test_read_only_numpy():
    x = np.arange(4.0)
    x.flags.writeable = False
    a = tvm.nd.from_dlpack(x)
    with pytest.raises(ValueError, match="read-only"):
        a.copyfrom(np.zeros(4))
    with pytest.raises(ValueError, match="read-only"):
        a[:] = 1
    assert not np.from_dlpack(a).flags.writeable  # versioned export keeps the flag
    with pytest.raises(BufferError, match="read-only"):
        a.__dlpack__()


def test_scalar_and_empty():
    a = tvm.nd.from_dlpack(np.array(3.5, "float32"))
    assert a.shape == () and float(a.numpy()) == 3.5
    e = tvm.nd.from_dlpack(np.zeros((0, 3), "int8"))
    assert e.shape == (0, 3)
    assert np.from_dlpack(tvm.nd.empty((0, 2))).shape == (0, 2)


def test_copy_export_and_device_checks(no_leak):
    a = tvm.nd.array(np.ones(3, "float32"))
    v = np.from_dlpack(a, copy=True)
    assert v.ctypes.data != a.data_ptr
    np.testing.assert_array_equal(v, 1)
    with pytest.raises(BufferError, match="cannot export"):
        a.__dlpack__(dl_device=(2, 0))
    with pytest.raises(TypeError, match="__dlpack__"):
        tvm.nd.from_dlpack([1, 2, 3])


def test_kernel_writes_into_shared_numpy(kmod):
    a, b = _rand((33,), "float32"), _rand((33,), "float32")
    out = np.zeros(33, "float32")
    kmod(tvm.nd.from_dlpack(a), tvm.nd.from_dlpack(b), tvm.nd.from_dlpack(out))
    np.testing.assert_allclose(out, a + b, rtol=1e-6)


# ---- torch -------------------------------------------------------------------------------------
TORCH_DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_torch_from_ndarray(torch, dtype, no_leak):
    x = _rand((4, 7), dtype)
    a = tvm.nd.array(x)
    t = torch.from_dlpack(a)
    assert t.data_ptr() == a.data_ptr
    assert tuple(t.shape) == (4, 7)
    np.testing.assert_array_equal(t.numpy(), x)
    t[0, 0] = 1
    assert a.numpy()[0, 0] == 1
    del t


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_ndarray_from_torch(torch, dtype):
    x = _rand((3, 4), dtype)
    t = torch.from_numpy(x.copy())
    a = tvm.nd.from_dlpack(t)
    assert a.data_ptr == t.data_ptr() and a.dtype == dtype
    np.testing.assert_array_equal(a.numpy(), x)
    a[1, 1] = x[0, 0]
    assert t[1, 1].item() == x[0, 0]


def test_torch_noncontiguous_and_lifetime(torch):
    t = torch.arange(24, dtype=torch.float32).reshape(4, 6)[:, 1::2].t()
    expect = t.numpy().copy()
    a = tvm.nd.from_dlpack(t)
    assert a.strides == tuple(t.stride())
    del t
    gc.collect()
    np.testing.assert_array_equal(a.numpy(), expect)  # the torch storage is still alive


def test_torch_tensor_freed_after_ndarray(torch):
    t = torch.ones(1000)
    ref = weakref.ref(t)
    a = tvm.nd.from_dlpack(t)
    del t
    gc.collect()
    np.testing.assert_array_equal(a.numpy(), 1)
    del a
    gc.collect()
    assert ref() is None


def test_torch_deleter_in_other_thread(torch, no_leak):
    a = tvm.nd.array(_rand((100,), "float32"))
    box = [torch.from_dlpack(a)]
    del a

    def drop():
        box.clear()  # the consumer frees the tensor in another thread
        gc.collect()

    th = threading.Thread(target=drop)
    th.start()
    th.join()


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                                  "float8_e5m2fnuz", "float8_e8m0fnu"])
def test_torch_low_precision_floats(torch, name):
    """bfloat16 and float8 both ways (DLPack's kDLBfloat and float8 codes), values kept."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    vals = np.array([1.5, -2.0, 0.25, 448.0 if "e4m3fn" == name[-6:] else 3.0, 0.0, -0.125, 7.0],
                    np.float32)
    if name == "float8_e8m0fnu":  # powers of two only
        vals = np.array([1.0, 2.0, 0.25, 2.0**-20, 2.0**100, 0.5, 8.0], np.float32)
    if not hasattr(torch, name):
        pytest.skip(f"this torch has no {name}")
    t = torch.from_numpy(vals).to(getattr(torch, name))
    a = tvm.nd.from_dlpack(t)
    assert a.dtype == name
    np.testing.assert_array_equal(a.numpy().astype(np.float32), t.float().numpy())
    b = tvm.nd.array(vals.astype(getattr(ml_dtypes, name)))
    back = torch.from_dlpack(b)
    assert back.dtype == getattr(torch, name)
    np.testing.assert_array_equal(back.float().numpy(), vals.astype(getattr(ml_dtypes, name))
                                  .astype(np.float32))


def test_subbyte_ints_not_exported():
    """int4 is one element per byte here; DLPack's int4 is packed: refused, not misdescribed."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = tvm.nd.array(np.arange(-3, 3).astype(ml_dtypes.int4))
    with pytest.raises(BufferError, match="one element per byte"):
        a.__dlpack__()


def test_kernel_on_torch_tensors(kmod, torch):
    a, b = torch.randn(64), torch.randn(64)
    c = torch.zeros(64)
    kmod(*(tvm.nd.from_dlpack(x) for x in (a, b, c)))
    torch.testing.assert_close(c, a + b)
    c2 = torch.zeros(32)
    kmod(*(tvm.nd.from_dlpack(x) for x in (a[::2], b[::2], c2)))  # strided: copied in
    torch.testing.assert_close(c2, a[::2] + b[::2])


def test_torch_legacy_capsule_and_array_copy(torch, no_leak):
    a = tvm.nd.array(_rand((2, 3), "float32"))
    t = torch.utils.dlpack.from_dlpack(a.to_dlpack())  # the legacy capsule API
    assert t.data_ptr() == a.data_ptr
    del t
    src = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    c = tvm.nd.array(src)  # nd.array copies a DLPack producer into aligned memory
    assert c.dtype == "int32" and c.data_ptr != src.data_ptr() and c.data_ptr % 64 == 0
    np.testing.assert_array_equal(c.numpy(), src.numpy())
    back = tvm.nd.from_dlpack(torch.utils.dlpack.to_dlpack(src))  # a raw torch capsule
    assert back.data_ptr == src.data_ptr()
