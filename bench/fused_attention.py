"""The zoo's transformers with and without the FuseAttention pass (``nn.attention``, one kernel
per attention block), against onnxruntime, in the same process (issue 25, point 4).

    python bench/fused_attention.py [--models whisper_encoder,bert] [--threads 1,2] [--rounds 5]
    python bench/fused_attention.py --block 6,1500,64 [--threads 1,2]   # one attention block

Per model (real size, the ONNX export of tvmpy.relay.testing.zoo): tvmpy built at opt_level 3
twice, once with ``disabled_pass=["FuseAttention"]`` (the separate batch_matmul -> softmax ->
batch_matmul kernels, "separate") and once as relay.build does by default ("fused"), and
onnxruntime; the three interleaved (bench/common.interleaved_samples, inputs fed and outputs
fetched as numpy on every side). Printed: the best round of each, the ratios to onnxruntime
(best / best) and fused / separate, and the attention kernels' share of the separate build's
per-node profile. Each thread count runs in its own process (TVM_NUM_THREADS = onnxruntime's
intra_op_num_threads).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    ensure_native_blas,
    geomean,
    interleaved_samples,
    machine_description,
    zoo_model,
)

ensure_native_blas()

MODELS = "whisper_encoder,bert,distilbert,gpt2,t5_encoder,vit,swin"


def _build(mod, params, fuse: bool):  # noqa: ANN001, ANN202
    from tvmpy import relay
    from tvmpy.relay.testing import compare
    from tvmpy.transform import PassContext

    with PassContext(opt_level=3, disabled_pass=[] if fuse else ["FuseAttention"]):
        lib = relay.build(mod, target="llvm", params=dict(params))
    return compare.tvm_runner(lib)


def _attention_share(run) -> tuple[float, int]:  # noqa: ANN001
    """(fraction of the per-node profile in batch_matmul / softmax / attention kernels,
    number of such kernels)."""
    rows = run.module.profile(number=2).rows
    hot = [r for r in rows if any(w in r["node"] for w in ("batch_matmul", "softmax",
                                                             "attention"))]
    total = sum(r["time"] for r in rows)
    return (sum(r["time"] for r in hot) / total if total else 0.0), len(hot)


def _one(name: str, threads: int, rounds: int) -> tuple[float, float]:
    from tvmpy.relay.testing import compare, zoo

    model, feeds, mod, params = zoo_model(name)[2:]
    sep = _build(mod, params, False)
    fused = _build(mod, params, True)
    ort = compare.ort_runner(model, threads=threads)
    want = ort(feeds)
    zoo.assert_close(sep(feeds), want, name + " (separate)")
    zoo.assert_close(fused(feeds), want, name + " (fused)")
    share, nk = _attention_share(sep)
    fshare, fk = _attention_share(fused)
    smp = interleaved_samples({"separate": lambda: sep(feeds), "fused": lambda: fused(feeds),
                               "ort": lambda: ort(feeds)}, rounds, pause=0.3, target_s=0.1)
    b = {k: min(v) for k, v in smp.items()}
    per_round = sorted(f / s for f, s in zip(smp["fused"], smp["separate"]))
    print(f"{name:<16} separate {b['separate'] * 1e3:8.2f} ms (x{b['separate'] / b['ort']:.2f} "
          f"ort) | fused {b['fused'] * 1e3:8.2f} ms (x{b['fused'] / b['ort']:.2f} ort) | ort "
          f"{b['ort'] * 1e3:8.2f} ms | fused/separate {b['fused'] / b['separate']:.2f} "
          f"(rounds {per_round[0]:.2f}-{per_round[-1]:.2f}) | attention kernels: separate "
          f"{nk} = {share:.0%} of the profile, fused {fk} = {fshare:.0%}", flush=True)
    return b["separate"] / b["ort"], b["fused"] / b["ort"]


def _block(spec: str, threads: int, rounds: int) -> None:
    """The attention block of bench/attention.py (``h,s,d``: softmax(Q K^T / sqrt(d)) V over
    [1, h, s, d], an ONNX model) built both ways, against onnxruntime."""
    import attention as A
    import numpy as np

    from tvmpy.relay.testing import compare

    h, s, d = (int(x) for x in spec.split(","))
    c = A.attention_case(h, s, d)
    model = c.onnx_fn()
    mod, params = compare.import_onnx(model, {k: v.shape for k, v in c.feeds.items()})
    sep, fused = _build(mod, params, False), _build(mod, params, True)
    ort = compare.ort_runner(model, threads=threads)
    want = ort(c.feeds)[0]
    for side in (sep, fused):
        np.testing.assert_allclose(side(c.feeds)[0], want, rtol=1e-4, atol=1e-5)
    smp = interleaved_samples({"separate": lambda: sep(c.feeds), "fused": lambda: fused(c.feeds),
                               "ort": lambda: ort(c.feeds)}, rounds, pause=0.1, target_s=0.1)
    b = {k: min(v) for k, v in smp.items()}
    print(f"attention block h{h} s{s} d{d}: separate {b['separate'] * 1e3:.2f} ms "
          f"(x{b['separate'] / b['ort']:.2f} ort) | fused {b['fused'] * 1e3:.2f} ms "
          f"(x{b['fused'] / b['ort']:.2f} ort, {c.flops / b['fused'] / 1e9:.0f} GF/s) | ort "
          f"{b['ort'] * 1e3:.2f} ms", flush=True)


def _worker(models: list[str], threads: int, rounds: int, block: str = "") -> None:
    from common import bench_threads

    threads = bench_threads(threads)
    print(f"== {threads} thread(s), {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    if block:
        _block(block, threads, rounds)
        return
    sep, fused = [], []
    for name in models:
        try:
            a, b = _one(name, threads, rounds)
        except Exception as e:  # noqa: BLE001  (a failing model is reported, others go on)
            print(f"{name:<16} FAILED: {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        sep.append(a)
        fused.append(b)
    if sep:
        print(f"geomean x ort at {threads} thread(s): separate {geomean(sep):.2f}, fused "
              f"{geomean(fused):.2f} over {len(sep)} models", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--block", default="", help="h,s,d: one attention block instead")
    ap.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)
    o = ap.parse_args()
    models = [m for m in o.models.split(",") if m]
    if o.worker:
        _worker(models, o.worker, o.rounds, o.block)
        return
    print(machine_description(), flush=True)
    for t in (int(v) for v in o.threads.split(",") if v):
        subprocess.run([sys.executable, __file__, "--models", o.models, "--rounds",
                        str(o.rounds), "--block", o.block, "--worker", str(t)], check=True)


if __name__ == "__main__":
    main()
