"""The CUDA runtime without a GPU: clear no-device errors, and every host-side path (arrays,
copies, launch plans, argument packing, module load, timing, export/load) on a fake driver."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy.runtime import cuda_module as cuda
from tvmpy.runtime import gpu_plan

from .cuda_fake import FakeDriver, view


def _add_kernel(drv, grid, block, shared, a, b, c, n):
    # C[i] = A[i] + B[i] for i < n, one thread per element
    total = grid[0] * block[0]
    assert total >= n
    view(c, n, "float32")[:] = view(a, n, "float32") + view(b, n, "float32")


PLAN = {"name": "vadd",
        "params": [{"name": "A", "kind": "buffer", "dtype": "float32", "shape": ["n"]},
                   {"name": "B", "kind": "buffer", "dtype": "float32", "shape": ["n"]},
                   {"name": "C", "kind": "buffer", "dtype": "float32", "shape": ["n"]}],
        "launches": [{"kernel": "vadd_kernel0",
                      "grid": [["floordiv", ["+", "n", 63], 64], 1, 1], "block": [64, 1, 1],
                      "shared": 0,
                      "args": [{"buffer": "A"}, {"buffer": "B"}, {"buffer": "C"},
                               {"expr": "n", "dtype": "int32"}]}]}


@pytest.fixture
def fake():
    drv = FakeDriver({"vadd_kernel0": (["handle"] * 3 + ["int32"], _add_kernel)})
    prev = cuda.set_driver(drv)
    yield drv
    cuda.set_driver(prev)


def test_no_gpu_errors():
    prev = cuda.set_driver(None)  # the real driver: this machine has none
    try:
        if cuda.device_exists(0):
            pytest.skip("a CUDA device is present")
        assert tvm.cuda(0).exist is False
        with pytest.raises(cuda.CUDAError, match="no CUDA device"):
            tvm.nd.array(np.zeros(3, "float32"), tvm.cuda(0))
        with pytest.raises(cuda.CUDAError, match="no CUDA device"):
            tvm.nd.empty((2,), "float32", tvm.cuda(0))
    finally:
        cuda.set_driver(prev)


def test_arrays_and_copies(fake):
    assert tvm.cuda(0).exist and not tvm.cuda(1).exist
    x = np.random.default_rng(0).standard_normal((3, 5)).astype("float32")
    a = tvm.nd.array(x, tvm.cuda(0))
    assert isinstance(a, cuda.CUDANDArray) and a.shape == (3, 5) and a.dtype == "float32"
    assert a.device == tvm.cuda(0) and a.__dlpack_device__() == (2, 0)
    np.testing.assert_array_equal(a.numpy(), x)
    b = tvm.nd.empty((3, 5), "float32", tvm.cuda(0))
    b.copyfrom(a)  # device to device
    np.testing.assert_array_equal(b.numpy(), x)
    c = a.copyto(tvm.cpu(0))  # device to host
    assert c.device == tvm.cpu(0)
    np.testing.assert_array_equal(c.numpy(), x)
    d = tvm.nd.array(c, tvm.cuda(0))  # host NDArray to device
    np.testing.assert_array_equal(d.numpy(), x)
    d[1] = 7.0
    assert (d.numpy()[1] == 7).all()
    with pytest.raises(ValueError, match="shape mismatch"):
        a.copyfrom(np.zeros((2, 2), "float32"))
    z = tvm.nd.empty((0,), "int32", tvm.cuda(0))
    assert z.numpy().shape == (0,)
    with pytest.raises(cuda.CUDAError, match="no CUDA device"):
        tvm.nd.empty((2,), "float32", tvm.cuda(3))
    n = len(fake.mem)
    del a, b, d, z
    assert len(fake.mem) == n - 4  # device memory freed with the arrays


def test_pack_params():
    holders, arr = cuda.pack_params([("handle", 0x7F0000001000), ("int32", -3),
                                     ("float32", 1.5), ("int64", 1 << 40), ("float16", 0.5)])
    import ctypes
    assert ctypes.c_uint64.from_address(arr[0]).value == 0x7F0000001000
    assert ctypes.c_int32.from_address(arr[1]).value == -3
    assert ctypes.c_float.from_address(arr[2]).value == 1.5
    assert ctypes.c_int64.from_address(arr[3]).value == 1 << 40
    assert ctypes.c_uint16.from_address(arr[4]).value == 0x3800
    with pytest.raises(cuda.CUDAError, match="cannot be passed"):
        cuda.pack_params([("float8", 1)])


def test_plan_expressions():
    env = {"n": 100, "m": -7}
    ev = gpu_plan.eval_expr
    assert ev(["floordiv", ["+", "n", 63], 64], env) == 2
    assert ev(["floordiv", "m", 2], env) == -4 and ev(["div", "m", 2], env) == -3
    assert ev(["floormod", "m", 3], env) == 2 and ev(["mod", "m", 3], env) == -1
    assert ev(["select", ["<", "n", 5], 1, ["max", "n", 3]], env) == 100
    assert ev(["min", ["*", "n", 2], 150], env) == 150
    with pytest.raises(gpu_plan.PlanError, match="unbound variable 'k'"):
        ev("k", env)
    with pytest.raises(gpu_plan.PlanError, match="unknown operator"):
        ev(["pow", 1, 2], env)
    with pytest.raises(gpu_plan.PlanError, match="division by zero"):
        ev(["floordiv", 1, 0], env)


@pytest.mark.parametrize("n", [1, 63, 64, 1000])
def test_launch_through_plan(fake, n):
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n).astype("float32"), rng.standard_normal(n).astype("float32")
    mod = cuda.CUDAModule("// cuda", b"// ptx", {"sm_90": b"CUBIN90"}, [PLAN], ["vadd_kernel0"])
    host = tvm.runtime.Module(None, {"functions": [], "entry": "vadd"}, type_key="llvm")
    host.import_module(mod)
    a, b = tvm.nd.array(x, tvm.cuda(0)), tvm.nd.array(y, tvm.cuda(0))
    c = tvm.nd.empty((n,), "float32", tvm.cuda(0))
    host(a, b, c)
    np.testing.assert_allclose(c.numpy(), x + y, rtol=1e-6)
    name, grid, block, shared, vals = fake.launches[-1]
    assert grid == ((n + 63) // 64, 1, 1) and block == (64, 1, 1) and shared == 0
    assert vals == [a.data_ptr, b.data_ptr, c.data_ptr, n]
    assert fake.loaded == [b"CUBIN90"]  # the cubin for the device's arch, loaded once
    res = host.time_evaluator("vadd", tvm.cuda(0), number=3, repeat=2)(a, b, c)
    assert len(res.results) == 2 and res.mean == pytest.approx(1e-3 / 3)


def test_ptx_fallback_and_missing_arch(fake):
    fake.arch = (8, 0)
    mod = cuda.CUDAModule("", b"PTX", {"sm_90": b"CUBIN90"}, [PLAN])
    a = tvm.nd.array(np.ones(4, "float32"), tvm.cuda(0))
    mod["vadd"](a, a, a)
    assert fake.loaded == [b"PTX"]
    mod2 = cuda.CUDAModule("", None, {"sm_90": b"CUBIN90"}, [PLAN])
    with pytest.raises(cuda.CUDAError, match="sm_80"):
        mod2["vadd"](a, a, a)


def test_argument_errors(fake):
    mod = cuda.CUDAModule("", b"PTX", {}, [PLAN])
    f = mod["vadd"]
    a = tvm.nd.array(np.ones(4, "float32"), tvm.cuda(0))
    b5 = tvm.nd.array(np.ones(5, "float32"), tvm.cuda(0))
    with pytest.raises(TypeError, match="takes 3 arguments"):
        f(a, a)
    with pytest.raises(TypeError, match="NDArray on a CUDA device"):
        f(a, np.ones(4, "float32"), a)
    with pytest.raises(TypeError, match="NDArray on a CUDA device"):
        f(a, tvm.nd.array(np.ones(4, "float32")), a)
    with pytest.raises(TypeError, match="must be float32"):
        f(a, tvm.nd.array(np.ones(4, "int32"), tvm.cuda(0)), a)
    with pytest.raises(ValueError, match="inconsistent|expected"):
        f(a, b5, a)
    assert not fake.launches
    e = tvm.nd.empty((0,), "float32", tvm.cuda(0))
    f(e, e, e)  # an empty grid: nothing launched
    assert not fake.launches


def test_dynamic_shared_over_48k(fake):
    plan = dict(PLAN, launches=[dict(PLAN["launches"][0], shared=64 * 1024)])
    mod = cuda.CUDAModule("", b"PTX", {}, [plan])
    a = tvm.nd.array(np.ones(4, "float32"), tvm.cuda(0))
    mod["vadd"](a, a, a)
    assert fake.dyn_shared == {"vadd_kernel0": 64 * 1024}
    assert fake.launches[-1][3] == 64 * 1024


def test_export_and_load(fake, tmp_path):
    mod = cuda.CUDAModule("extern \"C\" __global__ void vadd_kernel0() {}", b"PTX",
                          {"sm_90": b"\x7fELF\x00cubin"}, [PLAN], ["vadd_kernel0"])
    host = tvm.runtime.Module(None, {"functions": [], "entry": "vadd"}, type_key="llvm")
    host.import_module(mod)
    path = str(tmp_path / "vadd.so")
    host.export_library(path)
    loaded = tvm.runtime.load_module(path)
    cm = loaded.imported_modules[0]
    assert isinstance(cm, cuda.CUDAModule)
    assert cm.cubins == {"sm_90": b"\x7fELF\x00cubin"} and cm.ptx == b"PTX"
    assert "vadd_kernel0" in cm.get_source()
    x = np.arange(7, dtype="float32")
    a = tvm.nd.array(x, tvm.cuda(0))
    c = tvm.nd.empty((7,), "float32", tvm.cuda(0))
    loaded(a, a, c)
    np.testing.assert_array_equal(c.numpy(), 2 * x)


def test_dlpack_export_import(fake):
    x = np.arange(6, dtype="float32").reshape(2, 3)
    a = tvm.nd.array(x, tvm.cuda(0))
    b = tvm.nd.from_dlpack(a)  # round trip through a capsule of device memory
    assert isinstance(b, cuda.CUDANDArray) and b.data_ptr == a.data_ptr and b.shape == (2, 3)
    np.testing.assert_array_equal(b.numpy(), x)
    with pytest.raises(BufferError, match="cannot export cuda"):
        a.__dlpack__(dl_device=(1, 0))
