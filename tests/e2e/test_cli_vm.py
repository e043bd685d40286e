"""``tvmpy compile`` / ``tvmpy run`` on models the graph executor cannot run (a Loop, an If on
a run-time value, NonZero): the CLI picks the virtual machine, exports ONE library holding the
kernels and the bytecode, and ``tvmpy run`` runs it at several input sizes from one compile,
checked against onnxruntime."""

from __future__ import annotations

import subprocess
import sys

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
    for n in (7, 1):
        x = RNG.standard_normal(shape(n)).astype(np.float32)
        if case == "if" and n == 1:
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


@pytest.fixture(scope="module")
def loop_so(tmp_path_factory):
    """The Loop model compiled once by the CLI (a VM executable library)."""
    d = tmp_path_factory.mktemp("clivm")
    m = _loop_sum_rows()
    onnx.save(m, d / "loop.onnx")
    assert cli.main(["compile", str(d / "loop.onnx"), "-o", str(d / "loop.so")]) == 0
    return d, m


def test_fresh_process_run_and_profile(loop_so):
    """``python -m tvmpy run`` in a new process: the one file is the whole deployment."""
    d, m = loop_so
    x = RNG.standard_normal((13, 5)).astype(np.float32)
    np.save(d / "x13.npy", x)
    r = subprocess.run([sys.executable, "-m", "tvmpy", "run", str(d / "loop.so"), "--input",
                        f"x={d / 'x13.npy'}", "--output", str(d / "o13.npz"), "--profile", "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "(virtual machine)" in r.stdout and "slowest segments and kernels" in r.stdout
    assert "segment" in r.stdout.split("slowest", 1)[1]
    want = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.load(d / "o13.npz")["output0"], want, rtol=1e-5, atol=1e-5)


def test_python_api(loop_so):
    """The documented Python path: load_module + VirtualMachine."""
    import tvmpy as tvm
    from tvmpy.runtime.vm_library import VMExecutableModule

    d, m = loop_so
    lib = tvm.runtime.load_module(str(d / "loop.so"))
    assert isinstance(lib, VMExecutableModule)
    vm = tvm.runtime.vm.VirtualMachine(lib, tvm.cpu(0))
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(vm.invoke("main", x=x).numpy(), want, rtol=1e-5, atol=1e-5)
    vm.set_input("main", x)
    vm.run()
    np.testing.assert_allclose(vm.get_output(0).numpy(), want, rtol=1e-5, atol=1e-5)
    lib.export_library(str(d / "copy.so"))  # a loaded executable exports (copies) again
    assert isinstance(tvm.runtime.load_module(str(d / "copy.so")), VMExecutableModule)


@pytest.mark.parametrize("value, message", [
    (np.ones((4,), np.float32), "--input x: expected shape (?, 5) float32, got (4,) float32: "
                                "rank 1, expected 2"),
    (np.ones((4, 6), np.float32), "--input x: expected shape (?, 5) float32, got (4, 6) "
                                  "float32: dimension 1 is 6, expected 5"),
    (np.ones((4, 5), np.float64), "dtype float64, expected float32 (convert with "
                                  ".astype('float32'))"),
])
def test_bad_inputs_name_input_and_dim(loop_so, capsys, value, message):
    d, _ = loop_so
    np.save(d / "bad.npy", value)
    code, out, err = _cli(capsys, "run", d / "loop.so", "--input", f"x={d / 'bad.npy'}")
    assert code == 2 and err.startswith("tvmpy run: error:") and message in err, err
    code, out, err = _cli(capsys, "run", d / "loop.so", "--input", f"y={d / 'bad.npy'}")
    assert code == 2 and "unknown input(s) ['y']" in err and "x (?, 5) float32" in err, err


def test_vm_refuses_gpu(loop_so, capsys):
    d, _ = loop_so
    np.save(d / "x.npy", np.ones((2, 5), np.float32))
    code, _, err = _cli(capsys, "run", d / "loop.so", "--input", f"x={d / 'x.npy'}",
                        "--device", "cuda")
    assert code == 2 and "runs on the CPU only" in err, err
    code, _, err = _cli(capsys, "compile", d / "loop.onnx", "-o", d / "g.so", "--target", "cuda")
    assert code == 2 and "needs the virtual machine" in err, err


def test_dynamic_batch_static_model_stays_on_graph_executor(tmp_path, capsys):
    """A dynamic batch alone (sizes are expressions of the input sizes): the graph executor,
    without --input-shape, one library for batch 1 and 3."""
    w = numpy_helper.from_array(RNG.standard_normal((6, 4)).astype(np.float32), "w")
    m = _model([helper.make_node("MatMul", ["x", "w"], ["mm"]),
                helper.make_node("Relu", ["mm"], ["out"])],
               [helper.make_tensor_value_info("x", F, ["N", 6])],
               [helper.make_tensor_value_info("out", F, ["N", 4])], [w])
    onnx.save(m, tmp_path / "s.onnx")
    code, out, err = _cli(capsys, "compile", tmp_path / "s.onnx", "-o", tmp_path / "s.so")
    assert code == 0 and "executor: graph" in out, err
    sess = ort.InferenceSession(m.SerializeToString())
    for n in (1, 3):
        x = RNG.standard_normal((n, 6)).astype(np.float32)
        np.save(tmp_path / "x.npy", x)
        code, out, err = _cli(capsys, "run", tmp_path / "s.so", "--input",
                              f"x={tmp_path / 'x.npy'}", "--output", tmp_path / "o.npz")
        assert code == 0 and "(graph executor)" in out, err
        np.testing.assert_allclose(np.load(tmp_path / "o.npz")["output0"],
                                   sess.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_vm_reason_is_the_backends_rule():
    """relay.build_module.vm_reason: one rule for the CLI and the ONNX backend."""
    import tvmpy as tvm
    from tvmpy import relay
    from tvmpy.contrib.onnx_backend import needs_vm
    from tvmpy.relay.build_module import vm_reason

    x = relay.var("x", shape=(relay.Any(), 3))
    static = tvm.IRModule.from_expr(relay.Function([x], relay.exp(x)))
    assert vm_reason(static) == "" and not needs_vm(static)
    nz = tvm.IRModule.from_expr(relay.Function([x], relay.argwhere(x)))
    assert "argwhere" in vm_reason(nz) and needs_vm(nz)
    c = relay.var("c", shape=(), dtype="bool")
    branch = tvm.IRModule.from_expr(relay.Function([x, c], relay.If(c, x, relay.exp(x))))
    assert "If" in vm_reason(branch) and needs_vm(branch)


def test_bench_on_a_vm_model(loop_so, capsys):
    d, _ = loop_so
    code, out, err = _cli(capsys, "bench", d / "loop.onnx", "--input-shape", "x=7,5",
                          "--opt-levels", "0,3", "--repeat", "1", "--no-torch", "--profile", "2")
    assert code == 0, err
    assert "built for the virtual machine" in out and "check passed" in out, out
    assert "slowest segments and kernels at opt_level 3" in out, out


def test_gather_negative_index_on_a_run_time_axis(tmp_path, capsys):
    """ONNX Gather along a dim_param axis with run-time (negative) indices: one library."""
    m = _model([helper.make_node("Gather", ["x", "i"], ["y"], axis=0)],
               [helper.make_tensor_value_info("x", F, ["N", 3]),
                helper.make_tensor_value_info("i", I64, [2])],
               [helper.make_tensor_value_info("y", F, [2, 3])])
    onnx.save(m, tmp_path / "g.onnx")
    code, out, err = _cli(capsys, "compile", tmp_path / "g.onnx", "-o", tmp_path / "g.so")
    assert code == 0, err
    sess = ort.InferenceSession(m.SerializeToString())
    for n, idx in ((5, [-1, 2]), (1, [0, -1])):
        x = RNG.standard_normal((n, 3)).astype(np.float32)
        i = np.array(idx, np.int64)
        np.save(tmp_path / "x.npy", x)
        np.save(tmp_path / "i.npy", i)
        code, out, err = _cli(capsys, "run", tmp_path / "g.so", "--input", f"x={tmp_path / 'x.npy'}",
                              "--input", f"i={tmp_path / 'i.npy'}", "--output", tmp_path / "o.npz")
        assert code == 0, err
        np.testing.assert_allclose(np.load(tmp_path / "o.npz")["output0"],
                                   sess.run(None, {"x": x, "i": i})[0], rtol=1e-6)


def _nms():
    """boxes [1, N, 4], scores [1, 1, N] -> NonMaxSuppression (<= 3 boxes) -> box indices."""
    inits = [numpy_helper.from_array(np.array([3], np.int64), "mo"),
             numpy_helper.from_array(np.array([0.5], np.float32), "iou"),
             numpy_helper.from_array(np.array([0.1], np.float32), "st"),
             numpy_helper.from_array(np.array([2], np.int64), "two")]
    nodes = [helper.make_node("NonMaxSuppression", ["b", "s", "mo", "iou", "st"], ["sel"]),
             helper.make_node("Gather", ["sel", "two"], ["out"], axis=1)]
    return _model(nodes, [helper.make_tensor_value_info("b", F, [1, "N", 4]),
                          helper.make_tensor_value_info("s", F, [1, 1, "N"])],
                  [helper.make_tensor_value_info("out", I64, ["K", 1])], inits)


def test_nms_two_sizes_and_mismatched_shared_dim(tmp_path, capsys):
    m = _nms()
    onnx.save(m, tmp_path / "n.onnx")
    code, out, err = _cli(capsys, "compile", tmp_path / "n.onnx", "-o", tmp_path / "n.so")
    assert code == 0 and "executor: vm" in out and "non_max_suppression" in out, err
    sess = ort.InferenceSession(m.SerializeToString())
    feeds = [f"b={tmp_path / 'b.npy'}", f"s={tmp_path / 's.npy'}"]
    for n in (11, 2):
        xy = RNG.random((1, n, 2)).astype(np.float32) * 4
        b = np.concatenate([xy, xy + 1 + RNG.random((1, n, 2)).astype(np.float32)], -1)
        s = RNG.random((1, 1, n)).astype(np.float32)
        np.save(tmp_path / "b.npy", b)
        np.save(tmp_path / "s.npy", s)
        code, out, err = _cli(capsys, "run", tmp_path / "n.so", "--input", feeds[0], "--input",
                              feeds[1], "--output", tmp_path / "o.npz")
        assert code == 0, err
        np.testing.assert_array_equal(np.load(tmp_path / "o.npz")["output0"],
                                      sess.run(None, {"b": b, "s": s})[0])
    np.save(tmp_path / "s.npy", RNG.random((1, 1, 7)).astype(np.float32))
    code, out, err = _cli(capsys, "run", tmp_path / "n.so", "--input", feeds[0], "--input", feeds[1])
    assert code == 2 and "input 's': dimension 2 is 7, but input 'b' dimension 1 is 2" in err, err
