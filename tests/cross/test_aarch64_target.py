"""The AArch64 target on the host, without qemu: target parsing and arm_cpu, no host-feature
leak, foreign modules are export-only with clear errors, export_library's compiler choices
(fcompile callables, commands, triples, the default cross compiler), the pool's cache per
compiler."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.contrib import cc
from tvmpy.runtime import linker, parallel_pool

A64 = "llvm -mtriple=aarch64-linux-gnu"


def _elf_arch(path):
    with open(path, "rb") as f:
        return linker.elf_arch(f.read(64))


def _kernel(target=A64, parallel=True, name="k"):
    A = te.placeholder((50,), name="A")
    B = te.compute((50,), lambda i: te.exp(A[i]) + 1.0, name="B")
    s = te.create_schedule(B.op)
    o, i = s[B].split(B.op.axis[0], factor=4)
    s[B].vectorize(i)
    if parallel:
        s[B].parallel(o)
    return tvm.build(s, [A, B], target=target, name=name)


def test_foreign_target_does_not_take_host_cpu_or_features():
    t = tvm.target.Target(A64)
    assert t.arch == "aarch64" and t.is_foreign
    assert t.cpu == "generic" and t.features == ""
    assert t.vector_width_bits == 128 and t.vector_lanes("float32") == 4
    assert t.num_cores == 4  # not this machine's count: the same code on every build machine
    t2 = tvm.target.Target(A64 + " -mcpu=cortex-a72 -mattr=+neon,+dotprod")
    assert t2.cpu == "cortex-a72" and t2.features == "+neon,+dotprod"
    assert t2.vector_width_bits == 128
    host = tvm.target.Target("llvm")
    assert not host.is_foreign


def test_arm_cpu_targets():
    t = tvm.target.arm_cpu("rasp4b")
    assert t.keys == ["arm_cpu", "cpu"] and t.mcpu == "cortex-a72" and t.model == "bcm2711"
    assert t.mtriple == "aarch64-linux-gnu" and "+neon" in t.mattr
    assert tvm.target.Target(str(t)) == t  # the string round-trips (tuning logs key by it)
    assert tvm.target.arm_cpu("rasp3b").mcpu == "cortex-a53"
    assert tvm.target.arm_cpu("a72", "-num-cores=4").num_cores == 4
    with pytest.raises(ValueError, match="unknown model 'nope'"):
        tvm.target.arm_cpu("nope")
    assert tvm.target.Target("llvm -device=arm_cpu").keys == ["arm_cpu", "cpu"]


def test_aarch64_code_and_assembly_are_neon():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(s[B].split(B.op.axis[0], factor=4)[1])
    asm = tvm.lower(s, [A, B], name="k")["k"]
    from tvmpy.codegen.llvm import emit_assembly

    text = emit_assembly([asm], A64 + " -mcpu=cortex-a72")
    assert "v0.4s" in text or ".4s" in text  # NEON 4 x fp32
    assert "xmm" not in text and "ymm" not in text and "zmm" not in text


def test_foreign_module_is_export_only(tmp_path):
    f = _kernel()
    assert f.foreign_arch() == "aarch64"
    with pytest.raises(RuntimeError, match="built for aarch64.*export_library.*RPC"):
        f(np.zeros(50, "float32"), np.zeros(50, "float32"))
    out = tmp_path / "k.so"
    f.export_library(str(out))  # default cross compiler
    assert _elf_arch(out) == "aarch64"


def test_export_with_fcompile_forms(tmp_path):
    f = _kernel()
    calls = []

    def my_fcompile(output, objects, options=None):
        calls.append((output, list(objects), list(options or [])))
        cc.create_shared(output, objects, options, cc="aarch64-linux-gnu")

    for k, fc in enumerate([cc.cross_compiler("aarch64-linux-gnu"),
                            cc.cross_compiler(linker.cross_compiler("aarch64")),
                            my_fcompile]):
        out = tmp_path / f"k{k}.so"
        f.export_library(str(out), fc)
        assert _elf_arch(out) == "aarch64"
    assert calls and "-lpthread" in calls[0][2] and "-lm" in calls[0][2]
    assert cc.cross_compiler("aarch64-linux-gnu").output_format == "so"


def test_export_with_zig_cc(tmp_path):  # the ziglang wheel: a test dependency
    f = _kernel(parallel=False)
    zig = cc.cross_compiler(f"{os.sys.executable} -m ziglang cc -target aarch64-linux-gnu")
    f.export_library(str(tmp_path / "z.so"), zig)
    assert _elf_arch(tmp_path / "z.so") == "aarch64"


def test_no_cross_compiler_is_a_clear_error(tmp_path, monkeypatch):
    f = _kernel(parallel=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no aarch64-linux-gnu-gcc
    monkeypatch.setattr(linker.importlib.util, "find_spec", lambda name: None)  # no ziglang
    with pytest.raises(RuntimeError, match="no cross compiler for aarch64.*gcc-aarch64-linux-gnu"
                                           ".*ziglang"):
        f.export_library(str(tmp_path / "k.so"))


def test_pool_object_is_built_per_compiler():
    host = parallel_pool.pool_object()
    a64 = parallel_pool.pool_object(linker.cross_compiler("aarch64"))
    assert linker.elf_arch(host) == linker.host_arch()
    assert linker.elf_arch(a64) == "aarch64"


def test_mixed_architectures_refused(tmp_path):
    host = _kernel(target="llvm", parallel=False, name="k_host")
    f = _kernel(parallel=False)
    f.import_module(host)
    with pytest.raises(RuntimeError, match="different architectures"):
        f.export_library(str(tmp_path / "m.so"))


def test_relay_build_for_aarch64_exports(tmp_path):
    x = tvm.relay.var("x", shape=(1, 8, 9, 9))
    w = np.random.default_rng(0).uniform(-1, 1, (8, 8, 3, 3)).astype("float32")
    y = tvm.relay.nn.relu(tvm.relay.nn.conv2d(x, tvm.relay.const(w), padding=(1, 1),
                                              channels=8, kernel_size=(3, 3)))
    lib = tvm.relay.build(tvm.IRModule.from_expr(tvm.relay.Function([x], y)),
                          target=tvm.target.arm_cpu("rasp4b"))
    with pytest.raises(RuntimeError, match="built for aarch64"):
        lib["default"](tvm.cpu(0))
    lib.export_library(str(tmp_path / "net.so"), cc.cross_compiler("aarch64-linux-gnu"))
    assert _elf_arch(tmp_path / "net.so") == "aarch64"
    if shutil.which("aarch64-linux-gnu-readelf"):
        syms = subprocess.run(["aarch64-linux-gnu-readelf", "-Ws", str(tmp_path / "net.so")],
                              capture_output=True, text=True, timeout=60).stdout
        assert "__tvmpy_metadata" in syms


def test_cli_compile_for_aarch64(tmp_path, capsys):
    onnx = pytest.importorskip("onnx")  # installed with the e2e test dependencies
    from tvmpy import cli
    from tvmpy.relay.testing import onnx_models

    onnx.save(onnx_models.bert_encoder(layers=1, hidden=32, heads=2, seq=8), str(tmp_path / "m.onnx"))
    assert cli.main(["compile", str(tmp_path / "m.onnx"), "--target",
                     "llvm -mtriple=aarch64-linux-gnu -mattr=+neon", "-o",
                     str(tmp_path / "m.so")]) == 0
    assert _elf_arch(tmp_path / "m.so") == "aarch64"


def test_zig_is_the_fallback_cross_compiler(tmp_path, monkeypatch):
    real = shutil.which
    monkeypatch.setattr(linker.shutil, "which",
                        lambda n, *a, **k: None if "aarch64-linux-gnu-gcc" in n else real(n, *a, **k))
    assert linker.cross_compiler("aarch64")[1:] == ["-m", "ziglang", "cc", "-target",
                                                    "aarch64-linux-gnu"]
    f = _kernel()  # parallel: the pool is compiled by zig cc too
    f.export_library(str(tmp_path / "k.so"))
    assert _elf_arch(tmp_path / "k.so") == "aarch64"


def test_export_library_takes_a_triple_or_a_command(tmp_path):
    f = _kernel(parallel=False)
    for k, spec in enumerate(["aarch64-linux-gnu", linker.cross_compiler("aarch64")]):
        f.export_library(str(tmp_path / f"t{k}.so"), spec)
        assert _elf_arch(tmp_path / f"t{k}.so") == "aarch64"
    with pytest.raises(RuntimeError, match="not found"):
        f.export_library(str(tmp_path / "x.so"), "no-such-compiler-gcc")
