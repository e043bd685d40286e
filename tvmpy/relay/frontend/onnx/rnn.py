"""ONNX RNN, GRU and LSTM. An LSTM or GRU with the default activations (no clip, peepholes,
``input_forget`` or ``sequence_lens``) is, per direction, the input projection of all steps as
one dense and ``nn.rnn_scan`` (relay/op/rnn.py): the whole recurrence one kernel, for a static
or a run-time sequence length. The other cases are unrolled over a static sequence length; a
sequence length known only at run time (a symbolic ``seq_len`` dim) runs as a loop over the
time steps (a recursive function, ``control.while_loop``): one import serves every length.

The input projection of every time step is one dense; each step then adds the recurrent dense
and applies the gate equations of the ONNX definitions (gate orders: GRU z, r, h; LSTM i, o, f,
c; peepholes i, o, f). ``direction`` forward / reverse / bidirectional, ``layout`` 0 / 1,
``clip``, ``activations`` with ``activation_alpha`` / ``activation_beta``, GRU
``linear_before_reset``, LSTM ``input_forget`` and peepholes. ``sequence_lens`` (forward
direction, or all lengths equal to the sequence): steps past a batch entry's length leave its
state unchanged and output zeros.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...expr import RelayExpr, const
from ...op import nn, tensor, transform
from ..common import reshape_to, softplus
from .context import ImportContext, dtype_of, shape_of
from .registry import Attrs, Converter, Inputs, Names, Output, register


def _activation(ctx: ImportContext, name: str, alpha: float | None, beta: float | None, dt: str
                ) -> Callable[[RelayExpr], RelayExpr]:
    f = lambda v: const(np.asarray(v, dtype=dt))  # noqa: E731
    name = name.lower()
    if name == "sigmoid":
        return tensor.sigmoid
    if name == "tanh":
        return tensor.tanh
    if name == "relu":
        return nn.relu
    if name == "affine":
        return lambda x: tensor.add(tensor.multiply(x, f(alpha)), f(beta))
    if name == "leakyrelu":
        a = 0.01 if alpha is None else alpha
        return lambda x: tensor.where(tensor.less(x, f(0)), tensor.multiply(x, f(a)), x)
    if name == "thresholdedrelu":
        a = 1.0 if alpha is None else alpha
        return lambda x: tensor.where(tensor.greater(x, f(a)), x, f(0))
    if name == "scaledtanh":
        return lambda x: tensor.multiply(f(alpha), tensor.tanh(tensor.multiply(x, f(beta))))
    if name == "hardsigmoid":
        a, b = (0.2 if alpha is None else alpha), (0.5 if beta is None else beta)
        return lambda x: tensor.clip(tensor.add(tensor.multiply(x, f(a)), f(b)), 0.0, 1.0)
    if name == "elu":
        a = 1.0 if alpha is None else alpha
        return lambda x: tensor.where(tensor.less(x, f(0)), tensor.multiply(
            f(a), tensor.subtract(tensor.exp(x), f(1))), x)
    if name == "softsign":
        return lambda x: tensor.divide(x, tensor.add(tensor.abs(x), f(1)))
    if name == "softplus":
        return lambda x: softplus(x, dt)
    raise ctx.fail(f"activation {name!r} is not supported")


def _activations(ctx: ImportContext, attrs: Attrs, per_dir: int, dirs: int,
                 defaults: list[str], dt: str) -> list[list[Callable]]:
    names = [v.decode() if isinstance(v, bytes) else v for v in attrs.get("activations", [])]
    if not names:
        names = defaults * dirs
    if len(names) != per_dir * dirs:
        raise ctx.fail(f"activations {names}: expected {per_dir * dirs}")
    alphas = list(attrs.get("activation_alpha", []))
    betas = list(attrs.get("activation_beta", []))
    out = []
    for d in range(dirs):
        fns = []
        for k in range(per_dir):
            j = d * per_dir + k
            fns.append(_activation(ctx, names[j], alphas[j] if j < len(alphas) else None,
                                   betas[j] if j < len(betas) else None, dt))
        out.append(fns)
    return out


def _slice(x: RelayExpr, axis: int, lo: int, hi: int) -> RelayExpr:
    return transform.strided_slice(x, [lo], [hi], axes=[axis])


def _take0(x: RelayExpr, k: int) -> RelayExpr:
    """x[k] of a leading axis, the axis dropped (a take: the axis may be a run-time size,
    which strided_slice cannot lower)."""
    return transform.take(x, const(np.int64(k)), axis=0)


def _rnn(kind: str) -> Converter:
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    n_act = {"RNN": 1, "GRU": 2, "LSTM": 3}[kind]
    default_act = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"],
                   "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[kind]

    def convert(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
        inputs = list(inputs) + [None] * (8 - len(inputs))
        X, W, R, B, lens, h0 = inputs[:6]
        c0 = inputs[6] if kind == "LSTM" else None
        P = inputs[7] if kind == "LSTM" else None
        dt = dtype_of(X)
        direction = attrs.get("direction", "forward")
        direction = direction.decode() if isinstance(direction, bytes) else direction
        dirs = 2 if direction == "bidirectional" else 1
        H = int(attrs["hidden_size"]) if "hidden_size" in attrs else shape_of(R)[-1]
        layout = int(attrs.get("layout", 0))
        if layout:
            X = transform.transpose(X, [1, 0, 2])
            h0 = None if h0 is None else transform.transpose(h0, [1, 0, 2])
            c0 = None if c0 is None else transform.transpose(c0, [1, 0, 2])
        T, N, _ = shape_of(X)
        dynamic = not isinstance(T, int)
        clip = attrs.get("clip")
        acts = _activations(ctx, attrs, n_act, dirs, default_act, dt)
        mask = None
        if lens is not None:
            known = ctx.values.get(names[4])
            if known is not None and not dynamic and np.all(np.asarray(known) == T):
                lens = None
            elif direction != "forward":
                raise ctx.fail("sequence_lens with a reverse direction is not supported")
            else:
                lens = transform.cast(lens, "int32")
        zero = const(np.zeros((N, H), dtype=dt)) if isinstance(N, int) else None
        ys, hs, cs = [], [], []
        scan = _scan_applies(kind, attrs, names_of(attrs, dirs, n_act, default_act),
                             clip, P, lens, dt)
        for d in range(dirs):
            rev = direction == "reverse" or d == 1
            w, r = _take0(W, d), _take0(R, d)
            if scan:
                y, h, cell = _scan_direction(kind, X, w, r, _take0(B, d) if B is not None
                                             else None, _take0(h0, d) if h0 is not None else None,
                                             _take0(c0, d) if c0 is not None else None, H, rev,
                                             bool(attrs.get("linear_before_reset", 0)), dt)
                ys.append(y)
                hs.append(h)
                cs.append(cell)
                continue
            if dynamic:
                y, h, cell = _time_loop(ctx, kind, attrs, X, w, r, _take0(B, d) if B is not None
                                        else None, h0, c0, P, lens, d, gates, H, acts[d], clip,
                                        dt, rev, zero)
                ys.append(y)
                hs.append(h)
                cs.append(cell)
                continue
            # -1: the batch may be symbolic (the rows are T*N)
            xw = nn.dense(reshape_to(X, [-1, shape_of(X)[2]]), w)   # (T*N, G*H)
            if B is not None:
                b = _take0(B, d)
                wb, rb = _slice(b, 0, 0, gates * H), _slice(b, 0, gates * H, 2 * gates * H)
            else:
                wb = rb = None
            if wb is not None:  # GRU adds the recurrent bias inside the step (reset gate)
                xw = tensor.add(xw, wb if kind == "GRU" else tensor.add(wb, rb))
            xw = reshape_to(xw, [T, -1, gates * H])
            xwg = reshape_to(transform.transpose(reshape_to(xw, [T, -1, gates, H]), [2, 0, 1, 3]),
                             [gates * T, -1, H])                    # (G*T, N, H)
            if zero is None:  # a batch size known only at run time
                zero = tensor.zeros_like(_take0(xwg, 0))
            h = _take0(h0, d) if h0 is not None else zero
            cell = (_take0(c0, d) if c0 is not None else zero) if kind == "LSTM" else None
            p = _take0(P, d) if P is not None else None
            outs: list[RelayExpr] = [zero] * T
            for t in (range(T - 1, -1, -1) if rev else range(T)):
                # one row of xwg per gate, picked by a run-time index: fuses into the step's
                # gate kernels, which stay the same kernel in every step (a slice at offset t
                # would compile one kernel per step; xw[t] then its gates, a copy per step)
                xt = [transform.squeeze(transform.take(
                    xwg, const(np.array([k * T + t], np.int32)), axis=0), [0])
                    for k in range(gates)]  # (a 1-element index: a parameter, not a literal)
                if lens is not None:
                    mask = reshape_to(tensor.less(const(np.int32(t)), lens), [-1, 1])
                h_new, c_new = _step(kind, attrs, ctx, xt, h, cell, r, rb, p, H, acts[d], clip, dt)
                if mask is not None:
                    h_new = tensor.where(mask, h_new, h)
                    if c_new is not None:
                        c_new = tensor.where(mask, c_new, cell)
                    outs[t] = tensor.where(mask, h_new, zero)
                else:
                    outs[t] = h_new
                h, cell = h_new, c_new
            ys.append(tensor.stack(outs, 0))                     # (T, N, H)
            hs.append(h)
            cs.append(cell)
        Y = tensor.stack(ys, 1)                                  # (T, dirs, N, H)
        Yh = tensor.stack(hs, 0)                                 # (dirs, N, H)
        Yc = tensor.stack(cs, 0) if kind == "LSTM" else None
        if layout:
            Y = transform.transpose(Y, [2, 0, 1, 3])
            Yh = transform.transpose(Yh, [1, 0, 2])
            Yc = transform.transpose(Yc, [1, 0, 2]) if Yc is not None else None
        return [Y, Yh] + ([Yc] if kind == "LSTM" else [])

    return convert


def names_of(attrs: Attrs, dirs: int, per_dir: int, defaults: list[str]) -> list[str]:
    """The activation names of every direction, lower case (the defaults where none given)."""
    names = [v.decode() if isinstance(v, bytes) else v for v in attrs.get("activations", [])]
    return [n.lower() for n in (names or defaults * dirs)]


def _scan_applies(kind: str, attrs: Attrs, names: list[str], clip: Any, P: Any,
                  lens: Any, dt: str) -> bool:
    """Whether the layer runs as ``nn.rnn_scan`` (one kernel for the whole recurrence): LSTM
    or GRU with the default activations, float32, no clip, peepholes, coupled input-forget
    gate or per-row sequence lengths (those unroll, or loop, step by step)."""
    default = {"LSTM": ["sigmoid", "tanh", "tanh"], "GRU": ["sigmoid", "tanh"]}.get(kind)
    if default is None or dt != "float32" or clip is not None or P is not None \
            or lens is not None or attrs.get("input_forget", 0):
        return False
    if attrs.get("activation_alpha") or attrs.get("activation_beta"):
        return False
    return all(names[k] == default[k % len(default)] for k in range(len(names)))


def _pad_gates(x: RelayExpr, gates: int, H: int, hp: int) -> RelayExpr:
    """Each of the ``gates`` blocks of ``H`` along axis 0 zero-padded to ``hp``."""
    if hp == H:
        return x
    shape = shape_of(x)
    g = reshape_to(x, [gates, H] + list(shape[1:]))
    pad = [(0, 0), (0, hp - H)] + [(0, 0)] * (len(shape) - 1)
    return reshape_to(nn.pad(g, pad), [gates * hp] + list(shape[1:]))


def _scan_direction(kind: str, X: RelayExpr, w: RelayExpr, r: RelayExpr, b: RelayExpr | None,
                    h0: RelayExpr | None, c0: RelayExpr | None, H: int, rev: bool, lbr: bool,
                    dt: str) -> tuple[RelayExpr, RelayExpr, RelayExpr | None]:
    """One direction as ``nn.rnn_scan``: the input projection of all steps one dense (gates
    padded to whole vectors), then the recurrence in one kernel."""
    from ...expr import TupleGetItem
    from ...op import reduce
    from ...op.rnn import padded_hidden, rnn_scan

    gates = 4 if kind == "LSTM" else 3
    hp = padded_hidden(H)
    T, N, In = shape_of(X)
    wp = _pad_gates(w, gates, H, hp)                                  # (G*Hp, In)
    rt = transform.transpose(_pad_gates(r, gates, H, hp), [1, 0])     # (H, G*Hp)
    if isinstance(T, int) or isinstance(N, int):  # a 2-D dense (the tuned-path kernel)
        xw = reshape_to(nn.dense(reshape_to(X, [-1, In]), wp), [T, N, gates * hp])
    else:
        xw = nn.dense(X, wp)                                         # (T, N, G*Hp)
    aux: RelayExpr | None = None
    if b is not None:
        wb, rb = _slice(b, 0, 0, gates * H), _slice(b, 0, gates * H, 2 * gates * H)
        if kind == "LSTM":
            bias = tensor.add(wb, rb)
        else:  # z, r: both biases outside; h: Rb_h inside r * (...) where linear_before_reset
            rbh = _slice(rb, 0, 2 * H, 3 * H)
            keep = _slice(rb, 0, 0, 2 * H)
            bias = tensor.add(wb, transform.concatenate(
                [keep, tensor.zeros_like(rbh) if lbr else rbh], 0))
            if lbr:
                aux = _pad_gates(rbh, 1, H, hp)
        xw = tensor.add(xw, _pad_gates(bias, gates, H, hp))
    if kind == "GRU" and aux is None:
        aux = const(np.zeros(hp, dtype=dt))
    if h0 is None or (kind == "LSTM" and c0 is None):
        if isinstance(N, int):
            zero: RelayExpr = const(np.zeros((N, H), dtype=dt))
        else:  # (N, H) zeros for a batch known only at run time (also for T = 0)
            rows = reduce.sum(tensor.zeros_like(transform.take(X, const(np.int64(0)), axis=2)),
                              axis=[0])                               # (N,)
            zero = tensor.add(transform.expand_dims(rows, 1), const(np.zeros((1, H), dtype=dt)))
        h0 = zero if h0 is None else h0
        c0 = zero if c0 is None else c0
    out = rnn_scan(xw, rt, h0, c0 if kind == "LSTM" else aux, kind, H, rev, lbr)
    return (TupleGetItem(out, 0), TupleGetItem(out, 1),
            TupleGetItem(out, 2) if kind == "LSTM" else None)


def _time_loop(ctx: ImportContext, kind: str, attrs: Attrs, X: RelayExpr, w: RelayExpr,
               r: RelayExpr, b: RelayExpr | None, h0: RelayExpr | None, c0: RelayExpr | None,
               P: RelayExpr | None, lens: RelayExpr | None, d: int, gates: int, H: int,
               acts: list, clip: float | None, dt: str, rev: bool, zero: RelayExpr | None
               ) -> tuple[RelayExpr, RelayExpr, RelayExpr | None]:
    """One direction over a run-time number of steps: the input projection of all steps is one
    dense before the loop; the loop carries h (c), the outputs so far (time-major, appended in
    step order: at the front when reversed) and the values the step reads."""
    from ...expr import Constant
    from .control import append_step, axis_length, empty_rows, while_loop

    xw = nn.dense(X, w)                                              # (T, N, G*H)
    wb = rb = None
    if b is not None:
        wb, rb = _slice(b, 0, 0, gates * H), _slice(b, 0, gates * H, 2 * gates * H)
        xw = tensor.add(xw, wb if kind == "GRU" else tensor.add(wb, rb))
    if zero is None:  # a batch size known only at run time: zeros shaped like one step's
        # state (take: the step axis may be symbolic too, which strided_slice cannot lower)
        zero = tensor.zeros_like(_slice(transform.take(xw, const(np.int64(0)), axis=0), 1, 0, H))
    h = _take0(h0, d) if h0 is not None else zero
    cell = (_take0(c0, d) if c0 is not None else zero) if kind == "LSTM" else zero
    p = _take0(P, d) if P is not None else None
    T = axis_length(X, 0)
    reads = {"r": r, "rb": rb, "p": p, "lens": lens, "T": T}
    live = {k: v for k, v in reads.items() if v is not None and not isinstance(v, Constant)}
    names = list(live)

    def step(it: RelayExpr, vs: list) -> list:
        hv, cv, acc, xwv = vs[:4]
        env = dict(reads)
        env.update(zip(names, vs[4:]))
        t = tensor.subtract(tensor.subtract(env["T"], const(np.int64(1))), it) if rev else it
        xt = transform.take(xwv, t, axis=0)
        h_new, c_new = _step(kind, attrs, ctx, xt, hv, cv if kind == "LSTM" else None,
                             env["r"], env["rb"], env["p"], H, acts, clip, dt)
        c_new = c_new if c_new is not None else cv
        y = h_new
        if env["lens"] is not None:
            mask = transform.expand_dims(tensor.less(transform.cast(t, "int32"), env["lens"]), 1)
            y = tensor.where(mask, h_new, tensor.zeros_like(h_new))
            h_new = tensor.where(mask, h_new, hv)
            c_new = tensor.where(mask, c_new, cv)
        return [h_new, c_new, append_step(acc, it, y, front=rev), xwv] + vs[4:]

    out = while_loop(ctx, T, [h, cell, empty_rows(h), xw] + [live[k] for k in names],
                     step, f"{kind.lower()}_steps")
    return out[2], out[0], out[1] if kind == "LSTM" else None


def _step(kind: str, a: dict, c: Any, xt: RelayExpr | list[RelayExpr], h: RelayExpr,
          cell: RelayExpr | None, r: RelayExpr, rb: RelayExpr | None, p: RelayExpr | None, H: int,
          acts: list, clip: float | None, dt: str) -> tuple[RelayExpr, RelayExpr | None]:
    """One time step; ``xt``: the step's input projection (N, G*H), or its G gate slices."""
    def clipped(v: RelayExpr) -> RelayExpr:
        return v if clip is None else tensor.clip(v, -float(clip), float(clip))

    def gate(v: RelayExpr, k: int) -> RelayExpr:
        return _slice(v, 1, k * H, (k + 1) * H)

    def xg(k: int) -> RelayExpr:
        return xt[k] if isinstance(xt, list) else gate(xt, k)

    one = const(np.asarray(1, dtype=dt))
    if kind == "RNN":
        return acts[0](clipped(tensor.add(xg(0), nn.dense(h, r)))), None
    if kind == "GRU":
        f, g = acts
        hr = nn.dense(h, r)                                          # (N, 3H): z, r, h
        if rb is not None:
            hr = tensor.add(hr, rb)
        z = f(clipped(tensor.add(xg(0), gate(hr, 0))))
        rr = f(clipped(tensor.add(xg(1), gate(hr, 1))))
        if a.get("linear_before_reset", 0):
            hh = g(clipped(tensor.add(xg(2), tensor.multiply(rr, gate(hr, 2)))))
        else:
            rh = nn.dense(tensor.multiply(rr, h), _slice(r, 0, 2 * H, 3 * H))
            if rb is not None:
                rh = tensor.add(rh, _slice(rb, 0, 2 * H, 3 * H))
            hh = g(clipped(tensor.add(xg(2), rh)))
        return tensor.add(tensor.multiply(tensor.subtract(one, z), hh),
                          tensor.multiply(z, h)), None
    f, g, hf = acts
    # the step's input projection is added per gate, not to the recurrent dense's output: its
    # slices then fuse into the gates' kernels (added to the dense's output, xw[t] was a copy
    # kernel of its own in every step)
    v = nn.dense(h, r)                                               # (N, 4H): i, o, f, c
    gi, go, gf, gc = (tensor.add(xg(k), gate(v, k)) for k in range(4))
    if p is not None:
        pi, po, pf = (_slice(p, 0, k * H, (k + 1) * H) for k in range(3))
        gi = tensor.add(gi, tensor.multiply(pi, cell))
        gf = tensor.add(gf, tensor.multiply(pf, cell))
    it = f(clipped(gi))
    ft = tensor.subtract(one, it) if a.get("input_forget", 0) else f(clipped(gf))
    ct = g(clipped(gc))
    c_new = tensor.add(tensor.multiply(ft, cell), tensor.multiply(it, ct))
    if p is not None:
        go = tensor.add(go, tensor.multiply(po, c_new))
    ot = f(clipped(go))
    return tensor.multiply(ot, hf(c_new)), c_new


