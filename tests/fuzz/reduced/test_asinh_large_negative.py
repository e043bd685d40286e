"""Regression test written by the fuzzer's reducer: llvm-O0: mismatch: output 0: max error 0.0197 (scale 7.02, 8 of 16 elements beyond rtol 0.0001 / atol 0.0001*scale), e.g. at (0, 9, 0, 0): """

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from tvmpy.testing.fuzz.oracles import assert_model_ok  # noqa: E402


def test_asinh_of_large_negative_inputs():
    nodes = [
        helper.make_node('Asinh', ['t6'], ['t7'], name='n3_Asinh'),
    ]
    inits = [
    ]
    inputs = [helper.make_tensor_value_info('t6', 1, [1, 16, 1, 1])]
    outputs = [helper.make_tensor_value_info('t7', 1, [1, 16, 1, 1])]
    graph = helper.make_graph(nodes, "reduced", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 18)])
    onnx.checker.check_model(model, full_check=True)
    feeds = {
        't6': np.array([450.1717529296875, 596.37890625, -209.1647186279297, 356.2049560546875, -337.0846862792969, -234.55856323242188, 702.8894653320312, 711.0513916015625, 556.0023803710938, -558.2760620117188, 297.97119140625, -336.047607421875, -738.9002075195312, -515.8787231445312, 79.61528015136719, -257.6632080078125], dtype=np.float32).reshape((1, 16, 1, 1)),
    }
    assert_model_ok(model, feeds, configs=('llvm-O0', 'llvm-O3', 'c-O3', 'tir-interp'))
