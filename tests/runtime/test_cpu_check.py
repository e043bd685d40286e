"""Code for a CPU with features this machine lacks never runs (issue 24: code built with
``-mcpu=znver4`` died of SIGILL on an Intel Xeon): a library records the CPU features it was
compiled with, ``load_module`` refuses it with an error naming them, and it reads the metadata
from the file before ``dlopen``, so a refused file's constructors never run (point 2(d))."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.runtime import Module, load_module
from tvmpy.runtime.abi import METADATA_SYMBOL, Signature
from tvmpy.runtime.elf import read_dynamic_symbol
from tvmpy.runtime.host_cpu import _cpuinfo, host_features, missing_features, unsupported
from tvmpy.runtime.linker import compile_c, compiler, link_shared
from tvmpy.target import Target

ROOT = Path(__file__).resolve().parents[2]
TRIPLE = "x86_64-unknown-linux-gnu"

pytestmark = pytest.mark.skipif(host_features() is None, reason="no CPU feature detection here")


def _lacking() -> str:
    """A feature this machine lacks by LLVM's host detection and by the load check's own
    (/proc/cpuinfo where llvmlite is not loaded): every x86 CPU lacks some (AMD has no AMX or
    AVX512-FP16, Intel no SSE4A or XOP)."""
    return lacking_feature()


def lacking_feature() -> str:
    # absent for LLVM's detection and for /proc/cpuinfo's (a process without llvmlite loaded)
    kernel = (_cpuinfo() or ("", {}))[1]
    absent = sorted(f for f, on in (host_features() or {}).items() if not on)
    return next(f for f in absent if kernel.get(f) is False and missing_features([f]))


def _foreign_cpu() -> tuple[str, set[str]]:
    """A CPU LLVM knows that has features this one lacks by every detection the load check
    may use (LLVM's, /proc/cpuinfo's), and those features. Features no compiler emits (enqcmd,
    waitpkg, ...: what a KVM guest on an Emerald Rapids host lacks of "emeraldrapids") are not
    checked at load, so they do not make a CPU foreign."""
    host = Target("llvm").isa_features
    kernel = (_cpuinfo() or ("", {}))[1]
    for cpu in ("emeraldrapids", "znver4", "graniterapids", "znver5", "diamondrapids"):
        missing = {f for f in Target(f"llvm -mcpu={cpu}").isa_features - host
                   if kernel.get(f) is False and missing_features([f])}
        if missing:
            return cpu, missing
    pytest.fail("every CPU tried is a subset of this one")


def _constructor_c(marker: Path, with_function: bool = True) -> str:
    """C whose constructor writes ``marker`` when the library is loaded."""
    return (
        "#include <stdio.h>\n#include <stdint.h>\n"
        "__attribute__((constructor)) static void tvmpy_test_ctor(void) {\n"
        f'  FILE* f = fopen("{marker}", "w");\n'
        '  if (f) { fputs("ran", f); fclose(f); }\n}\n'
        + ("int32_t noop(void) { return 0; }\n" if with_function else ""))


def _noop_sig() -> Signature:
    return Signature("noop", [], [])


def _affine(target: str) -> Module:
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    return tvm.build(te.create_schedule(B.op), [A, B], target, name="affine")


# ---- point 2(d): nothing of a refused file runs --------------------------------------------------
def test_library_without_metadata_is_refused_before_its_constructor_runs(tmp_path):
    marker = tmp_path / "constructor_ran"
    so = tmp_path / "plain.so"
    src = tmp_path / "plain.c"
    src.write_text(_constructor_c(marker))
    subprocess.run(compiler() + ["-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    with pytest.raises(ValueError, match=f"not a tvmpy module.*{METADATA_SYMBOL}"):
        load_module(str(so))
    assert not marker.exists()
    # the constructor is real: loading the file any other way runs it
    subprocess.run([sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(so)!r})"], check=True)
    assert marker.read_text() == "ran"


@pytest.mark.parametrize("meta,error", [
    ({"version": 2}, "metadata version 2"),
    ({"cpu": {"triple": TRIPLE, "name": "imaginary"}}, "compiled for CPU 'imaginary'"),
])  # fmt: skip
def test_refused_tvmpy_library_constructor_never_runs(tmp_path, meta, error):
    if "cpu" in meta:
        meta["cpu"]["features"] = ["sse2", _lacking()]
    marker = tmp_path / "constructor_ran"
    so = tmp_path / "refused.so"
    full = {"version": 1, "entry": "noop", "functions": [_noop_sig().to_json()], **meta}
    link_shared([compile_c(_constructor_c(marker))], json.dumps(full), str(so))
    with pytest.raises((RuntimeError, ValueError), match=error):
        load_module(str(so))
    assert not marker.exists()


def test_metadata_is_read_from_the_file(tmp_path):
    lib = _affine("llvm")
    path = tmp_path / "affine.so"
    lib.export_library(str(path))
    raw = read_dynamic_symbol(str(path), METADATA_SYMBOL)
    meta = json.loads(raw.split(b"\0")[0])
    assert meta["functions"][0]["name"] == "affine"
    assert meta["cpu"]["name"] and "sse2" in meta["cpu"]["features"]
    assert read_dynamic_symbol(str(path), "no_such_symbol") is None
    loaded = load_module(str(path))
    a = np.arange(5, dtype="float32")
    b = tvm.nd.empty((5,))
    loaded(tvm.nd.array(a), b)
    np.testing.assert_array_equal(b.numpy(), a * 2 + 1)


def test_corrupt_elf_is_refused_without_loading(tmp_path):
    path = tmp_path / "affine.so"
    _affine("llvm").export_library(str(path))
    data = bytearray(path.read_bytes())
    data[0x28:0x30] = (len(data) * 4).to_bytes(8, "little")  # e_shoff past the end
    bad = tmp_path / "corrupt.so"
    bad.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match="corrupt.so.*(truncated|outside the file)"):
        load_module(str(bad))


# ---- libraries built for another CPU -----------------------------------------------------------
def test_library_for_a_cpu_with_missing_features_is_refused(tmp_path):
    cpu, missing = _foreign_cpu()
    lib = _affine(f"llvm -mcpu={cpu}")
    assert lib._meta["cpu"]["name"] == cpu and missing <= set(lib._meta["cpu"]["features"])
    a, b = tvm.nd.array(np.ones(4, "float32")), tvm.nd.empty((4,))
    feature = sorted(missing)[0]
    # built in memory: never loaded, calling it is a clear error
    with pytest.raises(RuntimeError, match=f"affine cannot run on this machine.*'{cpu}'.*{feature}"):
        lib(a, b)
    path = tmp_path / f"{cpu}.so"
    lib.export_library(str(path))  # it can still be exported for a machine with that CPU
    with pytest.raises(RuntimeError, match=f"cannot load .*{cpu}.so.*CPU '{cpu}'.*{feature}.*lacks"):
        load_module(str(path))


def test_graph_built_for_a_cpu_with_missing_features_is_refused(tmp_path):
    from tvmpy import relay
    from tvmpy.contrib import graph_executor

    cpu, missing = _foreign_cpu()
    x = relay.var("x", shape=(4, 8))
    f = relay.Function([x], relay.nn.relu(x) * relay.const(3.0))
    with tvm.transform.PassContext(opt_level=3):
        factory = relay.build(tvm.IRModule.from_expr(f), target=f"llvm -mcpu={cpu}")
    with pytest.raises(RuntimeError, match=f"cannot run on this machine.*{sorted(missing)[0]}"):
        m = graph_executor.GraphModule(factory["default"](tvm.cpu(0)))
        m.set_input("x", np.ones((4, 8), "float32"))
        m.run()
    path = tmp_path / "graph.so"
    factory.export_library(str(path))
    with pytest.raises(RuntimeError, match=f"CPU '{cpu}'"):
        load_module(str(path))


def test_in_memory_module_with_missing_features_is_not_loaded(tmp_path):
    marker = tmp_path / "constructor_ran"
    req = {"triple": TRIPLE, "name": "imaginary", "features": [_lacking()]}
    mod = Module.from_objects([compile_c(_constructor_c(marker))], [_noop_sig()], cpu=req)
    assert not marker.exists()
    with pytest.raises(RuntimeError, match=f"noop cannot run on this machine.*{_lacking()}"):
        mod()
    # the same library with a requirement this CPU meets loads (and its constructor runs)
    ok = Module.from_objects([compile_c(_constructor_c(marker))], [_noop_sig()],
                             cpu={"triple": TRIPLE, "name": "x", "features": ["sse2"]})
    ok()
    assert marker.exists()


def test_host_build_and_features_below_the_host_load():
    """This machine's own target, and features taken away from it, are never refused."""
    for target in ("llvm", "llvm -mattr=-avx2", "c"):
        lib = _affine(target)
        assert unsupported(lib._meta) is None, target
        b = tvm.nd.empty((3,))
        lib(tvm.nd.array(np.ones(3, "float32")), b)
        assert b.numpy().tolist() == [3.0] * 3


