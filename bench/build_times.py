"""relay.build times per model: cold (an empty kernel cache) and warm (rebuilt from the cache
that the cold build filled), each in a fresh process, with onnxruntime's session creation for
the same ONNX model in the same run as the other side (what a user of onnxruntime waits for
before the first run).

    PYTHONPATH=. python bench/build_times.py [--models resnet18,bert_base,...] [--workers N]

Models: ResNet-18, MobileNetV2 and BERT-base (12 layers, hidden 768, seq 128) from
``tvmpy.relay.testing.onnx_models``; ResNet-50, DenseNet-121 and GoogLeNet from torchvision
(random weights, ``torch.onnx.export``); all at batch 1, 224x224 images, opt_level 3, target
``llvm`` (untuned). ``--workers``: the kernel worker processes (config ``BUILD_WORKERS``;
0: one per CPU). Each figure is the best of ``--repeat`` rounds (a cold round starts from a new
empty cache folder). The CPU seconds of the building process and of its kernel workers are
printed too: on a loaded machine they say what the wall time would be on an idle one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402,F401  (strict schedules)

MODELS = ["resnet18", "resnet50", "bert_base", "mobilenet_v2", "densenet121", "googlenet"]


def onnx_model(name: str):
    """The ONNX ModelProto of ``name`` (batch 1)."""
    from tvmpy.relay.testing import onnx_models

    if name == "resnet18":
        return onnx_models.resnet18(image=224)
    if name == "mobilenet_v2":
        return onnx_models.mobilenet_v2(image=224)
    if name == "bert_base":
        return onnx_models.bert_encoder(layers=12, hidden=768, heads=12, seq=128)
    return _torchvision(name)


def _torchvision(name: str):
    import io
    import types

    for n in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
        sys.modules.setdefault(n, types.ModuleType(n))  # its CUDA C ops do not load here
    import onnx
    import torch
    import torchvision

    torch.manual_seed(0)
    kwargs = {"aux_logits": False, "init_weights": True} if name == "googlenet" else {}
    model = getattr(torchvision.models, name)(weights=None, **kwargs).eval()
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(model, (torch.randn(1, 3, 224, 224),), buf, opset_version=17,
                          input_names=["input"], output_names=["output"], dynamo=False)
    return onnx.load_from_string(buf.getvalue())


def _child(name: str, cache: str, workers: int) -> dict:
    """One build in this process: {'seconds', 'stages', 'kernels', 'ort_seconds'}."""
    import warnings

    warnings.simplefilter("ignore")
    import tvmpy as tvm
    from tvmpy import config, relay
    from tvmpy.relay.frontend import from_onnx

    model = onnx_model(name)
    mod, params = from_onnx(model)
    with config.config(CACHE=1, CACHE_DIR=cache, BUILD_WORKERS=workers):
        c0, k0 = time.process_time(), _children_cpu()
        t0 = time.perf_counter()
        with tvm.transform.PassContext(opt_level=3):
            lib = relay.build(mod, target="llvm", params=params)
        secs = time.perf_counter() - t0
        cpu, kids = time.process_time() - c0, _children_cpu() - k0
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    t0 = time.perf_counter()
    ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    ort_secs = time.perf_counter() - t0
    return {"seconds": secs, "stages": {k: round(v, 3) for k, v in lib.build_times.items()},
            "kernels": len(lib.lowered_funcs), "ort_seconds": ort_secs, "cpu": cpu,
            "workers_cpu": kids}


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (the kernel workers)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run_child(name: str, cache: str, workers: int) -> dict:
    env = dict(os.environ)
    env.pop("TVMPY_CACHE", None)
    # without .pyc files every child recompiles the modules relay.build imports lazily
    # (~0.5 s inside the timed build): what a user's installation does not pay
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = subprocess.run([sys.executable, __file__, "--child", name, "--cache", cache,
                          "--workers", str(workers)], env=env, capture_output=True, text=True,
                         timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{name}: build failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--child")
    ap.add_argument("--cache")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.cache, args.workers)))
        return
    print(f"# relay.build opt_level 3, llvm (untuned), batch 1; workers={args.workers or 'auto'}"
          f"; CPUs available: {len(os.sched_getaffinity(0))}; best of {args.repeat}")
    print(f"{'model':<14}{'kernels':>8}{'cold s':>9}{'warm s':>9}{'cold/warm':>10}"
          f"{'ort s':>8}{'cold/ort':>9}{'cold cpu':>10}{'workers':>9}{'warm cpu':>9}"
          "  cold stages")
    for name in args.models.split(","):
        colds, warms = [], []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="tvmpy_build_times_") as cache:
                colds.append(_run_child(name, cache, args.workers))
                warms.append(_run_child(name, cache, args.workers))
        cold = min(colds, key=lambda r: r["seconds"])
        warm = min(warms, key=lambda r: r["seconds"])
        ort_s = min(r["ort_seconds"] for r in colds + warms)
        print(f"{name:<14}{cold['kernels']:>8}{cold['seconds']:>9.2f}{warm['seconds']:>9.2f}"
              f"{cold['seconds'] / warm['seconds']:>10.1f}{ort_s:>8.2f}"
              f"{cold['seconds'] / ort_s:>9.1f}{cold.get('cpu', 0):>10.2f}"
              f"{cold.get('workers_cpu', 0):>9.2f}{warm.get('cpu', 0):>9.2f}  {cold['stages']}",
              flush=True)
    print("# cold cpu: CPU seconds of the building process; workers: of its kernel worker "
          "processes (on an idle machine with W cores, cold wall ~ cpu + workers / W); warm "
          "cpu: of the rebuild from the cache")


if __name__ == "__main__":
    main()
