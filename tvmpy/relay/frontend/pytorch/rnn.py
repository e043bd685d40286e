"""``aten.lstm.input`` / ``aten.gru.input`` (``torch.nn.LSTM`` / ``GRU`` as exported): each
layer through the ONNX importer's recurrence (``onnx/rnn.py``: the input projection of all time
steps as one dense, one recurrent dense per step, the gate kernels shared by every step), with
the weights put in ONNX's gate order. Without this converter torch decomposes the op into
per-step ATen calls: a split kernel more per step and no shared structure.

Eval mode only (``train=False``; dropout between layers is then the identity); ``hx`` as given
(torch.export always passes the initial states), ``batch_first`` and ``bidirectional``. The
sequence length and the batch may be symbolic.

A dynamic sequence length needs ``symbolic_rnn_export()`` around ``torch.export.export``:
torch (2.13) computes the output shapes of ``aten.lstm.input`` / ``aten.gru.input`` while
tracing by running their Python decompositions (``torch/_decomp/decompositions.py``:
``lstm_impl`` / ``gru_impl``, registered with ``py_impl(CompositeImplicitAutograd)`` and
``py_impl(Autograd)``), whose ``one_layer_lstm`` / ``one_layer_rnn`` iterate over the time axis
(``for inp in precomputed_input``: ``Tensor.__iter__`` -> ``unbind`` guards the length to the
example's, "Constraints violated (seq)! ... specialized it to be a constant"). No export option
avoids it (``strict=False``, ``Dim.AUTO``: the sequence is silently specialized). The graph keeps
the ``aten.lstm.input`` node either way; only its shape computation unrolls.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ...expr import RelayExpr
from ...op import tensor, transform
from ..onnx.rnn import recurrent_layer
from .common import Args, ConvertContext, Output, converter, fail, val

if TYPE_CHECKING:
    from torch.fx import Node

# torch's gates -> ONNX's: LSTM (i, f, g, o) -> (i, o, f, c); GRU (r, z, n) -> (z, r, h)
_ORDER = {"LSTM": (0, 3, 1, 2), "GRU": (1, 0, 2)}


def _gates(w: RelayExpr, kind: str, H: int) -> RelayExpr:
    """Rows of ``w`` (gates x H along axis 0) in ONNX's gate order."""
    parts = [transform.strided_slice(w, [k * H], [(k + 1) * H], axes=[0]) for k in _ORDER[kind]]
    return transform.concatenate(parts, 0)


@converter("aten.lstm.input", "aten.gru.input")
def _recurrent(ctx: ConvertContext, node: Node, args: Args) -> Output:
    kind = "LSTM" if "lstm" in str(node.target) else "GRU"
    if args.get("train"):
        raise fail(node, "only eval mode is supported (train=True)")
    x: Any = args["input"]
    hx = list(args["hx"]) if kind == "LSTM" else [args["hx"]]  # GRU: one tensor
    params = list(args["params"])
    layers, dirs = int(args["num_layers"]), 2 if args["bidirectional"] else 1
    per = 4 if args["has_biases"] else 2
    if len(params) != layers * dirs * per:
        raise fail(node, f"{len(params)} weights for {layers} layers x {dirs} directions")
    H = int(val(node)[1].shape[-1])  # hy: (layers * dirs, N, H)
    if args["batch_first"]:
        x = transform.transpose(x, [1, 0, 2])
    h_all = hx[0]
    c_all = hx[1] if kind == "LSTM" else None
    hs, cs = [], []
    for layer in range(layers):
        W, R, B = [], [], []
        for d in range(dirs):
            p = params[(layer * dirs + d) * per:(layer * dirs + d + 1) * per]
            W.append(_gates(p[0], kind, H))
            R.append(_gates(p[1], kind, H))
            if per == 4:
                B.append(transform.concatenate([_gates(p[2], kind, H), _gates(p[3], kind, H)], 0))
        sl = [layer * dirs, (layer + 1) * dirs]
        h0 = transform.strided_slice(h_all, sl[:1], sl[1:], axes=[0])
        c0 = None if c_all is None else transform.strided_slice(c_all, sl[:1], sl[1:], axes=[0])
        outs = recurrent_layer(kind, x, tensor.stack(W, 0), tensor.stack(R, 0),
                               tensor.stack(B, 0) if B else None, h0, c0, H,
                               "bidirectional" if dirs == 2 else "forward",
                               linear_before_reset=1)
        y = outs[0]                                                   # (T, dirs, N, H)
        # (T, N, dirs * H): 0 copies T and N, which may be symbolic
        x = transform.reshape(transform.transpose(y, [0, 2, 1, 3]), (0, 0, dirs * H))
        hs.append(outs[1])
        if kind == "LSTM":
            cs.append(outs[2])
    out = transform.transpose(x, [1, 0, 2]) if args["batch_first"] else x
    res = [out, transform.concatenate(hs, 0)]
    if kind == "LSTM":
        res.append(transform.concatenate(cs, 0))
    return res


