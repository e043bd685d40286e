"""Zoo models with and without the convolutions' right-edge padding hint
(``topi.nn.conv2d.PAD_LIKELY_W`` "none", the code before 2026-11-30, vs "after"), both builds
and onnxruntime in one process, 1 thread, interleaved rounds timed in process CPU time
(bench/common.interleaved_samples), inputs fed and outputs fetched on every side.

    PYTHONPATH=. python bench/pad_edge_zoo.py [--models resnet50,...] [--rounds 9]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ["TVM_NUM_THREADS"] = "1"
os.environ.setdefault("TVMPY_CACHE", "0")
from common import ensure_native_blas, zoo_switch_ab  # noqa: E402

ensure_native_blas()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet50,mobilenet_v3_large,efficientnet_b0")
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    conv2d = importlib.import_module("tvmpy.topi.nn.conv2d")

    def hint(mode: str):
        @contextlib.contextmanager
        def switch():
            default = conv2d.PAD_LIKELY_W
            conv2d.PAD_LIKELY_W = mode
            try:
                yield
            finally:
                conv2d.PAD_LIKELY_W = default
        return switch

    zoo_switch_ab(args.models.split(","), {m: hint(m) for m in ("none", "after")}, args.rounds)


if __name__ == "__main__":
    main()
