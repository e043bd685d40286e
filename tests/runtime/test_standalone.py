"""The runtime stands alone: an exported library loads and runs in a process that imports
``tvmpy.runtime`` and numpy only, and nothing of the compiler gets loaded on the way.

One subprocess builds and exports (relay.build of a small model with parameters, and a plain
``tvm.build`` kernel); a fresh subprocess, with no C compiler on its PATH and llvmlite, onnx and
torch made unimportable, loads both, checks the results and lists the tvmpy modules it loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

BUILD = r"""
import sys
import numpy as np
import tvmpy as tvm
from tvmpy import relay, te

out = sys.argv[1]
rng = np.random.default_rng(0)
x = relay.var("data", shape=(2, 8))
w = relay.var("w", shape=(4, 8))
b = relay.var("b", shape=(4,))
y = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w), b))
mod = tvm.IRModule.from_expr(relay.Function([x, w, b], y))
params = {"w": rng.standard_normal((4, 8)).astype("float32"),
          "b": rng.standard_normal(4).astype("float32")}
with tvm.transform.PassContext(opt_level=3):
    factory = relay.build(mod, target="llvm", params=params)
factory.export_library(f"{out}/graph.so")
xv = rng.standard_normal((2, 8)).astype("float32")
want = np.maximum(xv @ params["w"].T + params["b"], 0)

n = te.var("n")
A = te.placeholder((n,), name="A")
B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
s = te.create_schedule(B.op)
tvm.build(s, [A, B], "llvm", name="affine").export_library(f"{out}/affine.so")
a = rng.standard_normal(7).astype("float32")
np.savez(f"{out}/io.npz", x=xv, want=want, a=a, a_want=a * 2.0 + 1.0)
"""

LOAD = r"""
import json, sys
for blocked in ("llvmlite", "onnx", "onnxruntime", "torch"):
    sys.modules[blocked] = None  # importing them now raises ImportError
import numpy as np
import tvmpy.runtime as runtime
from tvmpy.runtime.graph_executor import GraphExecutor

out = sys.argv[1]
data = np.load(f"{out}/io.npz")
factory = runtime.load_module(f"{out}/graph.so")
ex = factory["default"](runtime.cpu(0))
assert isinstance(ex, GraphExecutor)
ex.set_input("data", data["x"])
ex.run()
np.testing.assert_allclose(ex.get_output(0).numpy(), data["want"], rtol=1e-5, atol=1e-6)

affine = runtime.load_module(f"{out}/affine.so")
b = runtime.ndarray.empty((7,), "float32")
affine(runtime.ndarray.array(data["a"]), b)
np.testing.assert_allclose(b.numpy(), data["a_want"], rtol=1e-6)
print(json.dumps(sorted(m for m in sys.modules if m == "tvmpy" or m.startswith("tvmpy."))))
"""

# what loading may bring in: the runtime, and below it (docs/ARCHITECTURE.md) config and
# ir.dtype, with the parent packages, whose __init__ files load nothing eagerly
ALLOWED = {"tvmpy", "tvmpy.config", "tvmpy.ir", "tvmpy.ir.dtype"}


def _run(code: str, *args: str, env: dict | None = None) -> str:
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def test_exported_modules_run_with_the_runtime_alone(tmp_path):
    _run(BUILD, str(tmp_path))
    env = dict(os.environ, CC="/bin/false", PATH="/nonexistent")
    loaded = json.loads(_run(LOAD, str(tmp_path), env=env).splitlines()[-1])
    assert "tvmpy.runtime.graph_executor" in loaded
    outside = [m for m in loaded if m not in ALLOWED and not m.startswith("tvmpy.runtime")]
    assert not outside, f"loading and running an exported module imported {outside}"


def test_import_tvmpy_loads_no_subpackage():
    """``import tvmpy`` is cheap: sub-packages (te, tir, relay, ...) load on first use."""
    code = ("import json, sys; import tvmpy as tvm; "
            "before = sorted(m for m in sys.modules if m.startswith('tvmpy')); "
            "tvm.te.placeholder; tvm.target.Target; "
            "print(json.dumps(before))")
    assert json.loads(_run(code).splitlines()[-1]) == ["tvmpy"]
