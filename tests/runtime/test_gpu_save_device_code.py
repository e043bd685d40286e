"""TVM's split save of a GPU build: ``m.save("x.o")`` writes the host part (launch plans) only,
``m.imported_modules[0].save("x.cl" / "x.ptx" / "x.cu")`` the device code with its kernel list
(``x.tvm_meta.json``); ``load_module`` of each and ``host.import_module(dev)`` run it again.
OpenCL on PoCL; CUDA on the fake driver (tvmpy/testing/cuda_fake.py), its kernels either
emulated in numpy or the generated CUDA C compiled for the host."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.contrib import cc
from tvmpy.runtime import cuda_module
from tvmpy.testing.cuda_fake import FakeDriver, HostKernels, view

RNG = np.random.default_rng(2626)


def _opencl():
    dev = tvm.opencl(0)
    assert dev.exist, "no OpenCL device (install pyopencl + pocl-opencl-icd)"
    return dev


def _build(target, name="scaled_add", factor=32, op="add"):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    if op == "add":
        C = te.compute((n,), lambda i: A[i] * 2.0 + B[i], name="C")
    else:
        C = te.compute((n,), lambda i: A[i] - B[i], name="C")
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=factor)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    return tvm.build(s, [A, B, C], tvm.target.Target(target, host="llvm"), name=name)


def _host_library(mod, tmp_path, stem="host"):
    """The tutorial's host path: save the object, link it, load it."""
    obj, lib = str(tmp_path / f"{stem}.o"), str(tmp_path / f"{stem}.so")
    mod.save(obj)
    cc.create_shared(lib, [obj])
    return tvm.runtime.load_module(lib)


def _check(f, dev, n):
    a = RNG.uniform(-1, 1, n).astype("float32")
    b = RNG.uniform(-1, 1, n).astype("float32")
    c = tvm.nd.array(np.zeros(n, "float32"), dev)
    f(tvm.nd.array(a, dev), tvm.nd.array(b, dev), c)
    tvm.testing.assert_allclose(c.numpy(), a * 2.0 + b, rtol=1e-6)


# ---- OpenCL (PoCL) -----------------------------------------------------------------------------
def test_opencl_host_object_and_cl_file_round_trip(tmp_path):
    m = _build("opencl")
    m.imported_modules[0].save(str(tmp_path / "k.cl"))
    assert (tmp_path / "k.cl").read_text() == m.imported_modules[0].get_source()
    info = json.loads((tmp_path / "k.tvm_meta.json").read_text())["func_info"]
    assert info == {k: {"name": k, "arg_types": v} for k, v in m.plan["kernels"].items()}

    host = _host_library(m, tmp_path)
    assert host.imported_modules == [] and host.device_module is None  # host code only
    dev_mod = tvm.runtime.load_module(str(tmp_path / "k.cl"))
    assert dev_mod.type_key == "opencl" and dev_mod.get_source() == m.imported_modules[0].source
    host.import_module(dev_mod)
    assert host.imported_modules[0] is dev_mod
    for n in (1, 31, 100):  # one element, under one block, several blocks with a partial one
        _check(host, _opencl(), n)
    # the re-joined module exports as one library again
    host.export_library(str(tmp_path / "joined.so"))
    _check(tvm.runtime.load_module(str(tmp_path / "joined.so")), _opencl(), 45)


def test_host_module_without_device_code_names_the_fix(tmp_path):
    host = _host_library(_build("opencl"), tmp_path)
    a = tvm.nd.array(np.ones(4, "float32"), _opencl())
    with pytest.raises(RuntimeError, match="never imported.*import_module"):
        host(a, a, tvm.nd.empty((4,), "float32", _opencl()))
    with pytest.raises(RuntimeError, match="never imported"):
        host.time_evaluator(host.entry_name, _opencl())(a, a, a)


def test_device_module_alone_is_not_callable(tmp_path):
    m = _build("opencl")
    m.imported_modules[0].save(str(tmp_path / "k.cl"))
    dev_mod = tvm.runtime.load_module(str(tmp_path / "k.cl"))
    a = np.ones(4, "float32")
    with pytest.raises(RuntimeError, match="run only through the host module.*import_module"):
        dev_mod(a, a, a)
    with pytest.raises(RuntimeError, match="scaled_add_kernel0"):
        dev_mod["scaled_add_kernel0"]


