"""Graph codegen: a fused ``main`` (contract C1) -> TVM's graph JSON (contract C3) + params.

Walks ``main`` in topological order: its parameters become "null" input nodes (by name),
each non-scalar Constant a "null" parameter node named ``p0``, ``p1``, ... whose value goes into
``params`` (as TVM names bound constants), and each call of a primitive function a ``tvm_op``
node calling the lowered symbol. Tuple / TupleGetItem are not nodes: they only route entries
(``[node, output index, 0]``). The heads are main's result, flattened. Storage ids come from
the static memory planner (``graph_plan_memory.plan_memory``, contract C4).

Symbolic shapes (``relay.Any``): an entry's symbolic dimensions are written as the printed
expression (``"N_1 * 4"``); a kernel that needs a size variable it cannot read off its buffers
lists it in the node attribute ``shape_args`` (the executor passes its value after the
buffers).

A primitive function that only reshapes its one argument (``reshape``, ``squeeze``,
``expand_dims``, ``nn.batch_flatten``: the same bytes in the same order, see
:func:`is_reshape_only`) becomes a ``"__nop"`` node, as in TVM: its output shares its
input's storage (the planner aliases them; a graph input is only ever copied into, so a view
of it stays valid; when the result is a graph output, the argument's storage is then kept as
that output's) and no kernel runs. Where the argument is a graph output, or the result is a
graph output and the argument a graph input, the function is lowered and runs as a copy.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from ...ir.functor import post_order
from ..expr import Call, Constant, Function, RelayExpr, Tuple, TupleGetItem, Var
from ..size_checks import dim_json, size_checks_of
from ..ty import TensorType
from ..visitor import dataflow_children
from .te_compiler import flat_tensor_types, primitive_calls, primitive_shape_args

__all__ = ["GraphCodegen", "GraphCodegenError", "codegen_graph", "is_reshape_only",
           "RESHAPE_OPS"]

Entry = list[int]  # [node id, output index, version]

RESHAPE_OPS = frozenset({"reshape", "squeeze", "expand_dims", "nn.batch_flatten"})
"""Operators whose result is their (row-major) input's bytes under another shape."""


def is_reshape_only(func: Function) -> bool:
    """Whether primitive ``func`` (one tensor parameter) is a chain of :data:`RESHAPE_OPS`
    on that parameter, result dtype and size equal to the parameter's (a view of its bytes)."""
    if len(func.params) != 1:
        return False
    e = func.body
    while isinstance(e, Call):
        if getattr(e.op, "name", None) not in RESHAPE_OPS or len(e.args) != 1:
            return False
        e = e.args[0]
    if e is not func.params[0] or e is func.body:
        return False
    src, dst = func.params[0].checked_type, func.body.checked_type
    if not (isinstance(src, TensorType) and isinstance(dst, TensorType)) \
            or src.dtype != dst.dtype:
        return False
    dims = [getattr(d, "value", d) for d in (*src.shape, *dst.shape)]
    if not all(isinstance(d, (int, np.integer)) for d in dims):
        # symbolic sizes (relay.Any): a view when the element counts are provably equal (the
        # executor sizes the shared storage per run and checks the two sizes agree)
        from ...arith import Analyzer
        from ...tir import const

        def count(shape: Any) -> Any:
            n: Any = const(1, "int64")
            for d in shape:
                n = n * (const(int(d), "int64") if isinstance(d, (int, np.integer))
                         else d.astype("int64") if d.dtype != "int64" else d)
            return n

        return Analyzer().can_prove_equal(count(src.shape), count(dst.shape))
    return int(np.prod([int(getattr(d, "value", d)) for d in src.shape])) == \
        int(np.prod([int(getattr(d, "value", d)) for d in dst.shape]))


class GraphCodegenError(ValueError):
    """``main`` is not in the fused form the graph codegen expects."""


def _graph_shape(t: TensorType, what: str) -> list[int | str]:
    """The shape of an entry in the graph JSON: ints, and symbolic dimensions (``Any``,
    ``te.var`` and expressions of them) as their printed expression, which the executor
    evaluates once the inputs' shapes bind the variables."""
    from ...runtime.function import compile_dim_expr

    out: list[int | str] = []
    for d in t.shape:
        d = getattr(d, "value", d)
        if isinstance(d, (int, np.integer)):
            out.append(int(d))
            continue
        text = str(d)
        try:
            compile_dim_expr(text)
        except ValueError as e:
            raise GraphCodegenError(f"{what}: dimension {d} of {t} cannot be evaluated at run "
                                    f"time by the graph executor: {e}") from None
        out.append(text)
    return out


