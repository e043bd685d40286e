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
  reads and writes the same memory. An output that nobody reads is freed right after its node;
- the output of a ``"__nop"`` node (a reshape-only function, no kernel) takes its input's
  storage: that storage is free again once every entry in it is dead, and never when the
  output is a graph output.

Sizes are in bytes (dtype-aware), so a float32 buffer can later hold int8 data of the same
size. The result reports the planned bytes against one buffer per entry.

Symbolic shapes (a graph built with ``relay.Any()`` dimensions): the storage ids depend only on
liveness, so they stay valid for every value of the shape variables; the sizes used to choose
among free blocks evaluate each variable at ``SIZE_HINT``, and the executor sizes each storage
for the actual shapes at run time (the largest entry it holds).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from ...runtime.graph_json import SymbolicShape, entry_nbytes, graph_entry_attrs, is_symbolic

__all__ = ["plan_memory", "MemoryPlan", "entry_nbytes", "graph_entry_attrs", "MATCH_RANGE",
           "MAX_TENSOR_BYTES"]

MATCH_RANGE = 16
MAX_TENSOR_BYTES = 2**63 - 1  # larger tensors overflow 64-bit sizes and offsets
SIZE_HINT = 1  # the value of every shape variable when sizing symbolic entries for the plan


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


def _hinted(shape: tuple) -> tuple[int, ...]:
    if not is_symbolic(shape):
        return shape
    sym = SymbolicShape(shape)
    return sym.eval(dict.fromkeys(sym.vars, SIZE_HINT))


def plan_memory(graph: dict) -> MemoryPlan:
    """Assign ``graph["attrs"]["storage_id"]`` in place (see the module docstring) and return
    the plan."""
    shapes, dtypes = graph_entry_attrs(graph)
    nodes = graph["nodes"]
    row = graph["node_row_ptr"]
    n_entries = row[-1]
    sizes = [entry_nbytes(_hinted(s), d) for s, d in zip(shapes, dtypes)]
    for e, size in enumerate(sizes):
        if size > MAX_TENSOR_BYTES:
            nid = bisect.bisect_right(row, e) - 1
            raise ValueError(
                f"graph: output {e - row[nid]} of node {nid} ({nodes[nid].get('name')}) is a "
                f"tensor of shape {tuple(shapes[e])} {dtypes[e]}: {size} bytes, more than a "
                "64-bit machine can address (2**63 - 1)")

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

    storage_id = [-1] * n_entries
    storage_sizes: list[int] = []
    live: list[int] = []  # per storage: its entries not dead yet
    pinned_sids: set[int] = set()  # never freed: of graph inputs, parameters and outputs
    free = _FreeList()

    def new_storage(size: int) -> int:
        storage_sizes.append(size)
        live.append(1)
        return len(storage_sizes) - 1

    for nid, node in enumerate(nodes):
        outs = range(row[nid], row[nid + 1])
        if node.get("op") == "null":
            for e in outs:
                storage_id[e] = new_storage(sizes[e])
                pinned_sids.add(storage_id[e])
            continue
        nop = node.get("attrs", {}).get("func_name") == "__nop"
        if nop and (len(node_inputs[nid]) != 1 or len(outs) != 1
                    or sizes[node_inputs[nid][0]] != sizes[outs[0]]
                    or node_inputs[nid][0] in heads):
            raise ValueError(f"graph JSON: node {nid} ({node.get('name')}) is a __nop, which "
                             "needs one input of the output's size that is not a graph output")
        for e in outs:
            if nop:
                storage_id[e] = storage_id[node_inputs[nid][0]]
                live[storage_id[e]] += 1
                if e in heads:  # the input's storage is the output's from now on
                    pinned_sids.add(storage_id[e])
                continue
            if e in heads:
                storage_id[e] = new_storage(sizes[e])
                pinned_sids.add(storage_id[e])
                continue
            i = free.take(sizes[e])
            if i is None:
                storage_id[e] = new_storage(sizes[e])
            else:
                _, sid = free.items.pop(i)
                storage_sizes[sid] = max(storage_sizes[sid], sizes[e])
                storage_id[e] = sid
                live[sid] = 1
        # inputs whose last consumer this was, and outputs nobody reads, are dead now
        dead = []
        for e in node_inputs[nid]:
            refcount[e] -= 1
            if refcount[e] == 0:
                dead.append(e)
        dead += [e for e in outs if refcount[e] == 0]
        for e in dead:
            sid = storage_id[e]
            live[sid] -= 1
            if sid not in pinned_sids and live[sid] == 0:
                free.add(storage_sizes[sid], sid)
    graph["attrs"]["storage_id"] = ["list_int", storage_id]
    return MemoryPlan(storage_id, storage_sizes, sizes,
                      [s in pinned_sids for s in range(len(storage_sizes))])
