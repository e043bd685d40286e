"""Per-operator latency of tvmpy's default x86 schedules vs onnxruntime, for the layer shapes of
ResNet-18, MobileNetV2 and a BERT-style encoder (4 layers, hidden 256, seq 128, 4 heads), batch 1.

Each case is one fused group as FuseOps makes it (conv2d + bias add + relu, conv2d + add + add +
relu, depthwise conv2d + bias + clip, dense + bias + gelu, batch_matmul + scale, softmax,
layer_norm, pools), lowered call by call with ``relay.backend.lower_call`` and scheduled by its
anchor's strategy (how ``relay.build`` lowers a primitive function), built for the host CPU; the
same computation runs as a small ONNX model in onnxruntime (intra_op_num_threads=2; ORT fuses
its own Conv+Add+Relu). Convolutions are timed in both the NCHW layout and the blocked NCHW{c}
layout that AlterOpLayout produces (weights pre-blocked as the pass does at compile time).
Timing: interleaved rounds, best of N, pauses between the two sides (see bench/common.py).

    python bench/ops.py [--model resnet18|mobilenet_v2|bert|awkward|all] [--filter TEXT]
                        [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import best_time, machine_description  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import relay  # noqa: E402
from tvmpy.relay.analysis import free_vars  # noqa: E402
from tvmpy.relay.backend import lower_call  # noqa: E402
from tvmpy.relay.type_infer import infer_type  # noqa: E402
from tvmpy.topi.nn.conv2d import conv2d_infer_layout  # noqa: E402

RNG = np.random.default_rng(0)


# --- lowering a fused group -------------------------------------------------------------------

def lower_group(expr: Any, target: str = "llvm", schedule: Callable | None = None
                ) -> tuple[Any, list, list, list]:
    """``(schedule, input placeholders, outputs, param vars)`` of the fused group ``expr``:
    every call lowered on its inputs' tensors, the whole scheduled by the anchor (the call of
    the highest pattern kind), as C2's lower_primitive does; ``schedule(outs)``, when given,
    replaces the anchor's schedule (for trying schedule variants)."""
    params = free_vars(expr)
    func = infer_type(relay.Function(params, expr))
    tensors: dict[int, Any] = {}
    placeholders = []
    for p in func.params:
        t = tvm.te.placeholder([int(d) for d in p.checked_type.shape], p.checked_type.dtype,
                               name=p.name_hint)
        tensors[id(p)] = t
        placeholders.append(t)
    best: list = [None, -1]

    def visit(e: Any) -> Any:
        if id(e) in tensors:
            return tensors[id(e)]
        if isinstance(e, relay.Constant):  # scalar constants live inside a fused body (C1)
            v = np.asarray(e.data.numpy() if hasattr(e.data, "numpy") else e.data)
            if v.ndim:
                raise TypeError("bench groups take their non-scalar constants as parameters")
            t = tvm.te.compute((), lambda: tvm.tir.const(v.item(), str(v.dtype)), name="c")
            tensors[id(e)] = t
            return t
        ins = [visit(a) for a in e.args]
        (out,), sched = lower_call(e, ins, target)
        if e.op.pattern > best[1]:
            best[:] = [sched, e.op.pattern]
        tensors[id(e)] = out
        return out

    out = visit(func.body)
    s = (schedule or best[0])([out])
    return s, placeholders, [out], list(func.params)


# --- cases ------------------------------------------------------------------------------------

@dataclass
class Case:
    name: str
    flops: float
    relay_fn: Callable[[], Any]           # -> relay expr over vars (names = input names)
    onnx_fn: Callable[[], Any]            # -> onnx ModelProto
    inputs: dict[str, np.ndarray]         # values for every relay var
    ort_inputs: list[str]                 # names fed to onnxruntime (others are initializers)
    check: Callable[[dict, np.ndarray, np.ndarray], float] | None = None
    extra: dict = field(default_factory=dict)


def _rand(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, size=shape).astype(np.float32)


def _onnx_model(nodes: list, inputs: dict[str, np.ndarray], outputs: dict[str, tuple],
                inits: dict[str, np.ndarray], opset: int = 20) -> Any:
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape))
         for k, v in inputs.items()],
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v)) for k, v in outputs.items()],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def to_nchwc(x: np.ndarray, bn: int) -> np.ndarray:
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // bn, bn, h, w).transpose(0, 1, 3, 4, 2))