register("RNN", _rnn("RNN"))
register("GRU", _rnn("GRU"))
register("LSTM", _rnn("LSTM"))


class _PlainContext:
    """What the recurrent converters read of an ImportContext, for a caller outside ONNX."""

    values: dict = {}

    @staticmethod
    def fail(msg: str) -> Exception:
        return ValueError(msg)


def recurrent_layer(kind: str, X: RelayExpr, W: RelayExpr, R: RelayExpr, B: RelayExpr | None,
                    h0: RelayExpr | None, c0: RelayExpr | None, hidden: int,
                    direction: str = "forward", linear_before_reset: int = 0) -> list[RelayExpr]:
    """One ONNX ``LSTM``/``GRU`` layer (time-major ``X``, its length and batch possibly
    symbolic; weights in the ONNX gate order) for another frontend: ``[Y (T, dirs, N, H), Y_h (dirs, N, H)(, Y_c)]``."""
    attrs: dict[str, Any] = {"hidden_size": hidden, "direction": direction}
    if kind == "GRU":
        attrs["linear_before_reset"] = linear_before_reset
    inputs = [X, W, R, B, None, h0] + ([c0] if kind == "LSTM" else [])
    out = _rnn(kind)(_PlainContext(), inputs, attrs, [""] * len(inputs))  # type: ignore[arg-type]
    return list(out)  # type: ignore[arg-type]
