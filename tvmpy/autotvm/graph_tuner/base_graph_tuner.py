"""The graph tuner (TVM's ``autotvm.graph_tuner``): choose one tuned record per convolution
of a relay graph so that the kernels' time plus the layout transforms between them is least.

On x86 a convolution runs in ``NCHW{b}c`` layouts (``ic_bn`` blocks in, ``oc_bn`` out); its
records say which blocks they were tuned for (the workload's packed kernel shape; tune several
blockings of a convolution with :func:`layout_tasks`). Between a producer with output blocks
``oc_bn`` and a consumer reading ``ic_bn`` blocks, the build inserts a ``layout_transform``
unless they are equal; a consumer outside the tuned convolutions (flatten, dense, a graph
output) reads NCHW, so the producer's output is transformed back. The graph tuner:

1. walks the graph: each tuned convolution (``target_ops``, with records) is a node; a value
   keeps the layout of the node that produced it through layout-preserving operators
   (elementwise, broadcast, pooling, batch norm); a join (``add`` of two branches) converts its
   other inputs to the first one's layout;
2. per node, keeps the best record of each distinct blocking, the ``max_sch_num`` fastest;
3. ``benchmark_layout_transform`` times every transform the choices can need (built as
   ``relay.build`` builds them), or with ``infer_layout=True`` times the largest and scales the
   others by their size;
4. ``run`` minimises kernel time + transform time exactly (:mod:`.solver`: TVM's dynamic
   programming on chains and trees, variable elimination on graphs with joins);
5. ``write_opt_sch2record_file(path)`` writes the chosen records; ``autotvm.apply_graph_best
   (path)`` around ``relay.build`` makes the layout pass use their blocks and the templates
   their configs.

Convolutions without a record keep the target's default layout policy and count as opaque.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...relay.expr import Call, Constant, Function, Tuple, TupleGetItem, Var
from ...relay.transform.layout_demand import passes_blocked_layout
from ...relay.transform.simplify_inference import SimplifyInference
from ...relay.type_infer import infer_type
from ...relay.visitor import dataflow_post_order
from ...target import as_target
from ..task.dispatcher import _target_key
from ..task.graph_best import conv_key, conv_record_layout
from .solver import solve, total_cost

__all__ = ["BaseGraphTuner"]

_LOG = logging.getLogger("autotvm")

_Layout = tuple[Any, ...]  # (shape NCHW, src block or None, dst block or None, dtype)


def _shape(t: Any) -> tuple[int, ...] | None:
    shape = getattr(t, "shape", None)
    if shape is None or not all(isinstance(d, (int, np.integer)) for d in shape):
        return None
    return tuple(int(d) for d in shape)


def _layout_name(block: int | None) -> str:
    return "NCHW" if block is None else f"NCHW{block}c"


class _Node:
    """A tuned convolution of the graph and its candidate records."""

    def __init__(self, index: int, call: Call, key: tuple, candidates: list[tuple[Any, Any]]):
        self.index = index
        self.call = call
        self.key = key
        self.candidates = candidates  # (MeasureInput, MeasureResult), fastest first
        blocks = [conv_record_layout(inp.task.workload) for inp, _ in candidates]
        self.blocks = [(b[1], b[2]) for b in blocks if b is not None]

    def costs(self) -> np.ndarray:
        return np.array([_mean(res) for _, res in self.candidates])


def _mean(res: Any) -> float:
    return float(np.mean([float(c) for c in res.costs]))


class BaseGraphTuner:
    """Common part of :class:`DPTuner` and :class:`PBQPTuner` (TVM's signature).

    Parameters
    ----------
    graph : relay.Function or IRModule
        The network (its ``main``), NCHW convolutions as ``nn.conv2d``.
    input_shapes : dict of str to tuple
        The shape of each graph input, checked against the graph.
    records : str or iterable of (MeasureInput, MeasureResult)
        Kernel tuning records (a log path or pairs).
    target_ops : list of relay Op or str
        The operators to choose layouts for: ``[relay.op.get("nn.conv2d")]``.
    target : str or Target
    max_sch_num : int
        Candidates kept per node: the fastest record of each blocking, this many blockings.
    dtype : str
    verbose, log_file, log_level, name : TVM's logging arguments; the messages go to the
        ``autotvm`` logger (``log_file``: also appended there when given).
    """

    def __init__(self, graph: Any, input_shapes: dict[str, Sequence[int]], records: Any,
                 target_ops: Sequence[Any], target: Any, max_sch_num: int = 20,
                 dtype: str = "float32", verbose: bool = True, log_file: str | None = None,
                 log_level: int = logging.DEBUG, name: str = "graph_tuner"):
        del verbose, log_level
        self.name = name
        self._target = as_target(target)
        self._dtype = dtype
        if int(max_sch_num) < 1:
            raise ValueError(f"max_sch_num must be >= 1, got {max_sch_num}")
        self._max_sch_num = int(max_sch_num)
        ops = [getattr(o, "name", o) for o in target_ops]
        unsupported = [o for o in ops if o != "nn.conv2d"]
        if not ops or unsupported:
            raise ValueError(f"graph tuner: target_ops must be [relay.op.get('nn.conv2d')] here "
                             f"(the layouts it chooses are those of x86 convolutions); got "
                             f"{ops}")
        self._handler: logging.Handler | None = None
        if log_file:
            self._handler = logging.FileHandler(log_file)
            _LOG.addHandler(self._handler)
        func = graph["main"] if hasattr(graph, "functions") else graph
        if not isinstance(func, Function):
            raise TypeError(f"graph tuner: graph must be a relay Function or IRModule, got "
                            f"{type(graph).__name__}")
        # the graph AlterOpLayout sees: batch_norm / dropout already folded into arithmetic
        self._func = infer_type(SimplifyInference().transform_function(infer_type(func), None,
                                                                         None))
        self._check_inputs(input_shapes)
        self._records = self._load(records)
        self._nodes: list[_Node] = []
        self._edges: dict[tuple[int, int], list[_Layout]] = {}  # (producer, consumer)
        self._joins: dict[tuple[int, int], list[_Layout]] = {}  # (other input, first input)
        self._to_plain: dict[int, list[_Layout]] = {}
        self._walk()
        if not self._nodes:
            raise RuntimeError("graph tuner: no nn.conv2d of the graph has a tuning record in "
                               "records (tune the tasks of autotvm.task.extract_from_program "
                               "first)")
        self._layout_cost: dict[_Layout, float] = {}
        self._choice: list[int] | None = None
        self.best_cost: float | None = None

    # ---- graph analysis ----------------------------------------------------------------------
    def _check_inputs(self, input_shapes: dict[str, Sequence[int]]) -> None:
        params = {p.name_hint: p for p in self._func.params}
        for name, shape in input_shapes.items():
            if name not in params:
                raise ValueError(f"graph tuner: input {name!r} is not a parameter of the graph "
                                 f"(parameters: {sorted(params)})")
            have = _shape(params[name].checked_type)
            if have is not None and tuple(int(d) for d in shape) != have:
                raise ValueError(f"graph tuner: input {name!r} has shape {have} in the graph, "
                                 f"input_shapes says {tuple(shape)}")

    def _load(self, records: Any) -> list[tuple[Any, Any]]:
        from .. import record

        if isinstance(records, (str, os.PathLike)):
            records = record.load_from_file(records)
        kind = _target_key(self._target)
        return [(i, r) for i, r in record.split_by_cpu(records, self._target, "graph tuner",
                                                       "left out")
                if r.error_no == 0 and _target_key(i.target) == kind]

    def _candidates(self, key: tuple) -> list[tuple[Any, Any]]:
        best: dict[tuple[int, int], tuple[Any, Any]] = {}
        for inp, res in self._records:
            lay = conv_record_layout(inp.task.workload)
            if lay is None or lay[0] != key:
                continue
            blocks = (lay[1], lay[2])
            if blocks not in best or _mean(res) < _mean(best[blocks][1]):
                best[blocks] = (inp, res)
        ranked = sorted(best.values(), key=lambda p: _mean(p[1]))
        return ranked[:self._max_sch_num]

    def _conv_key(self, call: Call) -> tuple | None:
        a = call.attrs
        if a.data_layout != "NCHW" or a.kernel_layout != "OIHW":
            return None
        d, w = (_shape(x.checked_type) for x in call.args)
        if d is None or w is None or len(d) != 4:
            return None
        if a.groups == 1:
            kind = "conv"
        elif a.groups == d[1] and w[0] == d[1] and w[1] == 1:
            kind = "depthwise"
        else:
            return None
        return conv_key(kind, d, w, a.strides, a.padding, a.dilation,
                        call.args[0].checked_type.dtype)

    def _preserves(self, call: Call) -> bool:
        """Whether the build keeps a blocked layout through ``call``: the op's layout rule
        (``relay/transform/layout_rules.py``) as AlterOpLayout asks it."""
        return any(passes_blocked_layout(call, i) for i in range(len(call.args)))

    def _walk(self) -> None:
        src: dict[int, int | None] = {}  # id(expr) -> node carrying the layout, or None
        skipped = 0
        for e in dataflow_post_order(self._func.body):
            s: int | None = None
            if isinstance(e, (Var, Constant)):
                s = None
            elif isinstance(e, TupleGetItem):
                s = src.get(id(e.tuple_value)) if e.index == 0 else None
            elif isinstance(e, Tuple):
                for f in e.fields:
                    self._needs_plain(src.get(id(f)), f)
            elif isinstance(e, Call):
                name = getattr(e.op, "name", "")
                key = self._conv_key(e) if name == "nn.conv2d" else None
                cands = self._candidates(key) if key is not None else []
                if cands:
                    node = _Node(len(self._nodes), e, key, cands)
                    self._nodes.append(node)
                    p = src.get(id(e.args[0]))
                    if p is not None:
                        self._add(self._edges, (p, node.index), e.args[0])
                    s = node.index
                elif name == "nn.conv2d" and key is not None:
                    skipped += 1  # untuned: the default policy decides; opaque here
                elif self._preserves(e):
                    first = None
                    for a in e.args:
                        q = src.get(id(a))
                        if q is None:
                            continue
                        if first is None:
                            first = q
                        elif q != first:
                            self._add(self._joins, (q, first), a)
                    s = first
                else:
                    for a in e.args:
                        self._needs_plain(src.get(id(a)), a)
            src[id(e)] = s
        self._needs_plain(src.get(id(self._func.body)), self._func.body)
        if skipped:
            _LOG.info("graph tuner: %d nn.conv2d without a tuning record keep the default "
                      "layout", skipped)

    def _add(self, table: dict, pair: tuple[int, int], value: Any) -> None:
        shape = _shape(value.checked_type)
        if shape is not None:
            table.setdefault(pair, []).append((shape, value.checked_type.dtype))

    def _needs_plain(self, node: int | None, value: Any) -> None:
        if node is None:
            return
        shape = _shape(getattr(value, "checked_type", None))
        if shape is not None and len(shape) == 4:
            self._to_plain.setdefault(node, []).append((shape, value.checked_type.dtype))

    # ---- layout transforms ---------------------------------------------------------------------
    def _transforms(self) -> set[_Layout]:
        need: set[_Layout] = set()
        for (p, c), vals in self._edges.items():
            for shape, dt in vals:
                for (_, ob) in self._nodes[p].blocks:
                    for (ib, _) in self._nodes[c].blocks:
                        if ob != ib:
                            need.add((shape, ob, ib, dt))
        for (q, f), vals in self._joins.items():
            for shape, dt in vals:
                for (_, oq) in self._nodes[q].blocks:
                    for (_, of) in self._nodes[f].blocks:
                        if oq != of:
                            need.add((shape, oq, of, dt))
        for n, vals in self._to_plain.items():
            for shape, dt in vals:
                for (_, ob) in self._nodes[n].blocks:
                    need.add((shape, ob, None, dt))
        return {t for t in need if t[0][1] % (t[1] or 1) == 0 and t[0][1] % (t[2] or 1) == 0}

    def benchmark_layout_transform(self, min_exec_num: int = 100, timeout: float = 10,
                                   use_rpc: bool = False, device_key: str | None = None,
                                   host: str = "localhost", port: int = 9190,
                                   n_parallel: int = 1, build_func: str = "default",
                                   layout_records: Any = None, target_host: Any = None,
                                   infer_layout: bool = False, runner: Any = None) -> None:
        """Time every layout transform the choices can need (seconds per run, mean of
        ``min_exec_num`` runs), as ``relay.build`` builds a ``layout_transform``.
        ``infer_layout``: time the largest transform only and scale the others by their number
        of elements. RPC measurement (``use_rpc``), ``layout_records`` and ``runner`` are not
        supported here (TVM's other arguments are accepted)."""
        del timeout, device_key, host, port, n_parallel, build_func, target_host
        if use_rpc or runner is not None or layout_records is not None:
            raise ValueError("benchmark_layout_transform: use_rpc / runner / layout_records are "
                             "not supported; the transforms are timed on this machine")
        if int(min_exec_num) < 1:
            raise ValueError(f"min_exec_num must be >= 1, got {min_exec_num}")
        need = sorted(self._transforms(), key=lambda t: (-math.prod(t[0]), str(t)))
        if infer_layout and need:
            base = need[0]
            per_elem = self._time_transform(base, int(min_exec_num)) / math.prod(base[0])
            for t in need:
                self._layout_cost[t] = per_elem * math.prod(t[0])
        else:
            for t in need:
                self._layout_cost[t] = self._time_transform(t, int(min_exec_num))
        _LOG.info("graph tuner: timed %d layout transform(s)%s", len(need),
                  " (inferred from the largest)" if infer_layout else "")

    def _time_transform(self, t: _Layout, number: int) -> float:
        from ... import relay
        from ...contrib import graph_executor
        from ...runtime import cpu
        from ...transform import PassContext

        shape, src, dst, dtype = t
        n, c, h, w = shape
        in_shape = (n, c, h, w) if src is None else (n, c // src, h, w, src)
        x = relay.var("x", shape=in_shape, dtype=dtype)
        y = relay.layout_transform(x, _layout_name(src), _layout_name(dst))
        with PassContext(opt_level=3):
            lib = relay.build(relay.Function([x], y), target=self._target)
        dev = cpu(0)
        m = graph_executor.GraphModule(lib["default"](dev))
        m.set_input("x", np.random.default_rng(0).random(in_shape).astype(dtype))
        return float(m.benchmark(dev, number=number, repeat=1).mean)

    def _cost_of(self, shape: tuple, src: int | None, dst: int | None, dtype: str) -> float:
        if src == dst:
            return 0.0
        t = (shape, src, dst, dtype)
        if t not in self._layout_cost:
            if t[0][1] % (src or 1) or t[0][1] % (dst or 1):
                return math.inf  # blocks that do not divide the channels: not a valid choice
            raise RuntimeError("graph tuner: layout transforms not timed yet; call "
                               "benchmark_layout_transform() before run()")
        return self._layout_cost[t]

    # ---- the problem and its solution ----------------------------------------------------------
    def _problem(self) -> tuple[list[int], dict[int, np.ndarray], dict[tuple[int, int], np.ndarray]]:
        sizes = [len(n.candidates) for n in self._nodes]
        unary = {n.index: n.costs() for n in self._nodes}
        for i, vals in self._to_plain.items():
            node = self._nodes[i]
            unary[i] = unary[i] + np.array([sum(self._cost_of(s, ob, None, dt) for s, dt in vals)
                                            for _, ob in node.blocks])
        pairwise: dict[tuple[int, int], np.ndarray] = {}
        for (p, c), vals in self._edges.items():
            pn, cn = self._nodes[p], self._nodes[c]
            m = np.array([[sum(self._cost_of(s, ob, ib, dt) for s, dt in vals)
                           for (ib, _) in cn.blocks] for (_, ob) in pn.blocks])
            pairwise[(p, c)] = pairwise.get((p, c), 0) + m
        for (q, f), vals in self._joins.items():
            qn, fn = self._nodes[q], self._nodes[f]
            m = np.array([[sum(self._cost_of(s, oq, of, dt) for s, dt in vals)
                           for (_, of) in fn.blocks] for (_, oq) in qn.blocks])
            pairwise[(q, f)] = pairwise.get((q, f), 0) + m
        return sizes, unary, pairwise

    def run(self, **kwargs: Any) -> None:
        """Choose one record per node minimising kernel + layout transform time."""
        del kwargs
        if not self._layout_cost and self._transforms():
            self.benchmark_layout_transform(min_exec_num=10)
        sizes, unary, pairwise = self._problem()
        choice, cost = solve(sizes, unary, pairwise)
        self._choice, self.best_cost = choice, cost
        default = total_cost([0] * len(sizes), unary, pairwise)
        _LOG.info("graph tuner %s: %d convolution(s), estimated %.3f ms (fastest kernels alone: "
                  "%.3f ms)", self.name, len(sizes), cost * 1e3, default * 1e3)

    def get_optimal_records(self) -> list[tuple[Any, Any]]:
        """The chosen ``(MeasureInput, MeasureResult)`` of each node, in graph order."""
        if self._choice is None:
            raise RuntimeError("graph tuner: call run() first")
        return [n.candidates[k] for n, k in zip(self._nodes, self._choice)]

    def write_opt_sch2record_file(self, record_file: str = "graph_opt_schedule.log") -> None:
        """Write the chosen records (one log line each) for ``autotvm.apply_graph_best``."""
        from .. import record

        with open(record_file, "w", encoding="utf-8") as f:
            for inp, res in self.get_optimal_records():
                f.write(record.encode(inp, res) + "\n")
        if self._handler is not None:
            _LOG.removeHandler(self._handler)
            self._handler.close()
            self._handler = None

    @property
    def node_blocks(self) -> list[list[tuple[int, int]]]:
        """The ``(ic_bn, oc_bn)`` of each node's candidates (graph order)."""
        return [list(n.blocks) for n in self._nodes]


