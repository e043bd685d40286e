"""A small CNN quantized by torch.ao (FX graph mode, ``prepare_fx`` / ``convert_fx`` with the "x86"
qconfig mapping: per-channel int8 weights, uint8 activations, calibrated on random inputs),
imported by ``relay.frontend.from_pytorch`` into the QNN dialect and compiled by tvmpy, vs
torch running its own quantized model (x86 engine: fbgemm/onednn int8 kernels); tvmpy and
torch fp32 on the float model for reference. 2 threads each side, one interleaved run
(``--torch-threads 1``: torch's OpenMP pool degrades badly when the 2 cores are shared).

    flock /tmp/tvmpy-bench.lock python bench/torch_quantized.py [--rounds 15] [--size 56]
                                                                [--torch-threads 2]

Prints the median (IQR) per side and the agreement of tvmpy's int8 output with torch's in
output quantization steps.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("TVM_NUM_THREADS", "2")

from common import (  # noqa: E402
    ensure_native_blas,
    interleaved_samples,
    machine_description,
    quartiles,
)

ensure_native_blas()

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import relay  # noqa: E402
from tvmpy.contrib import graph_executor  # noqa: E402


class SmallResNet(nn.Module):
    """conv-bn-relu stem, two residual blocks (the second strided), global pool, linear."""

    def __init__(self, c: int = 32) -> None:
        super().__init__()

        def cbr(i: int, o: int, s: int = 1, relu: bool = True) -> list[nn.Module]:
            layers: list[nn.Module] = [nn.Conv2d(i, o, 3, s, 1, bias=False), nn.BatchNorm2d(o)]
            return layers + ([nn.ReLU()] if relu else [])

        self.stem = nn.Sequential(*cbr(3, c, 2))
        self.b1 = nn.Sequential(*cbr(c, c), *cbr(c, c, relu=False))
        self.b2 = nn.Sequential(*cbr(c, 2 * c, 2), *cbr(2 * c, 2 * c, relu=False))
        self.down = nn.Sequential(nn.Conv2d(c, 2 * c, 1, 2, bias=False), nn.BatchNorm2d(2 * c))
        self.relu1, self.relu2 = nn.ReLU(), nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2 * c, 10)

    def forward(self, x):
        x = self.stem(x)
        x = self.relu1(self.b1(x) + x)
        x = self.relu2(self.b2(x) + self.down(x))
        return self.fc(torch.flatten(self.pool(x), 1))


def quantize(model: nn.Module, shape: tuple[int, ...]) -> nn.Module:
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    g = torch.Generator().manual_seed(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = prepare_fx(model, get_default_qconfig_mapping("x86"), (torch.randn(shape),))
        for _ in range(8):
            p(torch.randn(shape, generator=g))
        return convert_fx(p)


def tvm_side(model: nn.Module, shape: tuple[int, ...]) -> graph_executor.GraphModule:
    mod, params = relay.frontend.from_pytorch(model, [("x", list(shape))])
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm", params=params)
    return graph_executor.GraphModule(lib["default"](tvm.cpu()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--size", type=int, default=56)
    ap.add_argument("--torch-threads", type=int, default=2,
                    help="torch's intra-op threads (tvmpy: TVM_NUM_THREADS, default 2)")
    a = ap.parse_args()
    torch.set_num_threads(a.torch_threads)
    torch.backends.quantized.engine = "x86"
    torch.manual_seed(0)
    shape = (1, 3, a.size, a.size)
    fmodel = SmallResNet().eval()
    with torch.no_grad():  # non-trivial batch-norm statistics
        for m in fmodel.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_var.uniform_(0.5, 1.5)
                m.running_mean.normal_(0, 0.1)
    qmodel = quantize(copy.deepcopy(fmodel), shape)
    x = np.random.default_rng(0).standard_normal(shape).astype("float32")
    xt = torch.from_numpy(x)

    tq = tvm_side(qmodel, shape)
    tf = tvm_side(fmodel, shape)
    for m in (tq, tf):
        m.set_input("x", x)
    mod, _ = relay.frontend.from_pytorch(qmodel, [("x", list(shape))])
    step = float(mod["main"].body.args[1].data.numpy())
    tq.run()
    with torch.no_grad():
        ref = qmodel(xt).numpy()
    steps = float(np.abs(tq.get_output(0).numpy() - ref).max() / step)

    def torch_run(model):
        def run() -> None:
            with torch.no_grad():
                model(xt)
        return run

    sides = {"tvmpy int8": tq.run, "torch int8": torch_run(qmodel),
             "tvmpy fp32": tf.run, "torch fp32": torch_run(fmodel)}
    samples = interleaved_samples(sides, a.rounds)
    print(f"# {machine_description()}, torch {torch.__version__} (engine x86), input {shape}, "
          f"tvmpy {os.environ['TVM_NUM_THREADS']} threads, torch {a.torch_threads}, "
          f"{a.rounds} interleaved rounds")
    for name, xs in samples.items():
        q1, med, q3 = quartiles(xs)
        print(f"{name:18s} median {med * 1e3:7.3f} ms  IQR [{q1 * 1e3:.3f}, {q3 * 1e3:.3f}]  "
              f"best {min(xs) * 1e3:.3f}")
    med = {k: quartiles(v)[1] for k, v in samples.items()}
    print(f"tvmpy int8 / torch int8 = {med['tvmpy int8'] / med['torch int8']:.2f}x; "
          f"tvmpy int8 vs tvmpy fp32 speedup = {med['tvmpy fp32'] / med['tvmpy int8']:.2f}x")
    print(f"agreement: tvmpy int8 vs torch int8 max {steps:.1f} output steps")


if __name__ == "__main__":
    main()
