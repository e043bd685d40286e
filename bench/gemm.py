"""fp32 GEMM vs numpy (OpenBLAS), same run, interleaved.

    python bench/gemm.py [--sizes 1024 1000 ...] [--b const input] [--op matmul gemm]
    python bench/gemm.py --mode packed [--sizes 1024 2048]

``--mode onnx`` (default): the path a user takes. A one-node ONNX model (``MatMul``
A[M,K] @ B[K,N], or ``Gemm`` A @ B + bias[N]) is imported with ``relay.frontend.from_onnx``,
built with ``relay.build`` at opt_level 3 and run with the graph executor; numpy computes
``a @ b`` (``+ bias``) on the same arrays. B is an initializer (``--b const``: packed at
compile time) or a second graph input (``--b input``: set once, as a user would). A size is
``S`` (S x S x S), ``MxNxK``, or ``BxMxNxK`` (a batched MatMul, ``[B,M,K] @ [B,K,N]``).
Each round times both sides (``number`` calls each, a pause between them); the table gives
the median ms per call with [min, max] over the rounds, and numpy time / tvmpy time
("speed", > 1: tvmpy faster) of the medians with the [min, max] of the per-round ratios;
"best" is the ratio of the two sides' fastest rounds (the older sections' best-of-N figure).

Threads (``--threads``, default: tvmpy's own count, TVM_NUM_THREADS else OMP_NUM_THREADS else the
CPUs): tvmpy through TVM_NUM_THREADS, numpy's OpenBLAS set to the same count at run time
(``common.numpy_blas_threads``); the header prints both.

``--mode packed``: the hand-written packed-GEMM schedule of ``topi/x86/gemm.py`` (square
sizes, N a multiple of 32), GFLOP/s of both and the build time (the issue-2 benchmark).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    bench_clock,
    bench_threads,
    best_time,
    blas_description,
    ensure_native_blas,
    machine_description,
    numpy_blas_threads,
)

ensure_native_blas()

import numpy as np  # noqa: E402

import tvmpy as tvm  # noqa: E402

PAUSE_S = 0.3
CLOCK = time.perf_counter  # --cpu-time: time.process_time (one thread on both sides)
DEFAULT_SIZES = ["1024", "1000", "1023", "777", "513", "3072x768x127", "1x1000x512"]


# ---------------------------------------------------------------------------------------------
# --mode packed: the hand-written schedule (issue 2)
def run_packed(size: int, target: str, repeat: int) -> dict:
    from tvmpy.topi.x86.gemm import packed_gemm

    M = N = K = size
    t0 = time.perf_counter()
    s, args = packed_gemm(M, N, K)
    f = tvm.build(s, args, target=target, name="gemm")
    build_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    A, B, C = tvm.nd.array(a), tvm.nd.array(b), tvm.nd.empty((M, N))
    f(A, B, C)
    ref = a @ b
    err = float(np.abs(C.numpy() - ref).max() / np.abs(ref).max())
    flop = 2.0 * M * N * K
    # interleave the two measurements so that load changes hit both alike; pause between them:
    # OpenBLAS's threads busy-wait ~0.1 s after a call (and libgomp's briefly), which would
    # steal the other side's second core
    t_tvm, t_np = [], []
    ev = f.time_evaluator(f.entry_name, tvm.cpu(0), number=3, repeat=1)
    for _ in range(repeat):
        time.sleep(PAUSE_S)
        t_tvm.append(ev(A, B, C).mean)
        time.sleep(PAUSE_S)
        t_np.append(best_time(lambda: a @ b, repeat=1, number=3))
    g_tvm, g_np = flop / min(t_tvm) / 1e9, flop / min(t_np) / 1e9
    return {"size": size, "build_s": build_s, "rel_err": err, "tvmpy": g_tvm, "numpy": g_np}


def main_packed(opts: argparse.Namespace) -> None:
    sizes = [int(s) for s in opts.sizes] if opts.sizes else [1024, 2048]
    print(f"{'size':>6} {'build s':>8} {'tvmpy GFLOP/s':>14} {'numpy GFLOP/s':>14} {'ratio':>6} {'rel err':>8}")
    for size in sizes:
        r = run_packed(size, opts.target, opts.repeat)
        print(f"{r['size']:>6} {r['build_s']:>8.2f} {r['tvmpy']:>14.1f} {r['numpy']:>14.1f} "
              f"{r['tvmpy'] / r['numpy']:>6.2f} {r['rel_err']:>8.1e}")


# ---------------------------------------------------------------------------------------------
# --mode onnx: relay.build of an ONNX MatMul / Gemm, graph executor
def parse_size(text: str) -> tuple[int, int, int, int]:
    """``S`` | ``MxNxK`` | ``BxMxNxK`` -> (batch or 0, M, N, K)."""
    dims = [int(d) for d in text.lower().split("x")]
    if len(dims) == 1:
        return 0, dims[0], dims[0], dims[0]
    if len(dims) == 3:
        return (0, *dims)
    if len(dims) == 4:
        return tuple(dims)  # type: ignore[return-value]
    raise SystemExit(f"bad size {text!r}: S, MxNxK or BxMxNxK")


def onnx_model(batch: int, M: int, N: int, K: int, op: str, const_b: bool,
               b: np.ndarray, bias: np.ndarray | None):
    from onnx import TensorProto, helper, numpy_helper

    lead = [batch] if batch else []
    inputs = [helper.make_tensor_value_info("A", TensorProto.FLOAT, lead + [M, K])]
    inits = []
    if const_b:
        inits.append(numpy_helper.from_array(b, "B"))
    else:
        inputs.append(helper.make_tensor_value_info("B", TensorProto.FLOAT, list(b.shape)))
    out = helper.make_tensor_value_info("Y", TensorProto.FLOAT, lead + [M, N])
    if op == "gemm":
        inits.append(numpy_helper.from_array(bias, "C"))
        node = helper.make_node("Gemm", ["A", "B", "C"], ["Y"])
    else:
        node = helper.make_node("MatMul", ["A", "B"], ["Y"])
    graph = helper.make_graph([node], "gemm", inputs, [out], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _number(fn, budget_s: float = 0.02) -> int:
    """Calls per sample so that one sample takes about ``budget_s``."""
    t = time.perf_counter()
    fn()
    dt = time.perf_counter() - t
    return max(1, min(200, int(budget_s / max(dt, 1e-6))))


def run_onnx(size: str, op: str, const_b: bool, target: str, repeat: int) -> dict:
    from tvmpy import relay
    from tvmpy.contrib import graph_executor

    batch, M, N, K = parse_size(size)
    if op == "gemm" and batch:
        raise SystemExit("--op gemm: 2-D sizes only (ONNX Gemm is 2-D)")
    rng = np.random.default_rng(0)
    lead = (batch,) if batch else ()
    a = rng.standard_normal((*lead, M, K), dtype=np.float32)
    b = rng.standard_normal((*lead, K, N), dtype=np.float32)
    bias = rng.standard_normal((N,), dtype=np.float32) if op == "gemm" else None
    model = onnx_model(batch, M, N, K, op, const_b, b, bias)
    t0 = time.perf_counter()
    mod, params = relay.frontend.from_onnx(model)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target=target, params=params)
    build_s = time.perf_counter() - t0
    gm = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    gm.set_input("A", a)
    if not const_b:
        gm.set_input("B", b)

    def ref() -> np.ndarray:
        return a @ b if bias is None else a @ b + bias

    gm.run()
    want = ref()
    err = float(np.abs(gm.get_output(0).numpy() - want).max() / np.abs(want).max())
    n_tvm, n_np = _number(gm.run), _number(ref)
    t_tvm, t_np = [], []
    for _ in range(repeat):  # interleaved; a pause lets the other side's spinning threads sleep
        time.sleep(PAUSE_S)
        t = CLOCK()
        for _ in range(n_tvm):
            gm.run()
        t_tvm.append((CLOCK() - t) / n_tvm)
        time.sleep(PAUSE_S)
        t = CLOCK()
        for _ in range(n_np):
            ref()
        t_np.append((CLOCK() - t) / n_np)
    t_tvm_a, t_np_a = np.array(t_tvm), np.array(t_np)
    ratios = t_np_a / t_tvm_a
    return {"size": size, "op": op, "b": "const" if const_b else "input", "build_s": build_s,
            "err": err, "tvm": t_tvm_a, "np": t_np_a, "ratios": ratios,
            "speed": float(np.median(t_np_a) / np.median(t_tvm_a)),
            "best": float(t_np_a.min() / t_tvm_a.min()),
            "gflop": 2.0 * max(batch, 1) * M * N * K / 1e9}


def _ms(t: np.ndarray) -> str:
    return f"{np.median(t) * 1e3:8.3f} [{t.min() * 1e3:.3f}, {t.max() * 1e3:.3f}]"


def main_onnx(opts: argparse.Namespace) -> None:
    sizes = opts.sizes or DEFAULT_SIZES
    print(f"# mode onnx: relay.build opt_level 3, target {opts.target!r}, graph executor; "
          f"{opts.repeat} rounds; load average {os.getloadavg()[0]:.2f} at start")
    print(f"{'size':>14} {'op':>6} {'B':>5} {'tvmpy ms [min, max]':>28} "
          f"{'numpy ms [min, max]':>28} {'GFLOP/s':>7} {'speed [min, max]':>18} {'best':>5} "
          f"{'rel err':>8}")
    worst = []
    for size in sizes:
        for op in opts.op:
            for b in opts.b:
                r = run_onnx(size, op, b == "const", opts.target, opts.repeat)
                gf = r["gflop"] / np.median(r["tvm"])
                print(f"{r['size']:>14} {r['op']:>6} {r['b']:>5} {_ms(r['tvm']):>28} "
                      f"{_ms(r['np']):>28} {gf:7.1f} {r['speed']:6.2f} "
                      f"[{r['ratios'].min():.2f}, {r['ratios'].max():.2f}] {r['best']:5.2f} "
                      f"{r['err']:8.1e}",
                      flush=True)
                worst.append(r["speed"])
    print(f"# load average {os.getloadavg()[0]:.2f} at end; lowest speed {min(worst):.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["onnx", "packed"], default="onnx")
    p.add_argument("--sizes", nargs="+", help=f"default (onnx): {' '.join(DEFAULT_SIZES)}; "
                   "(packed): 1024 2048")
    p.add_argument("--op", nargs="+", choices=["matmul", "gemm"], default=["matmul"])
    p.add_argument("--b", nargs="+", choices=["const", "input"], default=["const", "input"])
    p.add_argument("--target", default="llvm")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--threads", type=int, default=None,
                   help="threads of both sides (default: tvmpy's own count)")
    p.add_argument("--cpu-time", action="store_true",
                   help="time rounds in process CPU time (needs --threads 1)")
    opts = p.parse_args()
    global CLOCK
    threads = bench_threads(opts.threads)  # before tvmpy's pool starts
    CLOCK = bench_clock(opts.cpu_time, threads)
    blas = numpy_blas_threads(threads)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {machine_description()}; "
          f"numpy: {blas_description()}; threads: tvmpy {threads}, numpy "
          f"{blas if blas is not None else 'OpenBLAS default (could not be set)'}; "
          f"{'process CPU time' if opts.cpu_time else 'wall time'}")
    if opts.mode == "packed":
        main_packed(opts)
    else:
        main_onnx(opts)


if __name__ == "__main__":
    main()
