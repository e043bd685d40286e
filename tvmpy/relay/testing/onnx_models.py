"""ONNX models with random weights, built with ``onnx.helper`` (no model files, no torch).

``resnet18``, ``mobilenet_v2`` and ``bert_encoder`` return an ``onnx.ModelProto`` in the form
that torch's exporter emits for the torchvision / HuggingFace architectures: Conv and
BatchNormalization kept apart (with non-trivial running statistics), Relu6 as Clip, MatMul + Add
for linear layers, GELU as the Erf formula, LayerNormalization (opset 17) or its decomposed
ReduceMean/Pow/Sqrt form, attention with MatMul/Div/Softmax and Reshape/Transpose by constant
shapes. Weights are deterministic for a seed and scaled so activations stay O(1) (rms ~ 0.3-1.5
at every layer, measured): He-initialised convolutions; BatchNormalization running variances
near the variance each conv output would have (estimated from its input's mean square, times
U(0.5, 1.5), with non-zero running means), as a trained network's statistics would be; and the
last BatchNormalization of every residual branch has gamma in [0.2, 0.4] so the sums of a deep
residual network do not grow with depth.

The graph input of the CNNs is ``input`` (float32 NCHW); ``bert_encoder`` takes ``input_ids``
(int64 [batch, seq] token ids, word + position embeddings + LayerNorm) or, with
``embeddings=False``, ``hidden_states`` (float32 [batch, seq, hidden]). There is no attention
mask (every token attends to every token). The output is ``output``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["resnet18", "mobilenet_v2", "bert_encoder", "recurrent", "input_feeds", "MODELS"]

OPSET = 17
IR_VERSION = 9  # onnxruntime loads ir_version <= 10 on every version we support


class _Graph:
    """Accumulates nodes and initializers; names are unique, weights come from one RNG."""

    def __init__(self, seed: int):
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.rng = np.random.default_rng(seed)
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._count: dict[str, int] = {}

    def name(self, base: str) -> str:
        k = self._count.get(base, 0)
        self._count[base] = k + 1
        return base if k == 0 else f"{base}_{k}"

    def init(self, base: str, value: np.ndarray) -> str:
        n = self.name(base)
        self.inits.append(self.numpy_helper.from_array(np.ascontiguousarray(value), n))
        return n

    def node(self, op: str, inputs: list[str], base: str, n_out: int = 1, **attrs: Any) -> Any:
        n = self.name(base)
        outs = [n] if n_out == 1 else [f"{n}:{k}" for k in range(n_out)]
        self.nodes.append(self.helper.make_node(op, inputs, outs, name=n, **attrs))
        return outs[0] if n_out == 1 else outs

    # weights ---------------------------------------------------------------------------------
    def he(self, base: str, shape: tuple[int, ...], fan_in: int, gain: float = 2.0) -> str:
        w = self.rng.standard_normal(shape) * np.sqrt(gain / fan_in)
        return self.init(base, w.astype(np.float32))

    def uniform(self, base: str, shape: tuple[int, ...], lo: float, hi: float) -> str:
        return self.init(base, self.rng.uniform(lo, hi, size=shape).astype(np.float32))

    def const(self, base: str, value: Any, dtype: Any) -> str:
        return self.init(base, np.asarray(value, dtype=dtype))

    def model(self, inputs: list[Any], output: str, out_shape: list[Any], name: str) -> Any:
        from onnx import TensorProto

        h = self.helper
        out = h.make_tensor_value_info("output", TensorProto.FLOAT, out_shape)
        self.nodes.append(h.make_node("Identity", [output], ["output"], name="output_identity"))
        g = h.make_graph(self.nodes, name, inputs, [out], initializer=self.inits)
        m = h.make_model(g, opset_imports=[h.make_opsetid("", OPSET)], producer_name="tvmpy")
        m.ir_version = IR_VERSION
        return m


# ------------------------------------------------------------------------------------------------
# CNN pieces


def _conv_bn(g: _Graph, x: str, name: str, cin: int, cout: int, k: int, stride: int,
             m_in: float, act: str | None = "relu", group: int = 1,
             gamma: tuple[float, float] = (0.5, 1.5)) -> tuple[str, float]:
    """Conv -> BatchNormalization -> activation; returns the output and its second moment.

    ``m_in`` is the (estimated) mean square of the input: the conv output then has variance
    ~ 2 * m_in (He init), and the running variance is set near it (times U(0.5, 1.5)), as a
    trained network's statistics would be, so the normalized output has variance ~ gamma^2.
    """
    fan_in = cin // group * k * k
    w = g.he(f"{name}.weight", (cout, cin // group, k, k), fan_in)
    y = g.node("Conv", [x, w], f"{name}.conv", kernel_shape=[k, k], strides=[stride, stride],
               pads=[k // 2] * 4, group=group)
    var_z = 2.0 * m_in
    bn = [g.uniform(f"{name}.bn.weight", (cout,), *gamma),
          g.uniform(f"{name}.bn.bias", (cout,), -0.2, 0.2),
          g.init(f"{name}.bn.running_mean",
                 (g.rng.uniform(-0.2, 0.2, size=cout) * np.sqrt(var_z)).astype(np.float32)),
          g.init(f"{name}.bn.running_var",
                 (g.rng.uniform(0.5, 1.5, size=cout) * var_z).astype(np.float32))]
    y = g.node("BatchNormalization", [y, *bn], f"{name}.bn", epsilon=1e-5)
    m_out = float(np.mean(np.square(gamma))) + 0.02
    if act == "relu":
        return g.node("Relu", [y], f"{name}.relu"), m_out / 2
    if act == "relu6":
        lo = g.const(f"{name}.clip_min", 0.0, np.float32)
        hi = g.const(f"{name}.clip_max", 6.0, np.float32)
        return g.node("Clip", [y, lo, hi], f"{name}.relu6"), m_out / 2
    return y, m_out


def _classifier(g: _Graph, x: str, cin: int, classes: int) -> str:
    y = g.node("GlobalAveragePool", [x], "avgpool")
    y = g.node("Flatten", [y], "flatten", axis=1)
    w = g.he("fc.weight", (classes, cin), cin, gain=1.0)
    b = g.uniform("fc.bias", (classes,), -0.1, 0.1)
    return g.node("Gemm", [y, w, b], "fc", transB=1)


def _image_input(batch: int | str, image: int) -> Any:
    """The image input; a ``str`` batch is a symbolic (``dim_param``) batch dimension."""
    from onnx import TensorProto, helper

    if image < 32 or (not isinstance(batch, str) and batch < 1):
        raise ValueError(f"image must be >= 32 and batch >= 1, got image={image}, batch={batch}")
    return helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, image, image])


def resnet18(batch: int | str = 1, image: int = 224, classes: int = 1000, seed: int = 0) -> Any:
    """torchvision's ResNet-18 (basic blocks, 1x1 projection shortcuts) as ONNX, opset 17
    (``batch="N"``: a symbolic batch dimension)."""
    g = _Graph(seed)
    y, m = _conv_bn(g, "input", "conv1", 3, 64, 7, 2, 1.0)
    y = g.node("MaxPool", [y], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    m, cin = 5.0 * m, 64  # the max of 9 rectified values: ~5x the mean square (measured)
    for s, cout in enumerate((64, 128, 256, 512), 1):
        for u in range(2):
            stride = 2 if (u == 0 and s > 1) else 1
            name = f"layer{s}.{u}"
            z, mz = _conv_bn(g, y, f"{name}.conv1", cin, cout, 3, stride, m)
            z, mz = _conv_bn(g, z, f"{name}.conv2", cout, cout, 3, 1, mz, act=None,
                             gamma=(0.2, 0.4))
            if stride != 1 or cin != cout:
                short, ms = _conv_bn(g, y, f"{name}.downsample", cin, cout, 1, stride, m,
                                     act=None)
                m = (mz + ms) / 2  # relu of the sum of two zero-mean branches
            else:
                short, m = y, m + mz / 2  # a rectified input plus a small zero-mean branch
            y = g.node("Relu", [g.node("Add", [z, short], f"{name}.add")], f"{name}.relu")
            cin = cout
    y = _classifier(g, y, cin, classes)
    return g.model([_image_input(batch, image)], y, [batch, classes], "resnet18")


_MBV2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
         (6, 160, 3, 2), (6, 320, 1, 1))  # (expansion t, channels c, repeats n, stride s)


def mobilenet_v2(batch: int | str = 1, image: int = 224, classes: int = 1000, seed: int = 0) -> Any:
    """torchvision's MobileNetV2 (width 1.0; inverted residuals, depthwise 3x3, Relu6 as Clip)."""
    g = _Graph(seed)
    y, m = _conv_bn(g, "input", "features.0", 3, 32, 3, 2, 1.0, act="relu6")
    cin, idx = 32, 1
    for t, c, n, s in _MBV2:
        for u in range(n):
            stride = s if u == 0 else 1
            name = f"features.{idx}"
            hidden = cin * t
            z, mz = y, m
            if t != 1:
                z, mz = _conv_bn(g, z, f"{name}.expand", cin, hidden, 1, 1, mz, act="relu6")
            z, mz = _conv_bn(g, z, f"{name}.dw", hidden, hidden, 3, stride, mz, act="relu6",
                             group=hidden)
            z, mz = _conv_bn(g, z, f"{name}.project", hidden, c, 1, 1, mz, act=None,
                             gamma=(0.2, 0.4) if stride == 1 and cin == c else (0.5, 1.5))
            if stride == 1 and cin == c:
                y, m = g.node("Add", [y, z], f"{name}.add"), m + mz
            else:
                y, m = z, mz
            cin, idx = c, idx + 1
    y, m = _conv_bn(g, y, f"features.{idx}", cin, 1280, 1, 1, m, act="relu6")
    y = _classifier(g, y, 1280, classes)
    return g.model([_image_input(batch, image)], y, [batch, classes], "mobilenet_v2")


