"""Scan: a recurrence over the leading (time) axis of one or more states (TVM's ``te.scan``).

``te.scan(init, update, state_placeholder)`` makes a :class:`ScanOp` whose output ``k`` is
``init[k]`` for the first ``init[k].shape[0]`` time steps, then ``update[k]`` step by step:
``update`` reads earlier steps through ``state_placeholder[k]`` (``s_state[t - 1, i]``). The
scan's loop is its ``scan_axis`` (``scan.idx``, from ``init.shape[0]`` to ``update.shape[0]``);
the stages of the *update* (those that read a state, up to the update tensors) run inside it,
one time step each (``Schedule.scan_body``); the init stages run before it. Lowering writes
the init, the update and the state into the scan's output buffer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..arith import simplify
from ..tir.expr import IterVar, PrimExpr, Range, Var, is_const_int
from .tensor import Operation, PlaceholderOp, Tensor, _check_name

__all__ = ["ScanOp", "scan"]


def _prove_equal(a: PrimExpr, b: PrimExpr) -> bool:
    return is_const_int(simplify(a - b), 0)


class ScanOp(Operation):
    """Output ``k`` has the shape of ``update[k]``; ``spatial_axis_`` holds one IterVar per
    non-time dimension of each state (in state order), ``scan_axis`` the time loop."""

    __slots__ = ("scan_axis", "init", "update", "state_placeholder", "inputs", "spatial_axis_",
                 "_outputs")
    scan_axis: IterVar
    init: tuple[Tensor, ...]
    update: tuple[Tensor, ...]
    state_placeholder: tuple[Tensor, ...]
    inputs: tuple[Tensor, ...]
    spatial_axis_: tuple[IterVar, ...]

    def __init__(self, name: str, tag: str, attrs: dict | None, axis: IterVar,
                 init: Sequence[Tensor], update: Sequence[Tensor],
                 state_placeholder: Sequence[Tensor], inputs: Sequence[Tensor] = (),
                 spatial_axis: Sequence[IterVar] | None = None):
        init, update, states = tuple(init), tuple(update), tuple(state_placeholder)
        _check_scan(name, axis, init, update, states)
        if spatial_axis is None:
            spatial_axis = [IterVar(Range(0, u.shape[k]), Var(f"{name}.out{i}.i{k}", "int32"),
                                    IterVar.Opaque)
                            for i, u in enumerate(update) for k in range(1, u.ndim)]
        self._init(name=name, tag=tag, attrs=dict(attrs or {}), scan_axis=axis, init=init,
                   update=update, state_placeholder=states, inputs=tuple(inputs or ()),
                   spatial_axis_=tuple(spatial_axis))
        self._init(_outputs=tuple(Tensor(self, k, u.shape, u.dtype) for k, u in enumerate(update)))

    @property
    def num_outputs(self) -> int:
        return len(self.update)

    @property
    def input_tensors(self) -> list[Tensor]:
        """The init and update tensors (TVM's: the states and ``inputs`` are read by the update)."""
        return [*self.init, *self.update]

    def root_iter_vars(self) -> list[IterVar]:
        return [self.scan_axis, *self.spatial_axis_]

    def replace_tensors(self, init: Sequence[Tensor], update: Sequence[Tensor]) -> ScanOp:
        """The same scan (same axes, states) over other init/update tensors."""
        return ScanOp(self.name, self.tag, self.attrs, self.scan_axis, init, update,
                      self.state_placeholder, self.inputs, self.spatial_axis_)


def _check_scan(name: str, axis: IterVar, init: tuple[Tensor, ...], update: tuple[Tensor, ...],
                states: tuple[Tensor, ...]) -> None:
    if not init:
        raise ValueError(f"scan {name}: needs at least one state (init, update, state_placeholder)")
    if not len(init) == len(update) == len(states):
        raise ValueError(f"scan {name}: init, update and state_placeholder must have the same "
                         f"length, got {len(init)}, {len(update)} and {len(states)}")
    for what, ts in (("init", init), ("update", update), ("state_placeholder", states)):
        for t in ts:
            if not isinstance(t, Tensor):
                raise TypeError(f"scan {name}: {what} must be te.Tensors, got {type(t).__name__} {t!r}")
    t0 = axis.known_dom.min
    for k, (i, u, s) in enumerate(zip(init, update, states)):
        if not isinstance(s.op, PlaceholderOp):
            raise TypeError(f"scan {name}: state_placeholder {k} ({s.name}) must be a te.placeholder "
                            "(the update reads earlier time steps through it)")
        if isinstance(u.op, PlaceholderOp):
            raise TypeError(f"scan {name}: update {k} ({u.name}) must be computed (te.compute), "
                            "not a placeholder")
        if not i.dtype == u.dtype == s.dtype:
            raise TypeError(f"scan {name}: state {k}: init ({i.dtype}), update ({u.dtype}) and "
                            f"state_placeholder ({s.dtype}) must have one dtype")
        if not i.ndim == u.ndim == s.ndim or s.ndim == 0:
            raise ValueError(f"scan {name}: state {k}: init ({i.ndim}-d), update ({u.ndim}-d) and "
                             f"state_placeholder ({s.ndim}-d) must have the same number of "
                             "dimensions, at least 1 (the first is time)")
        if not _prove_equal(i.shape[0], t0):
            raise ValueError(f"scan {name}: init {k} ({i.name}) has {i.shape[0]} time steps, the "
                             f"others {t0}: every init covers the same first steps")
        for what, t in (("update", u), ("state_placeholder", s)):
            if not _prove_equal(t.shape[0], update[0].shape[0]):
                raise ValueError(f"scan {name}: {what} {k} ({t.name}) has {t.shape[0]} time steps, "
                                 f"update 0 has {update[0].shape[0]}")
        for d in range(1, s.ndim):
            for what, t in (("init", i), ("update", u)):
                if not _prove_equal(t.shape[d], s.shape[d]):
                    raise ValueError(
                        f"scan {name}: state {k}: {what} {t.name} has shape "
                        f"{[str(x) for x in t.shape]}, the state {[str(x) for x in s.shape]}: "
                        "they must agree in every dimension but the first (time)")


def _as_list(x: Any, what: str) -> list[Tensor]:
    if isinstance(x, Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return list(x)
    raise TypeError(f"scan: {what} must be a te.Tensor or a list of them, got {type(x).__name__} {x!r}")


def scan(init: Any, update: Any, state_placeholder: Any, inputs: Any = None, name: str = "scan",
         tag: str = "", attrs: dict | None = None) -> Tensor | list[Tensor]:
    """A recurrence over time (TVM's ``te.scan``).

    ``init``: the first time steps of each state (shape ``(t0, ...)``); ``update``: each state
    at every time step (shape ``(T, ...)``, reading ``state_placeholder[k][t - 1, ...]`` and so
    on); ``state_placeholder``: ``te.placeholder`` s of shape ``(T, ...)`` standing for the scan's
    outputs inside the update. ``inputs`` (optional, as in TVM) lists the tensors the update
    reads besides the states. One tensor each or lists of the same length (several coupled
    states). Returns the output tensor, or a list for several states.
    """
    _check_name("scan", name)
    init_l = _as_list(init, "init")
    update_l = _as_list(update, "update")
    states = _as_list(state_placeholder, "state_placeholder")
    ins = [] if inputs is None else _as_list(inputs, "inputs")
    for t in ins:
        if not isinstance(t, Tensor):
            raise TypeError(f"scan {name}: inputs must be te.Tensors, got {type(t).__name__} {t!r}")
    if not init_l or not update_l:
        raise ValueError(f"scan {name}: needs at least one state (init, update, state_placeholder)")
    for what, ts in (("init", init_l), ("update", update_l)):
        if not isinstance(ts[0], Tensor) or ts[0].ndim == 0:
            raise ValueError(f"scan {name}: {what} must be tensors with a time dimension first")
    lo, hi = init_l[0].shape[0], update_l[0].shape[0]
    axis = IterVar(Range(lo, hi), Var(f"{name}.idx", hi.dtype), IterVar.Ordered)
    op = ScanOp(name, tag, attrs or {}, axis, init_l, update_l, states, ins)
    res = [op.output(k) for k in range(op.num_outputs)]
    return res[0] if len(res) == 1 else res
