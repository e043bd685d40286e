"""ConvTranspose and recurrent models vs onnxruntime, same run: a single ConvTranspose
(256 -> 128, k4 s2 p1, 16x16 -> 32x32), a DCGAN generator (nz=100 -> 4x4 -> ... -> 64x64 RGB,
BatchNorm + ReLU, Tanh), a 2-layer LSTM (hidden 256, 32 steps, batch 1) and a 2-layer GRU (same
sizes); PyTorch definitions with random weights, exported with ``torch.onnx.export``, imported
with ``relay.frontend.from_onnx``; tvmpy untuned at opt_level 0 and 3.

    TVM_NUM_THREADS=1 python bench/convt_lstm.py --threads 1 [--models convt,dcgan,lstm,gru]
                                                 [--repeat 10] [--profile 6]

Timing (bench/common.interleaved_samples): ``--repeat`` interleaved rounds (the order rotates),
~0.05 s of calls each after a pause; every call feeds the inputs and fetches the outputs
(``--cpu-time``, one thread only: rounds in process CPU time, which preemption on a loaded
machine does not inflate). The
ratio is tvmpy opt3 over onnxruntime, best round over best round, and the median of the
per-round ratios. The opt3 profile lists the slowest kernels (graph executor per-node times).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    bench_clock,
    ensure_native_blas,
    interleaved_samples,
    machine_description,
)

ensure_native_blas()

import numpy as np  # noqa: E402

from tvmpy.cli.bench import bench_threads  # noqa: E402
from tvmpy.relay.testing import compare  # noqa: E402


def _torch_models() -> dict:
    import torch
    from torch import nn

    class Generator(nn.Module):  # the DCGAN paper's generator, ngf=64, 64x64 RGB
        def __init__(self, nz: int = 100, ngf: int = 64) -> None:
            super().__init__()

            def up(i: int, o: int, s: int, p: int) -> list:
                return [nn.ConvTranspose2d(i, o, 4, s, p, bias=False), nn.BatchNorm2d(o),
                        nn.ReLU(True)]

            self.main = nn.Sequential(
                *up(nz, ngf * 8, 1, 0), *up(ngf * 8, ngf * 4, 2, 1), *up(ngf * 4, ngf * 2, 2, 1),
                *up(ngf * 2, ngf, 2, 1), nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False),
                nn.Tanh())

        def forward(self, z: torch.Tensor) -> torch.Tensor:
            return self.main(z)

    class Recurrent(nn.Module):
        def __init__(self, cell: type) -> None:
            super().__init__()
            self.rnn = cell(256, 256, num_layers=2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.rnn(x)[0]

    def randomize_bn(m: nn.Module) -> nn.Module:
        for b in m.modules():
            if isinstance(b, nn.BatchNorm2d):
                b.running_mean.uniform_(-0.5, 0.5)
                b.running_var.uniform_(0.5, 1.5)
                b.weight.data.uniform_(0.5, 1.5)
                b.bias.data.uniform_(-0.5, 0.5)
        return m.eval()

    return {
        "convt": (lambda: nn.ConvTranspose2d(256, 128, 4, 2, 1).eval(), (1, 256, 16, 16)),
        "dcgan": (lambda: randomize_bn(Generator()), (1, 100, 1, 1)),
        "lstm": (lambda: Recurrent(nn.LSTM).eval(), (32, 1, 256)),
        "gru": (lambda: Recurrent(nn.GRU).eval(), (32, 1, 256)),
    }


def onnx_model(name: str):
    """``(onnx ModelProto, input array)`` of model ``name``."""
    import onnx
    import torch

    torch.manual_seed(0)
    make, shape = _torch_models()[name]
    m = make()
    x = torch.randn(*shape)
    buf = io.BytesIO()
    torch.onnx.export(m, (x,), buf, input_names=["x"], output_names=["y"], opset_version=17,
                      dynamo=False)
    return onnx.load_from_string(buf.getvalue()), x.numpy()


def _profile(run, top: int) -> str:
    prof = run.module.module.profile(number=20)
    rows = prof.sorted_rows()
    total = sum(r["time"] for r in rows) or 1.0
    lines = [f"    opt3 kernels: {len(rows)}, sum {total * 1e3:.3f} ms"]
    for r in rows[:top]:
        lines.append(f"    {r['time'] * 1e3:7.3f} ms {r['time'] / total:5.1%}  {r['node']}  "
                     f"-> {tuple(r['shape'])}")
    return "\n".join(lines)


def bench(name: str, threads: int, repeat: int, top: int, cpu_time: bool = False) -> dict:
    model, x = onnx_model(name)
    feeds = {"x": x}
    ort = compare.ort_runner(model, threads=threads)
    want = ort(feeds)[0]
    mod, params = compare.import_onnx(model, {"x": x.shape})
    runners: dict = {}
    row: dict = {"model": name}
    for level in (0, 3):
        lib, secs = compare.build(mod, params, opt_level=level)
        run = compare.tvm_runner(lib)
        row[f"err{level}"] = compare.errors(run(feeds)[0], want)[1]
        row[f"kernels{level}"] = compare.graph_summary(lib)["kernels"]
        row[f"build{level}"] = secs
        runners[f"opt{level}"] = run
    runners["ort"] = ort
    samples = interleaved_samples({k: (lambda f=f: f(feeds)) for k, f in runners.items()},
                                  repeat, pause=0.2, target_s=0.05,
                                  clock=bench_clock(cpu_time, threads))
    row.update({k: min(v) for k, v in samples.items()})
    row["median_ratio"] = float(np.median([a / b for a, b in zip(samples["opt3"],
                                                                  samples["ort"])]))
    time.sleep(0.2)
    row["profile"] = _profile(runners["opt3"], top) if top else ""
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="convt,dcgan,lstm,gru")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--profile", type=int, default=6)
    p.add_argument("--cpu-time", action="store_true",
                   help="time rounds in process CPU time (needs --threads 1): robust to a loaded "
                        "machine's preemption")
    opts = p.parse_args()
    if opts.cpu_time:
        bench_clock(True, opts.threads)  # refuses more than one thread before any build
    threads = bench_threads(opts.threads)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {machine_description()}; batch 1; "
          f"{threads} thread(s) on every side; {opts.repeat} interleaved rounds; "
          f"{'process CPU time' if opts.cpu_time else 'wall time'}; "
          f"load {os.getloadavg()[0]:.1f}")
    rows = []
    for name in opts.models.split(","):
        r = bench(name, threads, opts.repeat, opts.profile, opts.cpu_time)
        rows.append(r)
        print(f"{name}: opt3 {r['kernels3']} kernels (opt0 {r['kernels0']}), build opt3 "
              f"{r['build3']:.1f} s, max rel err vs ORT opt0 {r['err0']:.1e} opt3 "
              f"{r['err3']:.1e}", flush=True)
        if r["profile"]:
            print(r["profile"], flush=True)
    print(f"\n| model | tvmpy opt3 (ms) | opt0 (ms) | onnxruntime (ms) | opt3/ORT best | "
          f"opt3/ORT median round |  ({threads} thread(s))")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['opt3'] * 1e3:.3f} | {r['opt0'] * 1e3:.3f} | "
              f"{r['ort'] * 1e3:.3f} | {r['opt3'] / r['ort']:.2f} | {r['median_ratio']:.2f} |")


if __name__ == "__main__":
    main()
