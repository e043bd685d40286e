"""Untuned CUDA convolutions on ResNet-18's conv layers (issue 29 points 2 and 5): the old
fallback config of ``conv2d_nchw.cuda``, the new shape-derived one, GPU Winograd
(``conv2d_nchw_winograd.cuda``: weight transformed in the operator, and pre-transformed, both
tile sizes) and cuDNN (``torch.nn.functional.conv2d``, ``cudnn.benchmark`` on, TF32 off), at
batch 1 and 16, each checked against torch's output.

    python bench/gpu_conv_defaults.py [--json out.json] [--batches 1,16] [--compile-only]

Every layer of ResNet-18 (each distinct shape once; ``count``: how often it occurs): the 7x7
stride-2 stem, the 3x3 stride-1 layers at 56/28/14/7, the 3x3 stride-2 and 1x1 stride-2
downsamples. Variants:

- ``direct_v1``: ``conv2d_nchw.cuda`` with the earlier fallback (FALLBACK_RULE "v1");
- ``direct``: with the shape-derived fallback (the default now);
- ``direct_264``: the same aiming at 264 blocks (two per SM) instead of the default 132 (one
  per SM; the H200 run of 2026-11-30 at batch 1 found 132 faster or equal on every layer);
- ``direct_max``: the same never shrinking (the largest per-thread tile and block, any grid);
- ``wino``: Winograd with the default tile size, weight transform inside (what relay builds);
- ``wino_pre``: the same with the weight pre-transformed (its first kernel left out);
- ``wino_alt_pre``: the other tile size (2 <-> 4), pre-transformed.

Modules are built first, in parallel processes (NVRTC + ptxas; ~1 s each), then timed one after
the other on the GPU with ``time_evaluator`` (median of ``--repeat`` means of ``--number`` runs).
The table gives ms per variant, and per layer which is fastest; the summary sums ms over the
model's layers (times ``count``) for: the old default (direct_v1), the new default (direct; the
strategy's Winograd where its rule picks it), the best tvmpy variant per layer, and cuDNN. Exit
status 1 when any variant's output differs from torch's by more than 1e-4 (direct) / 1e-3
(Winograd) of its max magnitude. ``--compile-only`` (no GPU needed): builds for sm_80 and
sm_90 and prints ptxas' registers / spills / shared memory per kernel; exit 1 on a spill of more
than SPILL_NOISE bytes or shared memory over 48 KB.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import pickle
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_common import cuda_event_times, cuda_target, torch_no_tf32  # noqa: E402

# name, C, H, OC, k, stride, pad, occurrences in ResNet-18
LAYERS = [
    ("stem 7x7/2", 3, 224, 64, 7, 2, 3, 1),
    ("3x3 64@56", 64, 56, 64, 3, 1, 1, 4),
    ("3x3/2 64->128", 64, 56, 128, 3, 2, 1, 1),
    ("1x1/2 64->128", 64, 56, 128, 1, 2, 0, 1),
    ("3x3 128@28", 128, 28, 128, 3, 1, 1, 3),
    ("3x3/2 128->256", 128, 28, 256, 3, 2, 1, 1),
    ("1x1/2 128->256", 128, 28, 256, 1, 2, 0, 1),
    ("3x3 256@14", 256, 14, 256, 3, 1, 1, 3),
    ("3x3/2 256->512", 256, 14, 512, 3, 2, 1, 1),
    ("1x1/2 256->512", 256, 14, 512, 1, 2, 0, 1),
    ("3x3 512@7", 512, 7, 512, 3, 1, 1, 3),
]
VARIANTS = ("direct_v1", "direct", "direct_264", "direct_max", "wino", "wino_pre", "wino_alt_pre")
SPILL_NOISE = 64
"""ptxas spill bytes below which --compile-only does not fail: ptxas spills 4-32 bytes in some
of these kernels at 32-56 registers (its own register target; the old fallback too)."""


def _variants(layer: tuple) -> list[str]:
    _, _, _, _, k, s, _, _ = layer
    return list(VARIANTS) if (k, s) == (3, 1) else [v for v in VARIANTS
                                                    if v.startswith("direct")]


def _tile(layer: tuple, variant: str, batch: int) -> int:
    from tvmpy.topi.cuda import winograd_tile_size

    _, _, h, _, _, _, p, _ = layer
    m = winograd_tile_size(h + 2 * p - 2, h + 2 * p - 2, batch)
    return (6 - m) if variant == "wino_alt_pre" else m


def _build(job: tuple) -> tuple:
    """In a worker: build one (layer index, batch, variant) for ``target``; the module pickled,
    its ptxas report, seconds."""
    li, batch, variant, target = job
    import logging

    logging.getLogger("tvmpy.autotvm").setLevel(logging.ERROR)  # "no tuned config", per build
    import tvmpy as tvm
    from tvmpy import te
    from tvmpy.target import Target
    from tvmpy.topi import cuda
    from tvmpy.topi.cuda import conv2d_direct

    layer = LAYERS[li]
    _, c, h, oc, k, s, p, _ = layer
    t0 = time.time()
    tgt = Target(target)
    d = te.placeholder((batch, c, h, h), name="data")
    if variant.endswith("_pre"):
        m = _tile(layer, variant, batch)
        w = te.placeholder((m + 2, m + 2, c, oc), name="U")
    else:
        w = te.placeholder((oc, c, k, k), name="weight")
    args = ((s, s), (p, p, p, p), (1, 1), "float32")
    with tgt, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no tuned config": the fallbacks are what we time
        if variant.startswith("direct"):
            conv2d_direct.FALLBACK_RULE = "v1" if variant == "direct_v1" else "shape"
            conv2d_direct.MIN_BLOCKS = {"direct_264": 264, "direct_max": 1}.get(variant, 132)
            out = cuda.conv2d_nchw(d, w, *args)
            sch = cuda.schedule_conv2d_nchw([out])
        else:
            m = _tile(layer, variant, batch)
            out = cuda.conv2d_nchw_winograd(d, w, *args, m, variant.endswith("_pre"))
            sch = cuda.schedule_conv2d_nchw_winograd([out])
    f = tvm.build(sch, [d, w, out], target=tgt)
    info = {arch: {kn: (i.registers, i.spill_stores + i.spill_loads, i.shared_bytes)
                   for kn, i in per.items()}
            for arch, per in f.imported_modules[0].ptxas_info.items()}
    return li, batch, variant, pickle.dumps(f), info, time.time() - t0


def _winograd_u(w: np.ndarray, m: int) -> np.ndarray:
    from tvmpy.topi.nn.winograd import winograd_matrices

    _, _, g = winograd_matrices(m)
    return np.einsum("ek,oikl,nl->enio", g, w.astype(np.float64), g).astype("float32")


def _torch(x: np.ndarray, w: np.ndarray, s: int, p: int, number: int, repeat: int) -> tuple:
    import torch

    torch_no_tf32()
    tx, tw = torch.from_numpy(x).cuda(), torch.from_numpy(w).cuda()
    conv = torch.nn.functional.conv2d
    with torch.inference_mode():
        for _ in range(3):
            out = conv(tx, tw, stride=s, padding=p)
        torch.cuda.synchronize()
        times = cuda_event_times(lambda: conv(tx, tw, stride=s, padding=p), number, repeat)
    return out.cpu().numpy(), float(np.median(times)) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--number", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workers", type=int, default=0, help="build processes (0: CPU count)")
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--trace", action="store_true", help="name each variant before it runs")
    ap.add_argument("--layers", default="", help="indices into LAYERS (default: all)")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    batches = [int(b) for b in a.batches.split(",") if b]
    t_start = time.time()
    import tvmpy as tvm

    if a.compile_only:
        target = "cuda"  # PTX + cubins for sm_80 and sm_90
    else:
        if not tvm.cuda(0).exist:
            print("no CUDA device (use --compile-only)")
            return 2
        target = cuda_target("cuda")
    chosen = {int(i) for i in a.layers.split(",") if i} or set(range(len(LAYERS)))
    jobs = [(li, b, v, target) for li, layer in enumerate(LAYERS) if li in chosen for b in batches
            for v in _variants(layer)]
    workers = a.workers or max(1, min(len(jobs), os.cpu_count() or 1))
    built: dict[tuple, tuple] = {}
    bad_ptx = []
    t0 = time.time()
    with cf.ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
        for li, b, v, blob, info, sec in pool.map(_build, jobs):
            built[(li, b, v)] = (blob, info, sec)
            for arch, per in info.items():
                for kn, (regs, spills, smem) in per.items():
                    if spills > SPILL_NOISE or smem > 48 * 1024:
                        bad_ptx.append((LAYERS[li][0], b, v, arch, kn, regs, spills, smem))
    print(f"built {len(jobs)} modules in {time.time() - t0:.1f} s ({workers} processes)",
          flush=True)
    if a.compile_only:
        print(f"{'layer':16s} {'b':>3s} {'variant':13s} ptxas per kernel: arch "
              "registers/spills/shared bytes")
        for (li, b, v), (_, info, _) in sorted(built.items()):
            parts = [f"{arch} " + " ".join(f"{r}/{sp}/{sm}" for r, sp, sm in per.values())
                     for arch, per in sorted(info.items())]
            print(f"{LAYERS[li][0]:16s} {b:3d} {v:13s} " + " | ".join(parts))
        for row in bad_ptx:
            print("SPILL/SHARED:", row)
        return 1 if bad_ptx else 0

    dev = tvm.cuda(0)
    rows = []
    failed = []
    rng = np.random.default_rng(0)
    hdr = "".join(f"{v:>13s}" for v in (*VARIANTS, "cudnn"))
    print(f"{'layer':16s} {'b':>3s}{hdr}   best (ms; errors vs torch in the JSON)")
    for li, layer in enumerate(LAYERS):
        if li not in chosen:
            continue
        name, c, h, oc, k, s, p, count = layer
        for b in batches:
            x = rng.uniform(-1, 1, (b, c, h, h)).astype("float32")
            w = rng.uniform(-1, 1, (oc, c, k, k)).astype("float32")
            ref, cudnn_ms = _torch(x, w, s, p, a.number, a.repeat)
            scale = float(np.abs(ref).max())
            row: dict = {"layer": name, "batch": b, "count": count,
                         "shape": [b, c, h, h], "weight": [oc, c, k, k], "stride": s,
                         "pad": p, "cudnn_ms": cudnn_ms, "ms": {}, "rel_err": {},
                         "ptxas": {}}
            xd = tvm.nd.array(x, dev)
            for v in _variants(layer):
                if a.trace:  # which variant runs (a kernel that never returns is named)
                    print(f"  .. {name} b{b} {v}", file=sys.stderr, flush=True)
                blob, info, _ = built[(li, b, v)]
                try:
                    f = pickle.loads(blob)
                except Exception as e:  # noqa: BLE001 - rebuild here rather than lose the row
                    print(f"  {name} b{b} {v}: unpickling failed ({e}); rebuilding")
                    f = pickle.loads(_build((li, b, v, target))[3])
                wv = _winograd_u(w, _tile(layer, v, b)) if v.endswith("_pre") else w
                wd = tvm.nd.array(wv, dev)
                od = tvm.nd.empty(ref.shape, "float32", dev)
                f(xd, wd, od)
                err = float(np.abs(od.numpy() - ref).max()) / scale
                tol = 1e-3 if v.startswith("wino") else 1e-4
                if not err <= tol:
                    failed.append((name, b, v, err))
                sec = f.time_evaluator(f.entry_name, dev, number=a.number,
                                       repeat=a.repeat)(xd, wd, od).median
                row["ms"][v] = sec * 1e3
                row["rel_err"][v] = err
                row["ptxas"][v] = info
            best = min(row["ms"], key=lambda k2: row["ms"][k2])
            row["best"] = best
            rows.append(row)
            cells = "".join(f"{row['ms'][v]:13.4f}" if v in row["ms"] else f"{'-':>13s}"
                            for v in VARIANTS)
            print(f"{name:16s} {b:3d}{cells}{cudnn_ms:13.4f}   {best}", flush=True)

    from tvmpy.relay.op.strategy.gpu import WINOGRAD_MIN_CHANNELS, WINOGRAD_MIN_MAP

    summary = {}
    for b in batches:
        rs = [r for r in rows if r["batch"] == b]

        def rule(r: dict) -> float:
            _, c, h, oc, k, s, p, _ = next(lay for lay in LAYERS if lay[0] == r["layer"])
            oh = h + 2 * p - k + 1
            wino = (k, s) == (3, 1) and min(c, oc) >= WINOGRAD_MIN_CHANNELS \
                and oh >= WINOGRAD_MIN_MAP
            return r["ms"]["wino" if wino else "direct"]

        summary[b] = {
            "old_default_ms": sum(r["ms"]["direct_v1"] * r["count"] for r in rs),
            "new_direct_ms": sum(r["ms"]["direct"] * r["count"] for r in rs),
            "new_default_rule_ms": sum(rule(r) * r["count"] for r in rs),
            "best_tvmpy_ms": sum(r["ms"][r["best"]] * r["count"] for r in rs),
            "cudnn_ms": sum(r["cudnn_ms"] * r["count"] for r in rs),
        }
        sm = summary[b]
        print(f"batch {b}: ResNet-18 conv layers summed (x count): old default "
              f"{sm['old_default_ms']:.3f} ms, new direct {sm['new_direct_ms']:.3f}, new default "
              f"(Winograd rule) {sm['new_default_rule_ms']:.3f}, best variant per layer "
              f"{sm['best_tvmpy_ms']:.3f}, cuDNN {sm['cudnn_ms']:.3f}")
    for fl in failed:
        print("WRONG RESULT:", fl)
    print(f"total {time.time() - t_start:.1f} s")
    if a.json:
        with open(a.json, "w") as fh:
            import torch

            json.dump({"device": torch.cuda.get_device_name(0), "target": target, "rows": rows, "summary": summary,
                       "failed": failed}, fh, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
