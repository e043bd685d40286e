"""Over RPC, a library needing CPU features the server's machine lacks is refused with a clear
error (the server loads through ``load_module``, which checks before dlopen): never SIGILL,
and the session keeps serving."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.runtime.abi import Signature
from tvmpy.runtime.host_cpu import _cpuinfo, host_features, missing_features
from tvmpy.runtime.linker import compile_c, link_shared
from tvmpy.target import Target

pytestmark = pytest.mark.skipif(host_features() is None, reason="no CPU feature detection here")


def _foreign_cpu() -> tuple[str, str]:
    """A CPU LLVM knows and one of its features that this machine lacks by every detection
    the load check may use (LLVM's, /proc/cpuinfo's). Features no compiler emits (enqcmd,
    waitpkg, ...: what a KVM guest on an Emerald Rapids host lacks of "emeraldrapids") are not
    checked at load, so they do not make a CPU foreign."""
    host = Target("llvm").isa_features
    kernel = (_cpuinfo() or ("", {}))[1]
    for cpu in ("emeraldrapids", "znver4", "graniterapids", "znver5"):
        missing = sorted(f for f in Target(f"llvm -mcpu={cpu}").isa_features - host
                         if kernel.get(f) is False and missing_features([f]))
        if missing:
            return cpu, missing[0]
    pytest.fail("every CPU tried is a subset of this one")


def test_library_for_another_cpu_refused_over_rpc(remote, libs, tmp_path):
    cpu, feature = _foreign_cpu()
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    path = tmp_path / "foreign.so"
    tvm.build(te.create_schedule(B.op), [A, B], f"llvm -mcpu={cpu}", name="affine") \
        .export_library(str(path))
    remote.upload(str(path))
    with pytest.raises(RuntimeError, match=f"CPU '{cpu}'.*{feature}.*lacks"):
        remote.load_module("foreign.so")
    # the session is unharmed: a library for this machine loads and runs
    remote.upload(libs["affine"])
    f = remote.load_module("affine.so")
    dev = remote.cpu(0)
    a, b = tvm.nd.array(np.arange(5, dtype="float32"), dev), tvm.nd.empty((5,), "float32", dev)
    f["affine"](a, b)
    np.testing.assert_array_equal(b.numpy(), np.arange(5) * 2 + 1)


def test_refused_library_constructor_never_runs_on_the_server(remote, tmp_path):
    """A recorded requirement this machine does not meet: the server refuses the file before
    dlopen, so its constructor (which would write a marker file) never runs."""
    # absent for LLVM's detection and for /proc/cpuinfo's (a process without llvmlite loaded)
    kernel = (_cpuinfo() or ("", {}))[1]
    absent = sorted(f for f, on in (host_features() or {}).items() if not on)
    lacking = next(f for f in absent if kernel.get(f) is False and missing_features([f]))
    marker = tmp_path / "constructor_ran"
    src = ("#include <stdio.h>\n#include <stdint.h>\n"
           "__attribute__((constructor)) static void ctor(void) {\n"
           f'  FILE* f = fopen("{marker}", "w");\n  if (f) fclose(f);\n}}\n'
           "int32_t noop(void) { return 0; }\n")
    meta = {"version": 1, "entry": "noop", "functions": [Signature("noop", [], []).to_json()],
            "cpu": {"triple": "x86_64-unknown-linux-gnu", "name": "made-up",
                    "features": [lacking]}}
    so = tmp_path / "ctor.so"
    link_shared([compile_c(src)], json.dumps(meta), str(so))
    remote.upload(str(so))
    with pytest.raises(RuntimeError, match=f"'made-up'.*{lacking}"):
        remote.load_module("ctor.so")
    assert not marker.exists()
    assert remote.ping() == "pong"