# ------------------------------------------------------------------------------------------------
# transformer pieces


def _linear(g: _Graph, x: str, name: str, cin: int, cout: int) -> str:
    w = g.he(f"{name}.weight", (cin, cout), cin, gain=1.0)  # stored [in, out] as exporters do
    b = g.uniform(f"{name}.bias", (cout,), -0.1, 0.1)
    return g.node("Add", [g.node("MatMul", [x, w], f"{name}.matmul"), b], f"{name}.add")


def _layer_norm(g: _Graph, x: str, name: str, hidden: int, decomposed: bool) -> str:
    gamma = g.uniform(f"{name}.weight", (hidden,), 0.8, 1.2)
    beta = g.uniform(f"{name}.bias", (hidden,), -0.1, 0.1)
    if not decomposed:
        return g.node("LayerNormalization", [x, gamma, beta], name, axis=-1, epsilon=1e-12)
    # what torch's exporter emits below opset 17
    mean = g.node("ReduceMean", [x], f"{name}.mean", axes=[-1], keepdims=1)
    d = g.node("Sub", [x, mean], f"{name}.sub")
    sq = g.node("Pow", [d, g.const(f"{name}.two", 2.0, np.float32)], f"{name}.pow")
    var = g.node("ReduceMean", [sq], f"{name}.var", axes=[-1], keepdims=1)
    eps = g.const(f"{name}.eps", 1e-12, np.float32)
    std = g.node("Sqrt", [g.node("Add", [var, eps], f"{name}.add_eps")], f"{name}.sqrt")
    y = g.node("Div", [d, std], f"{name}.div")
    return g.node("Add", [g.node("Mul", [y, gamma], f"{name}.mul"), beta], f"{name}.add")


