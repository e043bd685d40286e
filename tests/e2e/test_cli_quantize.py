"""``tvmpy quantize model.onnx --calibration data.npz -o model.int8.so`` (issue 10, point 6):
the per-layer scales and the accuracy check are printed, the library runs and its outputs are
close to the fp32 model's (onnxruntime)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tvmpy import cli  # noqa: E402


def _cnn():
    """x [1,3,10,10] -> Conv(8) -> Relu -> Conv(8) -> Relu -> GAP -> Flatten -> Gemm(6)."""
    rng = np.random.default_rng(3)
    w0 = numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.4).astype(np.float32), "w0")
    w1 = numpy_helper.from_array((rng.standard_normal((8, 8, 3, 3)) * 0.2).astype(np.float32), "w1")
    b1 = numpy_helper.from_array((rng.standard_normal(8) * 0.1).astype(np.float32), "b1")
    fw = numpy_helper.from_array((rng.standard_normal((6, 8)) * 2).astype(np.float32), "fw")
    fb = numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "fb")
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1] * 4),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("GlobalAveragePool", ["r1"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["out"], transB=1)]
    g = helper.make_graph(nodes, "qcnn",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 10])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 6])],
                          initializer=[w0, w1, b1, fw, fb])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def test_quantize_command_reports_scales_and_accuracy(tmp_path, capsys):
    model = tmp_path / "m.onnx"
    onnx.save(_cnn(), model)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "cal.npz", x=rng.standard_normal((16, 3, 10, 10)).astype(np.float32))
    out = tmp_path / "m.int8.so"
    rc = cli.main(["quantize", str(model), "--calibration", str(tmp_path / "cal.npz"), "-o",
                   str(out), "--skip-conv", "", "--heldout", "20"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "conv2d_0" in text and "conv2d_1" in text and "input scale" in text
    assert "top-1 agreement with fp32" in text and "held-out" in text
    assert "kept in float: dense_0" in text
    # the library runs; outputs close to onnxruntime's fp32 outputs
    import tvmpy as tvm
    from tvmpy.contrib import graph_executor

    lib = tvm.runtime.load_module(str(out))
    g = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    x = rng.standard_normal((1, 3, 10, 10)).astype(np.float32)
    g.set_input(x=x)
    g.run()
    got = g.get_output(0).numpy()
    want = ort.InferenceSession(str(model)).run(None, {"x": x})[0]
    assert np.abs(got - want).max() < 0.05 * np.abs(want).max() + 1e-3


def test_quantize_command_errors(tmp_path, capsys):
    model = tmp_path / "m.onnx"
    onnx.save(_cnn(), model)
    assert cli.main(["quantize", str(model)]) == 2  # kl_divergence without data
    assert "needs --calibration" in capsys.readouterr().err
    np.savez(tmp_path / "bad.npz", y=np.zeros((2, 3, 10, 10), np.float32))
    assert cli.main(["quantize", str(model), "--calibration", str(tmp_path / "bad.npz")]) == 2
    assert "no arrays for inputs ['x']" in capsys.readouterr().err
    np.savez(tmp_path / "shape.npz", x=np.zeros((2, 3, 9, 9), np.float32))
    assert cli.main(["quantize", str(model), "--calibration", str(tmp_path / "shape.npz")]) == 2
    assert "has shape (2, 3, 9, 9)" in capsys.readouterr().err
