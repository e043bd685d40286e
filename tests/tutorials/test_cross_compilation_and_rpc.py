"""The steps of TVM's tutorial "Cross Compilation and RPC", in our own code: a vector add-one
compiled for this machine, exported as ``lib.tar``, uploaded to an RPC server (a local session,
a loopback server process, and an AArch64 server under qemu-user when its sysroot is set up),
loaded there, run, checked against numpy and timed with ``time_evaluator``; cross-compiled for
32-bit ARM (``-mtriple=armv7l-linux-gnueabihf``) and AArch64: the exported files hold code of
that architecture, and this x86-64 machine refuses to load it with an error that says so."""

from __future__ import annotations

import tarfile

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import rpc, te
from tvmpy.contrib import utils
from tvmpy.runtime.linker import cross_compiler, elf_arch

N = 1024


def _add_one(target: str, n: int = N):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    return tvm.build(s, [A, B], target=target, name="add_one")


def _run_remote(remote, path: str, n: int = N) -> None:
    remote.upload(path)
    func = remote.load_module(path.rsplit("/", 1)[-1])
    dev = remote.cpu()
    x = np.random.default_rng(n).uniform(size=n).astype("float32")
    a = tvm.nd.array(x, dev)
    b = tvm.nd.array(np.zeros(n, dtype="float32"), dev)
    func(a, b)
    np.testing.assert_equal(b.numpy(), x + 1)
    timer = func.time_evaluator(func.entry_name, dev, number=10)
    res = timer(a, b)
    assert res.mean > 0 and str(res).startswith("Execution time summary:")


@pytest.fixture
def lib_tar(tmp_path):
    temp = utils.tempdir(str(tmp_path / "build"))
    path = temp.relpath("lib.tar")
    _add_one("llvm").export_library(path)
    return path


def test_local_session(lib_tar):
    _run_remote(rpc.LocalSession(), lib_tar)


def test_rpc_server_process(lib_tar, tmp_path):
    server = rpc.Server(port=0, silent=True, start_timeout=60)
    try:
        remote = rpc.connect("127.0.0.1", server.port, token=server.token, timeout=30)
        try:
            _run_remote(remote, lib_tar)
            path = str(tmp_path / "lib_1031.tar")  # an awkward size too
            _add_one("llvm", 1031).export_library(path)
            _run_remote(remote, path, 1031)
        finally:
            remote.close()
    finally:
        server.terminate()


def test_size_as_runtime_convert():
    n = tvm.runtime.convert(N)
    A = te.placeholder((n,), name="A")
    assert int(A.shape[0]) == N


@pytest.mark.parametrize("triple, arch", [("armv7l-linux-gnueabihf", "arm"),
                                          ("aarch64-linux-gnu", "aarch64")])
def test_cross_compile(tmp_path, triple, arch):
    func = _add_one(f"llvm -mtriple={triple}")
    path = str(tmp_path / "lib.tar")
    func.export_library(path)  # the objects only: no linker of the target needed
    with tarfile.open(path) as t:
        objs = [t.extractfile(m).read() for m in t.getmembers()]
    assert objs and {elf_arch(o) for o in objs} == {arch}
    remote = rpc.LocalSession()  # this x86-64 "device" cannot run it, and says why
    remote.upload(path)
    with pytest.raises(RuntimeError, match=f"its code is for {arch}, this machine is x86_64"):
        remote.load_module("lib.tar")
    try:
        cross_compiler(arch)
    except RuntimeError:
        pytest.skip(f"no cross toolchain for {arch}")
    func.export_library(str(tmp_path / "lib.so"))  # linked by the cross toolchain
    with open(tmp_path / "lib.so", "rb") as f:
        head = f.read(20)
    assert elf_arch(head) == arch and head[4] == (1 if arch == "arm" else 2)


def _aarch64_sysroot() -> bool:
    from tvmpy.contrib import qemu

    try:
        qemu.find_sysroot()
    except RuntimeError:
        return False
    return True


@pytest.mark.skipif(not _aarch64_sysroot(), reason="no AArch64 sysroot for qemu-user "
                    "(.ci/install-cross-tools sets it up)")
def test_aarch64_device_under_qemu(tmp_path):
    """The device side of the tutorial: an AArch64 RPC server (an AArch64 Python under
    qemu-user); the library is cross-linked here (the device has no compiler), uploaded, run."""
    path = str(tmp_path / "lib.so")
    _add_one("llvm -mtriple=aarch64-linux-gnu").export_library(path)
    server = rpc.Server(port=0, device="qemu-aarch64", silent=True, start_timeout=300)
    try:
        remote = rpc.connect("127.0.0.1", server.port, token=server.token, call_timeout=600)
        try:
            assert remote.get_function("runtime.device_info")()["machine"] == "aarch64"
            _run_remote(remote, path)
        finally:
            remote.close()
    finally:
        server.terminate()


def test_opencl_kernel_remotely(tmp_path):
    """The tutorial's OpenCL part: the kernel's threads bound to blocks and threads, the host
    side built for llvm; the OpenCL C is checked here, and run through the session where this
    machine has an OpenCL device (PoCL in CI)."""
    A = te.placeholder((N,), name="A")
    B = te.compute((N,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.x"))
    func = tvm.build(s, [A, B], "opencl", target_host="llvm", name="myadd")
    assert "__kernel" in func.imported_modules[0].get_source()
    path = str(tmp_path / "cl_lib.tar")
    func.export_library(path)
    remote = rpc.LocalSession()
    if not remote.cl(0).exist:
        pytest.skip("no OpenCL device here")
    remote.upload(path)
    mod = remote.load_module("cl_lib.tar")
    dev = remote.cl(0)
    x = np.random.default_rng(5).uniform(size=N).astype("float32")
    a = tvm.nd.array(x, dev)
    b = tvm.nd.array(np.zeros(N, dtype="float32"), dev)
    mod(a, b)
    np.testing.assert_equal(b.numpy(), x + 1)
    assert mod.time_evaluator(mod.entry_name, dev, number=3)(a, b).mean > 0
