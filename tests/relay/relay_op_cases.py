"""One small call per registered relay operator, with its expected output shape (and dtype when
not float32): shared by the type-inference and interpreter tests."""

import numpy as np

from tvmpy import relay
from tvmpy.relay.op import nn_int8
from tvmpy.relay.op.rnn import rnn_scan

rng = np.random.default_rng(7)


def _c(*shape, dtype="float32"):
    return relay.const(rng.uniform(0.5, 1.5, size=shape).astype(dtype))


# one case per registered operator: (build, expected shape, expected dtype)
def op_cases():
    from tvmpy.relay.op.index_check import check_indices

    x4 = relay.var("x4", shape=(2, 4, 9, 9))
    m = relay.var("m", shape=(3, 5))
    v5 = relay.var("v5", shape=(5,))
    b = relay.var("b", shape=(3, 5), dtype="bool")
    i = relay.var("i", shape=(2, 2), dtype="int32")
    s = relay.var("s", shape=(), dtype="float32")
    a3 = relay.var("a3", shape=(2, 3, 5))
    vec4 = _c(4)
    cases = {
        "nn.conv2d": (relay.nn.conv2d(x4, _c(6, 2, 3, 3), groups=2, dilation=2), (2, 6, 5, 5)),
        "nn.conv2d_transpose": (relay.nn.conv2d_transpose(x4, _c(4, 3, 3, 3), strides=2, padding=1,
                                                          output_padding=1), (2, 3, 18, 18)),
        "nn.dense": (relay.nn.dense(m, _c(7, 5)), (3, 7)),
        "nn.contrib_dense_pack": (relay.nn.contrib_dense_pack(m, _c(2, 5, 4)), (3, 8)),
        "nn.contrib_conv2d_NCHWc": (relay.nn.contrib_conv2d_nchwc(
            relay.var("xc", shape=(1, 2, 9, 9, 8)), _c(2, 2, 3, 3, 8, 16), padding=1,
            data_layout="NCHW8c", kernel_layout="OIHW8i16o", out_layout="NCHW4c"), (1, 8, 9, 9, 4)),
        "nn.contrib_conv2d_winograd_nchwc": (relay.nn.contrib_conv2d_winograd_nchwc(
            relay.var("xw", shape=(1, 2, 9, 7, 8)), _c(6, 6, 2, 16, 8), tile_size=4, padding=1,
            data_layout="NCHW8c", out_layout="NCHW8c"), (1, 2, 9, 7, 8)),
        "nn.contrib_conv2d_winograd_weight_transform": (
            relay.nn.contrib_conv2d_winograd_weight_transform(_c(16, 5, 3, 3), 4, 8),
            (6, 6, 2, 5, 8)),
        "nn.contrib_conv2d_winograd_without_weight_transform": (
            relay.nn.contrib_conv2d_winograd_without_weight_transform(
                x4, _c(6, 6, 4, 3), tile_size=4, padding=(1, 1)), (2, 3, 9, 9)),
        "shape_of": (relay.op.dyn.shape_of(x4), (4,), "int64"),
        "image.resize2d": (relay.image.resize2d(x4, (4, 18), method="nearest_neighbor"),
                           (2, 4, 4, 18)),
        "nn.matmul": (relay.nn.matmul(m, _c(5, 2)), (3, 2)),
        "nn.batch_matmul": (relay.nn.batch_matmul(a3, _c(2, 4, 5)), (2, 3, 4)),
        "nn.attention": (relay.nn.attention(a3, _c(2, 7, 5), _c(2, 7, 4), _c(1, 2, 1, 7),
                                            scale=0.5, heads=2), (2, 3, 4)),
        # one LSTM direction: T=3 steps, batch 2, hidden 5 (gates padded to 16 columns)
        "nn.rnn_scan": (relay.TupleGetItem(rnn_scan(_c(3, 2, 64), _c(5, 64), _c(2, 5), _c(2, 5),
                                                    "LSTM", 5), 0), (3, 2, 5)),
        "nn.bias_add": (relay.nn.bias_add(x4, vec4), (2, 4, 9, 9)),
        "nn.relu": (relay.nn.relu(m), (3, 5)),
        "nn.leaky_relu": (relay.nn.leaky_relu(m, 0.2), (3, 5)),
        "nn.gelu": (relay.nn.gelu(m), (3, 5)),
        "nn.prelu": (relay.nn.prelu(x4, vec4), (2, 4, 9, 9)),
        "nn.softmax": (relay.nn.softmax(m), (3, 5)),
        "nn.log_softmax": (relay.nn.log_softmax(m, axis=0), (3, 5)),
        "nn.batch_norm": (relay.nn.batch_norm(x4, vec4, vec4, vec4, vec4)[1], (4,)),
        "nn.layer_norm": (relay.nn.layer_norm(m, _c(5), _c(5)), (3, 5)),
        "nn.dropout": (relay.nn.dropout(m, 0.1), (3, 5)),
        "nn.max_pool2d": (relay.nn.max_pool2d(x4, 2, 2, ceil_mode=True), (2, 4, 5, 5)),
        "nn.avg_pool2d": (relay.nn.avg_pool2d(x4, 3, 2, padding=1), (2, 4, 5, 5)),
        "nn.global_avg_pool2d": (relay.nn.global_avg_pool2d(x4), (2, 4, 1, 1)),
        "nn.global_max_pool2d": (relay.nn.global_max_pool2d(x4), (2, 4, 1, 1)),
        "nn.adaptive_avg_pool2d": (relay.nn.adaptive_avg_pool2d(x4, (3, 2)), (2, 4, 3, 2)),
        "nn.pad": (relay.nn.pad(x4, ((0, 0), (0, 0), (1, 2), (3, 0))), (2, 4, 12, 12)),
        "nn.batch_flatten": (relay.nn.batch_flatten(x4), (2, 324)),
        "reshape": (relay.reshape(m, (5, -1)), (5, 3)),
        "reshape_like": (relay.reshape_like(m, relay.var("l", shape=(15,))), (15,)),
        "transpose": (relay.transpose(a3), (5, 3, 2)),
        "concatenate": (relay.concatenate([m, m], axis=-1), (3, 10)),
        "stack": (relay.stack([m, m, m], axis=1), (3, 3, 5)),
        "split": (relay.split(m, (2,), axis=1)[1], (3, 3)),
        "squeeze": (relay.squeeze(relay.var("q", shape=(1, 3, 1))), (3,)),
        "expand_dims": (relay.expand_dims(m, -1, 2), (3, 5, 1, 1)),
        "take": (relay.take(m, i, axis=1), (3, 2, 2)),
        "strided_slice": (relay.strided_slice(x4, [0, 1, 8], [2, 4, 0], [1, 2, -3]), (2, 2, 3, 9)),
        "broadcast_to": (relay.broadcast_to(v5, (4, 3, 5)), (4, 3, 5)),
        "cast": (relay.cast(m, "float16"), (3, 5), "float16"),
        "reinterpret": (relay.reinterpret(m, "int32"), (3, 5), "int32"),
        "layout_transform": (relay.layout_transform(relay.var("l4", shape=(1, 32, 7, 7)), "NCHW",
                                                    "NCHW8c"), (1, 4, 7, 7, 8)),
        "where": (relay.where(b, m, v5), (3, 5)),
        "clip": (relay.clip(m, -1.0, 1.0), (3, 5)),
        "zeros": (relay.zeros((2, 3), "int64"), (2, 3), "int64"),
        "ones": (relay.ones((4,)), (4,)),
        "full": (relay.full(s, (2, 2)), (2, 2)),
        "isnan": (relay.isnan(m), (3, 5), "bool"),
        "variance": (relay.op.reduce.variance(m, relay.mean(m, 1, True), axis=1), (3,)),
        "argmin": (relay.argmin(m), (), "int32"),
        "all": (relay.all(b, axis=0), (5,), "bool"),
        "any": (relay.any(b, axis=1, keepdims=True), (3, 1), "bool"),
    }
    iv = relay.var("iv", shape=(3, 5), dtype="int32")
    cases.update({
        "tile": (relay.tile(m, (2, 1, 3)), (2, 3, 15)),
        "repeat": (relay.repeat(m, 2, axis=0), (6, 5)),
        "reverse": (relay.reverse(m, axis=1), (3, 5)),
        "gather": (relay.gather(m, 1, relay.var("gi", shape=(3, 2), dtype="int64")), (3, 2)),
        "gather_nd": (relay.gather_nd(a3, relay.var("gn", shape=(2, 4), dtype="int32")), (4, 5)),
        "check_indices": (check_indices(relay.var("ci", shape=(4, 2), dtype="int64"), a3,
                                              [0, 1]), (4, 2), "int64"),
        "one_hot": (relay.one_hot(i, relay.const(1.0), relay.const(0.0), 4, axis=1), (2, 4, 2)),
        "arange": (relay.arange(1.0, 2.0, 0.3), (4,)),
        "cumsum": (relay.cumsum(m, axis=1, exclusive=True), (3, 5)),
        "nn.instance_norm": (relay.nn.instance_norm(x4, vec4, vec4), (2, 4, 9, 9)),
        "nn.group_norm": (relay.nn.group_norm(x4, vec4, vec4, num_groups=2), (2, 4, 9, 9)),
        "nn.depth_to_space": (relay.nn.depth_to_space(x4, 2), (2, 1, 18, 18)),
        "nn.space_to_depth": (relay.nn.space_to_depth(relay.var("sd", shape=(1, 2, 4, 6)), 2),
                              (1, 8, 2, 3)),
        "nn.stride_interleave": (relay.nn.stride_interleave(
            relay.Tuple([relay.var(f"si{k}", shape=(2, 3, 5, 5)) for k in range(4)]), (2, 2),
            (9, 10)), (2, 3, 9, 10)),
        "isinf": (relay.isinf(m), (3, 5), "bool"),
        "isfinite": (relay.isfinite(m), (3, 5), "bool"),
        "logical_xor": (relay.logical_xor(b, b), (3, 5), "bool"),
    })
    x3 = relay.var("x3", shape=(2, 4, 11))
    x5 = relay.var("x5", shape=(1, 2, 5, 6, 7))
    cases.update({
        "nn.conv1d": (relay.nn.conv1d(x3, _c(6, 2, 3), strides=2, padding=(1, 2), groups=2),
                      (2, 6, 6)),
        "nn.conv3d": (relay.nn.conv3d(x5, _c(3, 2, 3, 2, 3), padding=1, dilation=(1, 2, 1)),
                      (1, 3, 5, 6, 7)),
        "nn.max_pool1d": (relay.nn.max_pool1d(x3, 3, 2, padding=1), (2, 4, 6)),
        "nn.avg_pool1d": (relay.nn.avg_pool1d(x3, 2, count_include_pad=True), (2, 4, 10)),
        "nn.max_pool3d": (relay.nn.max_pool3d(x5, 2, 2), (1, 2, 2, 3, 3)),
        "nn.contrib_conv2d_NCHWc_int8": (nn_int8.contrib_conv2d_nchwc_int8(
            relay.var("c8", shape=(1, 2, 9, 9, 4), dtype="uint8"),
            relay.const(rng.integers(-9, 9, (1, 2, 3, 3, 1, 16, 4)).astype("int8")), (1, 1),
            (1, 1, 1, 1), (1, 1), 16, (3, 3), "NCHW4c", "OIHW1i16o4i"),
            (1, 1, 9, 9, 16), "int32"),
        "nn.contrib_depthwise_conv2d_NCHWc_int8": (nn_int8.contrib_depthwise_conv2d_nchwc_int8(
            relay.var("d8", shape=(1, 2, 9, 9, 8), dtype="uint8"),
            relay.const(rng.integers(-9, 9, (2, 1, 3, 3, 1, 8)).astype("int8")), (2, 2),
            (1, 1, 1, 1), (1, 1), (3, 3), "NCHW8c", "OIHW1i8o"), (1, 2, 5, 5, 8), "int32"),
        "nn.contrib_dense_pack_int8": (nn_int8.contrib_dense_pack_int8(
            relay.var("e8", shape=(3, 10), dtype="uint8"),
            relay.const(rng.integers(-9, 9, (1, 3, 16, 4)).astype("int8")), 5), (3, 5), "int32"),
        "nn.bitpack": (relay.nn.bitpack(relay.var("bp", shape=(2, 37, 3), dtype="int8"), bits=2),
                       (2, 2, 2, 3), "uint32"),
        "nn.bitserial_dense": (relay.nn.bitserial_dense(
            relay.var("bd", shape=(3, 40), dtype="uint8"),
            relay.const(rng.integers(0, 2, (5, 40)).astype("uint8"))), (3, 5), "int16"),
        "nn.bitserial_conv2d": (relay.nn.bitserial_conv2d(
            relay.var("bc", shape=(1, 7, 7, 9), dtype="uint8"),
            relay.const(rng.integers(0, 2, (3, 3, 9, 4)).astype("uint8")), padding=1,
            data_layout="NHWC", kernel_layout="HWIO"), (1, 7, 7, 4), "int16"),
        "nn.avg_pool3d": (relay.nn.avg_pool3d(x5, (1, 2, 3), 1, padding=(0, 1, 1)), (1, 2, 5, 7, 7)),
    })
    for n in ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"]:
        cases[n] = (getattr(relay, n)(relay.var("u", shape=(3, 5))), (3, 5))
    cases["bitwise_not"] = (relay.bitwise_not(iv), (3, 5), "int32")
    for n in ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"]:
        cases[n] = (getattr(relay, n)(iv, iv), (3, 5), "int32")
    from tvmpy.relay.op import tensor as T

    for n in ["negative", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "abs", "erf", "floor",
              "ceil", "round", "sign", "sin", "cos", "copy", "log2", "log1p", "trunc", "zeros_like",
              "ones_like", "nearbyint"]:
        cases[n] = (getattr(T, n)(m), (3, 5))
    cases["logical_not"] = (relay.logical_not(b), (3, 5), "bool")
    cases["annotation.stop_fusion"] = (T.stop_fusion(m), (3, 5))
    for n in ["add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "mod",
              "floor_divide", "floor_mod"]:
        cases[n] = (getattr(T, n)(m, v5), (3, 5))
    for n in ["logical_and", "logical_or"]:
        cases[n] = (getattr(T, n)(b, b), (3, 5), "bool")
    for n in ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]:
        cases[n] = (getattr(T, n)(m, s), (3, 5), "bool")
    for n in ["sum", "mean", "max", "min", "prod", "argmax"]:
        cases[n] = (getattr(relay, n)(a3, axis=(0, 2)), (3,), "int32" if n == "argmax" else "float32")
    cases.update(_list_cases(m))
    cases.update(_qnn_cases())
    cases.update(_dyn_axes_cases(a3))
    return cases


