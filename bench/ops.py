"""Per-operator latency of tvmpy vs onnxruntime, measured alike on both sides, for the layer
shapes of ResNet-18, MobileNetV2 and a BERT-style encoder (4 layers, hidden 256, seq 128, 4
heads), batch 1.

Each case is one small ONNX model (a fused group as the models have it: Conv + bias + Relu /
+ residual + Relu / + Clip, depthwise Conv + Clip, MatMul + bias (+ Erf-GELU / + residual),
batched MatMul (+ scale), Softmax, LayerNormalization, pools), weights as initializers. Both
sides get the same model and the same NCHW inputs and produce the NCHW output:

* tvmpy: ``relay.frontend.from_onnx`` + ``relay.build`` (opt_level 3 by default: AlterOpLayout
  puts the conv in NCHW{c} and adds the layout_transforms around it at the graph's boundary;
  dense weights packed at compile time), run on the graph executor: inputs set once with
  ``set_input``, then ``run()`` is timed (the output lives in the executor's preallocated
  storage). ``--opt-levels 2,3`` also times the opt_level 2 build (NCHW kernels, plain dense).
* onnxruntime (CPU, all graph optimizations, intra_op_num_threads=2): inputs bound once as
  OrtValues, the output bound to a preallocated OrtValue, ``run_with_iobinding`` timed.

So each timed call is one Python-level call into the runtime with nothing allocated or copied.
Timing (bench/common.py ``interleaved_samples``): every case the same number of rounds, the
sides interleaved (order rotating), each round the mean of a fixed number of back-to-back calls
(~5 ms), a short pause before each side; median and interquartile range over the rounds; ratio =
tvmpy median / onnxruntime median (below 1: tvmpy faster). No case is re-measured.

    python bench/ops.py [--model resnet18|mobilenet_v2|bert|awkward|pools|global_pools|all] [--filter TEXT] [--shard K/N]
                        [--rounds 31] [--opt-levels 3] [--markdown] [--json FILE]
    python bench/ops.py --report FILE [FILE ...] [--opt-levels 3]   # merge --json shards
    python bench/ops.py --breakdown [--model ...]   # per-kernel profiles, both sides

``--breakdown`` gives the kernel-level view (each side's own profiler, the compute kernels apart
from the boundary reorders): onnxruntime runs its convolutions blocked only inside its own
graph, so a timed "both blocked" comparison is not offered.

New cases: write a builder returning ``Case``s (conv_case/dense_case/... help) and add it to
``CASE_SETS``; ``--model`` then accepts its key.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    ensure_native_blas,
    geomean,
    interleaved_samples,
    machine_description,
    ort_bound_runner,
    ort_session,
    quartiles,
)

ensure_native_blas()  # numpy is not timed here; keeps the benches' environment alike

import numpy as np  # noqa: E402

RNG = np.random.default_rng(0)


# --- cases ------------------------------------------------------------------------------------

@dataclass
class Case:
    """One benchmark case: an ONNX model both sides compile, and its runtime inputs."""
    name: str
    flops: float
    onnx_fn: Callable[[], Any]            # -> onnx ModelProto (weights as initializers)
    feeds: dict[str, np.ndarray]          # runtime inputs (NCHW), fed to both sides


def _rand(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, size=shape).astype(np.float32)


def _onnx_model(nodes: list, inputs: dict[str, np.ndarray], out_shape: tuple,
                inits: dict[str, np.ndarray], opset: int = 17) -> Any:
    """A one-output ("y") float32 model; the last node's output is renamed "y"."""
    from onnx import TensorProto, helper, numpy_helper

    nodes[-1].output[0] = "y"
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape))
         for k, v in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _node(op: str, ins: list[str], out: str, **attrs: Any) -> Any:
    from onnx import helper

    return helper.make_node(op, ins, [out], **attrs)