def _output_shapes(input: Any, hx: Any, bidirectional: bool, batch_first: bool,
                   kind: str) -> Any:
    """Empty tensors shaped as ``aten.<kind>.input``'s outputs (no loop over time)."""
    h = hx[0] if kind == "LSTM" else hx
    T, N = (input.shape[1], input.shape[0]) if batch_first else input.shape[:2]
    width = (2 if bidirectional else 1) * h.shape[-1]
    out = input.new_empty((N, T, width) if batch_first else (T, N, width))
    if kind == "LSTM":
        return out, hx[0].new_empty(hx[0].shape), hx[1].new_empty(hx[1].shape)
    return out, hx.new_empty(hx.shape)


def _shaping_kernel(orig: Any, kind: str, fake: type) -> Any:
    names = ("input", "hx", "params", "has_biases", "num_layers", "dropout", "train",
             "bidirectional", "batch_first")

    def kernel(*args: Any, **kwargs: Any) -> Any:
        a = dict(zip(names, args), **kwargs)
        if not isinstance(a["input"], fake):
            return orig(*args, **kwargs)
        return _output_shapes(a["input"], a["hx"], bool(a["bidirectional"]),
                              bool(a["batch_first"]), kind)

    return kernel


@contextmanager
def symbolic_rnn_export() -> Iterator[None]:
    """Within this block ``torch.export.export`` keeps the sequence length of ``nn.LSTM`` /
    ``nn.GRU`` symbolic (see the module doc for why it does not otherwise): the Python kernels
    torch traces ``aten.lstm.input`` / ``aten.gru.input`` with are replaced by ones that, on
    fake tensors, only shape the outputs; real tensors still run torch's own kernels."""
    import torch
    from torch._C import DispatchKey
    from torch._subclasses.fake_tensor import FakeTensor

    keys = (DispatchKey.CompositeImplicitAutograd, DispatchKey.Autograd)
    saved: dict = {}
    ops = (("LSTM", torch.ops.aten.lstm.input), ("GRU", torch.ops.aten.gru.input))
    for _, op in ops:  # all checked before any is replaced: a refusal leaves torch as it was
        kernels = getattr(op, "py_kernels", None)
        if not isinstance(kernels, dict) or any(k not in kernels for k in keys):
            raise RuntimeError(f"symbolic_rnn_export: {op} has no Python kernels to replace in "
                               f"torch {torch.__version__}")
    for kind, op in ops:
        kernels = op.py_kernels
        for k in keys:
            saved[op, k] = kernels[k]
            kernels[k] = _shaping_kernel(kernels[k], kind, FakeTensor)
        op._dispatch_cache.clear()
    try:
        yield
    finally:
        for (op, k), orig in saved.items():
            op.py_kernels[k] = orig
            op._dispatch_cache.clear()