def _dyn_axes_cases(a3):
    """relay.op.dyn ops with run-time axes / scalars ("?": a dim known only at run time)."""
    from tvmpy.relay.op.dyn import dropout, reduce, scalar_args, signal, spatial, window

    axes = relay.const(np.array([0, -1], "int64"))
    one = relay.const(np.array([1], "int64"))
    cases = {f"dyn.{k}": (getattr(reduce, k)(a3, axes), ("?", "?", "?"))
             for k in reduce.KINDS}
    cases["dyn.sum"] = (reduce.sum(a3, axes, keepdims=False), ("?",))
    cases["dyn.trilu"] = (scalar_args.trilu(a3, one, upper=False), (2, 3, 5))
    cases["dyn.cumsum"] = (scalar_args.cumsum(a3, one), (2, 3, 5))
    cases["dyn.cumprod"] = (scalar_args.cumprod(a3, one, exclusive=True), (2, 3, 5))
    cases["dyn.window"] = (window.window(relay.const(np.int64(6)), "hann"), ("?",))
    cases["dyn.dropout"] = (dropout.dropout(a3, relay.const(np.float32(0.5)),
                                            relay.const(np.bool_(False)))[0], (2, 3, 5))
    i64 = lambda *v: relay.const(np.array(v, "int64"))  # noqa: E731
    cases["dyn.dft"] = (signal.dft(relay.var("xd", shape=(1, 6, 4, 1)), i64(1)), (1, 6, 4, 2))
    cases["dyn.stft"] = (signal.stft(relay.var("xs", shape=(2, 20, 1)), i64(4), _c(8), True),
                         (2, "?", 5, 2))
    cases["dyn.affine_grid"] = (spatial.affine_grid(_c(2, 2, 3), i64(2, 3, 4, 5)),
                                (2, "?", "?", 2))
    cases["dyn.col2im"] = (spatial.col2im(relay.var("xc2", shape=(1, 6, 9)), i64(4, 5),
                                          i64(2, 3)), (1, "?", "?", "?"))
    cases["dyn.max_unpool"] = (spatial.max_unpool(
        relay.var("xu", shape=(1, 2, 2, 2)), relay.const(np.array(
            [[[[0, 3], [9, 14]], [[16, 18], [27, 31]]]], "int64")), i64(1, 2, 4, 4), (1, 2, 4, 4)),
        (1, 2, "?", "?"))
    return cases


