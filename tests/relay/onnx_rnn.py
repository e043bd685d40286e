"""ONNX LSTM/GRU models of one node for the recurrent tests (test_rnn_build.py,
test_rnn_scan.py): weights drawn by the caller's generator, optional inputs by name."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def rnn_model(kind: str, T: Any, N: Any, I: int, H: int, r: Callable[..., np.ndarray],
              dirs: int = 1, inputs: Sequence[str] = (), bias: bool = True, **attrs: Any) -> Any:
    """One ONNX ``kind`` (LSTM / GRU) node of hidden size ``H`` over ``X [T, N, I]`` (``T``,
    ``N`` may be dim names), opset 14: weights ``W``, ``R`` and (``bias``) ``B`` initializers
    drawn by ``r(*shape)`` in that order; the optional inputs named in ``inputs`` (``lens``,
    ``h0``, ``c0`` for LSTM) graph inputs; outputs ``Y``, ``Y_h`` (and ``Y_c``)."""
    from onnx import TensorProto, helper, numpy_helper

    G = {"GRU": 3, "LSTM": 4}[kind]
    inits = [numpy_helper.from_array(r(dirs, G * H, I), "W"),
             numpy_helper.from_array(r(dirs, G * H, H), "R")]
    if bias:
        inits.append(numpy_helper.from_array(r(dirs, 2 * G * H), "B"))
    ins = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, N, I])]
    names = ["X", "W", "R", "B" if bias else ""]
    names.append("lens" if "lens" in inputs else "")
    if "lens" in inputs:
        ins.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [N]))
    for nm in ("h0", "c0") if kind == "LSTM" else ("h0",):
        names.append(nm if nm in inputs else "")
        if nm in inputs:
            ins.append(helper.make_tensor_value_info(nm, TensorProto.FLOAT, [dirs, N, H]))
    while names[-1] == "":
        names.pop()
    outs = ["Y", "Y_h"] + (["Y_c"] if kind == "LSTM" else [])
    node = helper.make_node(kind, names, outs, hidden_size=H, **attrs)
    graph = helper.make_graph([node], "rnn", ins,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                               for o in outs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def ort_run(model: Any, feeds: dict) -> list:
    """onnxruntime's outputs (CPU provider)."""
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)
