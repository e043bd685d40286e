"""The graph executor's reading of a graph JSON, every problem a ``GraphJSONError`` naming it:
the entries (shapes, dtypes, storage ids: ``parse_entries``), the nodes (``parse_node``: a
``_Node`` with its entries, function, shape arguments and run-time size checks, ``_SizeCheck``),
the inputs and outputs, and the check that the storage plan never shares a storage between
entries live at the same time (``check_storage_plan``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir import dtype as dt
from ..graph_json import GraphJSONError, graph_entry_attrs, parse_graph, size_violation


class _Node:
    __slots__ = ("nid", "name", "op", "func_name", "inputs", "outputs", "shape_args",
                 "size_checks")

    def __init__(self, nid: int, name: str, op: str, func_name: str, inputs: list[int],
                 outputs: list[int], shape_args: list[str] | None = None,
                 size_checks: list[_SizeCheck] | None = None):
        self.nid, self.name, self.op, self.func_name = nid, name, op, func_name
        self.inputs, self.outputs = inputs, outputs
        self.shape_args = shape_args or []  # size variables passed by value after the buffers
        self.size_checks = size_checks or []  # run-time sizes its operators need equal


class _SizeCheck:
    """One ``size_checks`` row of a node: two sizes an operator needs equal at run time
    (relay/size_checks.py), evaluated once per input shapes, before any kernel runs."""

    __slots__ = ("op", "lhs", "rhs", "lhs_what", "rhs_what", "bcast")

    def __init__(self, row: Any, where: str):
        from ..function import compile_dim_expr

        if not (isinstance(row, list) and len(row) == 6):
            raise GraphJSONError(f"graph JSON: {where}: a size_checks row must be [operator, "
                                 f"lhs, rhs, lhs_what, rhs_what, bcast], got {row!r}")
        self.op, lhs, rhs, self.lhs_what, self.rhs_what, bcast = row
        self.bcast = bool(bcast)
        try:
            self.lhs, self.rhs = (compile_dim_expr(str(d))[0] for d in (lhs, rhs))
        except ValueError as e:
            raise GraphJSONError(f"graph JSON: {where}: size_checks: {e}") from None

    def check(self, node: _Node, env: dict[str, int]) -> None:
        try:
            a, b = self.lhs(env), self.rhs(env)
        except KeyError as e:
            raise ValueError(f"run(): graph node {node.nid} ({node.name!r}), {self.op}: shape "
                             f"variable {e.args[0]} is bound by no graph input") from None
        why = size_violation(self.lhs_what, self.rhs_what, a, b, self.bcast)
        if why:
            raise ValueError(f"run(): graph node {node.nid} ({node.name!r}), operator "
                             f"{self.op}: {why}; no kernel was run")


def parse_entries(graph_json: str | dict) -> tuple[dict, list[Any], list[np.dtype], list[int]]:
    """The graph (checked), each entry's shape and numpy dtype, and each entry's storage id
    (``attrs.storage_id``, the memory plan made at compile time; without one, each entry gets
    its own storage)."""
    graph = parse_graph(graph_json)
    try:
        shapes, dtypes = graph_entry_attrs(graph)
    except (ValueError, TypeError) as e:
        raise GraphJSONError(str(e)) from None
    n_entries = graph["node_row_ptr"][-1]
    # the memory plan is made at compile time; without one, each entry gets its own storage
    sids = graph["attrs"].get("storage_id", ["list_int", list(range(n_entries))])
    if not (isinstance(sids, list) and len(sids) == 2 and sids[0] == "list_int"
            and isinstance(sids[1], list) and len(sids[1]) == n_entries
            and all(isinstance(s, int) and s >= 0 for s in sids[1])):
        raise GraphJSONError(f"graph JSON: attrs['storage_id'] must be [\"list_int\", "
                             f"[{n_entries} non-negative ints]]")
    sids = sids[1]
    np_dtypes = []
    for eid, d in enumerate(dtypes):
        try:
            np_dtypes.append(dt.to_numpy(d))
        except Exception:
            raise GraphJSONError(f"graph JSON: entry {eid} has unknown dtype {d!r}") from None
    return graph, shapes, np_dtypes, sids


def parse_entry(ref: Any, where: str, row: list[int]) -> int:
    if not (isinstance(ref, (list, tuple)) and len(ref) >= 2
            and all(isinstance(x, int) for x in ref)):
        raise GraphJSONError(f"graph JSON: {where}: an entry reference must be [node_id, "
                             f"output_index, version], got {ref!r}")
    nid, idx = ref[0], ref[1]
    if not 0 <= nid < len(row) - 1 or not 0 <= idx < row[nid + 1] - row[nid]:
        raise GraphJSONError(f"graph JSON: {where} refers to output {idx} of node {nid}, "
                             "which does not exist")
    return row[nid] + idx


def parse_node(nid: int, nj: Any, row: list[int]) -> _Node:
    if not isinstance(nj, dict) or "op" not in nj or "name" not in nj:
        raise GraphJSONError(f"graph JSON: node {nid} must be an object with \"op\" and "
                             f"\"name\", got {str(nj)[:80]}")
    op, name = nj["op"], str(nj["name"])
    where = f"node {nid} ({name!r})"
    inputs = [parse_entry(x, f"{where} input", row) for x in nj.get("inputs", [])]
    for e in inputs:
        if e >= row[nid]:
            raise GraphJSONError(f"graph JSON: {where} reads entry {e}, which is computed "
                                 "after it (nodes must be in topological order)")
    outputs = list(range(row[nid], row[nid + 1]))
    if op == "null":
        if inputs:
            raise GraphJSONError(f"graph JSON: {where} is an input (\"null\") but has inputs")
        if len(outputs) != 1:
            raise GraphJSONError(f"graph JSON: input {where} must have one entry, "
                                 f"node_row_ptr gives {len(outputs)}")
        return _Node(nid, name, op, "", [], outputs)
    if op != "tvm_op":
        raise GraphJSONError(f"graph JSON: {where} has op {op!r}; expected \"null\" or "
                             "\"tvm_op\"")
    attrs = nj.get("attrs") or nj.get("param") or {}
    func_name = attrs.get("func_name")
    if not isinstance(func_name, str) or not func_name:
        raise GraphJSONError(f"graph JSON: {where} has no attrs.func_name")
    for key, have in (("num_inputs", len(inputs)), ("num_outputs", len(outputs))):
        if key in attrs:
            try:
                want = int(attrs[key])
            except (TypeError, ValueError):
                raise GraphJSONError(f"graph JSON: {where}: attrs.{key} is {attrs[key]!r}, "
                                     "not an integer") from None
            if want != have:
                raise GraphJSONError(f"graph JSON: {where}: attrs.{key} is {want} but the "
                                     f"node has {have}")
    if not outputs:
        raise GraphJSONError(f"graph JSON: {where} has no outputs")
    shape_args = attrs.get("shape_args", [])
    if not (isinstance(shape_args, list) and all(isinstance(v, str) and v.isidentifier()
                                                  for v in shape_args)):
        raise GraphJSONError(f"graph JSON: {where}: attrs.shape_args must be a list of shape "
                             f"variable names, got {shape_args!r}")
    checks = attrs.get("size_checks", [])
    if not isinstance(checks, list):
        raise GraphJSONError(f"graph JSON: {where}: attrs.size_checks must be a list, got "
                             f"{checks!r}")
    return _Node(nid, name, op, func_name, inputs, outputs, shape_args,
                 [_SizeCheck(row, where) for row in checks])


def parse_inputs(graph: dict, nodes: list[_Node]) -> list[int]:
    """The input (``"null"``) nodes in order: ``arg_nodes``, else every ``"null"`` node; their
    names must be unique."""
    arg_nodes = graph.get("arg_nodes")
    if arg_nodes is None:
        arg_nodes = [n.nid for n in nodes if n.op == "null"]
    for nid in arg_nodes:
        if not (isinstance(nid, int) and 0 <= nid < len(nodes)
                and nodes[nid].op == "null"):
            raise GraphJSONError(f"graph JSON: arg_nodes entry {nid!r} is not a \"null\" "
                                 "(input) node")
    names = [nodes[n].name for n in arg_nodes]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise GraphJSONError(f"graph JSON: duplicate input names {dup}")
    return list(arg_nodes)


def parse_outputs(graph: dict, row: list[int]) -> list[int]:
    """The entries of the graph's outputs (``heads``)."""
    if "heads" not in graph:
        raise GraphJSONError("graph JSON: missing 'heads' (the outputs)")
    return [parse_entry(h, "heads", row) for h in graph["heads"]]


