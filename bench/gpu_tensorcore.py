"""float16 / bfloat16 GEMM on tensor cores (``dense_tensorcore.cuda``, wmma) vs torch.matmul
(cuBLAS), issue 29 point 1 (bench/RESULTS.md).

    python bench/gpu_tensorcore.py [--sizes 1024,4096,8192] [--configs all]
                                   [--dtypes float16,bfloat16] [--out tc.json]

For each size (M = N = K): C[M, N] = A[M, K] @ B[N, K]^T, float16 inputs, float32 accumulation
and output, built with target "cuda -arch=<the device's sm>" for several block/warp tilings
(the knobs of the template; the fallback is one of them), with and without cp.async copies
into shared memory (PassContext config "cuda.async_copy"), each timed with time_evaluator and
checked against torch's results on the same inputs (relative error = max |diff| / max |ref|
against torch.matmul in float32 without TF32, and against torch's float16 matmul, which is
timed as the cuBLAS baseline: fp16 in, fp32 accumulation, fp16 out). bfloat16: the same at
4096 with three of the variants (BF16_CONFIGS), against torch's bfloat16 matmul. Exits non-zero when a
result is wrong (relative error > 1e-3 against the float32 reference). Inputs are made on the
GPU by torch and passed through DLPack. Without a GPU (or torch) it builds every variant
(NVRTC + ptxas) and prints ptxas's registers / spills / shared memory per kernel.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
import traceback
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_common import cuda_event_times  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import autotvm  # noqa: E402
from tvmpy.autotvm.task.task import deserialize_args  # noqa: E402
from tvmpy.target import Target  # noqa: E402

# name -> knobs (block_row_warps, block_col_warps, warp_row_tiles, warp_col_tiles, chunk);
# offset 8, vec 8, wmma 16x16x16 throughout. Block tile = warps x tiles x 16.
# The fallback picks 128x128 with 2x4 warps of 4x2 tiles at these sizes. "+async": the same
# with the PassContext config "cuda.async_copy" (global -> shared copies as cp.async);
# "+swz8": the knob swizzle = 8 (one grid axis, 8 block rows fastest: L2 reuse).
CONFIGS = {
    "fallback": None,
    "b128x128_w2x2_t4x4_k32": (2, 2, 4, 4, 2),
    "b128x128_w4x2_t2x4_k32": (4, 2, 2, 4, 2),
    "fallback+async": None,
    "b128x128_w2x2_t4x4_k32+async": (2, 2, 4, 4, 2),
    "b128x128_w4x2_t2x4_k32+async": (4, 2, 2, 4, 2),
    "b64x128_w2x4_t2x2_k32+async": (2, 4, 2, 2, 2),
    "b128x256_w2x4_t4x4_k16+async": (2, 4, 4, 4, 1),
    "b64x64_w2x2_t2x2_k64+async": (2, 2, 2, 2, 4),
    "b128x128_w2x4_t4x2_k32+async+swz8": (2, 4, 4, 2, 2),
    "b128x128_w2x2_t4x4_k32+async+swz8": (2, 2, 4, 4, 2),
}
BF16_CONFIGS = ("fallback", "fallback+async", "b128x128_w2x2_t4x4_k32+async")
BF16_SIZES = (4096,)
_KNOBS = ("block_row_warps", "block_col_warps", "warp_row_tiles", "warp_col_tiles", "chunk")
TOL = 1e-3  # relative to max |ref|: fp32 accumulation differs only in summation order


def _config(task, knobs, swizzle=1):
    space = task.config_space
    vals = dict(zip(_KNOBS, knobs), offset=8, offsetCS=8, vec=8, wmma_m=16, swizzle=swizzle)
    idx = [[e.val for e in sp.entities].index(vals[name])
           for name, sp in space.space_map.items()]
    return space.get(space.knob2point(idx))


def build(size: int, name: str, target: Target, dtype: str = "float16"):
    """(module, ptxas info of the kernel) of one variant."""
    args = (("TENSOR", (size, size), dtype), ("TENSOR", (size, size), dtype), None, "float32")
    task = autotvm.task.create("dense_tensorcore.cuda", args, target=target)
    with target, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no tuned config" for the fallback variant
        swizzle = int(name.split("+swz")[1]) if "+swz" in name else 1
        if CONFIGS[name] is None:
            s, tensors = task.func(*deserialize_args(task.args))
        else:
            s, tensors = task.instantiate(_config(task, CONFIGS[name], swizzle))
    with tvm.transform.PassContext(config={"cuda.async_copy": "+async" in name}):
        mod = tvm.build(s, tensors, target=target)
    info = mod.imported_modules[0].ptxas_info
    kinfo = {arch: {k: vars(v) for k, v in per.items()} for arch, per in info.items()}
    return mod, kinfo


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1024,4096,8192")
    ap.add_argument("--configs", default="all", help="comma-separated names of CONFIGS, or all")
    ap.add_argument("--dtypes", default="float16,bfloat16",
                    help="input dtypes; bfloat16 runs BF16_CONFIGS only")
    ap.add_argument("--number", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="", help="also write the report as JSON here")
    args = ap.parse_args()
    from tvmpy.contrib import nvcc
    from tvmpy.runtime.cuda_module import CUDA_API, get_driver

    names = list(CONFIGS) if args.configs == "all" else args.configs.split(",")
    dev = tvm.cuda(0)
    has_gpu = dev.exist
    torch = None
    try:
        import torch as _torch

        if _torch.cuda.is_available():
            torch = _torch
    except ImportError:
        pass
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    "nvrtc": ".".join(map(str, nvcc.nvrtc_version())), "gemm": {},
                    "errors": {}}
    if has_gpu:
        arch = CUDA_API.arch(0)
        report["device"] = (f"{dev.device_name} ({arch}, {dev.multi_processor_count} SMs), "
                            f"driver {get_driver().driver_version()}")
        target = Target(f"cuda -arch={arch}")
    else:
        report["device"] = "none (no CUDA device: building only)"
        target = Target("cuda")
    report["torch"] = torch.__version__ if torch is not None else None
    print(f"device: {report['device']}; NVRTC {report['nvrtc']}; torch {report['torch']}")
    ok = True

    def save() -> None:  # after every variant: a crash (a poisoned CUDA context) keeps the rest
        if args.out:
            with open(args.out, "w") as fh:
                json.dump(report, fh, indent=1)

    gpu = has_gpu and torch is not None
    cases = [(d, int(x)) for d in args.dtypes.split(",") for x in args.sizes.split(",")
             if d == "float16" or int(x) in BF16_SIZES]
    data: dict = {}  # (dtype, size) -> (a, b, ref32, ref)
    for dtype, size in cases:
        entry: dict = {"variants": {}}
        report["gemm"][f"{dtype} {size}"] = entry
        if not gpu:
            continue
        flops = 2.0 * size ** 3
        tdt = getattr(torch, dtype)
        g = torch.Generator(device="cuda").manual_seed(size)
        a = torch.randn(size, size, device="cuda", dtype=tdt, generator=g)
        b = torch.randn(size, size, device="cuda", dtype=tdt, generator=g)
        torch.backends.cuda.matmul.allow_tf32 = False
        ref32 = torch.matmul(a.float(), b.float().t())
        bt = b.t()
        ref = torch.matmul(a, bt)
        for _ in range(3):
            torch.matmul(a, bt)
        torch.cuda.synchronize()
        times = cuda_event_times(functools.partial(torch.matmul, a, bt), args.number, args.repeat)
        tms = sorted(times)[len(times) // 2] * 1e3
        entry["torch_ms"] = tms
        entry["torch_tflops"] = flops / (tms / 1e3) / 1e12
        data[(dtype, size)] = (a, b, ref32, ref)
        print(f"{dtype} {size}: torch.matmul {dtype} (cuBLAS) {tms:8.3f} ms "
              f"({entry['torch_tflops']:7.1f} TFLOP/s)")
    # synchronous-copy variants first, then the cp.async ones (not yet run on a GPU before
    # this script: a fault there must not cost the others)
    for phase in (False, True):
        for dtype, size in cases:
            entry = report["gemm"][f"{dtype} {size}"]
            flops = 2.0 * size ** 3
            pool = names if dtype == "float16" else [n for n in names if n in BF16_CONFIGS]
            for name in [n for n in pool if ("+async" in n) == phase]:
                v: dict = {}
                entry["variants"][name] = v
                try:
                    t0 = time.time()
                    mod, kinfo = build(size, name, target, dtype)
                    v["build_s"] = time.time() - t0
                    v["ptxas"] = kinfo
                    first = next(iter(next(iter(kinfo.values())).values()))
                    desc = (f"regs {first['registers']} spills {first['spill_stores']}/"
                            f"{first['spill_loads']} shared {first['shared_bytes']} B")
                    if not gpu:
                        print(f"  {dtype} {size} {name:34s} built ({desc}; {v['build_s']:.1f} s)")
                        continue
                    a, b, ref32, ref = data[(dtype, size)]
                    torch.cuda.synchronize()  # torch's inputs are ready
                    da, db = tvm.nd.from_dlpack(a), tvm.nd.from_dlpack(b)
                    dc = tvm.nd.empty((size, size), "float32", dev)
                    mod(da, db, dc)
                    dev.sync()
                    got = torch.from_dlpack(dc)
                    scale = float(ref32.abs().max())
                    v["rel_err_vs_fp32"] = float((got - ref32).abs().max()) / scale
                    v["rel_err_vs_torch"] = float((got - ref.float()).abs().max()) / scale
                    tm = mod.time_evaluator(mod.entry_name, dev, number=args.number,
                                            repeat=args.repeat)(da, db, dc)
                    ms = sorted(tm.results)[len(tm.results) // 2] * 1e3
                    v.update({"ms": ms, "tflops": flops / (ms / 1e3) / 1e12,
                              "vs_cublas": entry["torch_ms"] / ms,
                              "spread_ms": [min(tm.results) * 1e3, max(tm.results) * 1e3]})
                    good = v["rel_err_vs_fp32"] <= TOL
                    ok = ok and good
                    print(f"  {dtype} {size} {name:34s} {ms:8.3f} ms {v['tflops']:7.1f} TFLOP/s "
                          f"{v['vs_cublas']:5.2f}x cuBLAS  rel.err {v['rel_err_vs_fp32']:.1e} "
                          f"(vs torch {dtype} {v['rel_err_vs_torch']:.1e}) {desc}"
                          f"{'' if good else '  WRONG'}")
                except Exception as err:  # noqa: BLE001 - report and go on with the next variant
                    ok = False
                    report["errors"][f"{dtype} {size} {name}"] = f"{type(err).__name__}: {err}"
                    print(f"  {dtype} {size} {name}: ERROR {type(err).__name__}: {err}")
                    traceback.print_exc()
                save()
    if gpu:
        for dtype, size in cases:
            entry = report["gemm"][f"{dtype} {size}"]
            best = min((x for x in entry["variants"].values() if "ms" in x),
                       key=lambda x: x["ms"], default=None)
            if best is not None:
                entry["best_vs_cublas"] = best["vs_cublas"]
                name = next(n for n, x in entry["variants"].items() if x is best)
                print(f"{dtype} {size}: best {name} {best['ms']:.3f} ms = "
                      f"{best['vs_cublas']:.2f}x cuBLAS {dtype} "
                      f"({best['tflops']:.1f} vs {entry['torch_tflops']:.1f} TFLOP/s)")
    save()
    if not gpu:
        print("no CUDA device (or no torch): built only, nothing ran")
        return 0 if ok else 1
    print("ALL OK" if ok else "WRONG RESULTS OR ERRORS: see above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