def _list_cases(m):
    """The run-time list builtins (ONNX sequences), each read back as a tensor."""
    from tvmpy.relay.op import sequence as L

    i0, i1 = relay.const(np.int64(0)), relay.const(np.int64(1))
    two = L.from_tuple(relay.Tuple([m, relay.negative(m)]), "float32")
    return {
        "list.empty": (L.length(L.empty("float32")), (), "int64"),
        "list.insert": (L.at(L.insert(L.empty("float32"), m), i0), (3, 5)),
        "list.from_tuple": (L.at(two, i1), (3, 5)),
        "list.at": (L.at(L.insert(two, relay.exp(m), i1), i1), (3, 5)),
        "list.erase": (L.length(L.erase(two)), (), "int64"),
        "list.length": (L.length(two), (), "int64"),
        "list.concat": (relay.sum(L.concat(two, 1)), ()),
        "list.split": (L.at(L.split(m, None, 1, keepdims=False), i1), (3,)),
    }


def _qnn_cases():
    from tvmpy.relay import qnn

    q = relay.var("q", shape=(2, 4, 9, 9), dtype="uint8")
    qm = relay.var("qm", shape=(3, 5), dtype="int8")
    q3 = relay.var("q3", shape=(2, 3, 5), dtype="int8")
    acc = relay.var("acc", shape=(3, 7), dtype="int32")
    s, z = relay.const(0.05), relay.const(3, "int32")
    sc7, zc7 = _c(7), relay.const(np.arange(7, dtype="int32"))
    wq = relay.const(rng.integers(-100, 100, (6, 2, 3, 3)).astype("int8"))
    dq = relay.const(rng.integers(-100, 100, (7, 5)).astype("int8"))
    x = relay.var("xq", shape=(3, 7))
    b = (qm, qm, s, z, relay.const(0.1), z, relay.const(0.2), z)
    return {
        "qnn.quantize": (qnn.op.quantize(x, sc7, zc7, axis=1, out_dtype="uint8"), (3, 7), "uint8"),
        "qnn.dequantize": (qnn.op.dequantize(qm, s, z), (3, 5)),
        "qnn.requantize": (qnn.op.requantize(acc, sc7, z, s, z, axis=1), (3, 7), "int8"),
        "qnn.conv2d": (qnn.op.conv2d(q, wq, z, z, s, s, groups=2, padding=1, kernel_size=3),
                       (2, 6, 9, 9), "int32"),
        "qnn.dense": (qnn.op.dense(qm, dq, z, zc7, s, sc7), (3, 7), "int32"),
        "qnn.batch_matmul": (qnn.op.batch_matmul(q3, q3, z, z, s, s), (2, 3, 3), "int32"),
        "qnn.add": (qnn.op.add(*b), (3, 5), "int8"),
        "qnn.mul": (qnn.op.mul(*b), (3, 5), "int8"),
        "qnn.subtract": (qnn.op.subtract(*b), (3, 5), "int8"),
        "qnn.concatenate": (qnn.op.concatenate([qm, qm], [s, s], [z, z], s, z, axis=1), (3, 10),
                            "int8"),
        "qnn.sigmoid": (qnn.op.sigmoid(qm, s, z, s, z), (3, 5), "int8"),
        "qnn.leaky_relu": (qnn.op.leaky_relu(qm, 0.1, s, z, s, z), (3, 5), "int8"),
        "qnn.avg_pool2d": (qnn.op.avg_pool2d(q, s, z, s, z, 2, 2), (2, 4, 4, 4), "uint8"),
        "qnn.global_avg_pool2d": (qnn.op.global_avg_pool2d(q, s, z, s, z), (2, 4, 1, 1),
                                  "uint8"),
        "qnn.softmax": (qnn.op.softmax(qm, s, z, s, z), (3, 5), "int8"),
    }




def data_dependent_cases():
    """The operators whose output size depends on the data: (call, shape, dtype) with None for
    each ``Any`` dimension (their values are tested in test_data_dependent_ops.py)."""
    m = relay.var("m", shape=(3, 5))
    c = relay.var("c", shape=(5,), dtype="bool")
    boxes, scores = relay.var("bx", shape=(1, 6, 4)), relay.var("sc", shape=(1, 2, 6))
    one = relay.const(np.array([2], "int64"))
    th = relay.const(np.array([0.5], "float32"))
    return {
        "argwhere": (relay.argwhere(m), (None, 2), "int32"),
        "compress": (relay.compress(m, c, axis=1), (3, None)),
        "unique": (relay.unique(m, axis=0)[0], (None, 5)),
        "vision.all_class_non_max_suppression": (relay.vision.all_class_non_max_suppression(
            boxes, scores, one, th, th), (None, 3), "int64"),
        "image.decode": (relay.op.image_decode.decode(relay.var("png", shape=(90,), dtype="uint8"),
                                                      "Grayscale"), (None, None, 1), "uint8"),
    }