def test_mismatched_device_code_is_refused(tmp_path):
    other = _build("opencl", name="other_sub", op="sub")
    other.imported_modules[0].save(str(tmp_path / "other.cl"))
    host = _host_library(_build("opencl"), tmp_path)
    with pytest.raises(ValueError, match="no kernel scaled_add_kernel0.*has: other_sub_kernel0"):
        host.import_module(tvm.runtime.load_module(str(tmp_path / "other.cl")))
    # same kernel name, other argument types
    m = _build("opencl")
    m.imported_modules[0].save(str(tmp_path / "k.cl"))
    meta = tmp_path / "k.tvm_meta.json"
    info = json.loads(meta.read_text())
    info["func_info"]["scaled_add_kernel0"]["arg_types"][-1] = "int64"
    meta.write_text(json.dumps(info))
    with pytest.raises(ValueError, match="kernel scaled_add_kernel0 takes .*int32.*int64"):
        host.import_module(tvm.runtime.load_module(str(tmp_path / "k.cl")))
    # a kernel list is needed; a CUDA file cannot serve an OpenCL host
    os.remove(meta)
    with pytest.raises(ValueError, match="needs its kernel list .*k.tvm_meta.json"):
        tvm.runtime.load_module(str(tmp_path / "k.cl"))
    assert host.device_module is None
    m.imported_modules[0].save(str(tmp_path / "k.cl"))
    host.import_module(tvm.runtime.load_module(str(tmp_path / "k.cl")))
    with pytest.raises(ValueError, match="already has its device module"):
        host.import_module(tvm.runtime.load_module(str(tmp_path / "k.cl")))
    _check(host, _opencl(), 40)


def test_device_save_formats():
    m = _build("opencl")
    with pytest.raises(ValueError, match="saved as .cl, not 'k.ptx'"):
        m.imported_modules[0].save("k.ptx")


# ---- CUDA (fake driver) ------------------------------------------------------------------------
def _emulate(drv, grid, block, shared, a, b, c, n):
    assert grid[0] * block[0] >= n and block == (32, 1, 1)
    view(c, n, "float32")[:] = view(a, n, "float32") * 2.0 + view(b, n, "float32")


@pytest.fixture(scope="module")
def cuda_add():
    return _build("cuda")


def test_cuda_ptx_file_round_trip(cuda_add, tmp_path):
    dm = cuda_add.imported_modules[0]
    dm.save(str(tmp_path / "k.ptx"))
    assert (tmp_path / "k.ptx").read_bytes() == dm.binaries["ptx"]
    host = _host_library(cuda_add, tmp_path)
    dev_mod = tvm.runtime.load_module(str(tmp_path / "k.ptx"))
    assert dev_mod.binaries == {"ptx": dm.binaries["ptx"]} and ".entry scaled_add_kernel0" in \
        dev_mod.get_source()
    with pytest.raises(ValueError, match="loaded without its source; save it as .ptx"):
        dev_mod.save(str(tmp_path / "again.cu"))
    host.import_module(dev_mod)
    drv = FakeDriver({"scaled_add_kernel0": (["handle"] * 3 + ["int32"], _emulate)})
    prev = cuda_module.set_driver(drv)
    try:
        for n in (1, 77):
            _check(host, tvm.cuda(0), n)
    finally:
        cuda_module.set_driver(prev)
    assert drv.loaded == [dm.binaries["ptx"]]  # the saved PTX is what the driver got


def test_cuda_source_file_runs_host_emulated(cuda_add, tmp_path):
    """``.cu``: the CUDA C, compiled when loaded (NVRTC); the kernels here run as the generated
    C compiled for the host, thread by thread."""
    cuda_add.imported_modules[0].save(str(tmp_path / "k.cu"))
    host = _host_library(cuda_add, tmp_path)
    dev_mod = tvm.runtime.load_module(str(tmp_path / "k.cu"))
    assert dev_mod.get_source() == cuda_add.imported_modules[0].get_source()
    host.import_module(dev_mod)
    kernels = HostKernels(dev_mod.get_source(), host.plan["kernels"], str(tmp_path))
    prev = cuda_module.set_driver(FakeDriver(kernels.kernels))
    try:
        _check(host, tvm.cuda(0), 70)
    finally:
        cuda_module.set_driver(prev)


def test_cuda_host_refuses_opencl_device_code(cuda_add, tmp_path):
    _build("opencl").imported_modules[0].save(str(tmp_path / "k.cl"))
    host = _host_library(cuda_add, tmp_path)
    with pytest.raises(ValueError, match="launches cuda kernels; the device module holds opencl"):
        host.import_module(tvm.runtime.load_module(str(tmp_path / "k.cl")))
    with pytest.raises(ValueError, match="saved as .cu or .ptx, not 'k.cubin'"):
        cuda_add.imported_modules[0].save("k.cubin")
    with pytest.raises(ValueError, match="cannot load device code of format 'cubin'"):
        tvm.runtime.load_module(str(tmp_path / "k.cl"), fmt="cubin")
