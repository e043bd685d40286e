"""``ComputeDAG``: the operations of a tensor-expression compute and their analysis (Ansor's
``ComputeDAG`` and ``AccessAnalyzer``).

The DAG holds the operations in topological order (placeholders included, producers first:
the order of ``te.create_schedule``'s stages, so a stage id of a :class:`State` is an index
into both). Per operation it records what the sketch rules ask: is it injective / elementwise,
does it reduce, is it an output, who consumes it, how it reads its inputs, and whether it needs
multi-level tiling (a reduction with data reuse: an input read without one of the spatial
axes, as matmul's ``A[i, k]`` misses ``j``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..te import schedule as te_schedule
from ..te.tensor import ComputeOp, Operation, PlaceholderOp, Tensor
from ..tir import expr as E
from ..tir.functor import post_order_visit

if TYPE_CHECKING:
    from .loop_state import State

__all__ = ["ComputeDAG", "OpInfo"]


@dataclass
class OpInfo:
    """What the sketch rules need to know about one operation of the DAG."""

    is_placeholder: bool
    is_injective: bool = False  # a compute without reduction
    is_elementwise: bool = False  # injective, reads every input at exactly its own indices
    is_strictly_inlineable: bool = False  # injective, no branch, no expensive call
    has_branch: bool = False  # if_then_else / select (padding)
    has_expensive_op: bool = False  # exp, log, sqrt, ... (worth computing once)
    has_reduction: bool = False
    is_output: bool = False
    needs_multi_level_tiling: bool = False
    consumers: list[int] = field(default_factory=list)
    producers: list[int] = field(default_factory=list)
    # input op index -> list of index tuples (as PrimExprs) this op reads it with
    read_accesses: dict[int, list[tuple[Any, ...]]] = field(default_factory=dict)
    spatial_extents: list[int | None] = field(default_factory=list)
    reduce_extents: list[int | None] = field(default_factory=list)


def _const(x: Any) -> int | None:
    return x.value if isinstance(x, E.IntImm) else (x if isinstance(x, int) else None)


def _accesses(op: ComputeOp) -> dict[int, list[tuple[Any, ...]]]:
    """``id(input op) -> [indices, ...]`` of every read of ``op``'s body."""
    out: dict[int, list[tuple[Any, ...]]] = {}

    def visit(n: Any) -> None:
        if isinstance(n, E.ProducerLoad):
            out.setdefault(id(n.producer.op), []).append(tuple(n.indices))

    for b in op.body:
        post_order_visit(b, visit)
    return out


_CHEAP_CALLS = frozenset({"if_then_else", "likely", "reinterpret", "fabs", "abs", "floor", "ceil",
                          "trunc", "round", "nearbyint", "isnan", "isinf", "isfinite"})


def branch_and_expensive(op: ComputeOp) -> tuple[bool, bool]:
    """Does ``op``'s body branch (if_then_else, select), does it call an expensive
    intrinsic (exp, log, sqrt, tanh, an external function ...)?"""
    flags = [False, False]

    def visit(n: Any) -> None:
        if isinstance(n, E.Select):
            flags[0] = True
        elif isinstance(n, E.Call):
            name = str(n.op)
            if name == "if_then_else":
                flags[0] = True
            elif name not in _CHEAP_CALLS:
                flags[1] = True

    for b in op.body:
        post_order_visit(b, visit)
    return flags[0], flags[1]


def same_index(idx: Any, iv: Any) -> bool:
    """Whether index expression ``idx`` reads axis ``iv`` at its own position: the axis'
    variable, or the constant 0 on an axis of extent 1 (relay's broadcast of a batch of one
    reads ``x[0, i, j]``)."""
    if idx is iv.var:
        return True
    return (isinstance(idx, E.IntImm) and idx.value == 0
            and _const(iv.known_dom.extent) == 1)


def read_accesses(op: ComputeOp) -> dict[int, list[tuple[Any, ...]]]:
    """``id(input op) -> [indices, ...]`` of every read of ``op``'s body."""
    return _accesses(op)


def has_data_reuse(op: ComputeOp) -> bool:
    """A reduction some input of which is read without one of the spatial axes (of extent
    > 1): each loaded element serves several outputs, so tiling keeps it in cache/registers."""
    if not op.reduce_axis:
        return False
    big = {id(iv.var) for iv in op.axis if _const(iv.known_dom.extent) != 1}
    for lst in _accesses(op).values():
        used: set[int] = set()
        for idx in lst:
            for x in idx:
                used |= _vars_of(x)
        if big - used:
            return True
    return False


def _vars_of(e: Any) -> set[int]:
    vs: set[int] = set()
    post_order_visit(e, lambda n: vs.add(id(n)) if isinstance(n, E.Var) else None)
    return vs