def test_foreign_architecture_is_not_judged_by_features():
    meta = {"cpu": {"triple": "aarch64-linux-gnu", "name": "cortex-a76", "features": ["sve2"]}}
    assert unsupported(meta) is None


# ---- without llvmlite: /proc/cpuinfo -------------------------------------------------------------
@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="Linux only")
def test_cpuinfo_names_agree_with_llvm_host_detection():
    found = _cpuinfo()
    assert found is not None
    llvm = host_features() or {}
    disagree = {f: (on, llvm[f]) for f, on in found[1].items() if f in llvm and llvm[f] != on}
    assert not disagree, disagree


@pytest.mark.skipif(not os.path.exists("/proc/cpuinfo"), reason="Linux only")
def test_runtime_alone_refuses_too(tmp_path):
    """With llvmlite unimportable (a runtime-only install) the check reads /proc/cpuinfo."""
    good, bad = tmp_path / "good.so", tmp_path / "bad.so"
    _affine("llvm").export_library(str(good))
    cpu, _ = _foreign_cpu()
    _affine(f"llvm -mcpu={cpu}").export_library(str(bad))
    code = (
        "import sys\nsys.modules['llvmlite'] = None\n"
        "import numpy as np\nimport tvmpy.runtime as rt\n"
        f"m = rt.load_module({str(good)!r})\n"
        "b = rt.ndarray.empty((2,), 'float32')\nm(rt.ndarray.array(np.ones(2, 'float32')), b)\n"
        "assert b.numpy().tolist() == [3.0, 3.0]\n"
        "try:\n"
        f"    rt.load_module({str(bad)!r})\n"
        "except RuntimeError as e:\n    print('REFUSED', e)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"REFUSED cannot load {bad}" in out.stdout and f"'{cpu}'" in out.stdout
