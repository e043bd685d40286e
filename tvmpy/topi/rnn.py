"""The recurrence of an LSTM or GRU layer as one kernel (``relay.nn.rnn_scan``).

The input projection of every time step (``X @ W^T`` plus the biases that can be added there)
is computed before, as one GEMM; this kernel runs the time loop: per step, the recurrent GEMV
``h @ R^T``, the gates and the state update, for every hidden unit. A serial loop over time
holds a parallel loop over (batch row, block of hidden units): a block computes all the gates of
its units (``R^T``'s columns are gate-major, so a block reads ``G`` contiguous column runs of
every row), then their new state, so one step is one parallel region (two for the GRU of
``linear_before_reset=0``, whose candidate GEMV reads ``r * h`` of every unit).

Layout: the hidden axis of the projection, of ``R^T`` and of the state is padded to ``Hp``
(a multiple of 16 floats, done by the caller on the constant weights: the padded columns are
zero) so that each block is whole vectors: a padded unit's gates are 0 + 0, its state stays 0
(LSTM: ``c = sigma(0) c + sigma(0) tanh(0)``; GRU: ``h = (1 - z) tanh(0) + z h``) and it never
feeds a real unit (the GEMV runs over the ``H`` real rows of ``R^T`` only).

Gate order (ONNX): LSTM i, o, f, c; GRU z, r, h. Activations: sigmoid and tanh, tanh written
as ``2 sigmoid(2x) - 1`` so that both use the inline vector exp of the LLVM backend.
"""

from __future__ import annotations

from typing import Any

from .. import te
from ..tir import ir_builder
from ..tir import op as tir_op
from ..tir import stmt as S
from ..tir.expr import IntImm, PrimExpr, Select, const

__all__ = ["rnn_scan", "rnn_block", "packed_block", "pack_rt_np", "unpack_rt_np",
           "workspace_shapes", "GATES", "PAD", "rnn_cell",
           "rnn_cell_workload", "rnn_cell_key", "rnn_scan_stepped", "CELL_WORKLOAD",
           "MEASURE_STEPS"]

#: gates per cell kind
GATES = {"LSTM": 4, "GRU": 3}
#: the padded hidden size is a multiple of this (floats: one 64-byte line)
PAD = 16
#: multiply-adds per step below which the step's blocks run serially (one thread): about 2 us
#: of one core's FMA work, less than the per-step wake-up of the thread pool
PARALLEL_MIN_MACS = 1 << 16


#: batch rows a job computes together (each weight vector loaded once for all of them)
MAX_ROWS = 4


def rnn_block(hp: int, lanes: int, gates: int, rows: int = 1) -> int:
    """Hidden units per block: a multiple of the vector ``lanes`` dividing ``hp``, as wide as
    keeps ``rows * gates * block / lanes`` accumulators within 16 vector registers."""
    lanes = max(1, min(lanes, PAD))
    best = lanes if hp % lanes == 0 else 1
    for m in (2, 4):
        ub = lanes * m
        if hp % ub == 0 and rows * gates * m <= 16:
            best = ub
    return best


def packed_block(cell: str, hp: int, lanes: int, rows: int | None) -> int:
    """The hidden units of one block of ``rnn_scan`` for ``rows`` batch rows (None: a batch
    known only at run time): the width of each block's run of a packed ``R^T``
    (``pack_rt``)."""
    nb_rows = MAX_ROWS if rows is None else max(1, min(MAX_ROWS, int(rows)))
    return rnn_block(hp, lanes, GATES[cell], nb_rows)


def pack_rt_np(rt: Any, cell: str, ub: int) -> Any:
    """``R^T`` (H, G*Hp) as ``rnn_scan``'s packed layout (Hp/ub, H, G*ub): block ``b`` holds
    the columns of units ``b*ub .. b*ub+ub-1`` of every gate, gate-major, each row after the
    other, so that a block's k loop reads one contiguous run (numpy; the relay form is
    ``relay/op/strategy/rnn.py``'s rewrite)."""
    G = GATES[cell]
    h, cols = rt.shape
    nb = cols // G // ub
    return rt.reshape(h, G, nb, ub).transpose(2, 0, 1, 3).reshape(nb, h, G * ub)