class ComputeDAG:
    """The compute of ``tensors`` (inputs and outputs, TVM's ``ComputeDAG(io_tensors)``) or of
    a registered workload key."""

    def __init__(self, compute: Any):
        if isinstance(compute, str):
            from .workload_registry import workload_key_to_tensors

            tensors = workload_key_to_tensors(compute)
            self.workload_key: str | None = compute
        else:
            tensors = list(compute) if isinstance(compute, (list, tuple)) else [compute]
            self.workload_key = None
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"ComputeDAG: expected te.Tensors, got {type(t).__name__} {t!r}")
        outs = [t for t in tensors if not isinstance(t.op, PlaceholderOp)]
        if not outs:
            raise ValueError("ComputeDAG: the tensors hold no computation (only placeholders)")
        self.tensors: list[Tensor] = tensors
        # outputs: computed tensors no other given computed tensor reads (TVM: the last ones)
        self.outputs = [t for t in outs]
        sch = te_schedule.create_schedule([t.op for t in self.outputs])
        self.ops: list[Operation] = [st.op for st in sch.stages]
        for t in tensors:
            if not any(t.op is op for op in self.ops):
                raise ValueError(f"ComputeDAG: tensor {t.name} is not used by the outputs")
        self._analyse(sch)

    # ---- analysis -----------------------------------------------------------------------------
    def _analyse(self, sch: Any) -> None:
        index = {id(op): k for k, op in enumerate(self.ops)}
        self.op_info: list[OpInfo] = []
        for k, op in enumerate(self.ops):
            if not isinstance(op, ComputeOp):
                self.op_info.append(OpInfo(is_placeholder=True))
                continue
            info = OpInfo(is_placeholder=False)
            info.is_output = sch.stages[k].is_output
            info.has_reduction = bool(op.reduce_axis)
            info.is_injective = not info.has_reduction
            acc = _accesses(op)
            info.read_accesses = {index[i]: v for i, v in acc.items() if i in index}
            info.producers = sorted(info.read_accesses)
            axis_vars = [iv.var for iv in op.axis]
            info.is_elementwise = info.is_injective and all(
                len(idx) == len(axis_vars) and all(same_index(a, iv) for a, iv in zip(idx, op.axis))
                for lst in info.read_accesses.values() for idx in lst)
            info.has_branch, info.has_expensive_op = branch_and_expensive(op)
            info.is_strictly_inlineable = (info.is_injective and not info.has_branch
                                           and not info.has_expensive_op)
            info.spatial_extents = [_const(iv.known_dom.extent) for iv in op.axis]
            info.reduce_extents = [_const(iv.known_dom.extent) for iv in op.reduce_axis]
            info.needs_multi_level_tiling = has_data_reuse(op)
            self.op_info.append(info)
        for k, info in enumerate(self.op_info):
            for p in info.producers:
                self.op_info[p].consumers.append(k)

    def flop_ct(self) -> int:
        from ..autotvm.task.task import compute_flop

        try:
            return int(compute_flop(te_schedule.create_schedule([t.op for t in self.outputs])))
        except Exception:  # noqa: BLE001 - a compute the counter does not know (extern ...)
            return -1

    # ---- states and schedules -------------------------------------------------------------------
    def init_state(self) -> State:
        """The state with no step: one root loop nest per stage."""
        from .loop_state import State

        return State(self, [])

    def apply_steps_from_state(self, state: State) -> tuple[Any, list[Tensor]]:
        """Replay ``state``'s steps on a fresh schedule: ``(te.Schedule, args)``."""
        from .transform_step import replay

        if state.dag is not self and state.dag.workload_key != self.workload_key:
            raise ValueError("apply_steps_from_state: the state belongs to another ComputeDAG")
        ctx = replay(self, state.transform_steps, check_complete=True)
        return ctx.sch, list(self.tensors)

    def print_python_code_from_state(self, state: State) -> str:
        """The TE schedule primitives ``state``'s steps amount to, as Python source."""
        from .transform_step import print_python

        return print_python(self, state.transform_steps)

    def __str__(self) -> str:
        lines = []
        for op, info in zip(self.ops, self.op_info):
            if info.is_placeholder:
                lines.append(f"{op.name} = PLACEHOLDER {list(op.output(0).shape)}")
            else:
                kind = ("reduction" if info.has_reduction else
                        "elementwise" if info.is_elementwise else "injective")
                lines.append(f"{op.name}: {kind}{' output' if info.is_output else ''}"
                             f"{' multi-level-tiling' if info.needs_multi_level_tiling else ''}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"ComputeDAG({[op.name for op in self.ops]})"

    def stage_index(self, op_or_tensor: Any) -> int:
        op = op_or_tensor.op if isinstance(op_or_tensor, Tensor) else op_or_tensor
        for k, o in enumerate(self.ops):
            if o is op:
                return k
        raise ValueError(f"{getattr(op, 'name', op)!r} is not an operation of this ComputeDAG")


