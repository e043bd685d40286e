"""Static memory planning of a graph-JSON graph (the paper's "static memory planning").

``plan_memory(graph)`` assigns every entry (node output) a *storage id*; the executor allocates
one buffer per storage and runs each node on views of them. The rules:

- graph inputs and parameters (``"null"`` nodes) and graph outputs (heads) each get a storage
  of their own, never shared: the user writes the former and reads the latter between runs;
- every other entry is *live* from the node that writes it until its last consumer has run
  (nodes execute in list order). When an intermediate entry needs storage it takes a *free*
  storage (whose entries are all dead), chosen as TVM's planner does: the smallest free block
  of at least the size needed, if it is at most ``MATCH_RANGE`` times too large; otherwise the
  largest smaller free block within ``MATCH_RANGE``, grown to the size needed; otherwise a new
  storage. A node's outputs are allocated before its inputs are freed, so a kernel never
  reads and writes the same memory. An output that nobody reads is freed right after its node.

Sizes are in bytes (dtype-aware), so a float32 buffer can later hold int8 data of the same
size. The result reports the planned bytes against one buffer per entry.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["plan_memory", "MemoryPlan", "entry_nbytes", "graph_entry_attrs", "MATCH_RANGE"]

MATCH_RANGE = 16


@dataclass
class MemoryPlan:
    """Storage assignment: ``storage_id[e]`` for entry ``e``; ``storage_sizes[s]`` in bytes."""

    storage_id: list[int]
    storage_sizes: list[int]
    entry_bytes: list[int] = field(repr=False)
    # per storage: True when it holds a graph input, parameter or output (never shared)
    storage_pinned: list[bool] = field(default_factory=list, repr=False)

    @property
    def planned_bytes(self) -> int:
        return sum(self.storage_sizes)

    @property
    def naive_bytes(self) -> int:
        """Bytes with one buffer per entry (no reuse)."""
        return sum(self.entry_bytes)

    @property
    def num_storages(self) -> int:
        return len(self.storage_sizes)

    @property
    def intermediate_planned_bytes(self) -> int:
        """Planned bytes of the shared storages (inputs, parameters and outputs left out)."""
        return sum(sz for sz, pin in zip(self.storage_sizes, self.storage_pinned) if not pin)

    @property
    def intermediate_naive_bytes(self) -> int:
        pinned = {s for s, pin in enumerate(self.storage_pinned) if pin}
        return sum(b for b, s in zip(self.entry_bytes, self.storage_id) if s not in pinned)

    def __str__(self) -> str:
        saved = 1 - self.planned_bytes / self.naive_bytes if self.naive_bytes else 0.0
        return (f"MemoryPlan: {len(self.storage_id)} entries in {self.num_storages} storages, "
                f"planned {self.planned_bytes} bytes vs {self.naive_bytes} naive "
                f"({saved:.1%} saved); intermediates {self.intermediate_planned_bytes} vs "
                f"{self.intermediate_naive_bytes} bytes")


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


class _FreeList:
    """Free storages ordered by size (ties by id, so planning is deterministic)."""

    def __init__(self) -> None:
        self.items: list[tuple[int, int]] = []  # (size, sid)

    def add(self, size: int, sid: int) -> None:
        bisect.insort(self.items, (size, sid))

    def take(self, size: int) -> int | None:
        """The index in ``items`` of the block to reuse for ``size`` bytes, or None."""
        i = bisect.bisect_left(self.items, (size, -1))
        if i < len(self.items) and self.items[i][0] <= size * MATCH_RANGE:
            return i  # smallest block that is large enough, not wastefully large
        if i > 0 and self.items[i - 1][0] * MATCH_RANGE >= size:
            return i - 1  # largest smaller block: it grows
        return None


def plan_memory(graph: dict) -> MemoryPlan:
    """Assign ``graph["attrs"]["storage_id"]`` in place (see the module docstring) and return
    the plan."""
    shapes, dtypes = graph_entry_attrs(graph)
    nodes = graph["nodes"]
    row = graph["node_row_ptr"]
    n_entries = row[-1]
    sizes = [entry_nbytes(s, d) for s, d in zip(shapes, dtypes)]

    def eid(ref: Any, where: str) -> int:
        if not (isinstance(ref, (list, tuple)) and len(ref) >= 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in ref)):
            raise ValueError(f"graph JSON: {where}: an entry reference must be [node_id, "
                             f"output_index, version], got {ref!r}")
        nid, idx = ref[0], ref[1]
        if not 0 <= nid < len(nodes) or not 0 <= idx < row[nid + 1] - row[nid]:
            raise ValueError(f"graph JSON: {where} refers to output {idx} of node {nid}, which "
                             "does not exist")
        return row[nid] + idx

    heads = {eid(h, "heads") for h in graph.get("heads", [])}
    refcount = [0] * n_entries
    node_inputs: list[list[int]] = []
    for nid, node in enumerate(nodes):
        ins = [eid(x, f"node {nid} ({node.get('name')}) input") for x in node.get("inputs", [])]
        for e in ins:
            if e >= row[nid]:
                raise ValueError(f"graph JSON: node {nid} ({node.get('name')}) reads entry {e}, "
                                 "which is not computed before it (nodes must be in "
                                 "topological order)")
            refcount[e] += 1
        node_inputs.append(ins)

    pinned = set(heads)  # never released: heads and graph inputs/params
    for nid, node in enumerate(nodes):
        if node.get("op") == "null":
            pinned.update(range(row[nid], row[nid + 1]))
    storage_id = [-1] * n_entries
    storage_sizes: list[int] = []
    free = _FreeList()

    def new_storage(size: int) -> int:
        storage_sizes.append(size)
        return len(storage_sizes) - 1

    for nid, node in enumerate(nodes):
        outs = range(row[nid], row[nid + 1])
        if node.get("op") == "null":
            for e in outs:
                storage_id[e] = new_storage(sizes[e])
            continue
        for e in outs:
            if e in heads:
                storage_id[e] = new_storage(sizes[e])
                continue
            i = free.take(sizes[e])
            if i is None:
                storage_id[e] = new_storage(sizes[e])
            else:
                _, sid = free.items.pop(i)
                storage_sizes[sid] = max(storage_sizes[sid], sizes[e])
                storage_id[e] = sid
        # inputs whose last consumer this was, and outputs nobody reads, are dead now
        dead = []
        for e in node_inputs[nid]:
            refcount[e] -= 1
            if refcount[e] == 0:
                dead.append(e)
        dead += [e for e in outs if refcount[e] == 0]
        for e in dead:
            if e not in pinned:
                free.add(storage_sizes[storage_id[e]], storage_id[e])
    graph["attrs"]["storage_id"] = ["list_int", storage_id]
    pinned_sids = {storage_id[e] for e in pinned}
    return MemoryPlan(storage_id, storage_sizes, sizes,
                      [s in pinned_sids for s in range(len(storage_sizes))])