def _gelu(g: _Graph, x: str, name: str) -> str:
    """0.5 * x * (1 + erf(x / sqrt(2))), node for node as torch exports nn.GELU()."""
    e = g.node("Erf", [g.node("Div", [x, g.const(f"{name}.sqrt2", np.sqrt(2.0), np.float32)],
                              f"{name}.div")], f"{name}.erf")
    e = g.node("Add", [e, g.const(f"{name}.one", 1.0, np.float32)], f"{name}.add")
    y = g.node("Mul", [x, e], f"{name}.mul")
    return g.node("Mul", [y, g.const(f"{name}.half", 0.5, np.float32)], f"{name}.mul_half")


def _attention(g: _Graph, x: str, name: str, batch: int | str, seq: int | str, hidden: int,
               heads: int) -> str:
    d = hidden // heads
    # a symbolic (dim_param) batch or sequence: ONNX's 0 copies the input's dimension
    batch, seq = (0 if isinstance(v, str) else v for v in (batch, seq))
    split = g.const(f"{name}.split_shape", [batch, seq, heads, d], np.int64)

    def proj(which: str, perm: list[int]) -> str:
        y = _linear(g, x, f"{name}.{which}", hidden, hidden)
        y = g.node("Reshape", [y, split], f"{name}.{which}.reshape")
        return g.node("Transpose", [y], f"{name}.{which}.transpose", perm=perm)

    q = proj("query", [0, 2, 1, 3])                 # [b, h, s, d]
    k = proj("key", [0, 2, 3, 1])                   # [b, h, d, s]
    v = proj("value", [0, 2, 1, 3])                 # [b, h, s, d]
    scores = g.node("MatMul", [q, k], f"{name}.scores")
    scores = g.node("Div", [scores, g.const(f"{name}.scale", np.sqrt(d), np.float32)],
                    f"{name}.scale")
    probs = g.node("Softmax", [scores], f"{name}.softmax", axis=-1)
    ctx = g.node("MatMul", [probs, v], f"{name}.context")
    ctx = g.node("Transpose", [ctx], f"{name}.context.transpose", perm=[0, 2, 1, 3])
    merge = g.const(f"{name}.merge_shape", [batch, seq, hidden], np.int64)
    return g.node("Reshape", [ctx, merge], f"{name}.context.reshape")


