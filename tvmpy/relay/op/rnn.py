"""``nn.rnn_scan``: the recurrence of an LSTM or GRU layer (one direction) as one operator.

The frontends compute the input projection of every step as one dense first; ``rnn_scan`` runs
the time loop (``topi.rnn``: one kernel, a serial loop over time holding a parallel loop over
blocks of hidden units). Its arguments (``H`` the hidden size, ``Hp`` it padded to a multiple
of 16, ``G`` the gates: LSTM 4 (i, o, f, c), GRU 3 (z, r, h)):

- ``xw`` (T, N, G*Hp): the projection plus the biases that add outside the recurrence, each
  gate's columns padded with zeros to ``Hp``;
- ``rt`` (H, G*Hp): the recurrent weight transposed, padded the same way; or, as the x86
  AlterOpLayout rewrite gives the kernel (``relay/op/strategy/rnn.py``), packed by blocks of
  ``ub`` hidden units (``topi.rnn.pack_rt_np``: (Hp/ub, H, G*ub));
- ``h0`` (N, H); ``aux``: LSTM ``c0`` (N, H), GRU the candidate gate's recurrent bias (Hp,)
  (applied inside ``r * (h R_h^T + Rb_h)`` where ``linear_before_reset``, else zeros).

Result: a tuple ``(Y (T, N, H), h_T (N, H)[, c_T (N, H)], workspaces...)``; ``T`` may be a
run-time size (0 included: the states are then the initial ones). ``rnn_scan_np`` is the numpy
meaning (the interpreter's ``FNumpy``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...topi.rnn import GATES, PAD, unpack_rt_np, workspace_shapes
from ..expr import RelayExpr
from ..ty import TensorType, TupleType, Type
from ._rel import fail, shape_str, tensor_arg
from .registry import REQUIRED, OpPattern, make_call, register_op, register_op_attr
from .shape_func import register_shape_func

__all__ = ["rnn_scan", "rnn_scan_np", "padded_hidden"]


def padded_hidden(hidden: int) -> int:
    """``Hp``: the hidden size rounded up to a multiple of 16 (whole vectors per gate)."""
    return -(-int(hidden) // PAD) * PAD


def _out_shapes(attrs: Any, T: Any, N: Any) -> list[tuple]:
    H, cell = int(attrs.hidden), attrs.cell
    shapes: list[tuple] = [(T, N, H), (N, H)] + ([(N, H)] if cell == "LSTM" else [])
    return shapes + workspace_shapes(cell, bool(attrs.linear_before_reset), N,
                                     padded_hidden(H))


def _rnn_scan_rel(arg_types: list[Type], attrs: Any) -> Type:
    cell = attrs.cell
    if cell not in GATES:
        fail(f"rnn_scan: cell must be 'LSTM' or 'GRU', got {cell!r}")
    G, H = GATES[cell], int(attrs.hidden)
    hp = padded_hidden(H)
    xw = tensor_arg(arg_types[0], "rnn_scan: xw")
    rt = tensor_arg(arg_types[1], "rnn_scan: rt")
    h0 = tensor_arg(arg_types[2], "rnn_scan: h0")
    aux = tensor_arg(arg_types[3], "rnn_scan: aux")
    if len(xw.shape) != 3:
        fail(f"rnn_scan: xw must be (T, N, {G}*{hp}), got {shape_str(xw.shape)}")
    T, N, cols = xw.shape

    def static(d: Any, want: int) -> bool:  # equal, or a size known only at run time
        return d == want if isinstance(d, int) else True

    if not static(cols, G * hp):
        fail(f"rnn_scan: xw must have {G}*{hp} columns (hidden {H} padded), got "
             f"{shape_str(xw.shape)}")
    packed = len(rt.shape) == 3 and all(isinstance(d, int) for d in rt.shape) and \
        rt.shape[1] == H and rt.shape[2] % G == 0 and rt.shape[0] * rt.shape[2] == G * hp
    if tuple(rt.shape) != (H, G * hp) and not packed:
        fail(f"rnn_scan: rt must be ({H}, {G * hp}) or packed (Hp/ub, {H}, {G}*ub), got "
             f"{shape_str(rt.shape)}")
    if len(h0.shape) != 2 or not static(h0.shape[1], H):
        fail(f"rnn_scan: h0 must be (N, {H}), got {shape_str(h0.shape)}")
    want_aux = "(N, H)" if cell == "LSTM" else f"({hp},)"
    if (cell == "LSTM" and (len(aux.shape) != 2 or not static(aux.shape[1], H))) or \
            (cell == "GRU" and (len(aux.shape) != 1 or not static(aux.shape[0], hp))):
        fail(f"rnn_scan: aux must be {want_aux}, got {shape_str(aux.shape)}")
    for what, t in (("rt", rt), ("h0", h0), ("aux", aux)):
        if t.dtype != xw.dtype:
            fail(f"rnn_scan: {what} is {t.dtype}, xw {xw.dtype}")
    if xw.dtype != "float32":
        fail(f"rnn_scan: only float32 is supported, got {xw.dtype}")
    return TupleType([TensorType(s, xw.dtype) for s in _out_shapes(attrs, T, N)])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def rnn_scan_np(attrs: Any, xw: np.ndarray, rt: np.ndarray, h0: np.ndarray,
                aux: np.ndarray) -> list[np.ndarray]:
    """The numpy meaning of ``rnn_scan`` (float64 inside; workspaces returned as zeros)."""
    cell, H = attrs.cell, int(attrs.hidden)
    G, hp = GATES[cell], padded_hidden(H)
    T, N = xw.shape[:2]
    x = xw.astype(np.float64).reshape(T, N, G, hp)[..., :H]
    if rt.ndim == 3:
        rt = unpack_rt_np(rt, cell)
    r = rt.astype(np.float64).reshape(H, G, hp)[..., :H]
    h = h0.astype(np.float64)
    c = aux.astype(np.float64) if cell == "LSTM" else None
    y = np.zeros((T, N, H))
    steps = range(T - 1, -1, -1) if attrs.reverse else range(T)
    for t in steps:
        if cell == "LSTM":
            g = x[t] + np.einsum("nk,kgh->ngh", h, r)
            i, o, f, cc = _sigmoid(g[:, 0]), _sigmoid(g[:, 1]), _sigmoid(g[:, 2]), np.tanh(g[:, 3])
            c = f * c + i * cc
            h = o * np.tanh(c)
        else:
            g = np.einsum("nk,kgh->ngh", h, r)
            z, rr = _sigmoid(x[t, :, 0] + g[:, 0]), _sigmoid(x[t, :, 1] + g[:, 1])
            if attrs.linear_before_reset:
                hh = np.tanh(x[t, :, 2] + rr * (g[:, 2] + aux[:H]))
            else:
                hh = np.tanh(x[t, :, 2] + (rr * h) @ r[:, 2])
            h = (1 - z) * hh + z * h
        y[t] = h
    dt = xw.dtype
    outs = [y.astype(dt), h.astype(dt)] + ([c.astype(dt)] if c is not None else [])
    return outs + [np.zeros(s, dt) for s in workspace_shapes(
        cell, bool(attrs.linear_before_reset), N, hp)]


register_op("nn.rnn_scan", _rnn_scan_rel, OpPattern.OPAQUE, 4,
            {"cell": REQUIRED, "hidden": REQUIRED, "reverse": False,
             "linear_before_reset": True})
register_op_attr("nn.rnn_scan", "FNumpy", lambda attrs, ins, t: rnn_scan_np(attrs, *ins))
# the trailing outputs that are the kernel's scratch memory (their values are undefined: no
# consumer reads them, and a check against the numpy meaning skips them)
register_op_attr("nn.rnn_scan", "FWorkspaceOutputs", lambda attrs: len(workspace_shapes(
    attrs.cell, bool(attrs.linear_before_reset), 1, PAD)))
register_shape_func("nn.rnn_scan", lambda attrs, shapes: _out_shapes(
    attrs, shapes[0][0], shapes[0][1]))


def rnn_scan(xw: RelayExpr, rt: RelayExpr, h0: RelayExpr, aux: RelayExpr, cell: str,
             hidden: int, reverse: bool = False, linear_before_reset: bool = True) -> RelayExpr:
    """The recurrence of one LSTM/GRU direction (see the module doc); a tuple."""
    if cell not in GATES:
        raise ValueError(f"rnn_scan: cell must be 'LSTM' or 'GRU', got {cell!r}")
    return make_call("nn.rnn_scan", [xw, rt, h0, aux],
                     {"cell": cell, "hidden": int(hidden), "reverse": bool(reverse),
                      "linear_before_reset": bool(linear_before_reset)})
