"""Shared pieces of the AArch64 tests: the sysroot (built when missing, never skipped) and one
qemu Python process that loads many exported libraries and checks them against expectations
computed on the host.

A batch is a folder with ``NAME.so`` + ``NAME.npz`` per case; the npz holds ``in0..inK`` (every
argument of the call, outputs included, in order), ``out`` (the index of each checked argument)
and ``want<i>`` / ``rtol`` / ``atol``. Graph cases (``kind`` "graph") hold the graph inputs
``input:<name>`` and the expected outputs ``want0..``.
"""

from __future__ import annotations

import json
import os

import numpy as np

from tvmpy.contrib import qemu

TARGET = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon"

DEVICE_SCRIPT = r"""
import json, os, sys, time
import numpy as np
from tvmpy.runtime.module import load_module
from tvmpy.runtime.device import cpu
folder = sys.argv[1]
out = {}
for name in sorted(f[:-3] for f in os.listdir(folder) if f.endswith(".so")):
    try:
        d = dict(np.load(os.path.join(folder, name + ".npz")))
        mod = load_module(os.path.join(folder, name + ".so"))
        rtol, atol = float(d["rtol"]), float(d["atol"])
        errs, t = [], 0.0
        if str(d["kind"]) == "graph":
            from tvmpy.contrib.graph_executor import GraphModule
            m = GraphModule(mod["default"](cpu(0)))
            for k, v in d.items():
                if k.startswith("input:"):
                    m.set_input(k[6:], v)
            m.run()  # the first run allocates; time the second
            t0 = time.perf_counter(); m.run(); t = time.perf_counter() - t0
            gots = [m.get_output(i).numpy() for i in range(m.get_num_outputs())]
            wants = [d[f"want{i}"] for i in range(len(gots))]
        else:
            args = [d[f"in{i}"].copy() for i in range(int(d["nargs"]))]
            mod(*args)
            gots = [args[i] for i in d["out"]]
            wants = [d[f"want{j}"] for j in range(len(gots))]
        ok = True
        for g, w in zip(gots, wants):
            if g.shape != w.shape or g.dtype != w.dtype:
                ok = False; errs.append(f"shape/dtype {g.shape} {g.dtype} vs {w.shape} {w.dtype}")
                continue
            gf, wf = g.astype("float64"), w.astype("float64")
            err = float(np.abs(gf - wf).max()) if g.size else 0.0
            bound = rtol * float(np.abs(wf).max() if w.size else 0) + atol
            ok = ok and bool(np.isfinite(gf).all() == np.isfinite(wf).all()) and err <= bound
            errs.append(err)
        out[name] = {"ok": ok, "errs": errs, "time": t}
    except Exception as e:
        out[name] = {"ok": False, "errs": [f"{type(e).__name__}: {e}"], "time": 0}
mods = sorted(m for m in sys.modules if m.split(".")[0] in ("llvmlite", "onnx", "torch", "tvmpy"))
print(json.dumps({"results": out, "modules": mods}))
"""


def sysroot() -> str:
    """The AArch64 sysroot; built (``tvmpy.contrib.qemu.setup_sysroot``) when missing."""
    qemu.find_qemu()
    try:
        return qemu.find_sysroot()
    except RuntimeError:
        return qemu.setup_sysroot()


def save_kernel(folder: str, name: str, mod, args: list[np.ndarray], outs: dict[int, np.ndarray],
                rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Export ``mod`` for AArch64 as ``NAME.so`` and its check as ``NAME.npz``."""
    mod.export_library(os.path.join(folder, name + ".so"))
    np.savez(os.path.join(folder, name + ".npz"), kind="kernel", nargs=len(args),
             out=np.array(list(outs), "int64"), rtol=rtol, atol=atol,
             **{f"in{i}": a for i, a in enumerate(args)},
             **{f"want{j}": w for j, w in enumerate(outs.values())})


def save_graph(folder: str, name: str, lib, inputs: dict[str, np.ndarray],
               wants: list[np.ndarray], rtol: float = 1e-4, atol: float = 1e-5) -> None:
    lib.export_library(os.path.join(folder, name + ".so"))
    np.savez(os.path.join(folder, name + ".npz"), kind="graph", rtol=rtol, atol=atol,
             **{f"input:{k}": v for k, v in inputs.items()},
             **{f"want{i}": w for i, w in enumerate(wants)})


def run_batch(folder: str, timeout: float = 900) -> dict:
    """Load and check every case of ``folder`` in ONE AArch64 Python under qemu."""
    text = qemu.run_python(DEVICE_SCRIPT, [folder], timeout=timeout, sysroot=sysroot())
    return json.loads(text.strip().splitlines()[-1])