def bert_encoder(layers: int = 4, hidden: int = 256, heads: int = 4, seq: int | str = 128,
                 batch: int | str = 1, vocab: int = 1000, embeddings: bool = True,
                 decomposed_layer_norm: bool = False, seed: int = 0) -> Any:
    """A BERT encoder (post-LN: attention + residual + LN, FFN 4x with GELU + residual + LN).
    A ``str`` batch or seq is a symbolic (``dim_param``) dimension; a symbolic seq needs
    ``embeddings=False`` (the position embeddings are a constant of the sequence length)."""
    from onnx import TensorProto, helper

    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
    if embeddings and isinstance(seq, str):
        raise ValueError("a symbolic seq needs embeddings=False (the position embeddings are "
                         "a constant [1, seq, hidden])")
    g = _Graph(seed)
    if embeddings:
        inp = helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, seq])
        words = g.init("embeddings.word_embeddings.weight",
                       (g.rng.standard_normal((vocab, hidden)) * 0.5).astype(np.float32))
        pos = g.init("embeddings.position_embeddings",
                     (g.rng.standard_normal((1, seq, hidden)) * 0.5).astype(np.float32))
        x = g.node("Gather", [words, "input_ids"], "embeddings.word", axis=0)
        x = g.node("Add", [x, pos], "embeddings.add")
        x = _layer_norm(g, x, "embeddings.LayerNorm", hidden, decomposed_layer_norm)
    else:
        inp = helper.make_tensor_value_info("hidden_states", TensorProto.FLOAT,
                                            [batch, seq, hidden])
        x = "hidden_states"
    for i in range(layers):
        name = f"encoder.layer.{i}"
        a = _attention(g, x, f"{name}.attention", batch, seq, hidden, heads)
        a = _linear(g, a, f"{name}.attention.output.dense", hidden, hidden)
        x = _layer_norm(g, g.node("Add", [a, x], f"{name}.attention.residual"),
                        f"{name}.attention.output.LayerNorm", hidden, decomposed_layer_norm)
        f = _linear(g, x, f"{name}.intermediate.dense", hidden, 4 * hidden)
        f = _gelu(g, f, f"{name}.intermediate.gelu")
        f = _linear(g, f, f"{name}.output.dense", 4 * hidden, hidden)
        x = _layer_norm(g, g.node("Add", [f, x], f"{name}.output.residual"),
                        f"{name}.output.LayerNorm", hidden, decomposed_layer_norm)
    return g.model([inp], x, [batch, seq, hidden], "bert_encoder")


