"""Exact minimisation of a sum of unary and pairwise cost tables over discrete choices.

The graph tuner's problem: one variable per tuned operator (which of its candidate records),
a unary cost per candidate (kernel time, plus the transform of its output back to NCHW where
a consumer needs that) and a pairwise table per edge between two operators (the layout
transform between a producer's output layout and a consumer's input layout). Solved by
variable elimination in min-degree order: on a chain or a tree this is the dynamic
programming of TVM's ``DPTuner`` (each operator's best cost given its neighbour's choice);
on a graph with cycles (residual joins) it is still exact, at a cost exponential in the
graph's induced width (2-3 for residual networks). A table larger than ``MAX_TABLE`` entries
raises (never a silent approximation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["solve", "total_cost", "MAX_TABLE"]

MAX_TABLE = 20_000_000

Factor = tuple[tuple[int, ...], np.ndarray]


def _expand(f: Factor, axes: tuple[int, ...]) -> np.ndarray:
    """The table of factor ``f`` broadcast to the variables ``axes``."""
    vars_, table = f
    order = sorted(range(len(vars_)), key=lambda i: axes.index(vars_[i]))
    t = np.transpose(table, order)
    present = sorted(vars_, key=axes.index)
    shape = [t.shape[present.index(v)] if v in present else 1 for v in axes]
    return t.reshape(shape)


def solve(sizes: Sequence[int], unary: Mapping[int, np.ndarray],
          pairwise: Mapping[tuple[int, int], np.ndarray]) -> tuple[list[int], float]:
    """``(choice per variable, least total cost)`` for variables ``0..len(sizes)-1`` with
    ``sizes[i]`` choices each; ``unary[i]`` has shape ``(sizes[i],)`` and
    ``pairwise[(i, j)]`` shape ``(sizes[i], sizes[j])`` (``i != j``; both orders may be given,
    they add)."""
    n = len(sizes)
    if any(int(s) < 1 for s in sizes):
        raise ValueError(f"every variable needs at least one choice, got sizes {list(sizes)}")
    factors: list[Factor] = []
    for i in range(n):
        u = np.asarray(unary.get(i, np.zeros(sizes[i])), dtype=np.float64)
        if u.shape != (sizes[i],):
            raise ValueError(f"unary cost of variable {i} has shape {u.shape}, want ({sizes[i]},)")
        factors.append(((i,), u))
    neighbours: list[set[int]] = [set() for _ in range(n)]
    for (i, j), m in pairwise.items():
        m = np.asarray(m, dtype=np.float64)
        if i == j or m.shape != (sizes[i], sizes[j]):
            raise ValueError(f"pairwise cost ({i}, {j}) has shape {m.shape}, want "
                             f"({sizes[i]}, {sizes[j]}) with i != j")
        factors.append(((i, j), m))
        neighbours[i].add(j)
        neighbours[j].add(i)
    trace: list[tuple[int, tuple[int, ...], np.ndarray]] = []
    alive = set(range(n))
    constant = 0.0
    while alive:
        v = min(alive, key=lambda x: (len(neighbours[x] & alive), x))
        mine = [f for f in factors if v in f[0]]
        factors = [f for f in factors if v not in f[0]]
        rest = tuple(sorted({u for f in mine for u in f[0]} - {v}))
        axes = rest + (v,)
        size = int(np.prod([sizes[a] for a in axes], dtype=np.int64))
        if size > MAX_TABLE:
            raise RuntimeError(f"graph tuner: eliminating operator {v} needs a table of {size} "
                               f"entries (over {len(axes)} operators); lower max_sch_num")
        joint = np.zeros([sizes[a] for a in axes])
        for f in mine:
            joint = joint + _expand(f, axes)
        trace.append((v, rest, np.argmin(joint, axis=-1)))
        best = np.min(joint, axis=-1)
        if rest:
            factors.append((rest, best))
        else:
            constant += float(best)
        for r in rest:
            neighbours[r] |= set(rest) - {r}
        alive.discard(v)
    choice: list[int] = [0] * n
    for v, rest, arg in reversed(trace):
        choice[v] = int(arg[tuple(choice[u] for u in rest)]) if rest else int(arg)
    return choice, constant


def total_cost(choice: Sequence[int], unary: Mapping[int, np.ndarray],
               pairwise: Mapping[tuple[int, int], np.ndarray]) -> float:
    """The cost of one assignment (to check a solution)."""
    c = sum(float(np.asarray(u)[choice[i]]) for i, u in unary.items())
    return c + sum(float(np.asarray(m)[choice[i], choice[j]]) for (i, j), m in pairwise.items())
