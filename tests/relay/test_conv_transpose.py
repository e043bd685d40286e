"""Transposed convolutions as ordinary convolutions per stride phase (relay.transform
.ConvTransposeToConv + nn.stride_interleave), checked against eager PyTorch's conv_transpose2d at
awkward shapes (odd sizes, output_padding, strides 1-3, kernels 1-5, padding, dilation, groups,
batch > 1, a 1x1 input) at opt_level 0 and 3, and through the ONNX frontend against
onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.relay.transform.conv_transpose import SHARED_PADDING_KEY, phase_plan

torch = pytest.importorskip("torch")

# (batch, in ch, out ch, H, W, kernel, stride, padding, output_padding, dilation, groups)
CASES = [
    (1, 8, 6, 5, 7, (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), 1),
    (2, 4, 6, 4, 3, (4, 4), (2, 2), (1, 1), (0, 0), (1, 1), 1),
    (1, 6, 9, 5, 5, (5, 2), (3, 2), (2, 1), (2, 0), (1, 1), 3),
    (1, 4, 4, 3, 6, (2, 3), (3, 1), (1, 0), (0, 0), (2, 3), 2),
    (1, 5, 7, 3, 2, (3, 5), (2, 3), (2, 4), (1, 2), (2, 1), 1),
    (3, 3, 5, 1, 1, (4, 4), (1, 1), (0, 0), (0, 0), (1, 1), 1),
    (2, 3, 5, 1, 1, (4, 3), (2, 2), (1, 0), (1, 1), (1, 1), 1),
    (1, 4, 4, 4, 4, (1, 1), (2, 2), (0, 0), (1, 1), (1, 1), 1),
    (1, 4, 4, 4, 4, (1, 1), (3, 3), (0, 0), (2, 1), (1, 1), 4),
    (1, 17, 19, 7, 5, (4, 4), (2, 2), (1, 1), (0, 0), (1, 1), 1),
    (1, 16, 32, 6, 6, (4, 4), (2, 2), (1, 1), (0, 0), (1, 1), 1),
    (2, 8, 8, 5, 4, (3, 3), (1, 1), (1, 1), (0, 0), (1, 1), 8),
]


def _reference(x, w, s, p, op, d, g):
    return torch.nn.functional.conv_transpose2d(
        torch.tensor(x), torch.tensor(w), stride=s, padding=p, output_padding=op, dilation=d,
        groups=g).numpy()


def _graph(xshape, wshape, oc, k, s, p, op, d, g):
    x = relay.var("x", shape=xshape)
    w = relay.var("w", shape=wshape)
    y = relay.nn.conv2d_transpose(x, w, strides=s, padding=p, output_padding=op, dilation=d,
                                  groups=g, channels=oc, kernel_size=k)
    b = relay.var("b", shape=(oc, 1, 1))
    return tvm.IRModule.from_expr(relay.Function([x, w, b], relay.tanh(y + b)))


def _build_run(mod, params, feeds, opt_level, config=None):
    with tvm.transform.PassContext(opt_level=opt_level, config=config):
        lib = relay.build(mod, "llvm", params=params)
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    for k, v in feeds.items():
        m.set_input(k, v)
    m.run()
    return m.get_output(0).numpy()


@pytest.mark.parametrize("opt_level", [0, 3])
@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_conv2d_transpose_matches_torch(case, opt_level):
    n, ic, oc, h, w_, k, s, p, op, d, g = case
    rng = np.random.default_rng(sum(case[:5]))
    x = rng.standard_normal((n, ic, h, w_)).astype("float32")
    w = rng.standard_normal((ic, oc // g, *k)).astype("float32")
    b = rng.standard_normal((oc, 1, 1)).astype("float32")
    want = np.tanh(_reference(x, w, s, p, op, d, g) + b)
    got = _build_run(_graph(x.shape, w.shape, oc, k, s, p, op, d, g), {"w": w, "b": b},
                     {"x": x}, opt_level)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_weight_as_input_is_rearranged_at_run_time():
    """A weight that is not a constant goes through reshape/transpose/take in the graph."""
    n, ic, oc, h, w_, k, s, p, op, d, g = CASES[2]
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, ic, h, w_)).astype("float32")
    w = rng.standard_normal((ic, oc // g, *k)).astype("float32")
    b = np.zeros((oc, 1, 1), "float32")
    got = _build_run(_graph(x.shape, w.shape, oc, k, s, p, op, d, g), {"b": b},
                     {"x": x, "w": w}, 3)
    np.testing.assert_allclose(got, np.tanh(_reference(x, w, s, p, op, d, g)), rtol=1e-4,
                               atol=1e-4)


def test_no_zero_dilated_input_is_left():
    """The rewrite leaves no conv2d_transpose (whose compute convolves the zero-dilated
    input): a k4 s2 layer becomes 4 convolutions of 2x2 taps and one interleave; a 1x1 input
    becomes a dense."""
    mod = _graph((1, 16, 8, 8), (16, 8, 4, 4), 8, (4, 4), (2, 2), (1, 1), (0, 0), (1, 1), 1)
    out = relay.transform.ConvTransposeToConv()(relay.transform.InferType()(mod))
    text = str(out)
    assert "nn.conv2d_transpose" not in text
    assert text.count("nn.conv2d(") == text.count("kernel_size=[2, 2]") == 4
    assert text.count("nn.stride_interleave(") == 1
    mod = _graph((1, 16, 1, 1), (16, 8, 4, 4), 8, (4, 4), (1, 1), (0, 0), (0, 0), (1, 1), 1)
    text = str(relay.transform.ConvTransposeToConv()(relay.transform.InferType()(mod)))
    assert "nn.dense" in text and "nn.conv2d" not in text


@pytest.mark.parametrize("size, k, s, d, pad, out", [
    (5, 3, 2, 1, 1, 10), (4, 4, 2, 1, 1, 8), (3, 5, 3, 2, 2, 13), (1, 1, 3, 1, 0, 3),
    (2, 2, 3, 1, 0, 6),
])
def test_phase_plan_reads_each_tap_once(size, k, s, d, pad, out):
    """Every (output, tap, input) product of the transposed convolution is in exactly one
    phase's correlation, and no phase reads outside the input."""
    q, phases = phase_plan(size, k, s, d, pad, out)
    assert q == -(-out // s)
    seen = set()
    for r, ph in enumerate(phases):
        if ph is None:
            continue
        xlen = ph.end - ph.begin
        assert 0 <= ph.begin < ph.end <= size
        assert xlen + sum(ph.pad) - ph.dilation * (len(ph.taps) - 1) == q
        for j in range(q):
            for t, tap in enumerate(ph.taps):
                i = j + t * ph.dilation - ph.pad[0] + ph.begin
                if 0 <= i < size and s * j + r < out:
                    seen.add((s * j + r, tap, i))
    want = {(i * s + kk * d - pad, kk, i) for i in range(size) for kk in range(k)
            if 0 <= i * s + kk * d - pad < out}
    assert seen == want


def test_onnx_grouped_conv_transpose_matches_onnxruntime():
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    w = rng.standard_normal((6, 2, 3, 4)).astype("float32")
    b = rng.standard_normal(6).astype("float32")
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], group=3, strides=[2, 3],
                            pads=[1, 0, 0, 2], output_padding=[1, 2], dilations=[1, 2])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 5, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6, 11, 13])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    x = rng.standard_normal((2, 6, 5, 3)).astype("float32")
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    mod, params = relay.frontend.from_onnx(model, {"x": x.shape}, freeze_params=False)
    got = _build_run(mod, params, {"x": x}, 3)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("hw, k, s", [((5, 4), (3, 3), (2, 2)), ((1, 1), (4, 4), (1, 1))])
