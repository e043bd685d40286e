# ruff: noqa: E402, E501, E741, B023
"""Grouped NCHWc 3x3 convolution kernels (topi ``conv2d_NCHWc`` with groups, + bias + relu) with
the default schedule and forced register tiles, next to onnxruntime's one-node Conv + Relu, 1
thread, same process, interleaved rounds, CPU time.

    python bench/grouped_tile_ab.py 512x28x32x2,1024x28x32x4 "[(None, None), (1, 7), (1, 14)]"

Shapes are CHANNELSxMAPxGROUPSxDILATION; the variants are (chunks per tile, columns per tile),
(None, None) the default schedule. Prints ms and the ratio to onnxruntime per variant.
"""
import sys
import time

sys.path.insert(0, "bench")
from common import bench_threads, ensure_native_blas, interleaved_samples

ensure_native_blas()
import numpy as np
from onnx import TensorProto, helper, numpy_helper

import tvmpy as tvm
from tvmpy import te, topi
from tvmpy.relay.testing import compare
from tvmpy.topi import nn
from tvmpy.topi.x86 import conv2d_nchwc as cn


def sides(c, hw, groups, d, variants):
    bn = 16
    icg = c // groups
    out = {}
    x = np.random.default_rng(0).uniform(-1, 1, (1, c, hw, hw)).astype("float32")
    w = np.random.default_rng(1).uniform(-1, 1, (c, icg, 3, 3)).astype("float32") / 10
    for (oct_, reg) in variants:
        A = te.placeholder((1, c // bn, hw, hw, bn), name="A")
        W = te.placeholder((c // bn, icg // bn, 3, 3, bn, bn), name="W")
        B = te.placeholder((1, c // bn, 1, 1, bn), name="B")
        conv = nn.conv2d_NCHWc(A, W, 1, d, d, f"NCHW{bn}c", f"NCHW{bn}c", groups=groups)
        o = topi.nn.relu(topi.add(conv, B))
        with tvm.target.Target("llvm"):
            if oct_ is None:
                s = cn.schedule_conv2d_NCHWc([o])
            else:
                s = cn.schedule_conv2d_NCHWc([o], reg_n=reg, oc_tile=oct_)
        f = tvm.build(s, [A, W, B, o], "llvm")
        arrs = [tvm.nd.array(np.random.default_rng(2).uniform(-1,1,[int(q) for q in t.shape]).astype("float32")) for t in (A, W, B, o)]
        out[f"t{oct_}x{reg}"] = (lambda f=f, a=arrs: f(*a))
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], group=groups, dilations=[d, d], pads=[d]*4), helper.make_node("Relu", ["c"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, hw, hw])], [numpy_helper.from_array(w, "w")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    ort = compare.ort_runner(m, threads=1)
    out["ort"] = lambda: ort({"x": x})
    return out

bench_threads(1)
variants = eval(sys.argv[2])
for spec in sys.argv[1].split(","):
    c, hw, g, d = (int(v) for v in spec.split("x"))
    sd = sides(c, hw, g, d, variants)
    got = interleaved_samples(sd, 7, pause=0.1, target_s=0.1, clock=time.process_time)
    o = min(got["ort"])
    print(spec, ", ".join(f"{k} {min(v)*1e3:.3f} ms ({min(v)/o:.2f}x)" for k, v in got.items()), flush=True)