def from_nchwc(x: np.ndarray) -> np.ndarray:
    n, cc, h, w, bn = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cc * bn, h, w))


def kernel_to_oihwio(w: np.ndarray, ibn: int, obn: int) -> np.ndarray:
    oc, ic, kh, kw = w.shape
    return np.ascontiguousarray(
        w.reshape(oc // obn, obn, ic // ibn, ibn, kh, kw).transpose(0, 2, 4, 5, 3, 1))


def conv_case(model: str, ic: int, hw: int, oc: int, k: int, s: int, epi: str,
              groups: int = 1, layout: str = "NCHW") -> Case:
    """conv2d (pad k//2) + bias + epilogue: relu | clip (relu6) | none | res (+ residual) |
    res_relu (+ residual, relu)."""
    p = k // 2
    oh = (hw + 2 * p - k) // s + 1
    x, w, b = _rand(1, ic, hw, hw), _rand(oc, ic // groups, k, k) * 0.2, _rand(oc)
    r = _rand(1, oc, oh, oh)
    flops = 2.0 * oc * oh * oh * (ic // groups) * k * k
    dw = groups > 1 and groups == ic
    tag = ("dw" if dw else "conv") + f"{k}x{k}"
    name = f"{model}:{tag} {ic}x{hw}x{hw}->{oc} s{s} +{epi} [{layout}]"
    inputs = {"x": x, "w": w, "b": b.reshape(oc, 1, 1)}
    if "res" in epi:
        inputs["r"] = r
    ibn, obn = conv2d_infer_layout(ic, oc)
    if layout != "NCHW":
        if dw:  # AlterOpLayout's depthwise form: kernel OIHW1i{c}o, data/output NCHW{c}c
            ibn = obn
            wk = w.reshape(oc // obn, obn, k, k).transpose(0, 2, 3, 1)[:, None, :, :, None, :]
        else:
            wk = kernel_to_oihwio(w, ibn, obn)
        inputs = {"x": to_nchwc(x, ibn), "w": np.ascontiguousarray(wk),
                  "b": np.ascontiguousarray(b.reshape(oc // obn, obn)[:, None, None, :])[None]}
        if "res" in epi:
            inputs["r"] = to_nchwc(r, obn)

    def build_relay() -> Any:
        vs = {k_: relay.var(k_, shape=v.shape) for k_, v in inputs.items()}
        if layout == "NCHW":
            y = relay.nn.conv2d(vs["x"], vs["w"], strides=(s, s), padding=(p, p, p, p),
                                groups=groups, channels=oc, kernel_size=(k, k))
        else:
            y = relay.nn.contrib_conv2d_nchwc(
                vs["x"], vs["w"], strides=(s, s), padding=(p, p, p, p), channels=oc,
                kernel_size=(k, k), groups=groups, data_layout=f"NCHW{ibn}c",
                kernel_layout=f"OIHW1i{obn}o" if dw else f"OIHW{ibn}i{obn}o",
                out_layout=f"NCHW{obn}c")
        y = relay.add(y, vs["b"])
        if "res" in epi:
            y = relay.add(y, vs["r"])
        if "relu" in epi:
            y = relay.nn.relu(y)
        if epi == "clip":
            y = relay.clip(y, 0.0, 6.0)
        return y

    def build_onnx() -> Any:
        from onnx import helper

        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[p] * 4, strides=[s, s],
                                  kernel_shape=[k, k], group=groups)]
        last = "c"
        if "res" in epi:
            nodes.append(helper.make_node("Add", [last, "r"], ["a"]))
            last = "a"
        if "relu" in epi:
            nodes.append(helper.make_node("Relu", [last], ["y"]))
        elif epi == "clip":
            nodes.append(helper.make_node("Clip", [last, "lo", "hi"], ["y"]))
        else:
            nodes.append(helper.make_node("Identity", [last], ["y"]))
        ins = {"x": x, **({"r": r} if "res" in epi else {})}
        inits = {"w": w, "b": b}
        if epi == "clip":
            inits.update(lo=np.array(0, np.float32), hi=np.array(6, np.float32))
        return _onnx_model(nodes, ins, {"y": (1, oc, oh, oh)}, inits)

    def check(feed: dict, got: np.ndarray, ort_out: np.ndarray) -> float:
        if layout != "NCHW":
            got = from_nchwc(got)
        return float(np.abs(got - ort_out).max() / (np.abs(ort_out).max() + 1e-6))

    ort_inputs = ["x", "r"] if "res" in epi else ["x"]
    c = Case(name, flops, build_relay, build_onnx, inputs, ort_inputs, check)
    # onnxruntime always sees NCHW values
    c.extra["ort_feed"] = {"x": x, **({"r": r} if "res" in epi else {})}
    return c


def dense_case(model: str, m: int, kdim: int, n: int, epi: str, packed: bool = False) -> Case:
    """dense (x @ W^T) + bias + epilogue: none | gelu | res (residual add); ``packed``: as
    AlterOpLayout leaves it at opt_level 3 (nn.contrib_dense_pack, weight packed at compile
    time)."""
    from tvmpy.topi.x86 import panel_width

    x, w, b, r = _rand(m, kdim), _rand(n, kdim) * 0.1, _rand(n), _rand(m, n)
    nr = panel_width(n)
    wk = np.ascontiguousarray(w.reshape(n // nr, nr, kdim).transpose(0, 2, 1)) if packed else w
    inputs = {"x": x, "w": wk, "b": b, **({"r": r} if epi == "res" else {})}

    def build_relay() -> Any:
        vs = {k_: relay.var(k_, shape=v.shape) for k_, v in inputs.items()}
        mm = (relay.nn.contrib_dense_pack(vs["x"], vs["w"]) if packed
              else relay.nn.dense(vs["x"], vs["w"]))
        y = relay.add(mm, vs["b"])
        if epi == "gelu":
            y = relay.nn.gelu(y)
        if epi == "res":
            y = relay.add(y, vs["r"])
        return y

    def build_onnx() -> Any:
        from onnx import helper

        nodes = [helper.make_node("MatMul", ["x", "wt"], ["mm"]),
                 helper.make_node("Add", ["mm", "b"], ["c"])]
        if epi == "gelu":
            nodes.append(helper.make_node("Gelu", ["c"], ["y"]))
        elif epi == "res":
            nodes.append(helper.make_node("Add", ["c", "r"], ["y"]))
        else:
            nodes.append(helper.make_node("Identity", ["c"], ["y"]))
        ins = {"x": x, **({"r": r} if epi == "res" else {})}
        return _onnx_model(nodes, ins, {"y": (m, n)}, {"wt": np.ascontiguousarray(w.T), "b": b})

    c = Case(f"{model}:dense {m}x{kdim}->{n} +{epi}" + (" [packed]" if packed else ""),
             2.0 * m * n * kdim, build_relay,
             build_onnx, inputs, ["x", "r"] if epi == "res" else ["x"])
    c.extra["ort_feed"] = {"x": x, **({"r": r} if epi == "res" else {})}
    return c


def bmm_case(model: str, b: int, m: int, kdim: int, n: int, scale: float | None) -> Case:
    """batch_matmul(A[b, m, k], B[b, k, n]) (transpose_b=False, as from_onnx makes it) times an
    optional scalar scale (the attention scores' 1/sqrt(d))."""
    a, bb = _rand(b, m, kdim), _rand(b, kdim, n)
    inputs = {"a": a, "bb": bb}

    def build_relay() -> Any:
        va, vb = relay.var("a", shape=a.shape), relay.var("bb", shape=bb.shape)
        y = relay.nn.batch_matmul(va, vb, transpose_b=False)
        if scale is not None:
            y = relay.multiply(y, relay.const(np.float32(scale)))
        return y

    def build_onnx() -> Any:
        from onnx import helper

        nodes = [helper.make_node("MatMul", ["a", "bb"], ["mm"])]
        if scale is not None:
            nodes.append(helper.make_node("Mul", ["mm", "sc"], ["y"]))
            inits = {"sc": np.array(scale, np.float32)}
        else:
            nodes.append(helper.make_node("Identity", ["mm"], ["y"]))
            inits = {}
        return _onnx_model(nodes, inputs, {"y": (b, m, n)}, inits)

    c = Case(f"{model}:batch_matmul {b}x{m}x{kdim}x{n}" + (" *scale" if scale else ""),
             2.0 * b * m * n * kdim, build_relay, build_onnx, inputs, ["a", "bb"])
    c.extra["ort_feed"] = inputs
    return c


def softmax_case(model: str, shape: tuple) -> Case:
    x = _rand(*shape) * 4
    c = Case(f"{model}:softmax {'x'.join(map(str, shape))}", 5.0 * x.size,
             lambda: relay.nn.softmax(relay.var("x", shape=shape), axis=-1),
             lambda: _onnx_model([__import__("onnx").helper.make_node("Softmax", ["x"], ["y"],
                                                                        axis=-1)],
                                 {"x": x}, {"y": shape}, {}),
             {"x": x}, ["x"])
    c.extra["ort_feed"] = {"x": x}
    return c


def layer_norm_case(model: str, m: int, n: int) -> Case:
    x, g, be = _rand(m, n), _rand(n), _rand(n)

    def build_relay() -> Any:
        return relay.nn.layer_norm(relay.var("x", shape=x.shape), relay.var("g", shape=g.shape),
                                   relay.var("be", shape=be.shape), axis=-1, epsilon=1e-5)

    def build_onnx() -> Any:
        from onnx import helper

        return _onnx_model([helper.make_node("LayerNormalization", ["x", "g", "be"], ["y"],
                                             axis=-1, epsilon=1e-5)],
                           {"x": x}, {"y": (m, n)}, {"g": g, "be": be})

    c = Case(f"{model}:layer_norm {m}x{n}", 8.0 * x.size, build_relay, build_onnx,
             {"x": x, "g": g, "be": be}, ["x"])
    c.extra["ort_feed"] = {"x": x}
    return c


def pool_case(model: str, kind: str, c_: int, hw: int, layout: str = "NCHW") -> Case:
    """max_pool 3x3 stride 2 pad 1 or global_avg_pool; in NCHW16c when ``layout`` is not
    NCHW (onnxruntime always runs NCHW)."""
    x = _rand(1, c_, hw, hw)
    xin = x if layout == "NCHW" else to_nchwc(x, 16)
    lay = "NCHW" if layout == "NCHW" else "NCHW16c"
    if kind == "max":
        oh = (hw + 2 - 3) // 2 + 1
        out = (1, c_, oh, oh)

        def build_relay() -> Any:
            return relay.nn.max_pool2d(relay.var("x", shape=xin.shape), pool_size=(3, 3),
                                       strides=(2, 2), padding=(1, 1, 1, 1), layout=lay)
        node = ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
        flops = 9.0 * c_ * oh * oh
    else:
        out = (1, c_, 1, 1)

        def build_relay() -> Any:
            return relay.nn.global_avg_pool2d(relay.var("x", shape=xin.shape), layout=lay)
        node = ("GlobalAveragePool", {})
        flops = float(x.size)

    def build_onnx() -> Any:
        from onnx import helper

        return _onnx_model([helper.make_node(node[0], ["x"], ["y"], **node[1])],
                           {"x": x}, {"y": out}, {})

    def check(feed: dict, got: np.ndarray, ort_out: np.ndarray) -> float:
        got = got if layout == "NCHW" else from_nchwc(got)
        return float(np.abs(got - ort_out).max() / (np.abs(ort_out).max() + 1e-6))

    c = Case(f"{model}:{kind}_pool {c_}x{hw}x{hw} [{layout}]", flops, build_relay, build_onnx,
             {"x": xin}, ["x"], check)
    c.extra["ort_feed"] = {"x": x}
    return c


def resnet18_cases(layouts: tuple[str, ...]) -> list[Case]:
    cs: list[Case] = []
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
    for lay in layouts:
        cs += [conv_case("resnet18", *c, layout=lay) for c in convs]
    for lay in layouts:
        cs.append(pool_case("resnet18", "max", 64, 112, lay))
        cs.append(pool_case("resnet18", "gavg", 512, 7, lay))
    cs.append(dense_case("resnet18", 1, 512, 1000, "none"))
    return cs


def mobilenet_v2_cases(layouts: tuple[str, ...]) -> list[Case]:
    cs: list[Case] = [conv_case("mobilenet_v2", 3, 224, 32, 3, 2, "clip", layout=lay)
                      for lay in layouts]
    seen = set()
    cin, hw = 32, 112
    for t, c_, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                        (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            st = s if i == 0 else 1
            hid = cin * t
            if t != 1:
                key = ("pw", cin, hw, hid, "clip")
                if key not in seen:
                    seen.add(key)
                    cs += [conv_case("mobilenet_v2", cin, hw, hid, 1, 1, "clip", layout=lay)
                           for lay in layouts]
            key = ("dw", hid, hw, st)
            if key not in seen:
                seen.add(key)
                cs += [conv_case("mobilenet_v2", hid, hw, hid, 3, st, "clip", groups=hid,
                                 layout=lay) for lay in layouts]
            ohw = (hw + 2 - 3) // st + 1
            epi = "res" if st == 1 and cin == c_ else "none"
            key = ("pw", hid, ohw, c_, epi)
            if key not in seen:
                seen.add(key)
                cs += [conv_case("mobilenet_v2", hid, ohw, c_, 1, 1, epi, layout=lay)
                       for lay in layouts]
            cin, hw = c_, ohw
    cs += [conv_case("mobilenet_v2", 320, 7, 1280, 1, 1, "clip", layout=lay) for lay in layouts]
    cs += [pool_case("mobilenet_v2", "gavg", 1280, 7, lay) for lay in layouts]
    cs.append(dense_case("mobilenet_v2", 1, 1280, 1000, "none"))
    return cs


# --- awkward convolution shapes (issue 12) ---------------------------------------------------
# Channel counts and map sizes that are not multiples of the vector width or register tile.
# NCHW only: the NCHWc variants here would take conv2d_infer_layout's blocks (57 channels:
# block 3), while relay.build now pads such channels (x86_alter_op.padded_block); the full grid
# through relay.build and the graph executor is bench/conv_shapes.py.
AWKWARD_CONVS = [  # ic, hw, oc, k, s, epilogue
    (3, 17, 64, 7, 2, "relu"), (3, 13, 24, 3, 1, "relu"), (24, 13, 57, 3, 1, "relu"),
    (57, 17, 57, 3, 2, "relu"), (57, 7, 128, 3, 1, "relu"), (64, 13, 57, 1, 1, "relu"),
]


def awkward_conv_cases() -> list[Case]:
    return [conv_case("awkward", *c, layout="NCHW") for c in AWKWARD_CONVS]
# --- end of the awkward convolution shapes ---------------------------------------------------


def bert_cases() -> list[Case]:
    seq, hid, heads, inter = 128, 256, 4, 1024
    dh = hid // heads
    return [
        dense_case("bert", seq, hid, hid, "none"),
        dense_case("bert", seq, hid, hid, "res"),
        dense_case("bert", seq, hid, inter, "gelu"),
        dense_case("bert", seq, inter, hid, "res"),
        dense_case("bert", seq, hid, hid, "none", packed=True),
        dense_case("bert", seq, hid, inter, "gelu", packed=True),
        dense_case("bert", seq, inter, hid, "res", packed=True),
        bmm_case("bert", heads, seq, dh, seq, 1.0 / np.sqrt(dh)),
        bmm_case("bert", heads, seq, seq, dh, None),
        softmax_case("bert", (heads, seq, seq)),
        layer_norm_case("bert", seq, hid),
    ]


# --- running ----------------------------------------------------------------------------------

def ort_session(model: Any) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def _number(fn: Callable[[], object], target_s: float = 0.02) -> int:
    t = best_time(fn, repeat=2)
    return max(1, min(1000, int(target_s / max(t, 1e-7))))


def run_case(c: Case, rounds: int, pause: float) -> dict:
    t0 = time.perf_counter()
    s, phs, outs, params = lower_group(c.relay_fn())
    f = tvm.build(s, [*phs, *outs], target="llvm", name="op")
    build_s = time.perf_counter() - t0
    args = [tvm.nd.array(c.inputs[p.name_hint]) for p in params]
    out = tvm.nd.empty([int(d) for d in outs[0].shape], "float32")
    f(*args, out)
    sess = ort_session(c.onnx_fn())
    feed = c.extra["ort_feed"]
    ref = sess.run(None, feed)[0]
    got = out.numpy()
    if c.check is not None:
        err = c.check(feed, got, ref)
    else:
        err = float(np.abs(got - ref).max() / (np.abs(ref).max() + 1e-6))
    # per-call timings, the best kept: on this shared 2-core machine another process often
    # preempts one of the two threads for a whole time slice (the parallel loop then waits for
    # it), which would dominate any mean; both sides are measured alike
    n_tvm = _number(lambda: f(*args, out))
    n_ort = _number(lambda: sess.run(None, feed))
    ev = f.time_evaluator(f.entry_name, tvm.cpu(0), number=1, repeat=max(5, n_tvm))
    tt, to = [], []
    for _ in range(rounds):
        time.sleep(pause)
        tt.append(min(ev(*args, out).results))
        time.sleep(pause)
        to.append(best_time(lambda: sess.run(None, feed), repeat=max(5, n_ort), number=1))
    return {"name": c.name, "tvm": min(tt), "ort": min(to), "flops": c.flops, "err": err,
            "build": build_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="all",
                    choices=["all", "resnet18", "mobilenet_v2", "bert", "awkward"])
    ap.add_argument("--filter", default="", help="only cases whose name contains this text")
    ap.add_argument("--layout", default="both", choices=["both", "NCHW", "NCHWc"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pause", type=float, default=0.25)
    ap.add_argument("--retries", type=int, default=2,
                    help="re-measurements of a case whose ratio is above 1.3")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    o = ap.parse_args()
    lays = ("NCHW", "NCHWc") if o.layout == "both" else (o.layout,)
    cases: list[Case] = []
    if o.model in ("all", "resnet18"):
        cases += resnet18_cases(lays)
    if o.model in ("all", "mobilenet_v2"):
        cases += mobilenet_v2_cases(lays)
    if o.model in ("all", "bert"):
        cases += bert_cases()
    if o.model in ("all", "awkward"):
        cases += awkward_conv_cases()
    cases = [c for c in cases if o.filter in c.name]
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} UTC, {machine_description()}; "
          "onnxruntime intra_op_num_threads=2; ratio = tvmpy time / onnxruntime time")
    if o.markdown:
        print("| case | tvmpy ms | GFLOP/s | ORT ms | GFLOP/s | ratio |")
        print("|---|---|---|---|---|---|")
    tot_t = tot_o = 0.0
    for c in cases:
        try:
            r = run_case(c, o.rounds, o.pause)
            for _ in range(o.retries):
                # a ratio above 1.3 is measured again (best kept): on this shared machine a
                # whole measurement can fall into a period where another process holds a core
                if r["tvm"] / r["ort"] <= 1.3:
                    break
                time.sleep(1.0)
                r2 = run_case(c, o.rounds, o.pause)
                r["tvm"], r["ort"] = min(r["tvm"], r2["tvm"]), min(r["ort"], r2["ort"])
        except Exception as e:  # a broken case is reported, the others still run
            print(f"{c.name}: FAILED {type(e).__name__}: {e}")
            continue
        tot_t += r["tvm"]
        tot_o += r["ort"]
        g_t, g_o = r["flops"] / r["tvm"] / 1e9, r["flops"] / r["ort"] / 1e9
        ratio = r["tvm"] / r["ort"]
        flag = "  <-- >1.5x" if ratio > 1.5 else ""
        if o.markdown:
            print(f"| {r['name']} | {r['tvm'] * 1e3:.3f} | {g_t:.1f} | {r['ort'] * 1e3:.3f} | "
                  f"{g_o:.1f} | {ratio:.2f} |")
        else:
            print(f"{r['name']:58s} tvm {r['tvm'] * 1e3:8.3f} ms {g_t:7.1f} GF/s | ort "
                  f"{r['ort'] * 1e3:8.3f} ms {g_o:7.1f} GF/s | ratio {ratio:5.2f} "
                  f"(err {r['err']:.0e}, build {r['build']:.1f}s){flag}", flush=True)
    print(f"# sum over cases: tvmpy {tot_t * 1e3:.2f} ms, onnxruntime {tot_o * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
