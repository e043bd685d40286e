"""Regression tests of wrong results found by random models (issue 15), each model built inline
with onnx.helper and checked by every oracle of the fuzzer against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import relay  # noqa: E402
from tvmpy.relay.testing import compare  # noqa: E402
from tvmpy.testing.fuzz.oracles import assert_model_ok  # noqa: E402


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "regression", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m, full_check=True)
    return m


@pytest.mark.parametrize("op", ["Add", "Mul", "Min", "Max", "Sub", "Div"])
@pytest.mark.parametrize("bshape", [[1, 4, 1, 8], [4, 1, 8]])
def test_broadcast_axis_between_kept_axes(op, bshape):
    # b broadcast along a middle axis: after fusion and the x86 injective schedule (all loops
    # fused, split by 16, vectorized) b's index is o // 5 * 8 + i % 8. VectorizeLoop left that
    # loop scalar and LLVM 22's loop vectorizer widened the read as 16 consecutive elements.
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 4, 10, 8])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, bshape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 10, 8])
    m = _model([helper.make_node(op, ["a", "b"], ["y"])], [x, b], [y])
    feeds = {"a": rng.standard_normal((1, 4, 10, 8)).astype("float32"),
             "b": rng.uniform(0.5, 2, bshape).astype("float32")}
    assert_model_ok(m, feeds, configs=("llvm-O0", "llvm-O3", "c-O3", "tir-interp"))


def test_relay_add_broadcast_every_opt_level():
    # the same through relay directly, as the issue reported it
    rng = np.random.default_rng(1)
    a = relay.var("a", shape=(1, 4, 10, 8))
    b = relay.var("b", shape=(1, 4, 1, 8))
    mod = tvm.IRModule.from_expr(relay.Function([a, b], relay.add(a, b)))
    na = rng.standard_normal((1, 4, 10, 8)).astype("float32")
    nb = rng.standard_normal((1, 4, 1, 8)).astype("float32")
    for level in range(4):
        lib, _ = compare.build(mod, {}, level, "llvm")
        got = compare.tvm_runner(lib)({"a": na, "b": nb})[0]
        np.testing.assert_allclose(got, na + nb, rtol=1e-6, err_msg=f"opt_level {level}")


def test_max_expand_transpose():
    # Max(x, c1) -> Expand -> Transpose(perm=[4, 3, 0, 2, 1]): wrong at opt_level >= 1 (one
    # fused kernel whose reads of x and c1 index with i % 8 of the vectorized loop)
    rng = np.random.default_rng(2)
    c1 = numpy_helper.from_array(rng.standard_normal((1, 8, 1, 1)).astype("float32"), "c1")
    sh = numpy_helper.from_array(np.array([2, 1, 1, 1, 1], dtype=np.int64), "sh")
    nodes = [helper.make_node("Max", ["x", "c1"], ["m"]),
             helper.make_node("Expand", ["m", "sh"], ["e"]),
             helper.make_node("Transpose", ["e"], ["y"], perm=[4, 3, 0, 2, 1])]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 5, 10])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [10, 5, 2, 8, 1])],
               [c1, sh])
    feeds = {"x": rng.standard_normal((1, 8, 5, 10)).astype("float32")}
    assert_model_ok(m, feeds)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
@pytest.mark.parametrize("shape", [[5, 16, 8], [2, 3, 4, 5, 3], [1, 3, 7, 5]])
def test_global_pools_of_every_rank(op, shape):
    # found by the fuzzer (seed 1085): 3-D and 5-D GlobalAveragePool / GlobalMaxPool were
    # refused by the frontend ("only 2-D") although onnxruntime runs them
    rng = np.random.default_rng(3)
    out = shape[:2] + [1] * (len(shape) - 2)
    m = _model([helper.make_node(op, ["x"], ["y"])],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
    assert_model_ok(m, {"x": rng.standard_normal(shape).astype("float32")},
                    configs=("relay-interp", "llvm-O0", "llvm-O3", "tir-interp"))


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceProd"])
def test_float16_reductions_through_relay_build(op):
    # found by the fuzzer (seed 10096): compiled float16 sums accumulated in float16
    rng = np.random.default_rng(4)
    lo, hi = (0.99, 1.01) if op == "ReduceProd" else (0.0, 3.0)
    x = rng.uniform(lo, hi, (3, 400)).astype("float16")
    m = _model([helper.make_node(op, ["x"], ["y"], keepdims=0)],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [3, 400])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [])], opset=17)
    assert_model_ok(m, {"x": x}, configs=("relay-interp", "llvm-O0", "llvm-O3", "c-O3"))


@pytest.mark.parametrize("dshape,ishape,axis", [([2, 2, 5], [2, 1, 3], -1),
                                                ([0, 1, 2, 2, 11], [0, 1, 1, 2, 3], 4),
                                                ([3, 4], [2, 6], 1)])
def test_gather_elements_with_indices_smaller_than_data(dshape, ishape, axis):
    # found by the fuzzer (seed 39): the relay interpreter broadcast size-1 index dims to the
    # data's (numpy's take_along_axis) instead of reading at the same position
    rng = np.random.default_rng(5)
    n = dshape[axis]
    idx = numpy_helper.from_array(rng.integers(-n, n, ishape).astype("int64"), "idx")
    m = _model([helper.make_node("GatherElements", ["x", "idx"], ["y"], axis=axis)],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, dshape)],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, ishape)], [idx])
    assert_model_ok(m, {"x": rng.standard_normal(dshape).astype("float32")},
                    configs=("relay-interp", "llvm-O0", "llvm-O3", "tir-interp"))


def test_softplus_of_large_inputs_does_not_overflow():
    # found by the fuzzer (seed 21353): Softplus was lowered as log(exp(x) + 1), inf for x > 88
    x = np.array([[-120.0, -30.0, -1.5, 0.0, 2.0, 30.0, 95.0, 700.0]], "float32")
    m = _model([helper.make_node("Softplus", ["x"], ["y"])],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])])
    assert_model_ok(m, {"x": x}, configs=("relay-interp", "llvm-O0", "llvm-O3", "c-O3",
                                          "tir-interp"))


@pytest.mark.parametrize("ashape,bshape", [([0, 4], [4, 3]), ([2, 0, 5], [5, 7]),
                                           ([0, 2, 3], [0, 3, 4]), ([3, 0], [0, 2])])
def test_matmul_of_empty_tensors(ashape, bshape):
    # found by the fuzzer (seed 21793): MatMul of an empty tensor (Compress selecting nothing)
    # reshaped its result with a literal 0, which relay's reshape read as "copy the dim";
    # lowering then divided by the empty axis
    rng = np.random.default_rng(6)
    out = list(np.matmul(np.zeros(ashape), np.zeros(bshape)).shape)
    b = numpy_helper.from_array(rng.standard_normal(bshape).astype("float32"), "b")
    m = _model([helper.make_node("MatMul", ["a", "b"], ["y"])],
               [helper.make_tensor_value_info("a", TensorProto.FLOAT, ashape)],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)], [b])
    assert_model_ok(m, {"a": rng.standard_normal(ashape).astype("float32")},
                    configs=("relay-interp", "llvm-O0", "llvm-O3", "tir-interp"))


def test_unloaded_c_module_leaves_openmp_threads_a_mapped_libgomp():
    # found by the fuzzer (seed 10614, after libraries became unloadable): the C-backend
    # module (OpenMP loops on libgomp's threads) was garbage collected and took libgomp with
    # it; libgomp's parked threads then ran unmapped code (SIGSEGV) during the next
    # compilation. In a subprocess, so that a crash is a failure, not the end of the run.
    import subprocess
    import sys

    code = ("import warnings; warnings.simplefilter('ignore')\n"
            "from tvmpy.testing.fuzz.generator import generate\n"
            "from tvmpy.testing.fuzz.oracles import check_model\n"
            "c = generate(10614)\n"
            "assert c.ops == ['ReverseSequence', 'MatMul', 'GatherND', 'Acos', 'Cast', "
            "'Gather'], 'the generator changed: regenerate this case'\n"
            "print(len(check_model(c.model, c.feeds, configs=('c-O3', 'llvm-O3-autotvm'))))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.strip().splitlines()[-1] == "0"


def test_float16_softplus_through_the_pytorch_frontend():
    # found by the fuzzer (seed 100077, pytorch oracle): aten.softplus was log(exp(x) + 1),
    # whose exp overflows float16 for 11 < x <= 20 (torch's threshold): inf instead of x
    pytest.importorskip("torch")
    x = np.array([[-30.0, -2.0, 0.5, 11.5, 15.0, 19.4, 25.0]], "float16")
    m = _model([helper.make_node("Softplus", ["x"], ["y"])],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 7])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 7])])
    assert_model_ok(m, {"x": x}, configs=("pytorch", "llvm-O3"))


@pytest.mark.parametrize("shape", [[2, 0, 3, 17], [0, 5], [3, 4, 0]])
def test_empty_outputs_of_fused_and_split_loops(shape):
    # found by the fuzzer (seed 100285): an empty tensor through Mul -> Softmax; the schedule
    # fused and split its loops, and lowering divided by the empty extent. An empty stage now
    # lowers to nothing.
    rng = np.random.default_rng(7)
    c = numpy_helper.from_array(rng.standard_normal(shape[-1:]).astype("float32"), "c")
    nodes = [helper.make_node("Mul", ["x", "c"], ["m"]),
             helper.make_node("Softmax", ["m"], ["s"], axis=-1),
             helper.make_node("Transpose", ["s"], ["y"], perm=list(range(len(shape)))[::-1])]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape[::-1])], [c])
    assert_model_ok(m, {"x": rng.standard_normal(shape).astype("float32")},
                    configs=("relay-interp", "llvm-O0", "llvm-O3", "c-O3", "tir-interp"))


@pytest.mark.parametrize("op,fmod", [("Mod", 1), ("Mod", 0), ("Div", 0)])
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_integer_division_in_a_masked_vector_tail(op, fmod, dtype):
    # found by the fuzzer (seed 100516): 12 int64 elements in 8-lane vectors; the tail's
    # masked-off lanes loaded a divisor of 0 and the vector division trapped (SIGFPE)
    rng = np.random.default_rng(8)
    tp = TensorProto.INT64 if dtype == "int64" else TensorProto.INT32
    attrs = {"fmod": fmod} if op == "Mod" else {}
    d = rng.integers(1, 6, (3, 4)) * rng.choice([-1, 1], (3, 4))
    m = _model([helper.make_node("Add", ["a", "a"], ["s"]),
                helper.make_node(op, ["s", "d"], ["y"], **attrs)],
               [helper.make_tensor_value_info("a", tp, [3, 4])],
               [helper.make_tensor_value_info("y", tp, [3, 4])],
               [numpy_helper.from_array(d.astype(dtype), "d")])
    feeds = {"a": rng.integers(-50, 50, (3, 4)).astype(dtype)}
    assert_model_ok(m, feeds, configs=("llvm-O0", "llvm-O3", "c-O3", "tir-interp"))


def test_arg_reduction_and_reshape_of_empty_tensors():
    # found by the fuzzer (seed 100826): ArgMin over a non-empty axis of an empty tensor broke
    # the relay interpreter (reshape to -1 of 0 elements), and the PyTorch frontend's reshapes
    # read a literal 0 as "copy the dim"
    rng = np.random.default_rng(9)
    nodes = [helper.make_node("ArgMin", ["x"], ["a"], axis=2, keepdims=0),
             helper.make_node("Sigmoid", ["x"], ["s"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 0, 5, 6])],
               [helper.make_tensor_value_info("a", TensorProto.INT64, [2, 0, 6]),
                helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 0, 5, 6])])
    configs = ("relay-interp", "llvm-O0", "llvm-O3", "tir-interp")
    try:
        import torch  # noqa: F401

        configs += ("pytorch",)
    except ImportError:
        pass
    assert_model_ok(m, {"x": rng.standard_normal((2, 0, 5, 6)).astype("float32")},
                    configs=configs)


def test_hardmax_of_an_empty_tensor():
    # found by the fuzzer (seed 200376): Hardmax was lowered through an arg-max over the
    # (empty) axis, which has no value; the output is empty anyway
    m = _model([helper.make_node("Hardmax", ["x"], ["y"], axis=-1)],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8, 1, 0])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8, 1, 0])])
    assert_model_ok(m, {"x": np.zeros((4, 8, 1, 0), "float32")},
                    configs=("relay-interp", "llvm-O0", "llvm-O3", "tir-interp"))


def test_max_pool_window_on_padding_only_is_minus_infinity_everywhere():
    # found by the fuzzer (seed 200458): with dilation 2 on a 1-row map the windows fall on
    # the padding only. ONNX leaves that value undefined (onnxruntime differs); tvmpy's
    # compiled code gives the padding's -inf and the relay interpreter crashed: now both -inf
    x = relay.var("x", shape=(2, 3, 1, 8))
    y = relay.nn.max_pool2d(x, pool_size=(2, 2), strides=(3, 3), dilation=(2, 1),
                            padding=(1, 0, 1, 0))
    mod = tvm.IRModule.from_expr(relay.Function([x], y))
    xv = np.random.default_rng(10).standard_normal((2, 3, 1, 8)).astype("float32")
    want = np.asarray(relay.create_executor("debug", mod=mod).evaluate()(xv))
    assert np.isneginf(want).all() and want.shape == (2, 3, 1, 3)
    for level in (0, 3):
        lib, _ = compare.build(mod, {}, level, "llvm")
        np.testing.assert_array_equal(compare.tvm_runner(lib)({"x": xv})[0], want)


def test_lrn_of_an_empty_tensor():
    # found by the fuzzer (seed 300000): LRN is lowered through a channel-window pool, whose
    # type relation refused the empty spatial axis
    m = _model([helper.make_node("LRN", ["x"], ["y"], size=3)],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 1, 0, 22])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 1, 0, 22])])
    assert_model_ok(m, {"x": np.zeros((5, 1, 0, 22), "float32")},
                    configs=("relay-interp", "llvm-O0", "llvm-O3", "tir-interp"))


@pytest.mark.parametrize("case", ["mm", "bmm", "conv", "softmax"])
def test_float16_products_through_the_pytorch_frontend_accumulate_in_float32(case):
    # found by the fuzzer (seed 400477, pytorch oracle): float16 matrix products accumulated
    # in float16 (6% off on a small output); torch's CPU kernels accumulate in float32
    torch = pytest.importorskip("torch")
    from tvmpy.relay.frontend import from_pytorch

    fns = {"mm": (lambda a, b: a @ b, [(5, 1000), (1000, 3)]),
           "bmm": (lambda a, b: torch.bmm(a, b), [(2, 4, 1000), (2, 1000, 3)]),
           "conv": (lambda a, b: torch.nn.functional.conv2d(a, b), [(1, 128, 4, 4), (3, 128, 3, 3)]),
           "softmax": (lambda a, b: torch.softmax(a * 4, -1) * b, [(3, 1000), (1,)])}
    fn, shapes = fns[case]

    class M(torch.nn.Module):
        def forward(self, a, b):
            return fn(a, b)

    rng = np.random.default_rng(11)
    xs = [rng.uniform(0.0, 1.0, s).astype("float16") for s in shapes]
    want = M()(*[torch.from_numpy(x) for x in xs]).numpy().astype("float64")
    ep = torch.export.export(M(), tuple(torch.from_numpy(x) for x in xs))
    mod, params = from_pytorch(ep, [(n, (list(x.shape), "float16")) for n, x in zip("ab", xs)])
    lib, _ = compare.build(mod, params, 3, "llvm")
    got = compare.tvm_runner(lib)({"a": xs[0], "b": xs[1]})[0].astype("float64")
    # one float16 rounding of the float32 result: half an ulp (2^-11 relative)
    np.testing.assert_allclose(got, want, rtol=2 ** -10, atol=2 ** -10 * np.abs(want).max())


def test_erf_of_an_empty_tensor():
    # found by the fuzzer (seed 500592): the numpy reference of erf (np.vectorize without
    # otypes) refused empty input in the relay interpreter
    m = _model([helper.make_node("Erf", ["x"], ["y"])],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 0, 2])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 0, 2])])
    assert_model_ok(m, {"x": np.zeros((3, 0, 2), "float32")},
                    configs=("relay-interp", "llvm-O0", "llvm-O3"))


def test_matmul_with_an_empty_contraction_axis_in_a_batch():
    # found by the fuzzer (seed 502102): MatMul of a (5, 8, 2, 0) tensor flattened its batch
    # with reshape (-1, 0), which cannot infer -1 from 0 elements; the product is all zeros
    rng = np.random.default_rng(12)
    b = numpy_helper.from_array(rng.standard_normal((0, 3)).astype("float32"), "b")
    m = _model([helper.make_node("MatMul", ["a", "b"], ["y"])],
               [helper.make_tensor_value_info("a", TensorProto.FLOAT, [5, 8, 2, 0])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 8, 2, 3])], [b])
    configs = ("relay-interp", "llvm-O0", "llvm-O3")
    try:
        import torch  # noqa: F401

        configs += ("pytorch",)
    except ImportError:
        pass
    assert_model_ok(m, {"a": np.zeros((5, 8, 2, 0), "float32")}, configs=configs)


def test_reduce_mean_over_an_empty_axis():
    # found by the fuzzer (seed 501568): refused by the frontend; onnxruntime gives 0 (numpy's
    # mean would be 0 / 0 = NaN)
    m = _model([helper.make_node("ReduceMean", ["x", "ax"], ["y"], keepdims=1)],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 0, 2])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 1, 2])],
               [numpy_helper.from_array(np.array([1], np.int64), "ax")], opset=18)
    assert_model_ok(m, {"x": np.zeros((3, 0, 2), "float32")},
                    configs=("llvm-O0", "llvm-O3", "tir-interp"))
