"""Transformer and segmentation kernels (issue 25, point 4) against onnxruntime and numpy in the
same run: softmax over attention scores (plain, and scaled + masked as exports have it),
log_softmax, the attention batch_matmuls (Q K^T and P V, broadcast batch), a whole attention
block, DeepLabV3's dilated ASPP convolutions (dilations larger than the map), LayerNorm and the
T5 / GPT-2 norm and GELU chains.

Each case is a small ONNX model both sides compile (tvmpy: ``relay.frontend.from_onnx`` +
``relay.build`` at opt_level 3 on the graph executor, inputs set once; onnxruntime: inputs and
output bound once, ``run_with_iobinding``) and, where numpy has the op, the same computation in
numpy (its OpenBLAS matmul for the products). Timing is bench/common.py's
``interleaved_samples``: the sides interleaved, median over the rounds; ratio = tvmpy median /
other side's median (below 1: tvmpy faster). Outputs are checked against onnxruntime.

    python bench/attention.py [--threads 1,2] [--filter TEXT] [--rounds 9] [--small]

Each thread count runs in its own process (tvmpy's pool reads TVM_NUM_THREADS once);
``--small`` uses short sequences (a quick check, not the issue's sizes).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    ensure_native_blas,
    geomean,
    interleaved_samples,
    machine_description,
    numpy_blas_threads,
    ort_bound_runner,
    ort_session,
)
from ops import _node, _onnx_model, tvm_side  # noqa: E402

ensure_native_blas()

import numpy as np  # noqa: E402

RNG = np.random.default_rng(0)


def _rand(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (RNG.uniform(-1, 1, size=shape) * scale).astype(np.float32)


@dataclass
class Case:
    name: str
    onnx_fn: Callable[[], Any]
    feeds: dict[str, np.ndarray]
    numpy_fn: Callable[[], Any] | None = None
    elems: int = 0          # elements of the output (ns/element is printed when given)
    flops: float = 0.0      # GFLOP/s is printed when given


def _np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def softmax_case(shape: tuple[int, ...], log: bool = False) -> Case:
    x = _rand(*shape, scale=4.0)
    op = "LogSoftmax" if log else "Softmax"

    def np_fn() -> Any:
        m = x - x.max(-1, keepdims=True)
        return m - np.log(np.exp(m).sum(-1, keepdims=True)) if log else _np_softmax(x)

    return Case(f"{op.lower()} {'x'.join(map(str, shape))}",
                lambda: _onnx_model([_node(op, ["x"], "y", axis=-1)], {"x": x}, shape, {}),
                {"x": x}, np_fn, elems=int(np.prod(shape)))


def masked_softmax_case(b: int, h: int, s: int) -> Case:
    """softmax(scores * scale + mask): the mask [b, 1, 1, s] broadcast over heads and rows."""
    x = _rand(b, h, s, s, scale=4.0)
    mask = np.where(RNG.uniform(size=(b, 1, 1, s)) < 0.1, -1e4, 0).astype(np.float32)
    sc = np.float32(0.125)
    nodes = [_node("Mul", ["x", "sc"], "m"), _node("Add", ["m", "mask"], "a"),
             _node("Softmax", ["a"], "y", axis=-1)]
    return Case(f"scale+mask+softmax {b}x{h}x{s}x{s}",
                lambda: _onnx_model(nodes, {"x": x, "mask": mask}, x.shape,
                                    {"sc": np.array(sc)}),
                {"x": x, "mask": mask}, lambda: _np_softmax(x * sc + mask), elems=x.size)


def bmm_case(b: int, m: int, k: int, n: int, trans_b: bool, bcast: bool = False) -> Case:
    """MatMul A[b, m, k] @ B: B given as [b, n, k] and transposed in the graph (Q K^T as torch
    exports it) when ``trans_b``, else [b, k, n]; ``bcast``: B has batch 1 (broadcast)."""
    a = _rand(b, m, k)
    bb = _rand(1 if bcast else b, *((n, k) if trans_b else (k, n)))
    nodes = ([_node("Transpose", ["bb"], "t", perm=[0, 2, 1]), _node("MatMul", ["a", "t"], "y")]
             if trans_b else [_node("MatMul", ["a", "bb"], "y")])
    bt = bb.transpose(0, 2, 1) if trans_b else bb
    name = f"batch_matmul {b}x{m}x{k} @ {'1' if bcast else b}x{k}x{n}" + (
        " (B^T)" if trans_b else "")
    return Case(name, lambda: _onnx_model(nodes, {"a": a, "bb": bb}, (b, m, n), {}),
                {"a": a, "bb": bb}, lambda: np.matmul(a, bt), flops=2.0 * b * m * n * k)


def attention_case(h: int, s: int, d: int) -> Case:
    """softmax(Q K^T / sqrt(d)) V over [1, h, s, d] (the Whisper encoder's block core)."""
    q, k, v = _rand(1, h, s, d), _rand(1, h, s, d), _rand(1, h, s, d)
    sc = np.float32(1 / np.sqrt(d))
    nodes = [_node("Transpose", ["k"], "kt", perm=[0, 1, 3, 2]),
             _node("MatMul", ["q", "kt"], "s"), _node("Mul", ["s", "sc"], "ss"),
             _node("Softmax", ["ss"], "p", axis=-1), _node("MatMul", ["p", "v"], "y")]
    feeds = {"q": q, "k": k, "v": v}
    return Case(f"attention h{h} s{s} d{d}",
                lambda: _onnx_model(nodes, feeds, q.shape, {"sc": np.array(sc)}), feeds,
                lambda: np.matmul(_np_softmax(np.matmul(q, k.transpose(0, 1, 3, 2)) * sc), v),
                flops=4.0 * h * s * s * d)


def aspp_case(ic: int, hw: int, oc: int, dil: int) -> Case:
    """A 3x3 convolution, padding = dilation (DeepLabV3's ASPP branches) + bias + ReLU."""
    x, w, b = _rand(1, ic, hw, hw), _rand(oc, ic, 3, 3, scale=0.05), _rand(oc)
    nodes = [_node("Conv", ["x", "w", "b"], "c", pads=[dil] * 4, dilations=[dil, dil],
                   kernel_shape=[3, 3]), _node("Relu", ["c"], "y")]
    return Case(f"conv3x3 dil{dil} {ic}x{hw}x{hw}->{oc}",
                lambda: _onnx_model(nodes, {"x": x}, (1, oc, hw, hw), {"w": w, "b": b}),
                {"x": x}, None, flops=2.0 * oc * hw * hw * ic * 9)


def layer_norm_case(m: int, n: int) -> Case:
    x, g, be = _rand(m, n), _rand(n), _rand(n)

    def np_fn() -> Any:
        mu = x.mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + be

    return Case(f"layer_norm {m}x{n}", lambda: _onnx_model(
        [_node("LayerNormalization", ["x", "g", "be"], "y", axis=-1, epsilon=1e-5)],
        {"x": x}, (m, n), {"g": g, "be": be}), {"x": x}, np_fn, elems=m * n)


def rms_norm_case(m: int, n: int) -> Case:
    """T5's LayerNorm as transformers exports it: x * rsqrt(mean(x^2) + eps) * w (Pow,
    ReduceMean, Add, Sqrt, Div, Mul, Mul)."""
    x, w = _rand(1, m, n), _rand(n)
    nodes = [_node("Pow", ["x", "two"], "p"), _node("ReduceMean", ["p"], "mu", axes=[-1]),
             _node("Add", ["mu", "eps"], "a"), _node("Sqrt", ["a"], "r"),
             _node("Div", ["x", "r"], "d"), _node("Mul", ["w", "d"], "y")]
    inits = {"two": np.array(2, np.float32), "eps": np.array(1e-6, np.float32), "w": w}
    return Case(f"t5 rms_norm 1x{m}x{n}",
                lambda: _onnx_model(nodes, {"x": x}, x.shape, inits, opset=13), {"x": x},
                lambda: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w, elems=x.size)


def gelu_tanh_case(m: int, n: int) -> Case:
    """GPT-2's NewGELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    x = _rand(1, m, n, scale=3.0)
    nodes = [_node("Pow", ["x", "three"], "x3"), _node("Mul", ["x3", "c"], "cx3"),
             _node("Add", ["x", "cx3"], "in"), _node("Mul", ["in", "k"], "kin"),
             _node("Tanh", ["kin"], "t"), _node("Add", ["t", "one"], "t1"),
             _node("Mul", ["x", "half"], "hx"), _node("Mul", ["hx", "t1"], "y")]
    inits = {"three": np.array(3, np.float32), "c": np.array(0.044715, np.float32),
             "k": np.array(np.sqrt(2 / np.pi), np.float32), "one": np.array(1, np.float32),
             "half": np.array(0.5, np.float32)}
    return Case(f"gpt2 gelu(tanh) 1x{m}x{n}",
                lambda: _onnx_model(nodes, {"x": x}, x.shape, inits), {"x": x},
                lambda: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
                elems=x.size)


def cases(small: bool) -> list[Case]:
    s = 300 if small else 1500  # the Whisper-style encoder's 1,500 frames
    return [
        softmax_case((1, 6, s, s)),
        masked_softmax_case(1, 6, s),
        softmax_case((1, 12, 197, 197)),           # ViT-B/16
        softmax_case((4, 97, 101)),                # prime lengths
        softmax_case((s, 1000), log=True),
        bmm_case(6, s, 64, s, trans_b=True),       # Q K^T
        bmm_case(6, s, s, 64, trans_b=False),      # P V
        bmm_case(12, 128, 64, 128, trans_b=True),  # BERT
        bmm_case(5, 97, 61, 89, trans_b=False, bcast=True),
        attention_case(6, s, 64),
        aspp_case(960, 16, 256, 12),
        aspp_case(960, 16, 256, 24),
        aspp_case(960, 16, 256, 36),
        aspp_case(960, 16, 256, 1),                # the same conv undilated (a reference)
        layer_norm_case(s, 384),
        rms_norm_case(128, 512),
        gelu_tanh_case(128, 3072),
    ]


def run_case(c: Case, rounds: int, threads: int) -> dict:
    model = c.onnx_fn()
    sess = ort_session(model, threads)
    ort_run, ort_outs = ort_bound_runner(sess, c.feeds)
    ort_run()
    want = ort_outs[0].numpy()
    m, build_s = tvm_side(model, c.feeds, 3)
    m.run()
    got = m.get_output(0).numpy()
    err = float(np.abs(got - want).max() / (np.abs(want).max() + 1e-6))
    sides: dict[str, Callable[[], object]] = {"tvmpy": m.run, "ort": ort_run}
    if c.numpy_fn is not None:
        sides["numpy"] = c.numpy_fn
    smp = interleaved_samples(sides, rounds, pause=0.02, target_s=0.05)
    row = {k: float(np.median(v)) for k, v in smp.items()}
    row.update(name=c.name, err=err, build=build_s,
               kernels=", ".join(f"{r['node']} {r['time'] * 1e3:.2f}"
                                 for r in m.profile(number=3).rows))
    return row


def worker(o: argparse.Namespace, threads: int) -> None:
    numpy_blas_threads(threads)
    wanted = o.filter.split("|")
    load = os.getloadavg()[0]
    print(f"## {threads} thread(s): {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, "
          f"{machine_description()}, load average {load:.2f}, {o.rounds} interleaved rounds, "
          "medians; ratio = tvmpy / other", flush=True)
    ratios = []
    for c in cases(o.small):
        if not any(w in c.name for w in wanted):
            continue
        try:
            r = run_case(c, o.rounds, threads)
        except Exception as e:  # a broken case is reported, the others still run
            print(f"{c.name}: FAILED {type(e).__name__}: {e}", flush=True)
            continue
        t = r["tvmpy"]
        extra = ""
        if c.elems:
            extra = f" {t / c.elems * 1e9:.2f} ns/elem"
        if c.flops:
            extra = f" {c.flops / t / 1e9:.0f} GF/s (ort {c.flops / r['ort'] / 1e9:.0f})"
        npy = (f", numpy {r['numpy'] * 1e3:.3f} ms (x{t / r['numpy']:.2f})"
               if "numpy" in r else "")
        ratios.append(t / r["ort"])
        print(f"{c.name:40s} tvmpy {t * 1e3:8.3f} ms{extra} | ort {r['ort'] * 1e3:.3f} ms "
              f"(x{t / r['ort']:.2f}){npy} | err {r['err']:.0e} build {r['build']:.1f}s",
              flush=True)
        if o.kernels:
            print(f"    kernels (ms): {r['kernels']}", flush=True)
    if ratios:
        print(f"# {threads} thread(s): geomean tvmpy/ort {geomean(ratios):.2f} over "
              f"{len(ratios)} cases", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,2", help="thread counts, e.g. 1,2")
    ap.add_argument("--filter", default="", help="only cases whose name contains this (a|b)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--small", action="store_true", help="short sequences (quick check)")
    ap.add_argument("--kernels", action="store_true", help="print tvmpy's per-kernel profile")
    ap.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)
    o = ap.parse_args()
    if o.worker:
        worker(o, o.worker)
        return
    for t in (int(v) for v in o.threads.split(",") if v):
        env = dict(os.environ, TVM_NUM_THREADS=str(t), OMP_NUM_THREADS=str(t),
                   OPENBLAS_NUM_THREADS=str(t))
        subprocess.run([sys.executable, *sys.argv, "--worker", str(t)], env=env, check=True)


if __name__ == "__main__":
    main()
