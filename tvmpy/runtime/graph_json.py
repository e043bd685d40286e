"""The graph JSON format (TVM's), as the runtime reads it and relay's graph codegen writes it.

    {"nodes": [{"op": "null" | "tvm_op", "name": ..., "inputs": [[nid, index, version], ...],
                "attrs": {"func_name": ..., "num_inputs": ..., "num_outputs": ...}}, ...],
     "arg_nodes": [nid, ...], "heads": [[nid, index, version], ...],
     "node_row_ptr": [0, ...],          # entries of node i: node_row_ptr[i] .. node_row_ptr[i+1]
     "attrs": {"shape": ["list_shape", [...]], "dltype": ["list_str", [...]],
               "storage_id": ["list_int", [...]]}}    # one value per entry

``storage_id`` is the static memory plan, made at compile time
(relay/backend/graph_plan_memory.py); the executor only checks and follows it.
"""

from __future__ import annotations

import copy
import json

import numpy as np

__all__ = ["GraphJSONError", "parse_graph", "graph_entry_attrs", "entry_nbytes"]


class GraphJSONError(ValueError):
    """The graph JSON is malformed or does not match the library."""


def parse_graph(graph_json: str | bytes | dict) -> dict:
    """The graph as a dict (a copy when given a dict); GraphJSONError when it is not JSON."""
    if isinstance(graph_json, dict):
        return copy.deepcopy(graph_json)
    if not isinstance(graph_json, (str, bytes)):
        raise TypeError(f"graph_json must be a JSON string, got {type(graph_json).__name__}")
    try:
        graph = json.loads(graph_json)
    except json.JSONDecodeError as e:
        raise GraphJSONError(f"graph JSON is not valid JSON: {e}") from None
    if not isinstance(graph, dict):
        raise GraphJSONError(f"graph JSON must be an object, got {type(graph).__name__}")
    return graph


def _attr(attrs: dict, key: str, kind: str, n: int) -> list:
    if key not in attrs:
        raise ValueError(f"graph JSON: attrs has no {key!r} (expected [\"{kind}\", [...]] with one "
                         f"value per entry)")
    val = attrs[key]
    if not (isinstance(val, list) and len(val) == 2 and val[0] == kind and isinstance(val[1], list)):
        raise ValueError(f"graph JSON: attrs[{key!r}] must be [\"{kind}\", [...]], got "
                         f"{str(val)[:80]}")
    if len(val[1]) != n:
        raise ValueError(f"graph JSON: attrs[{key!r}] has {len(val[1])} values for {n} entries")
    return val[1]


def graph_entry_attrs(graph: dict) -> tuple[list[tuple[int, ...]], list[str]]:
    """The shape and dtype of every entry, checked against the node count."""
    if not isinstance(graph, dict):
        raise TypeError(f"graph JSON must be an object, got {type(graph).__name__}")
    for key in ("nodes", "node_row_ptr", "attrs"):
        if key not in graph:
            raise ValueError(f"graph JSON: missing {key!r}")
    row = graph["node_row_ptr"]
    if not isinstance(graph["nodes"], list):
        raise ValueError("graph JSON: 'nodes' must be a list")
    if not isinstance(row, list) or len(row) != len(graph["nodes"]) + 1:
        raise ValueError(f"graph JSON: node_row_ptr has {len(row)} values for "
                         f"{len(graph['nodes'])} nodes (expected nodes + 1)")
    if (not all(isinstance(r, int) and not isinstance(r, bool) for r in row) or row[0] != 0
            or any(b < a for a, b in zip(row, row[1:]))):
        raise ValueError(f"graph JSON: node_row_ptr must be non-decreasing ints from 0, got "
                         f"{str(row)[:80]}")
    if not isinstance(graph["attrs"], dict):
        raise ValueError("graph JSON: 'attrs' must be an object")
    n = row[-1]
    shapes = []
    for e, s in enumerate(_attr(graph["attrs"], "shape", "list_shape", n)):
        if not (isinstance(s, list) and all(isinstance(d, int) and not isinstance(d, bool)
                                            and d >= 0 for d in s)):
            raise ValueError(f"graph JSON: entry {e} has shape {s!r}; expected a list of "
                             "non-negative ints")
        shapes.append(tuple(s))
    dtypes = [str(d) for d in _attr(graph["attrs"], "dltype", "list_str", n)]
    return shapes, dtypes


def entry_nbytes(shape: tuple[int, ...], dtype: str) -> int:
    try:
        item = 1 if dtype == "bool" else np.dtype(dtype).itemsize
    except TypeError:
        raise ValueError(f"graph JSON: unknown dtype {dtype!r}") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"graph JSON: negative dimension in shape {shape}")
    return int(np.prod(shape, dtype=np.int64)) * item
