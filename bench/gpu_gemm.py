"""The fp32 SIMT GEMM of ``dense.cuda`` on an NVIDIA GPU against cuBLAS (issue 29 points 2, 5).

    python bench/gpu_gemm.py [--out gpu_gemm.json] [--number 20] [--repeat 3]

Builds ``dense.cuda`` (``data[M, K] @ weight[N, K]^T``, tvmpy/topi/cuda/dense.py) for target
"cuda -arch=<the device's sm>" with its untuned fallback config and with hand-picked variants of
the same template (block tile, k step, float4 vectors on/off, double buffering), for 4096^3,
1024^3 and BERT-base's dense layers at batch 16 (2048x256 -> 1024, 2048x1024 -> 256); checks
each against numpy (float64) and times it with time_evaluator next to
``torch.nn.functional.linear`` (cuBLAS, TF32 off) on the same inputs. Prints registers/spills
from ptxas beside the times, writes JSON, exits non-zero on a wrong result. Without a GPU it
builds everything (NVRTC + ptxas) and says nothing ran. GPU time: well under a minute.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_common import cuda_event_times  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy.autotvm.space import OtherOptionEntity, SplitEntity  # noqa: E402

SHAPES = [(4096, 4096, 4096), (1024, 1024, 1024), (2048, 1024, 256), (2048, 256, 1024)]

# name -> (tile_y [-1, vthreads, threads, inner], tile_x, k step, vectorize, double buffer)
VARIANTS = {
    "128x128 16x16t 2x2vt k16 vec": ([-1, 2, 16, 4], [-1, 2, 16, 4], 16, 1, 0),
    "128x128 16x16t 2x2vt k16 vec db": ([-1, 2, 16, 4], [-1, 2, 16, 4], 16, 1, 1),
    "128x128 16x16t 2x2vt k8 vec db": ([-1, 2, 16, 4], [-1, 2, 16, 4], 8, 1, 1),
    "64x128 16x16t 1x2vt k16 vec db": ([-1, 1, 16, 4], [-1, 2, 16, 4], 16, 1, 1),
    "128x128 16x16t 2x2vt k8 vec": ([-1, 2, 16, 4], [-1, 2, 16, 4], 8, 1, 0),
    "128x128 16x16t 2x2vt k16 scalar": ([-1, 2, 16, 4], [-1, 2, 16, 4], 16, 0, 0),
    "64x128 16x16t 1x2vt k16 vec": ([-1, 1, 16, 4], [-1, 2, 16, 4], 16, 1, 0),
    "64x64 16x16t k16 vec db": ([-1, 1, 16, 4], [-1, 1, 16, 4], 16, 1, 1),
    "64x64 16x16t k16 vec": ([-1, 1, 16, 4], [-1, 1, 16, 4], 16, 1, 0),
    "128x64 16x16t 2x1vt k16 vec": ([-1, 2, 16, 4], [-1, 1, 16, 4], 16, 1, 0),
}


def build(m: int, n: int, k: int, target: str, variant: tuple | None):
    from tvmpy import autotvm
    from tvmpy.autotvm.task.task import deserialize_args

    task = autotvm.task.create("dense.cuda", (("TENSOR", (m, k), "float32"),
                                              ("TENSOR", (n, k), "float32")), target=target)
    if variant is None:
        with tvm.target.Target(target), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s, args = task.func(*deserialize_args(task.args))
    else:
        ty, tx, kt, vec, db = variant
        cfg = task.config_space.get(0)
        cfg._entity_map["tile_y"] = SplitEntity(ty)
        cfg._entity_map["tile_x"] = SplitEntity(tx)
        cfg._entity_map["tile_k"] = SplitEntity([-1, kt])
        cfg._entity_map["vectorize"] = OtherOptionEntity(vec)
        cfg._entity_map["double_buffer"] = OtherOptionEntity(db)
        cfg._entity_map["auto_unroll_max_step"] = OtherOptionEntity(512)
        cfg._entity_map["unroll_explicit"] = OtherOptionEntity(1)
        s, args = task.instantiate(cfg)
    return tvm.build(s, args, target=target, name="dense")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--number", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="", help="also write the report as JSON here")
    ap.add_argument("--shapes", default="", help="MxNxK,... (default: the four above)")
    args = ap.parse_args()
    from tvmpy.runtime.cuda_module import CUDA_API

    dev = tvm.cuda(0)
    has_gpu = dev.exist
    target = f"cuda -arch={CUDA_API.arch(0)}" if has_gpu else "cuda"
    shapes = ([tuple(int(v) for v in x.split("x")) for x in args.shapes.split(",")]
              if args.shapes else SHAPES)
    report: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    "device": dev.device_name if has_gpu else "none", "target": target,
                    "rows": []}
    torch = None
    try:
        import torch as _torch

        if _torch.cuda.is_available():
            torch = _torch
            torch.backends.cuda.matmul.allow_tf32 = False
    except ImportError:
        pass
    print(f"device: {report['device']}; target {target!r}")
    rng = np.random.default_rng(0)
    ok = True
    for m, n, k in shapes:
        flops = 2.0 * m * n * k
        a = rng.uniform(-1, 1, (m, k)).astype("float32")
        w = rng.uniform(-1, 1, (n, k)).astype("float32")
        ref = (a.astype("float64") @ w.astype("float64").T) if has_gpu else None
        torch_ms = None
        if torch is not None:
            ta, tw = torch.from_numpy(a).cuda(), torch.from_numpy(w).cuda()
            for _ in range(3):
                torch.nn.functional.linear(ta, tw)
            torch.cuda.synchronize()
            linear = functools.partial(torch.nn.functional.linear, ta, tw)
            runs = cuda_event_times(linear, args.number, args.repeat)
            torch_ms = float(np.median(runs)) * 1e3
            print(f"{m}x{n}x{k}: torch F.linear (cuBLAS fp32) {torch_ms:.3f} ms "
                  f"({flops / torch_ms / 1e9:.1f} TFLOP/s)")
        if torch is None:
            print(f"{m}x{n}x{k}:")
        variants: dict = {"fallback": None}
        for name, v in VARIANTS.items():
            bm = v[0][1] * v[0][2] * v[0][3]
            bn = v[1][1] * v[1][2] * v[1][3]
            if m % bm == 0 and n % bn == 0 and k % v[2] == 0:
                variants[name] = v
        for name, v in variants.items():
            row = {"shape": [m, n, k], "variant": name}
            try:
                t0 = time.perf_counter()
                f = build(m, n, k, target, v)
                info = next(iter(next(iter(
                    f.imported_modules[0].ptxas_info.values())).values()))
                row.update(registers=info.registers, spill_bytes=info.spill_stores,
                           shared_bytes=info.shared_bytes, build_s=time.perf_counter() - t0)
                line = (f"  {name:<34} {info.registers:3d} regs {info.spill_stores:3d} B spilled "
                        f"{info.shared_bytes:6d} B shared")
                if has_gpu:
                    da, dw = tvm.nd.array(a, dev), tvm.nd.array(w, dev)
                    dc = tvm.nd.empty((m, n), "float32", dev)
                    f(da, dw, dc)
                    err = float(np.max(np.abs(dc.numpy() - ref)) / np.max(np.abs(ref)))
                    good = err < 1e-4
                    ok &= good
                    tm = f.time_evaluator(f.entry_name, dev, number=args.number,
                                          repeat=args.repeat)(da, dw, dc)
                    ms = float(np.median(tm.results)) * 1e3
                    row.update(ms=ms, tflops=flops / ms / 1e9, max_rel_err=err, ok=good)
                    line += f"  {ms:8.3f} ms {flops / ms / 1e9:6.1f} TFLOP/s"
                    if torch_ms:
                        row.update(torch_ms=torch_ms, vs_cublas=torch_ms / ms)
                        line += f"  {torch_ms / ms:5.2f}x cuBLAS"
                    line += "" if good else f"  MISMATCH (rel err {err:.1e})"
                print(line)
            except Exception as err:  # noqa: BLE001  (report and go on with the next variant)
                ok = False
                row["error"] = f"{type(err).__name__}: {err}"
                print(f"  {name:<34} ERROR {row['error'][:300]}")
            report["rows"].append(row)
    if not has_gpu:
        print("no CUDA device: everything built (NVRTC + ptxas); nothing ran")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(report, fh, indent=1)
    print("ALL OK" if ok else "MISMATCHES OR ERRORS: see above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
