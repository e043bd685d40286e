"""``tvmpy quantize``: an ONNX model to int8 (relay.quantize), compiled; the per-layer scales and
the accuracy check are printed."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._common import (
    CliError,
    _check_output,
    _load_onnx,
    _random_feeds,
    _resolve_shapes,
    parse_shape_args,
)


def _calibration_samples(path: str, shapes: Mapping[str, tuple[int, ...]]
                         ) -> list[dict[str, np.ndarray]]:
    """Samples from an .npz holding one array per input: the input's shape (one sample) or a
    leading sample axis (N, *shape), or (N, *shape[1:]) for a batch-1 input."""
    if not os.path.isfile(path):
        raise CliError(f"no such file {path!r}")
    try:
        z = np.load(path)
    except Exception as e:  # noqa: BLE001 - a bad file is a user error
        raise CliError(f"{path!r} is not a readable .npz ({type(e).__name__}: {e})") from None
    missing = sorted(set(shapes) - set(z.files))
    if missing:
        raise CliError(f"--calibration {path}: no arrays for inputs {missing} (has {z.files})")
    per: dict[str, list[np.ndarray]] = {}
    for name, shape in shapes.items():
        a = z[name]
        if a.shape == tuple(shape):
            per[name] = [a]
        elif a.shape[1:] == tuple(shape):
            per[name] = list(a)
        elif shape and shape[0] == 1 and a.shape[1:] == tuple(shape[1:]):
            per[name] = [a[i:i + 1] for i in range(a.shape[0])]
        else:
            raise CliError(f"--calibration {path}: array {name} has shape {a.shape}; expected "
                           f"{tuple(shape)} or (N, ...) samples of it")
    counts = {len(v) for v in per.values()}
    if len(counts) != 1 or 0 in counts:
        raise CliError(f"--calibration {path}: the inputs hold different or zero sample counts "
                       f"{ {k: len(v) for k, v in per.items()} }")
    n = counts.pop()
    return [{k: v[i] for k, v in per.items()} for i in range(n)]


def cmd_quantize(args: argparse.Namespace) -> int:
    from .. import relay
    from ..relay.testing import compare

    model = _load_onnx(args.model)
    shapes = _resolve_shapes(model, parse_shape_args(args.input_shape))
    out = args.output or os.path.splitext(args.model)[0] + ".int8.so"
    _check_output(out)
    data = _calibration_samples(args.calibration, shapes) if args.calibration else None
    if data is None and args.calibrate_mode != "global_scale":
        raise CliError(f"--calibrate-mode {args.calibrate_mode} needs --calibration data.npz")
    skip = [int(s) for s in args.skip_conv.split(",") if s.strip()] if args.skip_conv else []
    mod, params = compare.import_onnx(model, shapes)
    t0 = time.perf_counter()
    with relay.quantize.qconfig(calibrate_mode=args.calibrate_mode, weight_scale=args.weight_scale,
                                per_channel=args.per_channel, skip_conv_layers=skip,
                                skip_dense_layer=not args.quantize_dense,
                                global_scale=args.global_scale):
        qmod, info = relay.quantize.quantize(mod, params, dataset=data, return_info=True)
    print(f"quantized {args.model} ({args.calibrate_mode}, weight scale {args.weight_scale}"
          f"{', per channel' if args.per_channel else ''}) in {time.perf_counter() - t0:.1f} s")
    print(f"  {'layer':<12} {'input scale':>12} {'weight scale':>13}")
    for name, s_in, s_w in info.layers:
        print(f"  {name:<12} {s_in:12.6g} {s_w:13.6g}")
    if info.skipped:
        print(f"  kept in float: {', '.join(info.skipped)}")
    if not info.layers:
        print("  warning: no layer was quantized (see --skip-conv / --quantize-dense)")
    feeds = data or [_random_feeds(model, shapes)]
    rep = relay.quantize.accuracy_report(mod, qmod, params, feeds, heldout=args.heldout)
    print(f"  {rep}")
    from .. import transform

    with transform.PassContext(opt_level=3):
        lib = relay.build(qmod, target=args.target)
    lib.export_library(out)
    print(f"-> {out} ({os.path.getsize(out) / 1e6:.1f} MB)")
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``quantize`` command to the ``tvmpy`` parser's subcommands ``sub``."""
    q = sub.add_parser("quantize", help="quantize an ONNX model to int8 (relay.quantize) and "
                       "compile it; prints the per-layer scales and the accuracy check")
    q.add_argument("model", help="model.onnx (fp32)")
    q.add_argument("--calibration", metavar="DATA.npz",
                   help="calibration inputs: one array per input, with a leading sample axis")
    q.add_argument("-o", "--output", help="output library (default: model.int8.so)")
    q.add_argument("--target", default="llvm")
    q.add_argument("--calibrate-mode", default="kl_divergence",
                   choices=["kl_divergence", "percentile", "max", "global_scale"])
    q.add_argument("--weight-scale", default="max", choices=["max", "power2"])
    q.add_argument("--global-scale", type=float, default=8.0)
    q.add_argument("--per-channel", action="store_true", help="one weight scale per channel")
    q.add_argument("--skip-conv", default="0", metavar="I,J",
                   help="conv2d layers (graph order) kept in float (default: 0; '' for none)")
    q.add_argument("--quantize-dense", action="store_true", help="quantize dense layers too")
    q.add_argument("--heldout", type=int, default=50, metavar="N",
                   help="random held-out inputs for the accuracy check (default 50)")
    q.add_argument("--input-shape", action="append", metavar="NAME=D0,D1,...")
    q.set_defaults(func=cmd_quantize)
