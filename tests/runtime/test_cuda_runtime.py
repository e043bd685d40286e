"""The CUDA runtime without a GPU: clear no-device errors, and every host-side path (arrays,
copies, launch plans, argument packing, module load, timing, export/load) on a fake driver."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy.runtime import cuda_module as cuda
from tvmpy.testing.cuda_fake import FakeDriver, view


def _add_kernel(drv, grid, block, shared, a, b, c, n):
    # C[i] = A[i] + B[i] for i < n, one thread per element
    assert grid[0] * block[0] >= n
    view(c, n, "float32")[:] = view(a, n, "float32") + view(b, n, "float32")


@pytest.fixture
def fake():
    drv = FakeDriver({"vadd_kernel0": (["handle"] * 3 + ["int32"], _add_kernel)})
    prev = cuda.set_driver(drv)
    yield drv
    cuda.set_driver(prev)


def test_no_gpu_errors():
    prev = cuda.set_driver(None)  # the real driver: this machine has none
    try:
        if cuda.CUDA_API.exist(0):
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
    assert a.shape == (3, 5) and a.dtype == "float32"
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
    import gc
    gc.collect()
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


def test_launch_and_binaries(fake):
    api = cuda.CUDA_API
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(100).astype("float32"), rng.standard_normal(100).astype("float32")
    a, b = tvm.nd.array(x, tvm.cuda(0)), tvm.nd.array(y, tvm.cuda(0))
    c = tvm.nd.empty((100,), "float32", tvm.cuda(0))
    prog = api.load_binaries({"ptx": b"PTX", "sm_90": b"CUBIN90", "sm_80": b"CUBIN80"}, 0)
    assert fake.loaded == [b"CUBIN90"]  # the cubin of the device's arch
    assert api.load_binaries({"ptx": b"PTX", "sm_90": b"CUBIN90"}, 0) is prog  # cached
    api.launch(prog, "vadd_kernel0", [2, 1, 1], [64, 1, 1], 0,
               [a._mem, b._mem, c._mem, np.int32(100)], 0)
    np.testing.assert_allclose(c.numpy(), x + y, rtol=1e-6)
    name, grid, block, shared, vals = fake.launches[-1]
    assert (grid, block, vals) == ((2, 1, 1), (64, 1, 1), [a._mem.ptr, b._mem.ptr, c._mem.ptr, 100])
    api.launch(prog, "vadd_kernel0", [1, 1, 1], [128, 1, 1], 64 * 1024,
               [a._mem, b._mem, c._mem, np.int32(3)], 0)
    assert fake.dyn_shared == {"vadd_kernel0": 64 * 1024}  # opted in above 48 KiB
    with pytest.raises(ValueError, match="at most 1024"):
        api.launch(prog, "vadd_kernel0", [1, 1, 1], [64, 32, 1], 0, [], 0)
    with pytest.raises(cuda.CUDAError, match="cannot pass argument"):
        api.launch(prog, "vadd_kernel0", [1, 1, 1], [64, 1, 1], 0, [3], 0)
    fake.arch = (8, 6)
    cuda.CUDA_API._reset()
    api.load_binaries({"ptx": b"PTX", "sm_90": b"CUBIN90"}, 0)
    assert fake.loaded[-1] == b"PTX"  # no cubin for sm_86: the driver JITs the PTX
    with pytest.raises(cuda.CUDAError, match="sm_86"):
        api.load_binaries({"sm_90": b"CUBIN90"}, 0)


def test_dlpack_export_import(fake):
    x = np.arange(6, dtype="float32").reshape(2, 3)
    a = tvm.nd.array(x, tvm.cuda(0))
    b = tvm.nd.from_dlpack(a)  # round trip through a capsule of device memory
    assert b._mem.ptr == a._mem.ptr and b.shape == (2, 3) and b.device == tvm.cuda(0)
    np.testing.assert_array_equal(b.numpy(), x)
    with pytest.raises(BufferError, match="cannot export cuda"):
        a.__dlpack__(dl_device=(1, 0))


def test_device_attributes(fake):
    dev = tvm.cuda(0)
    assert dev.compute_version == "9.0" and dev.device_name == "Fake H100"
    assert dev.max_threads_per_block == 1024 and dev.warp_size == 32
    assert dev.max_shared_memory_per_block == 49152 and dev.multi_processor_count == 132
    with pytest.raises(AttributeError, match="GPU device attribute"):
        _ = tvm.cpu(0).compute_version


_BUILD_CUDA = r"""
import sys
import tvmpy as tvm
from tvmpy import te
n = te.var("n")
A = te.placeholder((n,), name="A")
B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
s = te.create_schedule(B.op)
bx, tx = s[B].split(B.op.axis[0], factor=32)
s[B].bind(bx, te.thread_axis("blockIdx.x"))
s[B].bind(tx, te.thread_axis("threadIdx.x"))
tvm.build(s, [A, B], target="cuda", name="affine").export_library(sys.argv[1])
"""

_LOAD_CUDA = r"""
import json, sys
for blocked in ("llvmlite", "onnx", "onnxruntime", "torch", "nvidia", "cuda"):
    sys.modules[blocked] = None  # importing them now raises ImportError
import numpy as np
import tvmpy.runtime as runtime
from tvmpy.runtime import cuda_module
from tvmpy.testing.cuda_fake import FakeDriver, view

def affine(drv, grid, block, shared, a, b, n):
    view(b, n, "float32")[:] = view(a, n, "float32") * 2 + 1

drv = FakeDriver({"affine_kernel0": (["handle", "handle", "int32"], affine)})
cuda_module.set_driver(drv)
m = runtime.load_module(sys.argv[1])
x = np.arange(70, dtype="float32")
out = runtime.ndarray.empty((70,), "float32", runtime.cuda(0))
m(runtime.ndarray.array(x, runtime.cuda(0)), out)
np.testing.assert_array_equal(out.numpy(), x * 2 + 1)
assert drv.loaded and drv.loaded[0][:4] == b"\x7fELF"  # the embedded sm_90 cubin
print(json.dumps(sorted(m for m in sys.modules if m == "tvmpy" or m.startswith("tvmpy."))))
"""


def test_exported_cuda_module_loads_with_the_runtime_alone(tmp_path):
    """An exported CUDA module loads and launches (fake driver) in a process without the
    compiler, llvmlite, the NVIDIA wheels or cuda-python: PTX and cubins are embedded."""
    import json
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root)
    path = str(tmp_path / "affine.so")
    for code, extra in ((_BUILD_CUDA, {}), (_LOAD_CUDA, {"CC": "/bin/false"})):
        proc = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True,
                              env=dict(env, **extra), timeout=300, cwd=root)
        assert proc.returncode == 0, proc.stderr[-4000:]
    loaded = json.loads(proc.stdout.splitlines()[-1])
    allowed = {"tvmpy", "tvmpy.config", "tvmpy.ir", "tvmpy.ir.dtype", "tvmpy.testing",
               "tvmpy.testing.utils",  # stdlib + numpy only (tvm.testing's helpers)
               "tvmpy.testing.cuda_fake"}
    outside = [m for m in loaded if m not in allowed and not m.startswith("tvmpy.runtime")]
    assert not outside, f"loading and running an exported CUDA module imported {outside}"