def unpack_rt_np(rt: Any, cell: str) -> Any:
    """The inverse of ``pack_rt_np``: (Hp/ub, H, G*ub) -> (H, G*Hp)."""
    G = GATES[cell]
    nb, h, gub = rt.shape
    ub = gub // G
    return rt.reshape(nb, h, G, ub).transpose(1, 2, 0, 3).reshape(h, G * nb * ub)


def workspace_shapes(cell: str, linear_before_reset: bool, n: Any, hp: int) -> list[tuple]:
    """The shapes of ``rnn_scan``'s workspace outputs (after ``Y``, ``h_T`` and LSTM ``c_T``)."""
    out: list[tuple] = [(2, n, hp)]
    if cell == "LSTM":
        out.append((n, hp))
    elif not linear_before_reset:
        out += [(n, hp), (n, hp)]
    return out


def _sigmoid(x: PrimExpr) -> PrimExpr:
    return tir_op.sigmoid(x)


def _tanh(x: PrimExpr) -> PrimExpr:
    one = const(1.0, x.dtype)
    return const(2.0, x.dtype) * tir_op.sigmoid(x * const(2.0, x.dtype)) - one


def rnn_scan(xw: te.Tensor, rt: te.Tensor, h0: te.Tensor, aux: te.Tensor, cell: str,
             hidden: int, reverse: bool = False, linear_before_reset: bool = True,
             lanes: int = 8) -> list[te.Tensor]:
    """Run the recurrence (see the module doc).

    ``xw`` (T, N, G*Hp): the input projection with the biases that add outside the recurrence
    (LSTM: both; GRU: ``Wb`` and the z, r parts of ``Rb``, plus ``Rb_h`` where
    ``linear_before_reset=0``); ``rt`` (H, G*Hp): ``R^T`` padded, or packed (``pack_rt_np``:
    (Hp/ub, H, G*ub), one contiguous run a block of ``ub`` units, read as a stream: ~10% less
    time a step than the gate-strided rows once ``R^T`` is past L1); ``h0`` (N, H); ``aux``: LSTM
    ``c0`` (N, H), GRU the candidate's recurrent bias ``Rb_h`` (Hp,) (zeros where it is in
    ``xw``). Returns ``Y`` (T, N, H), ``h_T`` (N, H), for LSTM ``c_T`` (N, H), and the state
    workspaces (``workspace_shapes``), which callers ignore.
    """
    if cell not in GATES:
        raise ValueError(f"rnn_scan: cell must be LSTM or GRU, got {cell!r}")
    G, H = GATES[cell], int(hidden)
    packed = len(rt.shape) == 3
    if not all(isinstance(d, IntImm) for d in rt.shape) or int(rt.shape[-1]) % G:
        raise ValueError(f"rnn_scan: R^T must have a static multiple of {G} columns, "
                         f"got {rt.shape}")
    hp = int(rt.shape[-1]) // G * (int(rt.shape[0]) if packed else 1)
    if hp < H or hp % PAD:
        raise ValueError(f"rnn_scan: padded hidden size {hp} must be a multiple of {PAD} and "
                         f">= hidden {H}")
    if int(rt.shape[-2]) != H:
        raise ValueError(f"rnn_scan: R^T has {rt.shape[-2]} rows for hidden size {H}")
    T, N = xw.shape[0], xw.shape[1]
    rows = int(N) if isinstance(N, (int, IntImm)) else None
    # a job: NB batch rows x ub hidden units (the rows share every weight load)
    NB = MAX_ROWS if rows is None else max(1, min(MAX_ROWS, rows))
    # packed R^T (``pack_rt``): the blocks are its own, one contiguous (H, G*ub) run a block
    ub = int(rt.shape[2]) // G if packed else rnn_block(hp, lanes, G, NB)
    nb = hp // ub
    dt = xw.dtype
    gru0 = cell == "GRU" and not linear_before_reset
    # a step's jobs run in parallel when there is more than one and enough work to pay for
    # waking the pool every step (a few microseconds)
    n_jobs = (N + NB - 1) // NB * nb
    serial = rows is not None and ((rows + NB - 1) // NB * nb == 1
                                   or rows * H * G * hp < PARALLEL_MIN_MACS)
    jobs = "serial" if serial else "parallel"
    shapes: list[Any] = [(T, N, H), (N, H)] + ([(N, H)] if cell == "LSTM" else [])
    # workspaces: h (two slots, this step's and the next), then LSTM c, GRU(lbr 0) r * h and z;
    # separate buffers, so that every vector loop writes each buffer at one index only
    shapes += workspace_shapes(cell, linear_before_reset, N, hp)
    one = const(1.0, dt)
    zero = const(0.0, dt)

    def body(ins: list, outs: list) -> S.Stmt:
        ib = ir_builder.create()
        X = ib.buffer_ptr(ins[0], (T, N, G * hp))
        R = ib.buffer_ptr(ins[1], (nb, H, G * ub) if packed else (H, G * hp))
        H0 = ib.buffer_ptr(ins[2], (N, H))
        Y = ib.buffer_ptr(outs[0], (T, N, H))
        HT = ib.buffer_ptr(outs[1], (N, H))
        k0 = 3 if cell == "LSTM" else 2
        CT: Any = ib.buffer_ptr(outs[2], (N, H)) if cell == "LSTM" else None
        HS = ib.buffer_ptr(outs[k0], (2, N, hp))
        CS: Any = ib.buffer_ptr(outs[k0 + 1], (N, hp)) if cell == "LSTM" else None
        RH: Any = ib.buffer_ptr(outs[k0 + 1], (N, hp)) if gru0 else None
        ZS: Any = ib.buffer_ptr(outs[k0 + 2], (N, hp)) if gru0 else None
        C0: Any = ib.buffer_ptr(ins[3], (N, H)) if cell == "LSTM" else None
        RB: Any = ib.buffer_ptr(ins[3], (hp,)) if cell == "GRU" else None

        # the initial state, zero-padded
        with ib.for_range(0, N, name="n") as n:
            with ib.for_range(0, hp, name="u") as u:
                ok = u < H
                uc = tir_op.min(u, H - 1)
                HS[0, n, u] = Select(ok, H0[n, uc], zero)
                if CS is not None:
                    CS[n, u] = Select(ok, C0[n, uc], zero)

        def gemv(acc: Any, ns: list, u0: Any, gate_list: list[int], init_x: list[bool],
                 t: Any, src: Any, src_slot: Any) -> None:
            """acc[(r*G' + j)*ub + u] = (xw of gate g, or 0) + sum_k src[(slot,) n_r, k] R^T[k, g]
            for the rows ``ns`` (clamped into the batch: a row past it is computed, not stored)."""
            w = len(gate_list)
            blk = tir_op.floordiv(u0, ub)  # (job % nb) * ub / ub: the job's block of R^T
            for r, n in enumerate(ns):
                for j, g in enumerate(gate_list):
                    with ib.for_range(0, ub, name="u", kind="vectorize") as u:
                        acc[(r * w + j) * ub + u] = (X[t, n, g * hp + u0 + u] if init_x[j]
                                                     else zero)
            with ib.for_range(0, H, name="k") as k:
                for r, n in enumerate(ns):
                    hk = ib.let(f"hk{r}", src[n, k] if src_slot is None
                                else src[src_slot, n, k])
                    for j, g in enumerate(gate_list):
                        a = (r * w + j) * ub
                        with ib.for_range(0, ub, name="u", kind="vectorize") as u:
                            w_ku = (R[blk, k, g * ub + u] if packed
                                    else R[k, g * hp + u0 + u])
                            acc[a + u] = acc[a + u] + hk * w_ku

        def rows_of(job: Any) -> tuple[list, list, Any]:
            """The job's rows (clamped), whether each is in the batch, and its first unit."""
            n0 = (job // nb) * NB
            real = [n0 + r < N for r in range(NB)]
            ns = [n0 + r if rows is not None and rows % NB == 0 else tir_op.min(n0 + r, N - 1)
                  for r in range(NB)]
            return ns, real, (job % nb) * ub

        def store_h(hn: Any, n: Any, u0: Any, t: Any, nxt: Any) -> None:
            with ib.for_range(0, ub, name="u", kind="vectorize") as u:
                HS[nxt, n, u0 + u] = hn[u]
            with ib.for_range(0, tir_op.min(const(ub, "int32"), H - u0), name="u") as u:
                Y[t, n, u0 + u] = hn[u]

        with ib.for_range(0, T, name="s") as s:
            t = (T - 1 - s) if reverse else s
            cur = tir_op.floormod(s, 2)
            nxt = 1 - cur
            if gru0:  # phase A: z and r of every unit; r * h_prev kept for the candidate GEMV
                with ib.for_range(0, n_jobs, name="job", kind=jobs) as job:
                    ns, real, u0 = rows_of(job)
                    acc = ib.allocate(dt, (NB * 2 * ub,), name="acc", scope="local")
                    gemv(acc, ns, u0, [0, 1], [True, True], t, HS, cur)
                    for r, n in enumerate(ns):
                        a = r * 2 * ub
                        with ib.if_scope(real[r]):
                            with ib.for_range(0, ub, name="u", kind="vectorize") as u:
                                ZS[n, u0 + u] = _sigmoid(acc[a + u])
                                RH[n, u0 + u] = _sigmoid(acc[a + ub + u]) * HS[cur, n, u0 + u]
            with ib.for_range(0, n_jobs, name="job", kind=jobs) as job:
                ns, real, u0 = rows_of(job)
                w = {"LSTM": 4, "GRU": 1 if gru0 else 3}[cell]
                acc = ib.allocate(dt, (NB * w * ub,), name="acc", scope="local")
                if cell == "LSTM":
                    gemv(acc, ns, u0, [0, 1, 2, 3], [True] * 4, t, HS, cur)
                elif gru0:
                    gemv(acc, ns, u0, [2], [True], t, RH, None)
                else:
                    gemv(acc, ns, u0, [0, 1, 2], [True, True, False], t, HS, cur)
                for r, n in enumerate(ns):
                    a = r * w * ub
                    with ib.if_scope(real[r]):
                        hn = ib.allocate(dt, (ub,), name="hn", scope="local")
                        if cell == "LSTM":
                            cn = ib.allocate(dt, (ub,), name="cn", scope="local")
                            with ib.for_range(0, ub, name="u", kind="vectorize") as u:
                                cn[u] = (_sigmoid(acc[a + 2 * ub + u]) * CS[n, u0 + u]
                                         + _sigmoid(acc[a + u]) * _tanh(acc[a + 3 * ub + u]))
                            with ib.for_range(0, ub, name="u", kind="vectorize") as u:
                                CS[n, u0 + u] = cn[u]
                                hn[u] = _sigmoid(acc[a + ub + u]) * _tanh(cn[u])
                        elif gru0:
                            with ib.for_range(0, ub, name="u", kind="vectorize") as u:
                                z = ZS[n, u0 + u]
                                hn[u] = (one - z) * _tanh(acc[a + u]) + z * HS[cur, n, u0 + u]
                        else:
                            with ib.for_range(0, ub, name="u", kind="vectorize") as u:
                                z = _sigmoid(acc[a + u])
                                hh = _tanh(X[t, n, 2 * hp + u0 + u] + _sigmoid(acc[a + ub + u])
                                           * (acc[a + 2 * ub + u] + RB[u0 + u]))
                                hn[u] = (one - z) * hh + z * HS[cur, n, u0 + u]
                        store_h(hn, n, u0, t, nxt)

        last = tir_op.floormod(T, 2)
        with ib.for_range(0, N, name="n") as n:
            with ib.for_range(0, H, name="u") as u:
                HT[n, u] = HS[last, n, u]
                if CT is not None:
                    CT[n, u] = CS[n, u]
        return ib.get()

    # the cell is the auto-scheduler's task for this kernel (one per step: T runs a call)
    task = {} if rows is None else {"auto_scheduler_task": rnn_cell_key(
        cell, rows, H, hp, linear_before_reset, ub if packed else None),
        "auto_scheduler_task_runs": T}
    outs = te.extern(shapes, [xw, rt, h0, aux], body, name=f"{cell.lower()}_scan", dtype=dt,
                     tag="rnn_scan", attrs=task)
    return outs if isinstance(outs, list) else [outs]


# ----------------------------------------------------------------------------------------------
# The recurrence as a tunable task: one time step as a te compute (the auto-scheduler's task),
# and the recurrence kernel built around that step's schedule.
#
# ``rnn_cell`` is one step of the recurrence on the padded state (the same arithmetic as the
# kernel above: the same tanh, the GEMV over the H real rows of R^T). ``rnn_scan`` marks its
# kernel with the cell's workload key (``te.extern`` attrs ``auto_scheduler_task`` and
# ``auto_scheduler_task_runs``: T, the steps per call), so that ``auto_scheduler.extract_tasks``
# lists the cell instead of the untunable extern. ``rnn_scan_stepped`` is the kernel of a tuned
# cell: a serial tir loop over time (T may be a run-time size) around the lowered body of the
# cell's schedule, its buffers bound into the scan's (the step's projection row ``xw[t]``, the
# state buffers of this step and of the next: two separate buffers, the loop unrolled by two),
# then ``Y[t] = h`` and the final states. The cell's gate GEMV is gate-major ``(N, G, Hp)`` so
# that the sketch rule for slice consumers can compute it at a tile of units (the hand kernel's
# structure: all the gates of a block of units in registers, then their state update).

#: the registered name of the cell's workload (``auto_scheduler.register_workload``)
CELL_WORKLOAD = "topi.rnn_cell"


def _check_cell(cell: str, n: int, hidden: int, hp: int) -> None:
    if cell not in GATES:
        raise ValueError(f"rnn_cell: cell must be LSTM or GRU, got {cell!r}")
    if int(n) < 1 or int(hidden) < 1 or int(hp) < int(hidden) or int(hp) % PAD:
        raise ValueError(f"rnn_cell: need batch >= 1, hidden >= 1 and a padded hidden size that "
                         f"is a multiple of {PAD} and >= hidden; got batch {n}, hidden {hidden}, "
                         f"padded {hp}")


def rnn_cell(xw_t: te.Tensor, rt: te.Tensor, h: te.Tensor, aux: te.Tensor | None, cell: str,
             hidden: int, linear_before_reset: bool = True) -> list[te.Tensor]:
    """One step of ``rnn_scan`` as a te compute: ``xw_t`` (N, G*Hp) this step's projection,
    ``rt`` (H, G*Hp), or packed by blocks of ``ub`` units as the kernel reads it
    (``pack_rt_np``: (Hp/ub, H, G*ub)), ``h`` (N, Hp) the padded state, ``aux`` LSTM ``c``
    (N, Hp), GRU ``Rb_h`` (Hp,) (None for the GRU of ``linear_before_reset=0``, whose ``Rb_h``
    is in ``xw``). Returns the new ``h`` (N, Hp) and, for LSTM, the new ``c`` (N, Hp)."""
    G, H = GATES[cell], int(hidden)
    n, cols = int(xw_t.shape[0]), int(xw_t.shape[1])
    hp = cols // G
    _check_cell(cell, n, H, hp)
    one = const(1.0, xw_t.dtype)
    if len(rt.shape) == 3:
        ub = int(rt.shape[2]) // G

        def w(k: Any, col: Any, j: Any) -> PrimExpr:
            """``R^T[k, col*Hp + j]`` read from the packed layout."""
            return rt[tir_op.floordiv(j, ub), k, col * ub + tir_op.floormod(j, ub)]
    else:
        def w(k: Any, col: Any, j: Any) -> PrimExpr:
            return rt[k, col * hp + j]

    def gemv(src: te.Tensor, g0: int, width: int, name: str) -> te.Tensor:
        k = te.reduce_axis((0, H), name="k")
        return te.compute((n, width), lambda i, j: te.sum(src[i, k] * w(k, g0, j), axis=k),
                          name=name)

    def gate_gemv(src: te.Tensor, gates: int, name: str) -> te.Tensor:
        """``src @ R^T`` over the first ``gates`` gates, gate-major: (N, gates, Hp). A unit's
        gates are one box of it (``[i, :, u]``), so the epilogue that reads them computes at a
        tile of units (the sketch rule of slice consumers) and the GEMV needs no copy."""
        k = te.reduce_axis((0, H), name="k")
        return te.compute((n, gates, hp), lambda i, g, j: te.sum(src[i, k] * w(k, g, j), axis=k),
                          name=name)

    if cell == "LSTM":
        mm = gate_gemv(h, G, "gates")

        def gate(i: Any, g: int, u: Any) -> PrimExpr:
            return mm[i, g, u] + xw_t[i, g * hp + u]

        def state(i: Any, u: Any) -> list[PrimExpr]:
            c_u = _sigmoid(gate(i, 2, u)) * aux[i, u] + _sigmoid(gate(i, 0, u)) * _tanh(gate(i, 3, u))
            return [_sigmoid(gate(i, 1, u)) * _tanh(c_u), c_u]

        # one stage, two outputs (h', c'): the gates' only consumer, so that the sketch rules can
        # compute the GEMV at a tile of it; c' appears twice in the body, one value after CSE
        h_new, c_new = te.compute((n, hp), state, name="lstm_next")
        return [h_new, c_new]
    if linear_before_reset:
        mm = gate_gemv(h, G, "gates")

        def h_lbr(i: Any, u: Any) -> PrimExpr:
            z = _sigmoid(xw_t[i, u] + mm[i, 0, u])
            r = _sigmoid(xw_t[i, hp + u] + mm[i, 1, u])
            hh = _tanh(xw_t[i, 2 * hp + u] + r * (mm[i, 2, u] + aux[u]))
            return (one - z) * hh + z * h[i, u]

        return [te.compute((n, hp), h_lbr, name="h_next")]
    zr = gate_gemv(h, 2, "gates_zr")
    rh = te.compute((n, hp), lambda i, u: _sigmoid(xw_t[i, hp + u] + zr[i, 1, u]) * h[i, u],
                    name="r_h")
    cand = gemv(rh, 2, hp, "gates_h")

    def h_lbr0(i: Any, u: Any) -> PrimExpr:
        z = _sigmoid(xw_t[i, u] + zr[i, 0, u])
        return (one - z) * _tanh(xw_t[i, 2 * hp + u] + cand[i, u]) + z * h[i, u]

    return [te.compute((n, hp), h_lbr0, name="h_next")]


def _rt_shape(cell: str, hidden: int, hp: int, ub: int | None) -> tuple[int, ...]:
    """``R^T``'s shape: plain (H, G*Hp), or packed by blocks of ``ub`` units (Hp/ub, H, G*ub)."""
    G = GATES[cell]
    if ub is None:
        return (int(hidden), G * int(hp))
    if int(ub) < 1 or int(hp) % int(ub):
        raise ValueError(f"rnn_cell: a packed block of {ub} units does not divide the padded "
                         f"hidden size {hp}")
    return (int(hp) // int(ub), int(hidden), G * int(ub))


def rnn_cell_placeholders(cell: str, n: int, hidden: int, hp: int, linear_before_reset: bool = True,
                          dtype: str = "float32", ub: int | None = None) -> list[te.Tensor]:
    """The inputs of ``rnn_cell``: ``xw_t``, ``rt`` (packed by blocks of ``ub`` units where
    given), ``h`` and ``aux`` (none for the GRU of ``linear_before_reset=0``)."""
    _check_cell(cell, n, hidden, hp)
    G = GATES[cell]
    ins = [te.placeholder((n, G * hp), dtype, "xw_t"),
           te.placeholder(_rt_shape(cell, hidden, hp, ub), dtype, "rt"),
           te.placeholder((n, hp), dtype, "h")]
    if cell == "LSTM":
        ins.append(te.placeholder((n, hp), dtype, "c"))
    elif linear_before_reset:
        ins.append(te.placeholder((hp,), dtype, "rb"))
    return ins


def rnn_cell_workload(cell: str, n: int, hidden: int, hp: int,
                      linear_before_reset: bool = True, ub: int | None = None) -> list[te.Tensor]:
    """The cell's tensors (inputs, then outputs): the auto-scheduler's workload function.
    ``ub``: ``R^T`` packed by blocks of that many units, the layout the kernel reads on the
    targets that pack it (``relay/op/strategy/rnn.py``); None: the plain layout."""
    ins = rnn_cell_placeholders(cell, n, hidden, hp, linear_before_reset, ub=ub)
    aux = ins[3] if len(ins) > 3 else None
    return [*ins, *rnn_cell(*ins[:3], aux, cell, hidden, linear_before_reset)]


def rnn_cell_key(cell: str, n: int, hidden: int, hp: int, linear_before_reset: bool,
                 ub: int | None = None) -> str:
    """The workload key of the cell of one ``rnn_scan`` (the LSTM ignores
    ``linear_before_reset``: it is always True in its key). ``ub``: the block of a packed
    ``R^T`` (one more key argument, so that a record of the plain layout does not apply to the
    packed one: a different compute, a different default)."""
    import json

    lbr = True if cell == "LSTM" else bool(linear_before_reset)
    key: list[Any] = [CELL_WORKLOAD, cell, int(n), int(hidden), int(hp), lbr]
    if ub is not None:
        key.append(int(ub))
    return json.dumps(key)


#: time steps of the program a cell's schedule is measured as (``_cell_deployed``): enough that
#: the per-call work (initial and final state copies, the call itself) weighs about as little as
#: in a model's recurrence, few enough that a candidate's measurement stays short
MEASURE_STEPS = 8


def _measure_inputs(cell: str, n: int, hidden: int, hp: int,
                    ub: int | None = None) -> list[te.Tensor]:
    G = GATES[cell]
    return [te.placeholder((MEASURE_STEPS, n, G * hp), "float32", "xw"),
            te.placeholder(_rt_shape(cell, hidden, hp, ub), "float32", "rt"),
            te.placeholder((n, hidden), "float32", "h0"),
            te.placeholder((n, hidden) if cell == "LSTM" else (hp,), "float32", "aux")]


def _measured(ins: list[te.Tensor], outs: list[te.Tensor], cell: str) -> tuple[Any, list]:
    """``(schedule, args)`` of a recurrence kernel whose results (``Y``, ``h_T``, LSTM ``c_T``)
    are copied out: its workspaces stay inside the program (``rnn_scan`` and
    ``rnn_scan_stepped`` use them differently), so that the outputs of the two kernels compare."""
    keep = [te.compute(o.shape, lambda *i, o=o: o(*i), name=f"{o.op.name}_out{j}")
            for j, o in enumerate(outs[:3 if cell == "LSTM" else 2])]
    return te.create_schedule([k.op for k in keep]), [*ins, *keep]


def _cell_default_schedule(cell: str, n: int, hidden: int, hp: int,
                           linear_before_reset: bool = True,
                           ub: int | None = None) -> tuple[Any, list[te.Tensor]]:
    """``(schedule, args)`` of the untuned kernel (``rnn_scan``) over ``MEASURE_STEPS`` steps:
    what a tuned cell competes with (the auto-scheduler's default-schedule safety net), in the
    form its candidates are measured as (``_cell_deployed``), on the same ``R^T`` layout."""
    from .x86.injective import vector_lanes

    ins = _measure_inputs(cell, n, hidden, hp, ub)
    outs = rnn_scan(*ins, cell, hidden, False, linear_before_reset, lanes=vector_lanes("float32"))
    return _measured(ins, outs, cell)


def _cell_deployed(sch: Any, tensors: list[te.Tensor], cell: str, n: int, hidden: int, hp: int,
                   linear_before_reset: bool = True,
                   ub: int | None = None) -> tuple[Any, list[te.Tensor]]:
    """``(schedule, args)`` a schedule ``sch`` of the cell (``tensors``: the workload's) is
    measured as: the kernel it is deployed in, ``rnn_scan_stepped``, over ``MEASURE_STEPS``
    steps (costs are divided by them: ``deployed_runs``)."""
    ins = _measure_inputs(cell, n, hidden, hp, ub)
    outs = rnn_scan_stepped(*ins, cell, hidden, False, linear_before_reset, sch, list(tensors))
    return _measured(ins, outs, cell)


rnn_cell_workload.default_schedule = _cell_default_schedule  # type: ignore[attr-defined]
rnn_cell_workload.deployed_program = _cell_deployed  # type: ignore[attr-defined]
rnn_cell_workload.deployed_runs = MEASURE_STEPS  # type: ignore[attr-defined]


def _register_cell_workload() -> None:
    from ..auto_scheduler.workload_registry import register_workload

    register_workload(CELL_WORKLOAD, rnn_cell_workload, override=True)


_register_cell_workload()


def rnn_scan_stepped(xw: te.Tensor, rt: te.Tensor, h0: te.Tensor, aux: te.Tensor, cell: str,
                     hidden: int, reverse: bool, linear_before_reset: bool, sch: Any,
                     cell_tensors: list[te.Tensor]) -> list[te.Tensor]:
    """``rnn_scan`` (same arguments and outputs) whose step is the schedule ``sch`` of the
    cell ``cell_tensors`` (``rnn_cell_workload``'s tensors: xw_t, rt, h, aux, h', [c'])."""
    from ..te.schedule_ops import schedule_to_primfunc
    from ..tir.buffer import Buffer

    G, H = GATES[cell], int(hidden)
    packed = len(rt.shape) == 3  # packed by blocks of ub units: the cell reads the same layout
    ub = int(rt.shape[2]) // G if packed else None
    hp = int(rt.shape[-1]) // G * (int(rt.shape[0]) if packed else 1)
    T, N = xw.shape[0], xw.shape[1]
    if not isinstance(N, (int, IntImm)):
        raise ValueError("rnn_scan_stepped: the batch size must be static (a tuned cell is for "
                         f"one batch size), got {N}")
    n = int(N)
    want = [tuple(int(d) for d in t.shape)
            for t in rnn_cell_placeholders(cell, n, H, hp, linear_before_reset, ub=ub)]
    n_in, n_out = len(want), 2 if cell == "LSTM" else 1
    got = [tuple(int(d) for d in t.shape) for t in cell_tensors[:n_in]]
    if got != want or len(cell_tensors) != n_in + n_out:
        raise ValueError(f"rnn_scan_stepped: the cell's tensors {got} (+{len(cell_tensors) - n_in}"
                         f" outputs) are not the {cell} cell of batch {n}, hidden {H}: {want}")
    dt = xw.dtype
    shapes: list[Any] = [(T, N, H), (N, H)] + ([(N, H)] if cell == "LSTM" else [])
    shapes += workspace_shapes(cell, linear_before_reset, N, hp)
    zero = const(0.0, dt)

    def body(ins: list, outs: list) -> S.Stmt:
        ib = ir_builder.create()
        H0 = ib.buffer_ptr(ins[2], (N, H))
        Y = ib.buffer_ptr(outs[0], (T, N, H))
        HT = ib.buffer_ptr(outs[1], (N, H))
        CT: Any = ib.buffer_ptr(outs[2], (N, H)) if cell == "LSTM" else None
        C0: Any = ib.buffer_ptr(ins[3], (N, H)) if cell == "LSTM" else None
        # the state in two slots, A and B, SEPARATE buffers (LSTM: h and c each): a step reads
        # one slot and writes the other, and the time loop is unrolled by two (A -> B, B -> A)
        # so that every step's buffers are static. One buffer with a slot index would make
        # the step's stores and loads of the same buffer differ in index (``c[cur]`` vs
        # ``c[nxt]``), and the vectorizer would scalarize the step's epilogue (a scalar expf
        # per lane)
        names = ["h", "c"] if cell == "LSTM" else ["h"]
        slots = [{nm: ib.allocate(dt, (N, hp), name=f"{nm}_{ab}") for nm in names}
                 for ab in "ab"]
        with ib.for_range(0, N, name="n") as i:
            with ib.for_range(0, hp, name="u") as u:
                ok = u < H
                uc = tir_op.min(u, H - 1)
                slots[0]["h"][i, u] = Select(ok, H0[i, uc], zero)
                if cell == "LSTM":
                    slots[0]["c"][i, u] = Select(ok, C0[i, uc], zero)

        def view(buf: Any, shape: tuple, offset: Any, name: str) -> Buffer:
            return Buffer(buf.data, dt, shape, (), buf.elem_offset + offset, name, buf.scope)

        def step(s: Any, cur: dict, nxt: dict) -> None:
            t = (T - 1 - s) if reverse else s
            bufs = [view(ins[0], (n, G * hp), t * (n * G * hp), "xw_t"), ins[1], cur["h"].buffer]
            if cell == "LSTM":
                bufs.append(cur["c"].buffer)
            elif n_in > 3:
                bufs.append(ins[3])
            bufs.append(nxt["h"].buffer)
            if cell == "LSTM":
                bufs.append(nxt["c"].buffer)
            fn = schedule_to_primfunc(sch, cell_tensors, "rnn_step", dict(zip(cell_tensors, bufs)))
            ib.emit(fn.body)
            with ib.for_range(0, N, name="n") as i:
                with ib.for_range(0, H, name="u") as u:
                    Y[t, i, u] = nxt["h"][i, u]

        with ib.for_range(0, (T + 1) // 2, name="s2") as s2:
            step(2 * s2, slots[0], slots[1])
            with ib.if_scope(2 * s2 + 1 < T):
                step(2 * s2 + 1, slots[1], slots[0])

        def final(last: dict) -> None:
            with ib.for_range(0, N, name="n") as i:
                with ib.for_range(0, H, name="u") as u:
                    HT[i, u] = last["h"][i, u]
                    if CT is not None:
                        CT[i, u] = last["c"][i, u]

        with ib.if_scope(tir_op.floormod(T, 2) == 0):
            final(slots[0])
        with ib.else_scope():
            final(slots[1])
        return ib.get()

    outs = te.extern(shapes, [xw, rt, h0, aux], body, name=f"{cell.lower()}_scan_tuned", dtype=dt,
                     tag="rnn_scan")
    return outs if isinstance(outs, list) else [outs]
