"""Hash every lowered kernel of the showcase models and the zoo, to show a refactor changed no code.

Builds each model at opt_level 3 for the host (kernel cache off, kernels lowered in this
process), prints each kernel's lowered loop IR (``driver.lower_primfunc``'s output, the
function LLVM compiles) and records a sha256 of that text per kernel name. Write a baseline
on the old tree, then compare on the new one:

    PYTHONPATH=. python bench/kernel_hashes.py --out /tmp/before.json           # old tree
    PYTHONPATH=. python bench/kernel_hashes.py --compare /tmp/before.json       # new tree

``--compare`` exits 1 and names each model whose kernels differ (added, removed or changed
text). Models: the three showcase ONNX models (small sizes) and every zoo model at its
``small`` (CI) size through ONNX, or a subset with ``--models a,b``. ``--dump DIR`` also writes
each kernel's text, so a difference can be read with ``diff -r``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ["TVMPY_CACHE"] = "0"
os.environ["TVMPY_BUILD_WORKERS"] = "1"


def _showcase() -> dict[str, Callable[[], tuple[Any, dict]]]:
    from tvmpy.relay.testing import compare, onnx_models

    def imp(model: Any) -> tuple[Any, dict]:
        feeds = onnx_models.input_feeds(model)
        return compare.import_onnx(model, {k: v.shape for k, v in feeds.items()})

    return {
        "showcase_resnet18": lambda: imp(onnx_models.resnet18(image=64, classes=10)),
        "showcase_mobilenet_v2": lambda: imp(onnx_models.mobilenet_v2(image=64, classes=10)),
        "showcase_bert": lambda: imp(onnx_models.bert_encoder(layers=2, seq=32)),
    }


def _zoo() -> dict[str, tuple[Callable[[], tuple[Any, dict]], bool]]:
    from tvmpy.relay.testing import zoo

    out = {}
    for name, entry in zoo.MODELS.items():
        def load(entry: Any = entry) -> tuple[Any, dict]:
            spec = entry.build("small")
            return zoo.from_onnx(zoo.to_onnx(spec), spec)
        out[f"zoo_{name}"] = (load, entry.vm)
    return out


def kernel_texts(mod: Any, params: dict, vm: bool) -> dict[str, str]:
    """Each kernel's lowered text, by kernel name, for one opt_level-3 build of ``mod``."""
    from tvmpy import driver, transform
    from tvmpy.relay.backend import kernel_build

    texts: dict[str, str] = {}
    real = driver.lower_primfunc

    def record(prim: Any, *a: Any, **k: Any) -> Any:
        lowered = real(prim, *a, **k)
        texts[str(getattr(lowered, "name", None) or lowered.attrs.get("global_symbol"))] = \
            str(lowered)
        return lowered

    driver.lower_primfunc = record
    try:
        from tvmpy.relay.build_module import needs_vm
        with transform.PassContext(opt_level=3):
            if vm or needs_vm(mod):
                from tvmpy.relay import vm as relay_vm
                relay_vm.compile(mod, "llvm", params=dict(params))
            else:
                from tvmpy import relay
                relay.build(mod, "llvm", params=dict(params))
    finally:
        driver.lower_primfunc = real
    assert kernel_build  # imported so the patch is in place before any build starts
    return texts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="", help="comma-separated names (default: all)")
    ap.add_argument("--out", help="write {model: {kernel: sha256}} here")
    ap.add_argument("--compare", help="a baseline written with --out")
    ap.add_argument("--dump", help="also write each kernel's text under this folder")
    args = ap.parse_args()

    models: dict[str, tuple[Callable, bool]] = {k: (v, False) for k, v in _showcase().items()}
    models.update(_zoo())
    wanted = [m for m in args.models.split(",") if m] or list(models)
    unknown = [m for m in wanted if m not in models]
    if unknown:
        sys.exit(f"unknown models {unknown}; known: {sorted(models)}")
    result: dict[str, dict[str, str]] = {}
    for name in wanted:
        load, vm = models[name]
        t0 = time.perf_counter()
        mod, params = load()
        texts = kernel_texts(mod, params, vm)
        result[name] = {k: hashlib.sha256(v.encode()).hexdigest()[:16] for k, v in sorted(texts.items())}
        if args.dump:
            folder = os.path.join(args.dump, name)
            os.makedirs(folder, exist_ok=True)
            for k, v in texts.items():
                with open(os.path.join(folder, f"{k}.txt"), "w") as f:
                    f.write(v)
        print(f"{name}: {len(texts)} kernels, {time.perf_counter() - t0:.1f} s", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)
    if args.compare:
        with open(args.compare) as f:
            before = json.load(f)
        bad = 0
        for name in wanted:
            old, new = before.get(name), result[name]
            if old is None:
                print(f"{name}: not in the baseline")
                continue
            changed = sorted(k for k in old.keys() & new.keys() if old[k] != new[k])
            added, removed = sorted(new.keys() - old.keys()), sorted(old.keys() - new.keys())
            if changed or added or removed:
                bad += 1
                print(f"DIFFERS {name}: changed {changed} added {added} removed {removed}")
        print(f"{len(wanted) - bad} of {len(wanted)} models identical")
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
