"""The graph JSON format (TVM's), as the runtime reads it and relay's graph codegen writes it.

    {"nodes": [{"op": "null" | "tvm_op", "name": ..., "inputs": [[nid, index, version], ...],
                "attrs": {"func_name": ..., "num_inputs": ..., "num_outputs": ...}}, ...],
     "arg_nodes": [nid, ...], "heads": [[nid, index, version], ...],
     "node_row_ptr": [0, ...],          # entries of node i: node_row_ptr[i] .. node_row_ptr[i+1]
     "attrs": {"shape": ["list_shape", [...]], "dltype": ["list_str", [...]],
               "storage_id": ["list_int", [...]]}}    # one value per entry

``storage_id`` is the static memory plan, made at compile time
(relay/backend/graph_plan_memory.py); the executor only checks and follows it.

A graph compiled with symbolic dimensions (``relay.Any()``, ``te.var``) writes such a dimension
as a string: a shape variable (``"batch_1"``) or an integer expression of them
(``"batch_1 * 48"``, the syntax of ``runtime.function.compile_dim_expr``). The variables are
bound from the graph inputs' shapes at run time (``SymbolicShape``).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["GraphJSONError", "parse_graph", "graph_entry_attrs", "entry_nbytes",
           "SymbolicShape", "is_symbolic"]


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
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise GraphJSONError(f"graph JSON is not valid JSON: {e}") from None
    except RecursionError:
        raise GraphJSONError("graph JSON is nested too deeply to be read") from None
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
        if not (isinstance(s, list) and all((isinstance(d, int) and not isinstance(d, bool)
                                             and d >= 0) or (isinstance(d, str) and d)
                                            for d in s)):
            raise ValueError(f"graph JSON: entry {e} has shape {s!r}; expected a list of "
                             "non-negative ints (or symbolic dimensions as strings)")
        shapes.append(tuple(s))
    dtypes = [str(d) for d in _attr(graph["attrs"], "dltype", "list_str", n)]
    return shapes, dtypes


def is_symbolic(shape: Sequence[Any]) -> bool:
    """Whether a graph shape has a symbolic (string) dimension."""
    return any(isinstance(d, str) for d in shape)


def _getter(name: str) -> Callable[[Any], int]:
    def get(env: Any) -> int:
        return int(env[name])

    return get


class SymbolicShape:
    """A graph shape with symbolic dimensions, evaluated for given shape-variable values.

    ``SymbolicShape(["batch_1", 3, "batch_1 * 2"])``: ``.vars`` the variables it reads,
    ``.dims_of_var`` for each variable the dimensions that are exactly it (they bind it from an
    input's shape), ``.eval(env)`` the concrete shape (ValueError when a variable is unbound or
    a dimension comes out negative)."""

    def __init__(self, dims: Sequence[Any]):
        from .function import compile_dim_expr

        self.dims = tuple(dims)
        self.vars: set[str] = set()
        self.dims_of_var: dict[str, list[int]] = {}
        self._fns: list[Callable[[Any], int] | int] = []
        for k, d in enumerate(self.dims):
            if isinstance(d, str):
                if d.isidentifier():
                    self.dims_of_var.setdefault(d, []).append(k)
                    self.vars.add(d)
                    self._fns.append(_getter(d))
                else:
                    fn, names = compile_dim_expr(d)
                    self.vars |= names
                    self._fns.append(fn)
            else:
                self._fns.append(int(d))

    def eval(self, env: Mapping[str, int]) -> tuple[int, ...]:
        out = []
        for k, f in enumerate(self._fns):
            if isinstance(f, int):
                out.append(f)
                continue
            try:
                v = int(f(env))
            except KeyError as e:
                raise ValueError(f"shape {self}: dimension {k} ({self.dims[k]}) reads shape "
                                 f"variable {e.args[0]}, which no graph input binds") from None
            except ZeroDivisionError:
                raise ValueError(f"shape {self}: dimension {k} ({self.dims[k]}) divides by "
                                 f"zero for {dict(env)}") from None
            if v < 0:
                raise ValueError(f"shape {self}: dimension {k} ({self.dims[k]}) is {v} for "
                                 f"{dict(env)}")
            out.append(v)
        return tuple(out)

    def __str__(self) -> str:
        return "(" + ", ".join(str(d) for d in self.dims) + ")"


def entry_nbytes(shape: tuple[int, ...], dtype: str) -> int:
    try:
        item = 1 if dtype == "bool" else np.dtype(dtype).itemsize
    except TypeError:
        raise ValueError(f"graph JSON: unknown dtype {dtype!r}") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"graph JSON: negative dimension in shape {shape}")
    return math.prod(int(d) for d in shape) * item  # exact: an int64 product could wrap


def size_violation(lhs_what: str, rhs_what: str, a: int, b: int, bcast: bool) -> str | None:
    """Why two run-time sizes an operator needs equal (``bcast``: or one of them 1) are not:
    the executors' message for a graph node's ``size_checks`` row; None when they are."""
    if a == b or (bcast and 1 in (a, b)):
        return None
    return (f"{lhs_what} is {a}, but {rhs_what} is {b}: they must be equal"
            + (" or one of them 1 (broadcasting)" if bcast else ""))
