"""The Relay VM against the graph executor (issue 11): the same model compiled both ways.

- ResNet-18 (relay.testing, random weights, 224x224) at a static batch 1;
- the same model with a dynamic batch (``relay.Any()``), compiled once per executor and run
  at each batch of ``--batches`` (the graph executor with symbolic shapes vs the VM);
- a loop of ``--iters`` iterations on tiny tensors (a recursive function, the VM only): the
  cost of one iteration (a segment for the condition, one for the body, a tail call).

Both compiled at opt_level 3; the inputs are set once, then each side's call is timed
(``gm.run()`` vs ``vm.invoke`` with the inputs set by ``set_input``: the VM also copies the
inputs into its segment and the outputs out). Interleaved rounds, median and spread.

    python bench/vm_overhead.py [--batches 1,8] [--rounds 7] [--image 224] [--iters 1000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ensure_native_blas, machine_description  # noqa: E402

ensure_native_blas()

import numpy as np  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import relay  # noqa: E402
from tvmpy.contrib import graph_executor  # noqa: E402
from tvmpy.relay.testing import resnet  # noqa: E402
from tvmpy.runtime.vm import VirtualMachine  # noqa: E402


def _time(fn: Any, rounds: int, target_s: float = 0.3) -> list[float]:
    fn()
    t = time.perf_counter()
    fn()
    number = max(1, min(200, int(target_s / max(time.perf_counter() - t, 1e-6))))
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t) / number)
    return out


def _both(mod: Any, params: dict) -> tuple[Any, VirtualMachine, float, float]:
    with tvm.transform.PassContext(opt_level=3):
        t = time.perf_counter()
        lib = relay.build(mod, "llvm", params=params)
        t_graph = time.perf_counter() - t
        t = time.perf_counter()
        exe = relay.vm.compile(mod, "llvm", params=params)
        t_vm = time.perf_counter() - t
    gm = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    return gm, VirtualMachine(exe, tvm.cpu(0)), t_graph, t_vm


def _compare(label: str, gm: Any, vm: VirtualMachine, x: np.ndarray, rounds: int) -> dict:
    gm.set_input("data", x)
    vm.set_input("main", data=x)
    np.testing.assert_allclose(vm.invoke("main").numpy(), (gm.run(), gm.get_output(0))[1].numpy(),
                               rtol=1e-4, atol=1e-4)
    g, v = [], []
    for _ in range(rounds):  # interleaved
        g += _time(gm.run, 1)
        v += _time(lambda: vm.invoke("main"), 1)
    mg, mv = statistics.median(g), statistics.median(v)
    print(f"{label:<28} graph {mg * 1e3:8.2f} ms ({min(g) * 1e3:.2f}-{max(g) * 1e3:.2f})   "
          f"vm {mv * 1e3:8.2f} ms ({min(v) * 1e3:.2f}-{max(v) * 1e3:.2f})   vm/graph "
          f"{mv / mg:.3f}", flush=True)
    return {"graph_ms": mg * 1e3, "vm_ms": mv * 1e3, "ratio": mv / mg}


def _loop_module(iters: int) -> Any:
    loop = relay.GlobalVar("loop")
    i = relay.var("i", shape=(), dtype="int32")
    s = relay.var("s", shape=(4,))
    body = relay.If(relay.less(i, relay.const(iters, "int32")),
                    relay.Call(loop, [i + relay.const(1, "int32"), s * relay.const(0.5)]), s)
    mod = tvm.IRModule()
    mod[loop] = relay.Function([i, s], body, ret_type=relay.TensorType((4,), "float32"))
    x = relay.var("x", shape=(4,))
    mod["main"] = relay.Function([x], relay.Call(loop, [relay.const(0, "int32"), x]))
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--iters", type=int, default=1000)
    args = ap.parse_args()
    print(machine_description())
    rng = np.random.default_rng(0)
    shape = (3, args.image, args.image)

    mod, params = resnet.get_workload(18, batch_size=1, image_shape=shape)
    gm, vm, tg, tv = _both(mod, params)
    print(f"static ResNet-18: build {tg:.1f} s (graph), {tv:.1f} s (vm)", flush=True)
    _compare("resnet18 static b1", gm, vm, rng.standard_normal((1, *shape), "float32"),
             args.rounds)

    mod, params = resnet.get_workload(18, batch_size=relay.Any(), image_shape=shape)
    gm, vm, tg, tv = _both(mod, params)
    print(f"dynamic-batch ResNet-18: build {tg:.1f} s (graph), {tv:.1f} s (vm)", flush=True)
    for b in (int(s) for s in args.batches.split(",")):
        _compare(f"resnet18 dynamic b{b}", gm, vm,
                 rng.standard_normal((b, *shape), "float32"), args.rounds)

    with tvm.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(_loop_module(args.iters), "llvm")
    lvm = VirtualMachine(exe, tvm.cpu(0))
    x = rng.standard_normal(4).astype("float32")
    lvm.set_input("main", x)
    ts = _time(lambda: lvm.invoke("main"), args.rounds, 1.0)
    print(f"loop of {args.iters} iterations: {statistics.median(ts) * 1e3:.2f} ms, "
          f"{statistics.median(ts) / args.iters * 1e6:.1f} us per iteration "
          "(2 segments + tail call)")


if __name__ == "__main__":
    main()
