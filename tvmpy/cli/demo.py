"""``tvmpy demo``: a built-in model (no files): compile, check against onnxruntime, time."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import CliError, _resolve_shapes
from .bench import _add_timing_args, _bench


def cmd_demo(args: argparse.Namespace) -> int:
    from ..relay.testing import onnx_models

    kw: dict[str, Any] = {"batch": args.batch}
    if args.model != "bert_encoder":
        kw["image"] = args.image
    try:
        model = onnx_models.MODELS[args.model](**kw)
    except ImportError:
        raise CliError("the demo needs onnx and onnxruntime (pip install onnx onnxruntime)"
                       ) from None
    shapes = _resolve_shapes(model, {})
    return _bench(model, shapes, args,
                  f"demo: built-in {args.model} (random weights, seed 0), inputs {shapes}")


def add_parser(sub: Any) -> None:
    """Add the ``demo`` command to the ``tvmpy`` parser's subcommands ``sub``."""
    d = sub.add_parser("demo", help="built-in ResNet-18: compile, check vs onnxruntime, time")
    d.add_argument("--model", choices=("resnet18", "mobilenet_v2", "bert_encoder"),
                   default="resnet18")
    d.add_argument("--image", type=int, default=224, help="image size (default 224)")
    d.add_argument("--batch", type=int, default=1)
    _add_timing_args(d)
    d.set_defaults(func=cmd_demo)