def test_symbolic_batch_through_the_vm(hw, k, s):
    x = relay.var("x", shape=(relay.Any(), 6, *hw))
    rng = np.random.default_rng(11)
    w = rng.standard_normal((6, 5, *k)).astype("float32")
    y = relay.nn.relu(relay.nn.conv2d_transpose(x, relay.const(w), strides=s, padding=(1, 0),
                                                channels=5, kernel_size=k))
    mod = tvm.IRModule.from_expr(relay.Function([x], y))
    rewritten = relay.transform.ConvTransposeToConv()(relay.transform.InferType()(mod))
    assert "nn.conv2d_transpose" not in str(rewritten)  # the batch may be symbolic
    with tvm.transform.PassContext(opt_level=3):
        exe = relay.vm.compile(mod, "llvm")
    from tvmpy.runtime import vm as rvm

    vm = rvm.VirtualMachine(exe, tvm.cpu())
    for n in (1, 3):
        xv = rng.standard_normal((n, 6, *hw)).astype("float32")
        want = np.maximum(_reference(xv, w, s, (1, 0), (0, 0), (1, 1), 1), 0)
        np.testing.assert_allclose(vm.run(xv).numpy(), want, rtol=1e-4, atol=1e-4)


def test_stride_interleave_bad_input_is_named():
    parts = [relay.var(f"p{i}", shape=(1, 4, 3, 3)) for i in range(3)]
    with pytest.raises(Exception, match="needs 4 NCHW tensors"):
        relay.transform.infer_type(relay.nn.stride_interleave(parts, (2, 2), (6, 6)))
    parts.append(relay.var("p3", shape=(1, 4, 3, 3)))
    with pytest.raises(Exception, match="cannot fill 7x6"):
        relay.transform.infer_type(relay.nn.stride_interleave(parts, (2, 2), (7, 6)))


