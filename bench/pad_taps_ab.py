# ruff: noqa: E402, E501
"""NCHWc convolution kernels (default x86 schedule, + bias + relu, 1 thread) built with and
without the SkipPaddedTaps pass (``disabled_pass``), interleaved in one process, CPU time.

    python bench/pad_taps_ab.py 1024x28x32x4,512x7x1x1 [rounds] [--inline] [--both]

Shapes are CHANNELSxMAPxGROUPSxDILATION[xSTRIDE[xOUT_CHANNELS]] (3x3 window, padding =
dilation; stride 1 and as many output as input channels unless given; GROUPS == CHANNELS:
depthwise). Prints ms per side (min and median
of the rounds) and the ratio skip / noskip of the minima and of the medians; checks both
sides against each other. ``--inline`` adds both sides with the padding inlined where the
default schedule reads a padded copy (``default_inline_pad`` forced true); ``--both`` adds the
skipping side with ``PAD_LIKELY_W = "both"`` (the left edge's register tile peeled too).
"""
import sys
import time

sys.path.insert(0, "bench")
from common import bench_threads, ensure_native_blas, interleaved_samples

ensure_native_blas()
import numpy as np

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.topi import nn
from tvmpy.topi.x86 import conv2d_nchwc as cn

nn_conv2d = sys.modules["tvmpy.topi.nn.conv2d"]


def build(c, hw, groups, d, skip, inline=False, both=False, stride=1, oc=None):
    keep_likely = nn_conv2d.PAD_LIKELY_W
    nn_conv2d.PAD_LIKELY_W = "both" if both else keep_likely
    try:
        return _build(c, hw, groups, d, skip, inline, stride, oc or c)
    finally:
        nn_conv2d.PAD_LIKELY_W = keep_likely


def _build(c, hw, groups, d, skip, inline, stride, oc):
    per_group = c if groups == c else c // groups
    bn = next(b for b in (16, 8, 4, 2, 1) if per_group % b == 0)
    A = te.placeholder((1, c // bn, hw, hw, bn), name="A")
    B = te.placeholder((1, oc // bn, 1, 1, bn), name="B")
    if groups == c:
        W = te.placeholder((c // bn, 1, 3, 3, 1, bn), name="W")
        conv = nn.depthwise_conv2d_NCHWc(A, W, stride, d, d, f"NCHW{bn}c", f"NCHW{bn}c")
    else:
        W = te.placeholder((oc // bn, c // groups // bn, 3, 3, bn, bn), name="W")
        conv = nn.conv2d_NCHWc(A, W, stride, d, d, f"NCHW{bn}c", f"NCHW{bn}c", groups=groups)
    o = topi.nn.relu(topi.add(conv, B))
    keep = cn.default_inline_pad
    if inline:  # force the inlined padding where the default reads a padded copy
        cn.default_inline_pad = lambda conv, depthwise: True
    try:
        with tvm.target.Target("llvm"):
            s = cn.schedule_conv2d_NCHWc([o])
    finally:
        cn.default_inline_pad = keep
    with tvm.transform.PassContext(disabled_pass=[] if skip else ["SkipPaddedTaps"]):
        f = tvm.build(s, [A, W, B, o], "llvm")
    rng = np.random.default_rng(2)
    arrs = [tvm.nd.array(rng.uniform(-1, 1, [int(q) for q in t.shape]).astype("float32"))
            for t in (A, W, B, o)]
    return f, arrs


bench_threads(1)
rounds = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 9
for spec in sys.argv[1].split(","):
    c, hw, g, d, *rest = (int(v) for v in spec.split("x"))
    stride = rest[0] if rest else 1
    oc = rest[1] if len(rest) > 1 else c
    sides, outs = {}, {}
    variants = [("noskip", False, False, False), ("skip", True, False, False)]
    if "--inline" in sys.argv:
        variants += [("noskip_inl", False, True, False), ("skip_inl", True, True, False)]
    if "--both" in sys.argv:
        variants += [("skip_both", True, False, True)]
    for name, skip, inline, both in variants:
        f, arrs = build(c, hw, g, d, skip, inline, both, stride, oc)
        f(*arrs)
        outs[name] = arrs[-1].numpy()
        sides[name] = (lambda f=f, a=arrs: f(*a))
    for k in outs:
        np.testing.assert_allclose(outs[k], outs["noskip"], rtol=1e-5, atol=1e-5)
    got = interleaved_samples(sides, rounds, pause=0.05, target_s=0.1, clock=time.process_time)
    mn = {k: min(v) * 1e3 for k, v in got.items()}
    md = {k: float(np.median(v)) * 1e3 for k, v in got.items()}
    print(f"{spec}: noskip {mn['noskip']:.3f} / {md['noskip']:.3f} ms, skip {mn['skip']:.3f} / "
          f"{md['skip']:.3f} ms (min / median), skip/noskip {mn['skip'] / mn['noskip']:.3f} "
          f"(min) {md['skip'] / md['noskip']:.3f} (median)"
          + "".join(f", {k} {mn[k]:.3f} / {md[k]:.3f} ({mn[k] / mn['noskip']:.3f})" for k in mn
                    if k not in ("skip", "noskip")), flush=True)
