"""``nn.rnn_scan`` expanded into the per-step relay ops it replaced (for targets without an
``rnn_scan`` kernel: GPUs). The old frontend's unrolled recurrence: per step the recurrent
``nn.dense``, the gate slices of the input projection (one ``take`` of a 1-element constant
index, so every step's gate kernel is the same compiled kernel) and the gate equations; the
outputs stacked. The padded gate columns of ``xw`` / ``rt`` are sliced away first (constant
folded for constant weights). Needs a static sequence length (unrolled) and batch."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...topi.rnn import GATES, workspace_shapes
from ..expr import RelayExpr, Tuple, const
from . import nn, tensor, transform
from .rnn import padded_hidden

__all__ = ["expand_rnn_scan"]


def _dims(t: Any) -> list:
    return [int(d) if isinstance(d, (int, np.integer)) else getattr(d, "value", d)
            for d in t.shape]


def expand_rnn_scan(attrs: Any, args: list[RelayExpr], arg_types: list[Any]) -> RelayExpr:
    """The tuple ``nn.rnn_scan(*args)`` computes, as per-step ops (see the module doc)."""
    cell, H = attrs.cell, int(attrs.hidden)
    G, hp = GATES[cell], padded_hidden(H)
    lbr = bool(attrs.linear_before_reset)
    T, N, _ = _dims(arg_types[0])
    if not isinstance(T, int) or not isinstance(N, int):
        raise ValueError(
            f"nn.rnn_scan ({cell}): a sequence length or batch known only at run time "
            f"(xw {tuple(arg_types[0].shape)}) has no implementation on this target (no "
            "rnn_scan kernel: the recurrence is unrolled over a static sequence length); "
            "export the model with a static sequence length, or build it for an llvm target")
    xw, rt, h0, aux = args
    dt = arg_types[0].dtype

    def unpad(x: RelayExpr, axis: int, rest: list[int]) -> RelayExpr:
        """``x`` with its gate-major axis ``axis`` (G blocks of hp) split into (G, H): the
        padding columns of each gate dropped."""
        shape = rest[:axis] + [G, hp] + rest[axis:]
        return transform.strided_slice(transform.reshape(x, shape), [0], [H], axes=[axis + 1])

    w = transform.reshape(unpad(transform.transpose(rt, [1, 0]), 0, [H]), [G * H, H])
    xg = transform.reshape(transform.transpose(unpad(xw, 2, [T, N]), [2, 0, 1, 3]),
                           [G * T, N, H])                               # (G*T, N, H)

    def gate(v: RelayExpr, k: int) -> RelayExpr:
        return transform.strided_slice(v, [k * H], [(k + 1) * H], axes=[1])

    def x_at(k: int, t: int) -> RelayExpr:  # a 1-element index array: a parameter, one kernel
        return transform.squeeze(transform.take(xg, const(np.array([k * T + t], np.int32)),
                                                axis=0), [0])

    one = const(np.asarray(1, dtype=dt))
    h, c = h0, (aux if cell == "LSTM" else None)
    ys: list[RelayExpr] = [h0] * T
    for t in (range(T - 1, -1, -1) if attrs.reverse else range(T)):
        v = nn.dense(h, w)                                              # (N, G*H)
        if cell == "LSTM":
            gi, go, gf, gc = (tensor.add(x_at(k, t), gate(v, k)) for k in range(4))
            c = tensor.add(tensor.multiply(tensor.sigmoid(gf), c),
                           tensor.multiply(tensor.sigmoid(gi), tensor.tanh(gc)))
            h = tensor.multiply(tensor.sigmoid(go), tensor.tanh(c))
        else:
            z = tensor.sigmoid(tensor.add(x_at(0, t), gate(v, 0)))
            r = tensor.sigmoid(tensor.add(x_at(1, t), gate(v, 1)))
            if lbr:
                rbh = transform.strided_slice(aux, [0], [H], axes=[0])
                hh = tensor.add(gate(v, 2), rbh)
                hh = tensor.tanh(tensor.add(x_at(2, t), tensor.multiply(r, hh)))
            else:
                rh = nn.dense(tensor.multiply(r, h), transform.strided_slice(
                    w, [2 * H], [3 * H], axes=[0]))
                hh = tensor.tanh(tensor.add(x_at(2, t), rh))
            h = tensor.add(tensor.multiply(tensor.subtract(one, z), hh), tensor.multiply(z, h))
        ys[t] = h
    y = tensor.stack(ys, 0) if T else const(np.zeros((0, N, H), dtype=dt))
    outs: list[RelayExpr] = [y, h] + ([c] if c is not None else [])
    # the kernel's workspaces (never read after the call): zeros of their shapes
    outs += [const(np.zeros(s, dtype=dt)) for s in workspace_shapes(cell, lbr, N, hp)]
    return Tuple(outs)
