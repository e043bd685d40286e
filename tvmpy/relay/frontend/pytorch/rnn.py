"""``aten.lstm.input`` / ``aten.gru.input`` (``torch.nn.LSTM`` / ``GRU`` as exported): each
layer through the ONNX importer's recurrence (``onnx/rnn.py``: the input projection of all time
steps as one dense, one recurrent dense per step, the gate kernels shared by every step), with
the weights put in ONNX's gate order. Without this converter torch decomposes the op into
per-step ATen calls: a split kernel more per step and no shared structure.

Eval mode only (``train=False``; dropout between layers is then the identity); ``hx`` as given
(torch.export always passes the initial states), ``batch_first`` and ``bidirectional``.
"""

from __future__ import annotations

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
        T, _, N, _ = (int(v) for v in _shape(y))
        x = transform.reshape(transform.transpose(y, [0, 2, 1, 3]), (T, N, dirs * H))
        hs.append(outs[1])
        if kind == "LSTM":
            cs.append(outs[2])
    out = transform.transpose(x, [1, 0, 2]) if args["batch_first"] else x
    res = [out, transform.concatenate(hs, 0)]
    if kind == "LSTM":
        res.append(transform.concatenate(cs, 0))
    return res


def _shape(e: RelayExpr) -> list[Any]:
    from ...type_infer import infer_type

    return list(infer_type(e).checked_type.shape)
