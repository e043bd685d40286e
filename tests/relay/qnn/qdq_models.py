"""A small CNN built in code and quantized by onnxruntime's ``quantize_static`` (QDQ or
QOperator, per-channel int8 weights, uint8 activations, calibrated on random inputs): shared by
the QDQ test and bench/qnn_qdq.py."""

from __future__ import annotations

import numpy as np


def float_cnn(seed: int = 0, channels: tuple[int, ...] = (16, 32, 32), size: int = 32):
    """conv-relu x3 (stride 2 on the second, a residual add, max pool, global average pool,
    a Gemm head): an ONNX float model."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    c1, c2, c3 = channels

    def w(name, *shape):
        scale = np.sqrt(2.0 / np.prod(shape[1:]))
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype("float32"),
                                       name)

    def b(name, n):
        return numpy_helper.from_array((rng.standard_normal(n) * 0.1).astype("float32"), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c3"], ["r3"]),
        helper.make_node("Add", ["r3", "r2"], ["a"]),
        helper.make_node("MaxPool", ["a"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    inits = [w("w1", c1, 3, 3, 3), b("b1", c1), w("w2", c2, c1, 3, 3), b("b2", c2),
             w("w3", c3, c2, 3, 3), b("b3", c3), w("wf", 10, c3), b("bf", 10)]
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def quantized_cnn(fmt: str = "QDQ", seed: int = 0, calib: int = 8, activation: str = "QUInt8",
                  per_channel: bool = True, extra_options: dict | None = None, model=None,
                  reduce_range: bool = True, **kw):
    """(float model, quantized model) as ModelProtos (``model``: a float model to quantize
    instead of the CNN); the quantization through temp files (the quantizer's API takes
    paths). ``reduce_range`` (7-bit weights) by default: onnxruntime's u8s8 kernels on x86
    without VNNI saturate pair sums beyond int16, so only then is its fused integer run an
    exact reference on every x86 host."""
    import os
    import tempfile

    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    model = float_cnn(seed, **kw) if model is None else model
    name = model.graph.input[0].name
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.default_rng(seed + 1)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter([{name: rng.standard_normal(shape).astype("float32")}
                            for _ in range(calib)])

        def get_next(self):
            return next(self.it, None)

    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "f.onnx"), os.path.join(d, "q.onnx")
        onnx.save(model, src)
        quantize_static(src, dst, Reader(), quant_format=getattr(QuantFormat, fmt),
                        per_channel=per_channel, activation_type=getattr(QuantType, activation),
                        weight_type=QuantType.QInt8, reduce_range=reduce_range,
                        extra_options=extra_options or {})
        return model, onnx.load(dst)


def float_attention(seed: int = 0, seq: int = 8, dim: int = 16):
    """One attention head (MatMul projections, scores Q K^T, softmax, weighted V, an output
    projection): MatMuls of a constant weight and of two activations."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def w(name):
        return numpy_helper.from_array((rng.standard_normal((dim, dim)) / np.sqrt(dim))
                                       .astype("float32"), name)

    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("MatMul", ["x", "wk"], ["k"]),
        helper.make_node("MatMul", ["x", "wv"], ["v"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["o"]),
        helper.make_node("MatMul", ["o", "wo"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "attn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, dim])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, dim])],
        [w("wq"), w("wk"), w("wv"), w("wo")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
