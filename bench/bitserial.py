"""Bit-serial convolution and dense (issue 10, point 3): tvmpy's popcount kernels vs tvmpy's own
float32 kernels on the same layer shapes, x86 (this machine), 2 threads.

Per layer, three sides, all ``relay.build`` at opt_level 3 for "llvm" and run by the graph
executor (``set_input`` once, then ``run()`` only), interleaved rounds (bench/common.py):

* ``fp32``: nn.conv2d NCHW (or nn.dense), float32 input, constant weight;
* ``A2W1``: nn.bitserial_conv2d, 2-bit activations x 1-bit unipolar (+-1) weights,
  uint8 input (NCHW and NHWC), constant weight packed at compile time, uint32 words (NCHW:
  output columns are vector lanes) / uint64 words (dense);
* ``A1W1``: the same with 1-bit activations.

The ratio is fp32 time / bit-serial time (> 1: bit-serial faster). Outputs are checked against
the numpy references first. The paper's bit-serial experiment is on ARM: the AArch64 build of
these kernels is tested for correctness under qemu (tests/cross), where timings mean nothing.

    python bench/bitserial.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import interleaved_samples, machine_description, quartiles  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import relay  # noqa: E402
from tvmpy.contrib import graph_executor  # noqa: E402
from tvmpy.topi.testing import bitserial_conv2d_nchw_python, bitserial_dense_python  # noqa: E402

# (in channels, out channels, map, kernel, stride): ResNet-18's 3x3 layers and others
CONVS = [(64, 64, 56, 3, 1), (128, 128, 28, 3, 1), (256, 256, 14, 3, 1), (512, 512, 7, 3, 1),
         (128, 256, 28, 3, 2), (96, 160, 17, 3, 1), (256, 64, 56, 1, 1)]
DENSES = [(1, 4096, 4096), (16, 1024, 1024), (128, 768, 768)]  # rows, out, in


def _module(func: relay.Function) -> graph_executor.GraphModule:
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(tvm.IRModule.from_expr(func), target="llvm", params={})
    return graph_executor.GraphModule(lib["default"](tvm.cpu()))


def _runner(func: relay.Function, x: np.ndarray, ref: np.ndarray | None):
    m = _module(func)
    m.set_input("x", x)
    m.run()
    if ref is not None:
        np.testing.assert_array_equal(m.get_output(0).numpy(), ref)
    return m.run


def conv_sides(c: tuple, rng: np.random.Generator) -> dict:
    ic, oc, hw, k, s = c
    pad = k // 2
    xf = rng.uniform(-1, 1, (1, ic, hw, hw)).astype("float32")
    wf = rng.uniform(-1, 1, (oc, ic, k, k)).astype("float32")
    x = relay.var("x", shape=xf.shape)
    sides = {"fp32": _runner(relay.Function([x], relay.nn.conv2d(
        x, relay.const(wf), strides=s, padding=pad, kernel_size=k, channels=oc)), xf, None)}
    for ab in (2, 1):
        a = rng.integers(0, 1 << ab, (1, ic, hw, hw)).astype("uint8")
        w = rng.integers(0, 2, (oc, ic, k, k)).astype("uint8")
        ref = bitserial_conv2d_nchw_python(a, w, s, pad, ab, 1, "int16")
        for layout in ("NCHW", "NHWC"):
            av, wv, rv, kl = a, w, ref, "OIHW"
            if layout == "NHWC":
                av, wv, rv, kl = (a.transpose(0, 2, 3, 1).copy(), w.transpose(2, 3, 1, 0).copy(),
                                  ref.transpose(0, 2, 3, 1), "HWIO")
            xb = relay.var("x", shape=av.shape, dtype="uint8")
            y = relay.nn.bitserial_conv2d(xb, relay.const(wv), strides=s, padding=pad,
                                          activation_bits=ab, weight_bits=1, data_layout=layout,
                                          kernel_layout=kl, pack_dtype="uint32")
            sides[f"A{ab}W1 {layout}"] = _runner(relay.Function([xb], y), av, rv)
    return sides


def dense_sides(c: tuple, rng: np.random.Generator) -> dict:
    m, n, k = c
    xf = rng.uniform(-1, 1, (m, k)).astype("float32")
    x = relay.var("x", shape=xf.shape)
    wf = rng.uniform(-1, 1, (n, k)).astype("float32")
    sides = {"fp32": _runner(relay.Function([x], relay.nn.dense(x, relay.const(wf))), xf, None)}
    for ab in (2, 1):
        a = rng.integers(0, 1 << ab, (m, k)).astype("uint8")
        w = rng.integers(0, 2, (n, k)).astype("uint8")
        xb = relay.var("x", shape=a.shape, dtype="uint8")
        y = relay.nn.bitserial_dense(xb, relay.const(w), data_bits=ab, weight_bits=1,
                                     pack_dtype="uint64", out_dtype="int32")
        sides[f"A{ab}W1"] = _runner(relay.Function([xb], y), a,
                                    bitserial_dense_python(a, w, ab, 1, "int32"))
    return sides


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--filter", default="")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"# {machine_description()}; {args.rounds} interleaved rounds; ratio = fp32 / side "
          "(median of the per-round ratios; best/best in brackets)")
    cases = [("conv", c) for c in CONVS] + [("dense", c) for c in DENSES]
    for kind, c in cases:
        name = (f"conv{c[3]}x{c[3]} s{c[4]} {c[0]}x{c[2]}x{c[2]}->{c[1]}" if kind == "conv"
                else f"dense {c[0]}x{c[2]}->{c[1]}")
        if args.filter not in name:
            continue
        sides = (conv_sides if kind == "conv" else dense_sides)(c, rng)
        t = interleaved_samples(sides, args.rounds)
        base = t["fp32"]
        cells = [f"fp32 {quartiles(base)[1] * 1e6:8.1f} us"]
        for k, v in t.items():
            if k == "fp32":
                continue
            ratio = float(np.median([b / x for b, x in zip(base, v)]))
            cells.append(f"{k} {quartiles(v)[1] * 1e6:8.1f} us x{ratio:5.2f} "
                         f"[{min(base) / min(v):5.2f}]")
        print(f"{name:32s} " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
