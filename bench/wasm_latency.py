"""WebAssembly vs host latency of two small models (a DQN-style MLP and a small CNN).

Each model is built with relay.build (opt_level 3) for the host (``llvm``, and ``llvm
-num-cores=1``) and for ``llvm -mtriple=wasm32-unknown-unknown`` with and without
``-mattr=+simd128``; the .wasm is exported, loaded back (``load_module``) and run in-process by
wasmtime. Latency: the graph executor's ``benchmark()`` (``run()`` only, the same input set
once), median of ``--repeat`` repeats of at least 50 ms. Also prints the max difference from
the host output.

    python bench/wasm_latency.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402,F401  (strict schedules, as every bench)

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay.analysis import free_vars

TARGETS = {"host x86 (2 threads)": "llvm", "host x86 (1 thread)": "llvm -num-cores=1",
           "wasm32": "llvm -mtriple=wasm32-unknown-unknown",
           "wasm32 +simd128": "llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128",
           "wasm32 +simd128,+relaxed-simd": "llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128,+relaxed-simd"}


def dqn_mlp(rng: np.random.Generator) -> tuple:
    """obs 128 -> 256 -> 256 -> 18 Q-values (dense + bias + relu)."""
    x = relay.var("obs", shape=(1, 128))
    h, params, d_in = x, {}, 128
    for i, d in enumerate((256, 256, 18)):
        params[f"w{i}"] = (rng.standard_normal((d, d_in)) / np.sqrt(d_in)).astype("float32")
        params[f"b{i}"] = (0.1 * rng.standard_normal(d)).astype("float32")
        h = relay.nn.bias_add(relay.nn.dense(h, relay.var(f"w{i}", shape=(d, d_in))),
                              relay.var(f"b{i}", shape=(d,)))
        h = relay.nn.relu(h) if i < 2 else h
        d_in = d
    return h, params, {"obs": rng.standard_normal((1, 128)).astype("float32")}


def small_cnn(rng: np.random.Generator) -> tuple:
    """1x3x32x32 -> [conv3x3 16 + relu + maxpool] -> [conv3x3 32 + relu + maxpool] -> dense 10."""
    x = relay.var("data", shape=(1, 3, 32, 32))
    params: dict = {}

    def conv(h, name, cin, cout):
        params[name] = (rng.standard_normal((cout, cin, 3, 3)) / np.sqrt(9 * cin)).astype("float32")
        params[name + "_b"] = (0.1 * rng.standard_normal(cout)).astype("float32")
        h = relay.nn.conv2d(h, relay.var(name, shape=(cout, cin, 3, 3)), padding=(1, 1))
        return relay.nn.relu(relay.nn.bias_add(h, relay.var(name + "_b", shape=(cout,))))

    h = relay.nn.max_pool2d(conv(x, "c1", 3, 16), (2, 2), (2, 2))
    h = relay.nn.max_pool2d(conv(h, "c2", 16, 32), (2, 2), (2, 2))
    params["fc"] = (rng.standard_normal((10, 2048)) / 45).astype("float32")
    h = relay.nn.dense(relay.nn.batch_flatten(h), relay.var("fc", shape=(10, 2048)))
    return h, params, {"data": rng.standard_normal((1, 3, 32, 32)).astype("float32")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print("| model | target | latency (us, median) | max abs diff vs host |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in (("DQN MLP 128-256-256-18", dqn_mlp), ("CNN 3x32x32", small_cnn)):
            out, params, inputs = make(rng)
            mod = tvm.IRModule.from_expr(relay.Function(free_vars(out), out))
            ref = None
            for label, target in TARGETS.items():
                with tvm.transform.PassContext(opt_level=3):
                    lib = relay.build(mod, target=target, params=params)
                if "wasm" in target:
                    path = os.path.join(tmp, "net.wasm")
                    lib.export_library(path)
                    lib = tvm.runtime.load_module(path)
                m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
                m.set_input(**inputs)
                m.run()
                y = m.get_output(0).numpy()
                ref = y if ref is None else ref
                t = m.module.benchmark(tvm.cpu(0), repeat=args.repeat, number=10,
                                       min_repeat_ms=50)
                print(f"| {name} | {label} | {t.median * 1e6:.1f} | "
                      f"{np.abs(y - ref).max():.2e} |", flush=True)


if __name__ == "__main__":
    main()