def _kernel_names(mod, params, opt_level, config=None):
    import json

    with tvm.transform.PassContext(opt_level=opt_level, config=config):
        lib = relay.build(mod, "llvm", params=params)
    return [n["attrs"]["func_name"] for n in json.loads(lib.get_graph_json())["nodes"]
            if n["op"] == "tvm_op"]


@pytest.mark.parametrize("shared", [False, True], ids=["own_padding", "shared_padding"])
@pytest.mark.parametrize("hw, k, s, p, op", [
    ((8, 8), (4, 4), (2, 2), (1, 1), (0, 0)),  # DCGAN's layer: phase paddings (1, 0) / (0, 1)
    ((7, 5), (3, 3), (2, 2), (1, 1), (1, 1)),  # unequal tap counts (1 and 2 per axis)
    ((5, 7), (5, 4), (3, 2), (2, 1), (2, 1)),  # stride 3 in H (taps 2, 2, 1), output_padding
    ((11, 13), (5, 7), (3, 3), (2, 3), (1, 2)),  # stride 3, kernels not divisible by it
])
def test_phase_lowering_matches_torch(hw, k, s, p, op, shared):
    """The phase convolutions (each phase's own padding; with ``SHARED_PADDING_KEY`` a shared
    padded input where the tap counts along an axis are equal) and the interleave with the bias
    and tanh give torch's values at opt_level 0 and 3, with one convolution per phase."""
    config = {SHARED_PADDING_KEY: shared}
    ic, oc = 16, 8
    rng = np.random.default_rng(sum(hw) + sum(k))
    x = rng.standard_normal((2, ic, *hw)).astype("float32")
    w = rng.standard_normal((ic, oc, *k)).astype("float32")
    b = rng.standard_normal((oc, 1, 1)).astype("float32")
    mod = _graph(x.shape, w.shape, oc, k, s, p, op, (1, 1), 1)
    want = np.tanh(_reference(x, w, s, p, op, (1, 1), 1) + b)
    for opt_level in (0, 3):
        names = _kernel_names(mod, {"w": w, "b": b}, opt_level, config)
        assert sum("conv2d" in n for n in names) == s[0] * s[1], names
        got = _build_run(mod, {"w": w, "b": b}, {"x": x}, opt_level, config)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_only_a_crop_is_a_slice():
    """Padding beyond the kernel's reach (k3 s2 p3, unequal tap counts: no shared padding): a
    phase reads a strict sub-range of the input, cropped by strided_slice (conv2d has no
    negative padding), no nn.pad; values as torch's."""
    mod = _graph((1, 4, 9, 6), (4, 5, 3, 3), 5, (3, 3), (2, 2), (3, 2), (0, 1), (1, 1), 1)
    text = str(relay.transform.ConvTransposeToConv()(relay.transform.InferType()(mod)))
    assert "strided_slice" in text and "nn.pad" not in text
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 4, 9, 6)).astype("float32")
    w = rng.standard_normal((4, 5, 3, 3)).astype("float32")
    b = rng.standard_normal((5, 1, 1)).astype("float32")
    want = np.tanh(_reference(x, w, (2, 2), (3, 2), (0, 1), (1, 1), 1) + b)
    got = _build_run(mod, {"w": w, "b": b}, {"x": x}, 3)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_phases_read_the_input_in_place():
    """k4 s2 p1 (DCGAN's layer): each phase's window is its convolution's own padding, so the
    built graph has the four phase convolutions and the interleave (with the bias and tanh)
    and no pad or window-copy kernel; with ``SHARED_PADDING_KEY`` the input is padded once and each
    phase convolves a same-size window of it, the four phases one compiled kernel (fewer
    kernels to compile, but a pad and four window copies per layer at run time: DCGAN's
    generator 38 kernels against 22, bench/RESULTS.md, session 5)."""
    mod = _graph((1, 16, 8, 8), (16, 32, 4, 4), 32, (4, 4), (2, 2), (1, 1), (0, 0), (1, 1), 1)
    rng = np.random.default_rng(5)
    params = {"w": rng.standard_normal((16, 32, 4, 4)).astype("float32"),
              "b": rng.standard_normal((32, 1, 1)).astype("float32")}
    for opt_level in (0, 3):
        names = _kernel_names(mod, params, opt_level)
        convs = [n for n in names if "conv2d" in n]
        assert len(convs) == 4 and len(set(convs)) == 4, names
        assert not any("strided_slice" in n or n.endswith("pad") for n in names), names
    for opt_level in (0, 3):
        names = _kernel_names(mod, params, opt_level, {SHARED_PADDING_KEY: True})
        convs = [n for n in names if "conv2d" in n]
        assert len(convs) == 4 and len(set(convs)) == 1, names
        assert sum("strided_slice" in n for n in names) >= 3, names