def recurrent(kind: str = "LSTM", seq: int | str = 5, batch: int = 2, inputs: int = 6,
              hidden: int = 13, direction: str = "forward", states: bool = False,
              layers: int = 1, seed: int = 0, **attrs: Any) -> Any:
    """``layers`` stacked ONNX ``LSTM`` / ``GRU`` nodes (``kind``; opset 14, time-major input
    ``X`` [seq, batch, inputs], weights ~ N(0, 1/fan_in), biases given): layer k's ``Y`` (its
    direction axis folded into the features: Transpose + Reshape) is layer k+1's input. With
    ``states`` each layer's initial ``h``/``c`` [dirs, batch, hidden] are graph inputs
    ``h{k}``/``c{k}``. Outputs: every layer's ``Y_h`` (and ``Y_c``), then the last ``Y``
    folded [seq, batch, dirs * hidden]. ``attrs``: more node attributes
    (``linear_before_reset``)."""
    from onnx import TensorProto, helper

    if kind not in ("LSTM", "GRU"):
        raise ValueError(f"kind must be 'LSTM' or 'GRU', got {kind!r}")
    G, dirs = {"GRU": 3, "LSTM": 4}[kind], 2 if direction == "bidirectional" else 1
    g = _Graph(seed)
    f32 = TensorProto.FLOAT
    ins = [helper.make_tensor_value_info("X", f32, [seq, batch, inputs])]
    outs: list[str] = []
    x, feat = "X", inputs
    for k in range(layers):
        w = g.he(f"W{k}", (dirs, G * hidden, feat), feat, 1.0)
        r = g.he(f"R{k}", (dirs, G * hidden, hidden), hidden, 1.0)
        b = g.uniform(f"B{k}", (dirs, 2 * G * hidden), -0.5, 0.5)
        names = [x, w, r, b, ""]
        if states:
            for nm in (f"h{k}", f"c{k}") if kind == "LSTM" else (f"h{k}",):
                names.append(nm)
                ins.append(helper.make_tensor_value_info(nm, f32, [dirs, batch, hidden]))
        y = g.node(kind, names, f"{kind.lower()}{k}", n_out=3 if kind == "LSTM" else 2,
                   hidden_size=hidden, direction=direction, **attrs)
        outs += y[1:]
        t = g.node("Transpose", [y[0]], f"fold{k}.transpose", perm=[0, 2, 1, 3])
        x = g.node("Reshape", [t, g.const(f"fold{k}.shape", [-1, batch, dirs * hidden],
                                          np.int64)], f"fold{k}")
        feat = dirs * hidden
    outs.append(x)
    graph = helper.make_graph(g.nodes, f"{kind.lower()}_layers", ins,
                              [helper.make_tensor_value_info(o, f32, None) for o in outs],
                              initializer=g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)],
                          producer_name="tvmpy")
    m.ir_version = IR_VERSION
    return m


MODELS = {"resnet18": resnet18, "mobilenet_v2": mobilenet_v2, "bert_encoder": bert_encoder}


def input_feeds(model: Any, seed: int = 1, dims: dict[str, int] | None = None
                ) -> dict[str, np.ndarray]:
    """Random inputs for every graph input that is not an initializer (floats ~ N(0, 1), integer
    inputs uniform in [0, 100) so they are valid token ids for any vocabulary >= 100);
    ``dims`` gives the symbolic (``dim_param``) dimensions' sizes."""
    from onnx import helper

    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = [(dims or {}).get(d.dim_param, 0) if d.dim_param else d.dim_value
                 for d in tt.shape.dim]
        if any(s <= 0 for s in shape):
            raise ValueError(f"input {vi.name!r} has a symbolic shape {shape}: give it explicitly")
        dt = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
        if dt.kind in "iu":
            feeds[vi.name] = rng.integers(0, 100, size=shape).astype(dt)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dt)
    return feeds