def conv_case(model: str, ic: int, hw: int, oc: int, k: int, s: int, epi: str,
              groups: int = 1, pad: int | None = None, dilation: int = 1) -> Case:
    """Conv (bias, pad ``dilation * (k // 2)`` unless given) + epilogue: relu | clip (relu6) |
    none | res (+ residual input) | res_relu (+ residual, relu) | silu (x * Sigmoid(x), as torch
    exports nn.SiLU) | hswish (HardSwish) | sigmoid | gelu (erf form, as torch exports
    nn.GELU). ``hw`` is the (square) input size."""
    p = dilation * (k // 2) if pad is None else pad
    oh = (hw + 2 * p - dilation * (k - 1) - 1) // s + 1
    x, w, b = _rand(1, ic, hw, hw), _rand(oc, ic // groups, k, k) * 0.2, _rand(oc)
    dw = groups > 1 and groups == ic
    name = (f"{model}:{'dw' if dw else 'conv'}{k}x{k} {ic}x{hw}x{hw}->{oc} s{s}"
            + (f" p{p}" if pad is not None else "") + (f" g{groups}" if groups > 1 and not dw
                                                       else "")
            + (f" d{dilation}" if dilation > 1 else "") + f" +{epi}")
    feeds = {"x": x}
    nodes = [_node("Conv", ["x", "w", "b"], "c", pads=[p] * 4, strides=[s, s],
                   kernel_shape=[k, k], group=groups, dilations=[dilation] * 2)]
    inits = {"w": w, "b": b}
    if "res" in epi:
        feeds["r"] = _rand(1, oc, oh, oh)
        nodes.append(_node("Add", ["c", "r"], "a"))
    if "relu" in epi:
        nodes.append(_node("Relu", [nodes[-1].output[0]], "y"))
    elif epi == "clip":
        inits.update(lo=np.array(0, np.float32), hi=np.array(6, np.float32))
        nodes.append(_node("Clip", [nodes[-1].output[0], "lo", "hi"], "y"))
    elif epi == "silu":
        nodes += [_node("Sigmoid", ["c"], "sg"), _node("Mul", ["c", "sg"], "y")]
    elif epi == "hswish":
        nodes.append(_node("HardSwish", ["c"], "y"))
    elif epi == "sigmoid":
        nodes.append(_node("Sigmoid", ["c"], "y"))
    elif epi == "gelu":
        inits.update(sq2=np.array(np.sqrt(2.0), np.float32), one=np.array(1, np.float32),
                     half=np.array(0.5, np.float32))
        nodes += [_node("Div", ["c", "sq2"], "g0"), _node("Erf", ["g0"], "g1"),
                  _node("Add", ["g1", "one"], "g2"), _node("Mul", ["c", "g2"], "g3"),
                  _node("Mul", ["g3", "half"], "y")]
    flops = 2.0 * oc * oh * oh * (ic // groups) * k * k
    return Case(name, flops, lambda: _onnx_model(nodes, feeds, (1, oc, oh, oh), inits), feeds)


def se_case(model: str, c: int, hw: int, squeeze: int) -> Case:
    """Squeeze-and-excitation as EfficientNet has it: GlobalAveragePool -> 1x1 Conv (c ->
    squeeze) + SiLU -> 1x1 Conv (squeeze -> c) -> Sigmoid -> Mul with the input."""
    x = _rand(1, c, hw, hw)
    inits = {"w1": _rand(squeeze, c, 1, 1) * 0.2, "b1": _rand(squeeze),
             "w2": _rand(c, squeeze, 1, 1) * 0.2, "b2": _rand(c)}
    nodes = [_node("GlobalAveragePool", ["x"], "p"),
             _node("Conv", ["p", "w1", "b1"], "c1", kernel_shape=[1, 1]),
             _node("Sigmoid", ["c1"], "s1"), _node("Mul", ["c1", "s1"], "a1"),
             _node("Conv", ["a1", "w2", "b2"], "c2", kernel_shape=[1, 1]),
             _node("Sigmoid", ["c2"], "g"), _node("Mul", ["x", "g"], "y")]
    flops = 4.0 * c * squeeze + 2.0 * c * hw * hw
    return Case(f"{model}:se {c}x{hw}x{hw} squeeze {squeeze}", flops,
                lambda: _onnx_model(nodes, {"x": x}, (1, c, hw, hw), inits), {"x": x})


def dense_case(model: str, m: int, kdim: int, n: int, epi: str) -> Case:
    """MatMul by a constant [K, N] weight + bias + epilogue: none | gelu (the Erf formula, as
    torch exports nn.GELU) | res (+ residual input)."""
    x, w, b = _rand(m, kdim), _rand(kdim, n) * 0.1, _rand(n)
    feeds = {"x": x}
    inits = {"w": w, "b": b}
    nodes = [_node("MatMul", ["x", "w"], "mm"), _node("Add", ["mm", "b"], "c")]
    if epi == "gelu":
        inits.update(sq2=np.array(np.sqrt(2.0), np.float32), one=np.array(1, np.float32),
                     half=np.array(0.5, np.float32))
        nodes += [_node("Div", ["c", "sq2"], "d"), _node("Erf", ["d"], "e"),
                  _node("Add", ["e", "one"], "e1"), _node("Mul", ["c", "e1"], "g"),
                  _node("Mul", ["g", "half"], "y")]
    elif epi == "res":
        feeds["r"] = _rand(m, n)
        nodes.append(_node("Add", ["c", "r"], "y"))
    return Case(f"{model}:dense {m}x{kdim}->{n} +{epi}", 2.0 * m * n * kdim,
                lambda: _onnx_model(nodes, feeds, (m, n), inits), feeds)


def bmm_case(model: str, b: int, m: int, kdim: int, n: int, scale: float | None) -> Case:
    """MatMul of two runtime inputs A[b, m, k] @ B[b, k, n] (attention scores / context), times
    an optional scalar (the scores' 1/sqrt(d))."""
    feeds = {"a": _rand(b, m, kdim), "bb": _rand(b, kdim, n)}
    nodes = [_node("MatMul", ["a", "bb"], "mm")]
    inits = {}
    if scale is not None:
        inits["sc"] = np.array(scale, np.float32)
        nodes.append(_node("Mul", ["mm", "sc"], "y"))
    return Case(f"{model}:batch_matmul {b}x{m}x{kdim}x{n}" + (" *scale" if scale else ""),
                2.0 * b * m * n * kdim, lambda: _onnx_model(nodes, feeds, (b, m, n), inits),
                feeds)


def softmax_case(model: str, shape: tuple[int, ...]) -> Case:
    feeds = {"x": _rand(*shape) * 4}
    return Case(f"{model}:softmax {'x'.join(map(str, shape))}", 5.0 * np.prod(shape),
                lambda: _onnx_model([_node("Softmax", ["x"], "y", axis=-1)], feeds, shape, {}),
                feeds)


def layer_norm_case(model: str, m: int, n: int) -> Case:
    feeds = {"x": _rand(m, n)}
    inits = {"g": _rand(n), "be": _rand(n)}
    return Case(f"{model}:layer_norm {m}x{n}", 8.0 * m * n,
                lambda: _onnx_model([_node("LayerNormalization", ["x", "g", "be"], "y", axis=-1,
                                           epsilon=1e-5)], feeds, (m, n), inits), feeds)


def pool_case(model: str, kind: str, c: int, hw: int) -> Case:
    """MaxPool 3x3 stride 2 pad 1 (kind "max") or GlobalAveragePool (kind "gavg")."""
    feeds = {"x": _rand(1, c, hw, hw)}
    if kind == "max":
        oh = (hw + 2 - 3) // 2 + 1
        node = _node("MaxPool", ["x"], "y", kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
        out, flops = (1, c, oh, oh), 9.0 * c * oh * oh
    else:
        node = _node("GlobalAveragePool", ["x"], "y")
        out, flops = (1, c, 1, 1), float(c * hw * hw)
    return Case(f"{model}:{kind}_pool {c}x{hw}x{hw}", flops,
                lambda: _onnx_model([node], feeds, out, {}), feeds)


def window_pool_case(model: str, op: str, c: int, hw: int, k: int, s: int, pad: int,
                     ceil_mode: int = 0, cip: int = 0) -> Case:
    """MaxPool / AveragePool (``count_include_pad`` ``cip``), GlobalAveragePool /
    GlobalMaxPool (``k`` ignored) on a ``c x hw x hw`` input."""
    feeds = {"x": _rand(1, c, hw, hw)}
    if op.startswith("Global"):
        node = _node(op, ["x"], "y")
        return Case(f"{model}:{op} {c}x{hw}x{hw}", float(c * hw * hw),
                    lambda: _onnx_model([node], feeds, (1, c, 1, 1), {}), feeds)
    span = hw + 2 * pad - k
    oh = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (oh - 1) * s >= hw + pad:
        oh -= 1
    attrs: dict[str, Any] = dict(kernel_shape=[k, k], strides=[s, s], pads=[pad] * 4,
                                 ceil_mode=ceil_mode)
    if op == "AveragePool":
        attrs["count_include_pad"] = cip
    node = _node(op, ["x"], "y", **attrs)
    tag = f"{op} {k}x{k}/{s} pad {pad}" + (" ceil" if ceil_mode else "") + (
        " cip" if cip else "")
    return Case(f"{model}:{tag} {c}x{hw}x{hw}", float(k * k * c * oh * oh),
                lambda: _onnx_model([node], feeds, (1, c, oh, oh), {}), feeds)


# pools of other models / awkward sizes: odd channel counts and planes, stride 1 (Inception's
# avg pool), 2x2/2, ceil_mode (SqueezeNet), a large plane for the global pool
AWKWARD_POOLS = [
    ("MaxPool", 57, 17, 3, 2, 1), ("AveragePool", 64, 35, 3, 1, 1),
    ("MaxPool", 256, 14, 2, 2, 0), ("MaxPool", 96, 55, 3, 2, 0, 1),
    ("AveragePool", 128, 28, 3, 2, 1, 0, 1), ("MaxPool", 3, 224, 3, 2, 1),
    ("GlobalAveragePool", 64, 56, 0, 0, 0), ("GlobalMaxPool", 57, 13, 0, 0, 0),
]


def awkward_pool_cases() -> list[Case]:
    return [window_pool_case("pools", *c) for c in AWKWARD_POOLS]


def resnet18_cases() -> list[Case]:
    convs = [  # ic, hw, oc, k, s, epilogue
        (3, 224, 64, 7, 2, "relu"),
        (64, 56, 64, 3, 1, "relu"), (64, 56, 64, 3, 1, "res_relu"),
        (64, 56, 128, 3, 2, "relu"), (64, 56, 128, 1, 2, "none"),
        (128, 28, 128, 3, 1, "relu"), (128, 28, 128, 3, 1, "res_relu"),
        (128, 28, 256, 3, 2, "relu"), (128, 28, 256, 1, 2, "none"),
        (256, 14, 256, 3, 1, "relu"), (256, 14, 256, 3, 1, "res_relu"),
        (256, 14, 512, 3, 2, "relu"), (256, 14, 512, 1, 2, "none"),
        (512, 7, 512, 3, 1, "relu"), (512, 7, 512, 3, 1, "res_relu"),
    ]
    return ([conv_case("resnet18", *c) for c in convs]
            + [pool_case("resnet18", "max", 64, 112), pool_case("resnet18", "gavg", 512, 7),
               dense_case("resnet18", 1, 512, 1000, "none")])


def mobilenet_v2_cases() -> list[Case]:
    cs = [conv_case("mobilenet_v2", 3, 224, 32, 3, 2, "clip")]
    seen: set[tuple] = set()

    def add(*args: Any, **kw: Any) -> None:  # each distinct layer once
        key = (*args, *kw.items())
        if key not in seen:
            seen.add(key)
            cs.append(conv_case("mobilenet_v2", *args, **kw))

    cin, hw = 32, 112
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            st = s if i == 0 else 1
            hid = cin * t
            if t != 1:
                add(cin, hw, hid, 1, 1, "clip")  # expand
            add(hid, hw, hid, 3, st, "clip", groups=hid)  # depthwise
            ohw = (hw + 2 - 3) // st + 1
            add(hid, ohw, c, 1, 1, "res" if st == 1 and cin == c else "none")  # project
            cin, hw = c, ohw
    cs += [conv_case("mobilenet_v2", 320, 7, 1280, 1, 1, "clip"),
           pool_case("mobilenet_v2", "gavg", 1280, 7),
           dense_case("mobilenet_v2", 1, 1280, 1000, "none")]
    return cs


def bert_cases() -> list[Case]:
    seq, hid, heads, inter = 128, 256, 4, 1024
    dh = hid // heads
    return [
        dense_case("bert", seq, hid, hid, "none"),
        dense_case("bert", seq, hid, hid, "res"),
        dense_case("bert", seq, hid, inter, "gelu"),
        dense_case("bert", seq, inter, hid, "res"),
        bmm_case("bert", heads, seq, dh, seq, 1.0 / np.sqrt(dh)),
        bmm_case("bert", heads, seq, seq, dh, None),
        softmax_case("bert", (heads, seq, seq)),
        layer_norm_case("bert", seq, hid),
    ]


def epilogue_cases() -> list[Case]:
    """The fused activations of EfficientNet-B0 (SiLU) and MobileNetV3 (HardSwish) on their
    layers, each beside the same conv alone; squeeze-and-excitation blocks (issue 25)."""
    cs = [conv_case("epilogues", 16, 112, 96, 1, 1, e)
          for e in ("none", "silu", "hswish", "sigmoid")]
    cs += [conv_case("epilogues", 96, 112, 96, 3, 2, e, groups=96) for e in ("none", "silu")]
    cs += [conv_case("epilogues", 40, 28, 240, 1, 1, e) for e in ("none", "silu", "hswish")]
    cs += [se_case("epilogues", 96, 56, 4), se_case("epilogues", 240, 28, 10),
           se_case("epilogues", 1152, 7, 48)]
    return cs


def grouped_cases() -> list[Case]:
    """Grouped / dilated / large-kernel depthwise convolutions of the zoo (issue 25):
    ResNeXt-50 32x4d's grouped 3x3 layers (its last two stages dilated 2 and 4, output stride
    8, as resnext_dilated), ConvMixer-768/32's depthwise 7x7 and pointwise layers + GELU, and
    RegNetY-400MF's grouped 3x3 (8 channels a group)."""
    return [
        conv_case("grouped", 128, 56, 128, 3, 1, "relu", groups=32),
        conv_case("grouped", 256, 56, 256, 3, 2, "relu", groups=32),
        conv_case("grouped", 256, 28, 256, 3, 1, "relu", groups=32),
        conv_case("grouped", 512, 28, 512, 3, 1, "relu", groups=32, dilation=2),
        conv_case("grouped", 1024, 28, 1024, 3, 1, "relu", groups=32, dilation=4),
        conv_case("grouped", 1024, 28, 512, 1, 1, "relu"),
        conv_case("grouped", 1024, 28, 2048, 1, 1, "res_relu"),
        conv_case("grouped", 768, 32, 768, 7, 1, "gelu", groups=768),
        conv_case("grouped", 768, 32, 768, 1, 1, "gelu"),
        conv_case("grouped", 208, 14, 208, 3, 1, "relu", groups=26),
    ]


# --- awkward convolution shapes (issue 12) ---------------------------------------------------
# Channel counts and map sizes that are not multiples of the vector width or register tile; the
# full grid is bench/conv_shapes.py (same method).
AWKWARD_CONVS = [  # ic, hw, oc, k, s, epilogue
    (3, 17, 64, 7, 2, "relu"), (3, 13, 24, 3, 1, "relu"), (24, 13, 57, 3, 1, "relu"),
    (57, 17, 57, 3, 2, "relu"), (57, 7, 128, 3, 1, "relu"), (64, 13, 57, 1, 1, "relu"),
]


def awkward_conv_cases() -> list[Case]:
    return [conv_case("awkward", *c) for c in AWKWARD_CONVS]


# global pools at squeeze-and-excitation sizes (EfficientNet/MobileNetV3/RegNet: the expanded
# channels before the SE block) and awkward ones: prime planes and channel counts, size 1
GLOBAL_POOLS = [
    ("GlobalAveragePool", 96, 112), ("GlobalAveragePool", 144, 56), ("GlobalAveragePool", 240, 28),
    ("GlobalAveragePool", 672, 14), ("GlobalAveragePool", 1152, 7), ("GlobalMaxPool", 144, 56),
    ("GlobalMaxPool", 480, 14), ("GlobalAveragePool", 37, 17), ("GlobalMaxPool", 13, 31),
    ("GlobalAveragePool", 256, 1),
]


def global_pool_cases() -> list[Case]:
    return [window_pool_case("global_pools", op, c, hw, 0, 0, 0) for op, c, hw in GLOBAL_POOLS]


# the case sets --model chooses from ("all": every set, in this order); add new sets here
CASE_SETS: dict[str, Callable[[], list[Case]]] = {
    "resnet18": resnet18_cases,
    "mobilenet_v2": mobilenet_v2_cases,
    "bert": bert_cases,
    "epilogues": epilogue_cases,
    "awkward": awkward_conv_cases,
    "grouped": grouped_cases,
    "pools": awkward_pool_cases,
    "global_pools": global_pool_cases,
}


# --- running ----------------------------------------------------------------------------------

def tvm_side(model: Any, feeds: dict[str, np.ndarray], opt_level: int) -> tuple[Any, float]:
    """``(graph module with the inputs set, build seconds)`` of ``model`` built by relay.build."""
    from tvmpy.contrib import graph_executor
    from tvmpy.relay.testing import compare
    from tvmpy.runtime import cpu

    mod, params = compare.import_onnx(model, {k: v.shape for k, v in feeds.items()})
    lib, secs = compare.build(mod, params, opt_level=opt_level)
    m = graph_executor.GraphModule(lib["default"](cpu(0)))
    m.set_input(**feeds)
    return m, secs


def kernel_shares(m: Any) -> tuple[str, float]:
    """tvmpy's kernels of the one-op graph with each one's share of the summed kernel time, and
    the layout_transform kernels' total share (the graph executor's per-node profile; tvmpy-only,
    not part of the comparison)."""
    rows = m.profile(number=20).rows
    total = sum(r["time"] for r in rows) or 1.0
    lt = sum(r["time"] for r in rows if "layout_transform" in r["node"]) / total
    return ", ".join(f"{r['node']} {r['time'] / total:.0%}" for r in rows), lt


def ort_node_times(model: Any, feeds: dict[str, np.ndarray], number: int = 50,
                   threads: int = 2) -> list[tuple[str, float]]:
    """onnxruntime's own per-node profile: (op type, median seconds) of every kernel it runs,
    over ``number`` bound runs (the profiler adds a little to each node)."""
    import statistics
    import tempfile

    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    opts.enable_profiling = True
    opts.profile_file_prefix = os.path.join(tempfile.gettempdir(), "tvmpy_bench_ops_ort_profile")
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    run, _ = ort_bound_runner(sess, feeds)
    for _ in range(number + 5):
        run()
    path = sess.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    per: dict[str, list[float]] = {}
    ops_: dict[str, str] = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per.setdefault(e["name"], []).append(e["dur"] * 1e-6)
            ops_[e["name"]] = e.get("args", {}).get("op_name", e["name"])
    return [(ops_[k], statistics.median(v[5:] or v)) for k, v in per.items()]


def _is_reorder(node: str) -> bool:
    return "layout_transform" in node or node.startswith("Reorder")


def breakdown(c: Case, opt_level: int, number: int = 50, threads: int = 2) -> dict:
    """Per-kernel median times of both sides, each from its own profiler (tvmpy's graph executor
    profile; onnxruntime's session profiler), split into the boundary reorders (tvmpy's
    layout_transform kernels, onnxruntime's ReorderInput/ReorderOutput) and the rest: a
    kernel-level view, both convolutions running blocked inside, without per-call overheads."""
    model = c.onnx_fn()
    m, _ = tvm_side(model, c.feeds, opt_level)
    tv = [(r["node"], r["time"]) for r in m.profile(number=number).rows]
    on = ort_node_times(model, c.feeds, number, threads)
    row = {"name": c.name, "tvmpy": tv, "ort": on}
    for side, rows in (("tvmpy", tv), ("ort", on)):
        row[f"{side} reorder"] = sum(t for n, t in rows if _is_reorder(n))
        row[f"{side} compute"] = sum(t for n, t in rows if not _is_reorder(n))
    return row


def print_breakdowns(rows: list[dict], opt_level: int) -> None:
    print(f"\n| case | tvmpy O{opt_level} compute us | ORT compute us | compute ratio | tvmpy "
          "layout_transform us | ORT Reorder us |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['tvmpy compute'] * 1e6:.1f} | {r['ort compute'] * 1e6:.1f} | "
              f"{r['tvmpy compute'] / r['ort compute']:.2f} | {r['tvmpy reorder'] * 1e6:.1f} | "
              f"{r['ort reorder'] * 1e6:.1f} |")
    sets = [s for s in CASE_SETS if any(r["name"].startswith(s + ":") for r in rows)]
    for s in sets:
        rs = [r for r in rows if r["name"].startswith(s + ":")]
        print(f"# kernel-level {s}: geomean compute ratio "
              f"{geomean([r['tvmpy compute'] / r['ort compute'] for r in rs]):.2f}; reorders "
              f"summed tvmpy {sum(r['tvmpy reorder'] for r in rs) * 1e3:.3f} ms, onnxruntime "
              f"{sum(r['ort reorder'] for r in rs) * 1e3:.3f} ms")


def run_case(c: Case, rounds: int, pause: float, opt_levels: list[int], target_s: float,
             threads: int = 2) -> dict:
    """Both sides of ``c`` built, checked against each other and timed (see the module doc);
    tvmpy's thread count is the process's (``--threads`` sets TVM_NUM_THREADS)."""
    model = c.onnx_fn()
    sess = ort_session(model, threads)
    ort_run, ort_outs = ort_bound_runner(sess, c.feeds)
    ort_run()
    want = ort_outs[0].numpy()
    sides: dict[str, Callable[[], object]] = {}
    row: dict[str, Any] = {"name": c.name, "flops": c.flops, "err": 0.0}
    mods = {}
    for lvl in opt_levels:
        m, row[f"build O{lvl}"] = tvm_side(model, c.feeds, lvl)
        m.run()
        got = m.get_output(0).numpy()
        if got.shape != want.shape:
            raise ValueError(f"tvmpy O{lvl} output shape {got.shape} != onnxruntime's {want.shape}")
        err = float(np.abs(got - want).max() / (np.abs(want).max() + 1e-6))
        row["err"] = max(row["err"], err)
        mods[lvl] = m
        sides[f"O{lvl}"] = m.run
    sides["ort"] = ort_run
    samples = interleaved_samples(sides, rounds, pause=pause, target_s=target_s)
    for k, xs in samples.items():
        row[k], row[f"min {k}"] = quartiles(xs), min(xs)
    for lvl in opt_levels:  # the spread of the per-round ratios (rounds are interleaved pairs)
        row[f"ratio O{lvl}"] = quartiles([a / b for a, b in zip(samples[f"O{lvl}"],
                                                                 samples["ort"])])
    for lvl in opt_levels:
        row[f"kernels O{lvl}"], row[f"layout share O{lvl}"] = kernel_shares(mods[lvl])
    return row


def _ms(q: tuple[float, float, float]) -> str:
    return f"{q[1] * 1e3:.3f} ({q[0] * 1e3:.3f}-{q[2] * 1e3:.3f})"


def _us(q: tuple[float, float, float]) -> str:
    return f"{q[1] * 1e6:.1f} ({q[0] * 1e6:.1f}-{q[2] * 1e6:.1f})"


def print_case(r: dict, levels: list[int]) -> None:
    parts = [f"{r['name']:50s}"]
    for lvl in levels:
        q, rq = r[f"O{lvl}"], r[f"ratio O{lvl}"]
        parts.append(f"tvmpy O{lvl} {_ms(q)} {r['flops'] / q[1] / 1e9:6.1f} GF/s, ratio "
                     f"{q[1] / r['ort'][1]:.2f} (rounds {rq[0]:.2f}-{rq[2]:.2f})")
    parts.append(f"ort {_ms(r['ort'])} {r['flops'] / r['ort'][1] / 1e9:6.1f} GF/s")
    parts.append("best rounds " + ", ".join(f"O{lv} {r[f'min O{lv}'] * 1e3:.3f}" for lv in levels)
                 + f", ort {r['min ort'] * 1e3:.3f} ms")
    parts.append(f"err {r['err']:.0e}, build " + "/".join(
        f"{r[f'build O{lvl}']:.1f}" for lvl in levels) + " s")
    print(" | ".join(parts), flush=True)
    for lvl in levels:
        print(f"    tvmpy O{lvl} kernels: {r[f'kernels O{lvl}']}", flush=True)


def print_markdown(rows: list[dict], levels: list[int]) -> None:
    """One table per opt_level: medians (IQR), the ratio of medians (and the IQR of the
    per-round ratios), the ratio of the best rounds, GFLOP/s, tvmpy's layout_transform share."""
    for lvl in levels:
        print(f"\n| case | tvmpy O{lvl} ms | ORT ms | ratio (round IQR) | best-round ratio | "
              "GFLOP/s tvmpy / ORT | layout_transform share |\n|---|---|---|---|---|---|---|")
        for r in rows:
            q, o, rq = r[f"O{lvl}"], r["ort"], r[f"ratio O{lvl}"]
            print(f"| {r['name']} | {_ms(q)} | {_ms(o)} | {q[1] / o[1]:.2f} ({rq[0]:.2f}-"
                  f"{rq[2]:.2f}) | {r[f'min O{lvl}'] / r['min ort']:.2f} | "
                  f"{r['flops'] / q[1] / 1e9:.0f} / {r['flops'] / o[1] / 1e9:.0f} | "
                  f"{r[f'layout share O{lvl}']:.0%} |")


def print_summary(rows: list[dict], levels: list[int]) -> None:
    """Per opt_level and model: geomean / median / range of the ratios of medians, and the
    cases below 0.9x onnxruntime's speed (ratio above 1/0.9)."""
    sets = [s for s in CASE_SETS if any(r["name"].startswith(s + ":") for r in rows)]
    print()
    for lvl in levels:
        for s in ["all", *sets] if len(sets) > 1 else sets:
            rs = [r for r in rows if s == "all" or r["name"].startswith(s + ":")]
            ratios = [r[f"O{lvl}"][1] / r["ort"][1] for r in rs]
            best = [r[f"min O{lvl}"] / r["min ort"] for r in rs]
            slow = [r["name"] for r, x in zip(rs, ratios) if x > 1 / 0.9]
            print(f"# summary O{lvl} {s}: {len(rs)} cases, geomean ratio {geomean(ratios):.2f} "
                  f"(best rounds {geomean(best):.2f}), median {float(np.median(ratios)):.2f}, "
                  f"range {min(ratios):.2f}-{max(ratios):.2f}; below 0.9x onnxruntime's speed "
                  f"(ratio > 1.11): {len(slow)}" + (f" ({', '.join(slow)})" if slow else ""))
    print(f"# largest max|tvmpy - ort| / max|ort|: {max((r['err'] for r in rows), default=0):.1e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="all", choices=["all", *CASE_SETS])
    ap.add_argument("--filter", default="",
                    help="only cases whose name contains this text (alternatives split by |)")
    ap.add_argument("--shard", default="0/1", metavar="K/N",
                    help="only every N-th selected case, starting at the K-th (0-based): splits "
                         "a long table into shorter runs")
    ap.add_argument("--rounds", type=int, default=31, help="interleaved rounds per case")
    ap.add_argument("--pause", type=float, default=0.05, help="seconds before each side's round")
    ap.add_argument("--round-ms", type=float, default=5.0,
                    help="about how long one side's round of back-to-back calls lasts")
    ap.add_argument("--opt-levels", default="3", help="tvmpy build opt_levels, e.g. 3 or 2,3")
    ap.add_argument("--threads", type=int, default=2,
                    help="threads of both sides (onnxruntime intra_op_num_threads, tvmpy "
                         "TVM_NUM_THREADS)")
    ap.add_argument("--markdown", action="store_true", help="also print markdown tables")
    ap.add_argument("--json", metavar="FILE", help="append each case's figures (JSON lines)")
    ap.add_argument("--breakdown", action="store_true",
                    help="instead of the timing table: each selected case's per-kernel profile "
                         "on both sides (the highest --opt-levels), boundary reorders apart")
    ap.add_argument("--report", nargs="+", metavar="FILE",
                    help="measure nothing: print the tables and summary of --json files "
                         "(e.g. the shards of one table)")
    o = ap.parse_args()
    levels = sorted({int(v) for v in o.opt_levels.split(",") if v})
    if not levels or any(lv not in range(4) for lv in levels):
        ap.error("--opt-levels: integers 0-3, e.g. 3 or 2,3")
    if o.report:
        rows = []
        for path in o.report:
            with open(path) as f:
                rows += [r for r in map(json.loads, f) if "name" in r]
        order = {c.name: i for i, c in enumerate(c for mk in CASE_SETS.values() for c in mk())}
        rows.sort(key=lambda r: order.get(r["name"], len(order)))  # shards back in table order
        for line in dict.fromkeys(r["header"] for path in o.report
                                  for r in map(json.loads, open(path)) if "header" in r):
            print(line)
        print_markdown(rows, levels)
        print_summary(rows, levels)
        return
    sets = list(CASE_SETS) if o.model == "all" else [o.model]
    wanted = o.filter.split("|")
    cases = [c for s in sets for c in CASE_SETS[s]() if any(w in c.name for w in wanted)]
    try:
        k, n = (int(v) for v in o.shard.split("/"))
        if not 0 <= k < n:
            raise ValueError
    except ValueError:
        ap.error("--shard: K/N with 0 <= K < N, e.g. 1/3")
    cases = cases[k::n]
    if o.threads < 1:
        ap.error("--threads: at least 1")
    os.environ["TVM_NUM_THREADS"] = str(o.threads)  # read when tvmpy's pool starts
    if o.breakdown:
        rows = []
        for c in cases:
            r = breakdown(c, max(levels), threads=o.threads)
            rows.append(r)
            print(f"{c.name}: tvmpy " + ", ".join(f"{n} {t * 1e6:.1f}" for n, t in r["tvmpy"])
                  + " | onnxruntime " + ", ".join(f"{n} {t * 1e6:.1f}" for n, t in r["ort"])
                  + " (us)", flush=True)
        print_breakdowns(rows, max(levels))
        return
    sink = open(o.json, "a") if o.json else None
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    header = (f"# {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {machine_description()}, "
              f"load average {load:.2f}; {o.rounds} interleaved rounds per case; tvmpy graph "
              f"executor run() after set_input once vs onnxruntime run_with_iobinding (input "
              f"and output bound once); {o.threads} threads each side"
              "; times: median (25th-75th percentile) ms; ratio = "
              "tvmpy median / onnxruntime median")
    print(header, flush=True)
    # the fixed cost of one call on each side (a 16-element Relu): what the smallest cases pay
    feeds = {"x": _rand(1, 16)}
    floor = run_case(Case("floor:relu 1x16", 16.0, lambda: _onnx_model(
        [_node("Relu", ["x"], "y")], feeds, (1, 16), {}), feeds), o.rounds, o.pause, levels,
        o.round_ms / 1e3, o.threads)
    fl = ("# per-call floor (16-element Relu), us: " + ", ".join(
        f"tvmpy O{lv} {_us(floor[f'O{lv}'])}" for lv in levels) + f", onnxruntime "
        f"{_us(floor['ort'])}")
    print(fl, flush=True)
    if sink:
        sink.write(json.dumps({"header": header + "\n" + fl}) + "\n")
    rows = []
    for c in cases:
        try:
            r = run_case(c, o.rounds, o.pause, levels, o.round_ms / 1e3, o.threads)
        except Exception as e:  # a broken case is reported, the others still run
            print(f"{c.name}: FAILED {type(e).__name__}: {e}", flush=True)
            continue
        rows.append(r)
        print_case(r, levels)
        if sink:
            sink.write(json.dumps(r) + "\n")
            sink.flush()
    if sink:
        sink.close()
    if o.markdown and rows:
        print_markdown(rows, levels)
    if rows:
        print_summary(rows, levels)


if __name__ == "__main__":
    main()