class GraphCodegen:
    """Builds the graph of one fused main. ``lower(func) -> symbol`` lowers (or looks up)
    a primitive function and returns its library symbol."""

    def __init__(self, lower: Callable[[Function], str]):
        self.lower = lower
        self.nodes: list[dict[str, Any]] = []
        self.entry_types: list[list[TensorType]] = []  # per node, its output types
        self.arg_nodes: list[int] = []
        self.params: dict[str, np.ndarray] = {}
        self.input_names: set[str] = set()
        self._next_param = 0
        self.memo: dict[int, list[Entry]] = {}
        self._nops: dict[int, Function] = {}  # node id -> its reshape-only function

    # ---- nodes ------------------------------------------------------------------------------
    def _add(self, node: dict[str, Any], types: list[TensorType]) -> list[Entry]:
        nid = len(self.nodes)
        self.nodes.append(node)
        self.entry_types.append(types)
        if node["op"] == "null":
            self.arg_nodes.append(nid)
        return [[nid, k, 0] for k in range(len(types))]

    def _var(self, v: Var) -> list[Entry]:
        t = v.checked_type
        if not isinstance(t, TensorType):
            raise GraphCodegenError(f"input %{v.name_hint} has type {t}; graph inputs must be "
                                    "tensors")
        return self._add({"op": "null", "name": v.name_hint, "inputs": []}, [t])

    def _constant(self, c: Constant) -> list[Entry]:
        name = f"p{self._next_param}"
        while name in self.input_names:  # an input already has this name: skip it
            self._next_param += 1
            name = f"p{self._next_param}"
        self._next_param += 1
        arr = c.data.numpy()  # read-only; the factory copies it into an NDArray
        if arr.ndim == 0 or not arr.flags.c_contiguous:
            arr = np.array(arr, order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
        self.params[name] = arr
        return self._add({"op": "null", "name": name, "inputs": []}, [c.checked_type])

    def _call(self, call: Call) -> list[Entry]:
        func = call.op
        if not (isinstance(func, Function) and func.attrs.get("Primitive")):
            what = getattr(func, "name", None) or type(func).__name__
            raise GraphCodegenError(f"main calls {what} outside a primitive function; "
                                    "graph codegen needs the fused form (run FuseOps)")
        inputs = [e for a in call.args for e in self.memo[id(a)]]
        out_types = flat_tensor_types(call.checked_type, "primitive call")
        if len(inputs) == 1 and is_reshape_only(func):
            self._nops[len(self.nodes)] = func  # (lowered after all if it cannot alias)
            node = {"op": "tvm_op", "name": "reshape_nop", "inputs": inputs,
                    "attrs": {"func_name": "__nop", "num_inputs": "1", "num_outputs": "1",
                              "flatten_data": "0"}}
            return self._add(node, out_types)
        symbol = self.lower(func)
        node = {"op": "tvm_op", "name": symbol, "inputs": inputs,
                "attrs": {"func_name": symbol, "num_inputs": str(len(inputs)),
                          "num_outputs": str(len(out_types)), "flatten_data": "0"}}
        shape_args = primitive_shape_args(func)
        if shape_args:  # symbolic sizes the kernel cannot read off its buffers: passed by value
            node["attrs"]["shape_args"] = [v.name for v in shape_args]
        checks = graph_size_checks(func)
        if checks:  # run-time sizes the operators need equal: checked before any kernel runs
            node["attrs"]["size_checks"] = checks
        return self._add(node, out_types)

    def _lower_node(self, e: RelayExpr) -> list[Entry]:
        if isinstance(e, Var):
            return self._var(e)
        if isinstance(e, Constant):
            return self._constant(e)
        if isinstance(e, Call):
            return self._call(e)
        if isinstance(e, Tuple):
            return [x for f in e.fields for x in self.memo[id(f)]]
        if isinstance(e, TupleGetItem):
            fields = e.tuple_value.checked_type.fields
            start = sum(len(flat_tensor_types(f)) for f in fields[: e.index])
            n = len(flat_tensor_types(fields[e.index]))
            return self.memo[id(e.tuple_value)][start:start + n]
        raise GraphCodegenError(f"{type(e).__name__} in main is not supported by the graph "
                                "executor (only operators, tuples and their items)")

    # ---- driver -----------------------------------------------------------------------------
    def codegen(self, main: Function) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """``(graph, params)``: the C3 graph as a dict (storage ids not yet planned)."""
        names = [p.name_hint for p in main.params]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise GraphCodegenError(f"main has several inputs named {dup}; graph inputs are "
                                    "set by name, so names must be unique")
        self.input_names = set(names)
        for p in main.params:  # inputs first, in main's order, even when unused
            self.memo[id(p)] = self._var(p)
        # inputs first, any depth (the callee of a call, a primitive function, is not a node)
        for e in post_order(main.body, dataflow_children, self.memo):
            if isinstance(e, Var):
                raise GraphCodegenError(f"free variable %{e.name_hint} in main")
            self.memo[id(e)] = self._lower_node(e)
        heads = self.memo[id(main.body)]
        if not heads:
            raise GraphCodegenError("main returns an empty tuple; a graph needs an output")
        head_entries = {(h[0], h[1]) for h in heads}
        for nid, func in self._nops.items():
            src = self.nodes[nid]["inputs"][0]
            if (src[0], src[1]) in head_entries or (
                    (nid, 0) in head_entries and self.nodes[src[0]]["op"] == "null"):
                # a graph output is not a view of another output, nor of an input: a copy
                symbol = self.lower(func)
                self.nodes[nid]["name"] = symbol
                self.nodes[nid]["attrs"]["func_name"] = symbol
                shape_args = primitive_shape_args(func)
                if shape_args:  # (a symbolic reshape: sizes passed by value, as for any call)
                    self.nodes[nid]["attrs"]["shape_args"] = [v.name for v in shape_args]
        row_ptr = [0]
        shapes: list[list[int | str]] = []
        dtypes: list[str] = []
        for nid, types in enumerate(self.entry_types):
            row_ptr.append(row_ptr[-1] + len(types))
            for t in types:
                shapes.append(_graph_shape(t, f"node {self.nodes[nid]['name']}"))
                dtypes.append(str(t.dtype))
        self._check_bound(shapes)
        graph = {"nodes": self.nodes, "arg_nodes": self.arg_nodes,
                 "heads": [list(h) for h in heads], "node_row_ptr": row_ptr,
                 "attrs": {"dltype": ["list_str", dtypes], "shape": ["list_shape", shapes],
                           "storage_id": ["list_int", list(range(len(dtypes)))]}}
        return graph, self.params


    def _check_bound(self, shapes: list[list[int | str]]) -> None:
        """Every shape variable must be a dimension of a graph input: the executor binds them
        from the inputs' shapes. A size that only data or a broadcast of two unknown sizes
        decides (a fresh ``Any``) is refused here, naming the node and dimension."""
        from ...runtime.graph_json import SymbolicShape

        row = 0
        bound: set[str] = set()
        entries = []
        for nid, types in enumerate(self.entry_types):
            for k in range(len(types)):
                entries.append((nid, k, shapes[row]))
                row += 1
        for nid, _k, shape in entries:
            if self.nodes[nid]["op"] == "null":
                bound |= set(SymbolicShape(shape).dims_of_var)
        for nid, k, shape in entries:
            sym = SymbolicShape(shape)
            free = sorted(sym.vars - bound)
            if free:
                node = self.nodes[nid]
                dims = [d for d, x in enumerate(shape) if isinstance(x, str)
                        and any(v in x for v in free)]
                raise GraphCodegenError(
                    f"node {nid} ({node['name']}) output {k} has shape "
                    f"({', '.join(map(str, shape))}): dimension(s) {dims} ({', '.join(free)}) "
                    "are not sizes of any graph input, so the graph executor cannot compute "
                    "them before running (a size decided by data: relay.vm.compile runs such "
                    "graphs); give the inputs static or shared shapes")


def codegen_graph(main: Function, lower: Callable[[Function], str], plan: bool = True
                  ) -> tuple[str, dict[str, np.ndarray], Any]:
    """``(graph_json, params, memory_plan)`` of a fused, typed ``main``.

    ``lower(func)`` returns the library symbol of a primitive function. With ``plan`` the
    storage ids are assigned by ``graph_plan_memory.plan_memory`` (else one per entry and
    ``memory_plan`` is None)."""
    if not isinstance(main, Function):
        raise TypeError(f"codegen_graph takes the main relay Function, got {type(main).__name__}")
    graph, params = GraphCodegen(lower).codegen(main)
    memory_plan = None
    if plan:
        from .graph_plan_memory import plan_memory

        memory_plan = plan_memory(graph)
    return json.dumps(graph), params, memory_plan


def graph_size_checks(func: Function) -> list[list[Any]]:
    """The run-time size equalities of a primitive function's operators (relay/size_checks.py)
    as the graph JSON node attribute ``size_checks``: ``[operator, lhs, rhs, lhs_what,
    rhs_what, bcast]`` per equality, the sizes written as the entries' shapes are."""
    from ...runtime.function import compile_dim_expr

    out: list[list[Any]] = []
    for call in reversed(primitive_calls(func)):
        for c in size_checks_of(call):
            row = [str(getattr(call.op, "name", "op")), dim_json(c.lhs), dim_json(c.rhs),
                   c.lhs_what, c.rhs_what, int(c.bcast)]
            for d in row[1:3]:
                try:
                    compile_dim_expr(str(d))
                except ValueError as e:
                    raise GraphCodegenError(f"{call.op.name}: the run-time check {c} cannot be "
                                            f"evaluated by the graph executor: {e}") from None
            if row not in out:
                out.append(row)
    return out


def first_symbolic_entry(graph: dict) -> str | None:
    """The first node output of a graph with a run-time (symbolic) dimension, as
    ``node 3 (fused_add) output 0 dimension 0 (any_1 of shape (any_1, 3))``; None when every
    shape is static."""
    row = graph["node_row_ptr"]
    shapes = graph["attrs"]["shape"][1]
    for nid, node in enumerate(graph["nodes"]):
        for k, e in enumerate(range(row[nid], row[nid + 1])):
            dims = [d for d, x in enumerate(shapes[e]) if isinstance(x, str)]
            if dims:
                shape = ", ".join(map(str, shapes[e]))
                return (f"node {nid} ({node['name']}) output {k} dimension {dims[0]} "
                        f"({shapes[e][dims[0]]} of shape ({shape}))")
    return None
