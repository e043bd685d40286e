"""The graph executor's reading of a graph JSON's nodes: each node checked and kept as a
``_Node`` (its entries, function, shape arguments and run-time size checks, ``_SizeCheck``)."""

from __future__ import annotations

from typing import Any

from ..graph_json import (
    GraphJSONError,
    size_violation,
)


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
