"""``tvmpy compile`` / ``tvmpy run`` on models the graph executor cannot run (a Loop, an If on
a run-time value, NonZero): the CLI picks the virtual machine, exports ONE library holding the
kernels and the bytecode, and ``tvmpy run`` runs it at several input sizes from one compile,
checked against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tvmpy import cli  # noqa: E402

RNG = np.random.default_rng(11)
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _loop_sum_rows():
    """x [N, 5] -> Loop over N rows (trip count from Shape) summing them, * w -> [5]."""
    body = helper.make_graph(
        [helper.make_node("Gather", ["x", "i"], ["row"], axis=0),
         helper.make_node("Add", ["acc", "row"], ["acc_out"]),
         helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond", B, []),
         helper.make_tensor_value_info("acc", F, [5])],
        [helper.make_tensor_value_info("cond_out", B, []),
         helper.make_tensor_value_info("acc_out", F, [5])])
    w = numpy_helper.from_array(RNG.standard_normal(5).astype(np.float32), "w")
    zero = numpy_helper.from_array(np.zeros(5, np.float32), "zero")
    nodes = [helper.make_node("Shape", ["x"], ["s"], end=1),
             helper.make_node("Squeeze", ["s"], ["n"]),
             helper.make_node("Constant", [], ["t"], value=helper.make_tensor("t", B, [], [1])),
             helper.make_node("Loop", ["n", "t", "zero"], ["total"], body=body),
             helper.make_node("Mul", ["total", "w"], ["out"])]
    return _model(nodes, [helper.make_tensor_value_info("x", F, ["N", 5])],
                  [helper.make_tensor_value_info("out", F, [5])], [w, zero])


def _if_on_value():
    """x [N, 3]: if sum(x) > 0 then relu(x) @ w else (x - 1) @ w."""
    w = numpy_helper.from_array(RNG.standard_normal((3, 4)).astype(np.float32), "w")
    one = numpy_helper.from_array(np.array(1, np.float32), "one")
    zero = numpy_helper.from_array(np.array(0, np.float32), "zero0")
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["a"]),
                              helper.make_node("MatMul", ["a", "w"], ["ta"])], "then", [],
                             [helper.make_tensor_value_info("ta", F, ["N", 4])])
    other = helper.make_graph([helper.make_node("Sub", ["x", "one"], ["b"]),
                               helper.make_node("MatMul", ["b", "w"], ["eb"])], "else", [],
                              [helper.make_tensor_value_info("eb", F, ["N", 4])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero0"], ["c"]),
             helper.make_node("If", ["c"], ["out"], then_branch=then, else_branch=other)]
    return _model(nodes, [helper.make_tensor_value_info("x", F, ["N", 3])],
                  [helper.make_tensor_value_info("out", F, ["N", 4])], [w, one, zero])


def _nonzero_gather():
    """x [N] -> the values > 0.2 (NonZero, Reshape, Gather) * 3."""
    th = numpy_helper.from_array(np.array(0.2, np.float32), "th")
    flat = numpy_helper.from_array(np.array([-1], np.int64), "flat")
    three = numpy_helper.from_array(np.array(3, np.float32), "three")
    nodes = [helper.make_node("Greater", ["x", "th"], ["m"]),
             helper.make_node("NonZero", ["m"], ["nz"]),
             helper.make_node("Reshape", ["nz", "flat"], ["idx"]),
             helper.make_node("Gather", ["x", "idx"], ["g"], axis=0),
             helper.make_node("Mul", ["g", "three"], ["out"])]
    return _model(nodes, [helper.make_tensor_value_info("x", F, ["N"])],
                  [helper.make_tensor_value_info("out", F, ["K"])], [th, flat, three])


def _reshape_from_shape():
    """x [N, 6, 4] -> Reshape to Concat(Shape(x)[0:1], [-1]) = [N, 24] -> MatMul w [24, 5]."""
    w = numpy_helper.from_array(RNG.standard_normal((24, 5)).astype(np.float32), "w")
    idx = numpy_helper.from_array(np.array([0], np.int64), "idx")
    rest = numpy_helper.from_array(np.array([-1], np.int64), "rest")
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "idx"], ["n"], axis=0),
             helper.make_node("Concat", ["n", "rest"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("MatMul", ["r", "w"], ["out"])]
    return _model(nodes, [helper.make_tensor_value_info("x", F, ["N", 6, 4])],
                  [helper.make_tensor_value_info("out", F, ["N", 5])], [w, idx, rest])


# name -> (model, executor the CLI must choose (None: either), input shape per N)
CASES = {
    "loop": (_loop_sum_rows, "vm", lambda n: (n, 5)),
    "if": (_if_on_value, "vm", lambda n: (n, 3)),
    "nonzero": (_nonzero_gather, "vm", lambda n: (n,)),
    "reshape": (_reshape_from_shape, None, lambda n: (n, 6, 4)),
}


def _cli(capsys, *args):
    code = cli.main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return {}


@pytest.mark.parametrize("case", list(CASES))
def test_compile_once_run_two_sizes(tmp_path, capsys, case):
    make, executor, shape = CASES[case]
    m = make()
    onnx.save(m, tmp_path / "m.onnx")
    code, out, err = _cli(capsys, "compile", tmp_path / "m.onnx", "-o", tmp_path / "m.so")
    assert code == 0, err
    chosen = out.split("executor: ", 1)[1].split()[0]
    assert executor in (None, chosen), out
    if chosen == "vm":
        assert "the graph executor cannot run this model: " in out
    sess = ort.InferenceSession(m.SerializeToString())
    for n in (7, 2):
        x = RNG.standard_normal(shape(n)).astype(np.float32)
        if case == "if" and n == 2:
            x = -np.abs(x)  # the other branch
        np.save(tmp_path / "x.npy", x)
        code, out, err = _cli(capsys, "run", tmp_path / "m.so", "--input", f"x={tmp_path / 'x.npy'}",
                              "--output", tmp_path / "o.npz", "--repeat", "2")
        assert code == 0, err
        assert ("virtual machine" if chosen == "vm" else "graph executor") in out
        want = sess.run(None, {"x": x})[0]
        got = np.load(tmp_path / "o.npz")["output0"]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