def check_storage_plan(nodes: list[_Node], sids: list[int], input_nids: list[int],
                   output_eids: list[int]) -> None:
    """Refuse a storage plan in which two entries that are live at the same time share a
    storage (inputs and outputs are live throughout): it would compute wrong results."""
    n_nodes = len(nodes)
    last_use = [-1] * len(sids)
    for node in nodes:
        for e in node.outputs:
            last_use[e] = node.nid
    for node in nodes:
        for e in node.inputs:
            last_use[e] = max(last_use[e], node.nid)
    for e in output_eids + [nodes[n].outputs[0] for n in input_nids]:
        last_use[e] = n_nodes
    # per storage, the entry last written into it; its last use covers the views of it
    # (``__nop`` outputs in the same storage, any number, chained or not)
    owner: dict[int, int] = {}
    for node in nodes:
        for e in node.outputs:
            prev = owner.get(sids[e])
            if node.func_name == "__nop" and sids[node.inputs[0]] == sids[e]:
                if prev is not None:
                    last_use[prev] = max(last_use[prev], last_use[e])
                continue
            if prev is not None and last_use[prev] >= node.nid:
                what = "a graph input or output" if last_use[prev] == n_nodes else "live"
                raise GraphJSONError(
                    f"graph JSON: storage {sids[e]} holds entry {prev} ({what}) when node "
                    f"{node.nid} ({node.name!r}) writes entry {e} to it: storage_id is not "
                    "a valid memory plan")
            owner[sids[e]] = e