def _numpy_conv_transpose(x, w, s, p, op):
    """conv_transpose2d by its definition (groups 1, dilation 1): every input element scatters
    its product with the whole kernel into the output, then the padding is cropped."""
    n, _, h, wd = x.shape
    oc, kh, kw = w.shape[1:]
    full = np.zeros((n, oc, (h - 1) * s[0] + kh + op[0], (wd - 1) * s[1] + kw + op[1]))
    for i in range(h):
        for j in range(wd):
            full[:, :, i * s[0]:i * s[0] + kh, j * s[1]:j * s[1] + kw] += np.einsum(
                "nc,cokl->nokl", x[:, :, i, j].astype(np.float64), w.astype(np.float64))
    oh = (h - 1) * s[0] - 2 * p[0] + kh + op[0]
    ow = (wd - 1) * s[1] - 2 * p[1] + kw + op[1]
    return full[:, :, p[0]:p[0] + oh, p[1]:p[1] + ow]


def test_shared_padding_option_switches_the_lowering():
    """PassContext ``relay.ConvTransposeToConv.shared_padding``: unset (default) or False, each
    phase convolution pads the input itself (no nn.pad, no strided_slice); True, the input is
    padded once and each phase reads a same-size window of it (nn.pad + strided_slice). Both
    lowerings, built, give numpy's conv_transpose2d (odd sizes, output_padding, bias, tanh)."""
    xshape, wshape, k, s, p, op = (2, 5, 7, 5), (5, 3, 4, 4), (4, 4), (2, 2), (1, 1), (1, 0)
    mod = _graph(xshape, wshape, 3, k, s, p, op, (1, 1), 1)
    rng = np.random.default_rng(13)
    x = rng.standard_normal(xshape).astype("float32")
    w = rng.standard_normal(wshape).astype("float32")
    b = rng.standard_normal((3, 1, 1)).astype("float32")
    want = np.tanh(_numpy_conv_transpose(x, w, s, p, op) + b)
    typed = relay.transform.InferType()(mod)
    for config, shared in ((None, False), ({SHARED_PADDING_KEY: False}, False),
                           ({SHARED_PADDING_KEY: True}, True)):
        with tvm.transform.PassContext(opt_level=3, config=config):
            text = str(relay.transform.ConvTransposeToConv()(typed))
        assert "nn.conv2d_transpose" not in text
        assert ("nn.pad" in text) == shared and ("strided_slice" in text) == shared, text
        got = _build_run(mod, {"w": w, "b": b}, {"x": x}, 3, config)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
