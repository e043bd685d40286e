"""One short CUDA check for a machine with an NVIDIA GPU (bench/RESULTS.md, issue 14).

    python bench/gpu_check.py [--sizes 1024,4096] [--out gpu_check.json]

Needs only the repo and its wheels (numpy, llvmlite, nvidia-cuda-nvrtc-cu12, nvidia-cuda-nvcc-cu12;
torch with CUDA when present, for the comparison and DLPack). It prints the device, then builds
with target "cuda -arch=<the device's sm>" and checks against numpy: an elementwise kernel with a
symbolic size (also through target "nvptx"), a vthread kernel, row reductions (one thread per row; 32 threads per row with
warp shuffles, cuda and nvptx; argmax of rows across 32 threads, a tuple combiner; a GEMM
reading its rows of A from "warp" memory through __shfl_sync) and the tiled GEMM (shared-memory tiles fetched
cooperatively; 16x16 threads with 4x4 outputs each, and TVM's tutorial
schedule: 8x8 threads x 2x2 virtual threads; target "nvptx" too at the first size) at each size, timed with
time_evaluator next to torch.matmul (cuBLAS) on the same device. Exits non-zero on a mismatch.
Without a GPU it still builds everything (NVRTC + ptxas) and says that nothing ran.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
import time
import traceback
from collections.abc import Iterator

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_common import cuda_event_times  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import te  # noqa: E402


def gemm_schedule(M: int, N: int, K: int, block: int = 64, threads: int = 16, ktile: int = 8,
                  vthreads: bool = False):
    """The classic TVM GPU GEMM: a block x block tile of C per thread block of threads x threads
    threads, each computing (block / threads)^2 outputs in registers (local); A/B tiles of
    block x ktile in shared memory fetched cooperatively by all threads, then copied to
    registers per k step. ``vthreads``: 2 x 2 virtual threads (strided outputs, fewer
    shared-memory bank conflicts), as in TVM's tutorial."""
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "shared", [C])
    BB = s.cache_read(B, "shared", [C])
    AL = s.cache_read(AA, "local", [C])
    BL = s.cache_read(BB, "local", [C])
    CC = s.cache_write(C, "local")
    by, yi = s[C].split(C.op.axis[0], factor=block)
    bx, xi = s[C].split(C.op.axis[1], factor=block)
    s[C].reorder(by, bx, yi, xi)
    s[C].bind(by, te.thread_axis("blockIdx.y"))
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    if vthreads:
        tyz, yi = s[C].split(yi, nparts=2)
        txz, xi = s[C].split(xi, nparts=2)
    ty, yi = s[C].split(yi, nparts=threads)
    tx, xi = s[C].split(xi, nparts=threads)
    if vthreads:
        s[C].reorder(tyz, txz, ty, tx, yi, xi)
        s[C].bind(tyz, te.thread_axis("vthread", name="vy"))
        s[C].bind(txz, te.thread_axis("vthread", name="vx"))
    else:
        s[C].reorder(ty, tx, yi, xi)
    s[C].bind(ty, te.thread_axis("threadIdx.y"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    s[CC].compute_at(s[C], tx)
    yo, xo = CC.op.axis
    ko, ki = s[CC].split(CC.op.reduce_axis[0], factor=ktile)
    s[CC].reorder(ko, ki, yo, xo)
    s[AA].compute_at(s[CC], ko)
    s[BB].compute_at(s[CC], ko)
    s[AL].compute_at(s[CC], ki)
    s[BL].compute_at(s[CC], ki)
    for S in (AA, BB):  # cooperative fetch: the tile's elements spread over all threads
        fused = s[S].fuse(*s[S].op.axis)
        rest, t = s[S].split(fused, factor=threads * threads)
        ty_, tx_ = s[S].split(t, factor=threads)
        s[S].bind(ty_, te.thread_axis("threadIdx.y"))
        s[S].bind(tx_, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


GEMM_VARIANTS = {"16x16 threads": {"threads": 16},
                 "tvm-tutorial 8x8 threads x 2x2 vthreads": {"threads": 8, "vthreads": True},
                 "128x128 block 16x16 threads x 2x2 vthreads": {"block": 128, "threads": 16,
                                                                "vthreads": True},
                 "128x128 block 16x16 threads x 2x2 vthreads ktile 16": {
                     "block": 128, "threads": 16, "vthreads": True, "ktile": 16}}


def argmax_rows(rows: int, k: int, threads: int = 32):
    """topi.argmax over rows, a block per row, the columns split over 32 threads (warp
    shuffles of the (index, value) pair)."""
    from tvmpy import topi

    A = te.placeholder((rows, k), name="A")
    B = topi.argmax(A, axis=1)
    red = B.op.input_tensors[0]
    s = te.create_schedule(B.op)
    s[red].bind(red.op.axis[0], te.thread_axis("blockIdx.x"))
    ko, _ = s[red].split(red.op.reduce_axis[0], nparts=threads)
    s[red].bind(ko, te.thread_axis("threadIdx.x"))
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    return s, [A, B]


def warp_gemm(M: int, N: int, K: int, lanes: int = 32):
    """C = A @ B with each block's row of A in "warp" memory (registers + shuffles)."""
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AW = s.cache_read(A, "warp", [C])
    tx = te.thread_axis("threadIdx.x")
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=lanes)
    s[C].bind(i, te.thread_axis("blockIdx.y"))
    s[C].bind(jo, te.thread_axis("blockIdx.x"))
    s[C].bind(ji, tx)
    s[AW].compute_at(s[C], jo)
    _, ki = s[AW].split(s[AW].op.axis[1], factor=lanes)
    s[AW].bind(ki, tx)
    return s, [A, B, C]


def _bind_1d(s, stage, axis, factor):
    bx, tx = s[stage].split(axis, factor=factor)
    s[stage].bind(bx, te.thread_axis("blockIdx.x"))
    s[stage].bind(tx, te.thread_axis("threadIdx.x"))


def _check(name: str, got: np.ndarray, want: np.ndarray, report: dict, rtol: float = 1e-4) -> bool:
    err = float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))
    ok = bool(err <= rtol)
    report["checks"][name] = {"max_rel_err": err, "ok": ok}
    print(f"  {name:<28} max|err|/max|ref| = {err:.2e}  {'OK' if ok else 'MISMATCH'}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1024,4096", help="GEMM sizes (M = N = K)")
    ap.add_argument("--number", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="", help="also write the report as JSON here")
    args = ap.parse_args()
    from tvmpy.contrib import nvcc
    from tvmpy.runtime.cuda_module import CUDA_API, get_driver

    dev = tvm.cuda(0)
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "checks": {},
                    "errors": {},
                    "gemm": {}, "nvrtc": ".".join(map(str, nvcc.nvrtc_version()))}
    has_gpu = dev.exist
    if has_gpu:
        drv = get_driver()
        arch = CUDA_API.arch(0)
        report["device"] = (f"{dev.device_name} ({arch}, {dev.multi_processor_count} SMs), "
                            f"driver {drv.driver_version()}")
        target = f"cuda -arch={arch}"
    else:
        report["device"] = "none (no CUDA device: building only)"
        target = "cuda"
    print(f"device: {report['device']}; NVRTC {report['nvrtc']}; target {target!r}")
    torch = None
    try:
        import torch as _torch

        if _torch.cuda.is_available():
            torch = _torch
            report["torch"] = f"{_torch.__version__}, cuBLAS via torch.matmul"
    except ImportError:
        pass
    rng = np.random.default_rng(0)

    # elementwise, symbolic n (guards), and the DLPack round trip with torch
    n = te.var("n")
    X = te.placeholder((n,), name="X")
    Y = te.compute((n,), lambda i: te.exp(X[i]) * 0.5 + te.tanh(X[i]), name="Y")
    s = te.create_schedule(Y.op)
    _bind_1d(s, Y, Y.op.axis[0], 128)
    f_ew = tvm.build(s, [X, Y], target=target, name="ew")
    f_ew_nvptx = tvm.build(s, [X, Y], target=target.replace("cuda", "nvptx"), name="ew")
    # vthread
    V = te.compute((n,), lambda i: X[i] * 2.0 + 1.0, name="V")
    s = te.create_schedule(V.op)
    bx, x = s[V].split(V.op.axis[0], factor=256)
    vx, tx = s[V].split(x, nparts=4)
    s[V].bind(bx, te.thread_axis("blockIdx.x"))
    s[V].bind(vx, te.thread_axis("vthread"))
    s[V].bind(tx, te.thread_axis("threadIdx.x"))
    f_vt = tvm.build(s, [X, V], target=target, name="vt")
    # row sums, one thread per row
    R = te.placeholder((4099, 257), name="R")
    kk = te.reduce_axis((0, 257), name="kk")
    S = te.compute((4099,), lambda i: te.sum(R[i, kk], axis=kk), name="S")
    s = te.create_schedule(S.op)
    _bind_1d(s, S, S.op.axis[0], 64)
    f_rs = tvm.build(s, [R, S], target=target, name="rowsum")
    # row sums with 32 threads per row: rfactor + a cross-thread reduction (warp shuffles)
    S2 = te.compute((4099,), lambda i: te.sum(R[i, kk], axis=kk), name="S2")
    s = te.create_schedule(S2.op)
    ko, _ = s[S2].split(S2.op.reduce_axis[0], nparts=32)
    SF = s.rfactor(S2, ko)
    tx = te.thread_axis("threadIdx.x")
    s[S2].bind(s[S2].op.reduce_axis[0], tx)
    s[SF].compute_at(s[S2], s[S2].op.reduce_axis[0])
    s[S2].set_store_predicate(tx.var.equal(0))
    s[S2].bind(s[S2].op.axis[0], te.thread_axis("blockIdx.x"))
    f_warp = {kind: tvm.build(s, [R, S2], target=target.replace("cuda", kind), name="warpsum")
              for kind in ("cuda", "nvptx")}
    f_argmax, f_warpmem = {}, {}
    for kind in ("cuda", "nvptx"):
        sch, sargs = argmax_rows(4099, 257)
        f_argmax[kind] = tvm.build(sch, sargs, target=target.replace("cuda", kind), name="amax")
        sch, sargs = warp_gemm(37, 203, 45)
        f_warpmem[kind] = tvm.build(sch, sargs, target=target.replace("cuda", kind), name="wgemm")
    sizes = [int(x) for x in args.sizes.split(",") if x]
    gemms = {}
    for size in sizes:
        for variant, kw in GEMM_VARIANTS.items():
            t0 = time.perf_counter()
            sch, gargs = gemm_schedule(size, size, size, **kw)
            for kind in ("cuda", "nvptx"):
                if kind == "nvptx" and size != sizes[0]:
                    continue  # the LLVM NVPTX path: checked at the first size only
                key = f"{size} {variant} [{kind}]"
                gemms[key] = (size, tvm.build(sch, gargs, target=target.replace("cuda", kind),
                                              name=f"gemm{size}"))
                info = next(iter(next(iter(
                    gemms[key][1].imported_modules[0].ptxas_info.values())).values()))
                print(f"  built gemm {key} in {time.perf_counter() - t0:.1f} s: "
                      f"{info.registers} registers, {info.shared_bytes} B shared, "
                      f"{info.stack_bytes} B stack, {info.spill_stores} B spilled")
                report["gemm"][key] = {"registers": info.registers,
                                       "shared_bytes": info.shared_bytes}
    if not has_gpu:
        print("no CUDA device: everything built (NVRTC + ptxas); nothing ran")
        report["ran"] = False
        _write(report, args.out)
        return 0
    report["ran"] = True

    with _guard("small kernels", report):
        for size_n in (1, 1000, 100003):
            x = rng.standard_normal(size_n).astype("float32")
            y = tvm.nd.empty((size_n,), "float32", dev)
            f_ew(tvm.nd.array(x, dev), y)
            _check(f"elementwise n={size_n}", y.numpy(), np.exp(x) * 0.5 + np.tanh(x), report)
            y2 = tvm.nd.empty((size_n,), "float32", dev)
            f_ew_nvptx(tvm.nd.array(x, dev), y2)
            _check(f"elementwise nvptx n={size_n}", y2.numpy(), np.exp(x) * 0.5 + np.tanh(x),
                         report)
        x = rng.standard_normal(5000).astype("float32")
        v = tvm.nd.empty((5000,), "float32", dev)
        f_vt(tvm.nd.array(x, dev), v)
        _check("vthread n=5000", v.numpy(), x * 2 + 1, report)
        r = rng.standard_normal((4099, 257)).astype("float32")
        sres = tvm.nd.empty((4099,), "float32", dev)
        f_rs(tvm.nd.array(r, dev), sres)
        _check("row sums 4099x257", sres.numpy(), r.astype("float64").sum(1), report)
        for kind, fw in f_warp.items():
            sres = tvm.nd.empty((4099,), "float32", dev)
            fw(tvm.nd.array(r, dev), sres)
            _check(f"warp-shuffle row sums [{kind}]", sres.numpy(), r.astype("float64").sum(1),
                   report)
        ties = rng.integers(-3, 3, (4099, 257)).astype("float32")
        for kind, fa in f_argmax.items():
            for name, data in (("normal", r), ("ties", ties)):
                idx = tvm.nd.empty((4099,), "int32", dev)
                fa(tvm.nd.array(data, dev), idx)
                _check(f"argmax rows across threads [{kind}, {name}]", idx.numpy(),
                       np.argmax(data, axis=1), report, rtol=0)
        wa = rng.uniform(-1, 1, (37, 45)).astype("float32")
        wb = rng.uniform(-1, 1, (45, 203)).astype("float32")
        for kind, fw in f_warpmem.items():
            wc = tvm.nd.empty((37, 203), "float32", dev)
            fw(tvm.nd.array(wa, dev), tvm.nd.array(wb, dev), wc)
            _check(f"warp-memory gemm 37x203x45 [{kind}]", wc.numpy(), wa @ wb, report)
        if torch is not None:
            tt = torch.from_dlpack(y)  # tvm -> torch, same memory
            back = tvm.nd.from_dlpack(tt * 2)  # torch -> tvm
            _check("dlpack torch round trip", back.numpy(), 2 * y.numpy(), report)

    torch_ms: dict[int, float] = {}
    for key, (size, f) in gemms.items():
        with _guard(f"gemm {key}", report):
            a = rng.uniform(-1, 1, (size, size)).astype("float32")
            b = rng.uniform(-1, 1, (size, size)).astype("float32")
            da, db = tvm.nd.array(a, dev), tvm.nd.array(b, dev)
            dc = tvm.nd.empty((size, size), "float32", dev)
            f(da, db, dc)
            ref = a @ b
            _check(f"gemm {key}", dc.numpy(), ref, report, rtol=1e-4)
            tm = f.time_evaluator(f.entry_name, dev, number=args.number, repeat=args.repeat)(da, db, dc)
            flops = 2.0 * size ** 3
            entry = report["gemm"][key]
            entry.update({"tvmpy_ms": tm.mean * 1e3, "tvmpy_tflops": flops / tm.mean / 1e12})
            line = f"  gemm {key}: tvmpy {tm.mean * 1e3:8.3f} ms ({entry['tvmpy_tflops']:.2f} TFLOPS)"
            if torch is not None and size not in torch_ms:
                ta = torch.from_numpy(a).cuda()
                tb = torch.from_numpy(b).cuda()
                torch.backends.cuda.matmul.allow_tf32 = False
                for _ in range(3):
                    torch.matmul(ta, tb)
                torch.cuda.synchronize()
                best = cuda_event_times(functools.partial(torch.matmul, ta, tb), args.number, args.repeat)
                torch_ms[size] = float(np.mean(best)) * 1e3
            if torch is not None:
                ms = torch_ms[size]
                entry.update({"torch_ms": ms, "torch_tflops": flops / (ms / 1e3) / 1e12})
                line += f"; torch.matmul fp32 (no TF32) {ms:8.3f} ms ({entry['torch_tflops']:.2f} TFLOPS)"
            print(line)
    _write(report, args.out)
    ok = all(c["ok"] for c in report["checks"].values()) and not report["errors"]
    print("ALL OK" if ok else "MISMATCHES OR ERRORS: see above")
    return 0 if ok else 1


@contextlib.contextmanager
def _guard(name: str, report: dict) -> Iterator[None]:
    """Run a section; an exception is reported and the script goes on with the next one."""
    try:
        yield
    except Exception as err:  # noqa: BLE001  (a device check must report, not stop)
        report["errors"][name] = f"{type(err).__name__}: {err}"
        print(f"  {name}: ERROR {type(err).__name__}: {err}")
        traceback.print_exc()


def _write(report: dict, path: str) -> None:
    if path:
        with open(path, "w") as fh:
            json.dump(report, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
