"""Static memory planning (relay/backend/graph_plan_memory.py, contract C4): hand-built graphs
with known answers, errors, and a property test over random DAGs (no two simultaneously live
entries share a storage; every storage holds its entries; inputs, params and outputs own theirs).
"""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvmpy.relay.backend.graph_plan_memory import MATCH_RANGE, entry_nbytes, plan_memory


class G:
    """A tiny builder of graph-JSON dicts (contract C3)."""

    def __init__(self):
        self.nodes, self.shapes, self.dtypes, self.row = [], [], [], [0]
        self.arg_nodes = []

    def _add(self, node, outs):
        self.nodes.append(node)
        for shape, dtype in outs:
            self.shapes.append(list(shape))
            self.dtypes.append(dtype)
        self.row.append(self.row[-1] + len(outs))
        return len(self.nodes) - 1

    def input(self, name, shape, dtype="float32"):
        nid = self._add({"op": "null", "name": name, "inputs": []}, [(shape, dtype)])
        self.arg_nodes.append(nid)
        return (nid, 0)

    def op(self, name, inputs, outs):
        """outs: list of (shape, dtype); returns the entry refs (node, index)."""
        node = {"op": "tvm_op", "name": name, "inputs": [[n, i, 0] for n, i in inputs],
                "attrs": {"func_name": name, "num_inputs": str(len(inputs)),
                          "num_outputs": str(len(outs)), "flatten_data": "0"}}
        nid = self._add(node, outs)
        return [(nid, k) for k in range(len(outs))]

    def graph(self, heads):
        return {"nodes": self.nodes, "arg_nodes": self.arg_nodes,
                "heads": [[n, i, 0] for n, i in heads], "node_row_ptr": self.row,
                "attrs": {"dltype": ["list_str", self.dtypes],
                          "shape": ["list_shape", self.shapes]}}


def eid(g, ref):
    return g["node_row_ptr"][ref[0]] + ref[1]


F = "float32"


def test_chain_reuses_two_buffers():
    b = G()
    x = b.input("x", (8, 8))
    refs = [x]
    for k in range(6):
        refs = b.op(f"f{k}", refs, [((8, 8), F)])
    g = b.graph(refs)
    plan = plan_memory(g)
    sid = g["attrs"]["storage_id"][1]
    assert sid == plan.storage_id
    inter = [sid[eid(g, (k + 1, 0))] for k in range(5)]  # f0..f4 outputs (f5 is the head)
    assert inter[0] == inter[2] == inter[4] and inter[1] == inter[3] and inter[0] != inter[1]
    # x, two ping-pong buffers, the head
    assert plan.num_storages == 4
    assert plan.planned_bytes == 4 * 256 and plan.naive_bytes == 7 * 256
    assert "planned 1024 bytes vs 1792 naive" in str(plan)
    assert plan.intermediate_planned_bytes == 512 and plan.intermediate_naive_bytes == 5 * 256
    assert "intermediates 512 vs 1280 bytes" in str(plan)


def test_diamond_keeps_shared_input_alive():
    b = G()
    x = b.input("x", (4,))
    (a,) = b.op("a", [x], [((4,), F)])
    (l,) = b.op("l", [a], [((4,), F)])
    (r,) = b.op("r", [a], [((4,), F)])  # a still live: r may not take a's storage
    (d,) = b.op("d", [l, r], [((4,), F)])
    (e,) = b.op("e", [d], [((4,), F)])
    g = b.graph([e])
    plan_memory(g)
    s = {k: g["attrs"]["storage_id"][1][eid(g, v)] for k, v in
         {"x": x, "a": a, "l": l, "r": r, "d": d, "e": e}.items()}
    assert len({s["a"], s["l"], s["r"]}) == 3
    assert s["d"] == s["a"]  # a is dead after r; d reuses it (l, r still being read)
    assert s["e"] not in (s["x"], s["a"], s["l"], s["r"], s["d"])


def test_nop_aliases_and_keeps_its_storage_alive():
    """A "__nop" (reshape view) shares its input's storage; the storage stays taken while
    either entry is live, and for good once the view is a graph output."""
    b = G()
    x = b.input("x", (4, 4))
    (a,) = b.op("a", [x], [((4, 4), F)])
    (v,) = b.op("__nop", [a], [((16,), F)])      # view of a; a itself is dead now
    (c,) = b.op("c", [x], [((4, 4), F)])         # may not take a's storage: v is live
    (d,) = b.op("d", [v, c], [((16,), F)])
    (xv,) = b.op("__nop", [x], [((16,), F)])     # view of a graph input
    (e,) = b.op("e", [d, xv], [((16,), F)])
    (hv,) = b.op("__nop", [e], [((2, 8), F)])    # a graph output through a view
    (f,) = b.op("f", [x], [((4, 4), F)])         # may not take e's storage
    g = b.graph([hv, f])
    plan = plan_memory(g)
    sid = g["attrs"]["storage_id"][1]
    s = {k: sid[eid(g, r)] for k, r in dict(x=x, a=a, v=v, c=c, d=d, xv=xv, e=e, hv=hv,
                                           f=f).items()}
    assert s["v"] == s["a"] and s["c"] != s["a"] and s["xv"] == s["x"] and s["hv"] == s["e"]
    assert s["f"] not in (s["e"], s["x"])
    assert plan.storage_pinned[s["e"]] and plan.storage_pinned[s["x"]]


def test_nop_of_a_graph_output_refused():
    b = G()
    x = b.input("x", (4,))
    (a,) = b.op("a", [x], [((4,), F)])
    (v,) = b.op("__nop", [a], [((2, 2), F)])
    with pytest.raises(ValueError, match="__nop"):
        plan_memory(b.graph([a, v]))


def test_multi_output_node_outputs_distinct_and_unused_output_freed():
    b = G()
    x = b.input("x", (6,))
    o0, o1, o2 = b.op("split", [x], [((2,), F)] * 3)
    (y,) = b.op("g", [o0, o1], [((2,), F)])  # o2 is never read
    (z,) = b.op("h", [y], [((2,), F)])
    g = b.graph([z])
    plan_memory(g)
    sid = g["attrs"]["storage_id"][1]
    outs = [sid[eid(g, r)] for r in (o0, o1, o2)]
    assert len(set(outs)) == 3
    # y is allocated while o0/o1 are live but o2 is already free: y takes o2's storage
    assert sid[eid(g, y)] == outs[2]


def test_inputs_params_and_heads_never_shared():
    b = G()
    x = b.input("x", (16,))
    w = b.input("p0", (16,))
    (a,) = b.op("a", [x, w], [((16,), F)])
    (h1,) = b.op("h1", [a], [((16,), F)])
    (c,) = b.op("c", [h1], [((16,), F)])  # reads a head: the head stays its own
    (h2,) = b.op("h2", [c], [((16,), F)])
    (h3,) = b.op("h3", [h2], [((16,), F)])
    g = b.graph([h1, h2, h3, x])  # an input can be a head too
    plan = plan_memory(g)
    sid = plan.storage_id
    pinned = [eid(g, r) for r in (x, w, h1, h2, h3)]
    for e in pinned:
        assert sid.count(sid[e]) == 1, f"entry {e} shares its storage"
    assert sid[eid(g, c)] == sid[eid(g, a)]


def test_sizes_are_bytes_dtype_aware_and_blocks_grow():
    b = G()
    x = b.input("x", (4,))
    (a,) = b.op("a", [x], [((16,), "float32")])  # 64 bytes
    (c,) = b.op("c", [a], [((8,), "float16")])  # 16 bytes
    (d,) = b.op("d", [c], [((64,), "int8")])  # 64 bytes: takes a's block exactly
    (e,) = b.op("e", [d], [((20,), "float32")])  # 80 bytes: c's 16-byte block grows to 80
    (f,) = b.op("f", [e], [((1,), "float32")])
    g = b.graph([f])
    plan = plan_memory(g)
    sid = plan.storage_id
    assert sid[eid(g, d)] == sid[eid(g, a)]
    assert sid[eid(g, e)] == sid[eid(g, c)]
    assert plan.storage_sizes[sid[eid(g, e)]] == 80
    assert plan.naive_bytes == 16 + 64 + 16 + 64 + 80 + 4


def test_no_reuse_of_far_too_large_or_small_blocks():
    big = 4 * MATCH_RANGE * 4  # floats: 16x more bytes than the small entries, and more
    b = G()
    x = b.input("x", (1,))
    (a,) = b.op("a", [x], [((big,), F)])
    (c,) = b.op("c", [a], [((2,), F)])
    (d,) = b.op("d", [c], [((2,), F)])  # a is free, but > 16x too large for d
    (e,) = b.op("e", [d], [((2,), F)])  # c is free and fits exactly
    (f,) = b.op("f", [e], [((big,), F)])  # free: a (fits), d (far too small)
    (h,) = b.op("h", [f], [((1,), F)])
    g = b.graph([h])
    sid = plan_memory(g).storage_id
    assert sid[eid(g, d)] != sid[eid(g, a)]
    assert sid[eid(g, e)] == sid[eid(g, c)]
    assert sid[eid(g, f)] == sid[eid(g, a)]

    b = G()
    x = b.input("x", (1,))
    (a,) = b.op("a", [x], [((1,), F)])
    (c,) = b.op("c", [a], [((1,), F)])
    (d,) = b.op("d", [c], [((big,), F)])  # a's 4-byte block is far too small to grow
    (e,) = b.op("e", [d], [((1,), F)])
    g = b.graph([e])
    sid = plan_memory(g).storage_id
    assert sid[eid(g, d)] not in (sid[eid(g, a)], sid[eid(g, c)])


def test_empty_and_bool_entries():
    b = G()
    x = b.input("x", (0, 3))
    (a,) = b.op("a", [x], [((0, 3), F)])
    (m,) = b.op("m", [a], [((5,), "bool")])
    g = b.graph([m])
    plan = plan_memory(g)
    assert plan.storage_sizes[plan.storage_id[eid(g, m)]] == 5
    assert entry_nbytes((0, 3), F) == 0


@pytest.mark.parametrize("mutate, msg", [
    (lambda g: g["attrs"].pop("shape"), "no 'shape'"),
    (lambda g: g["attrs"].update(dltype=["list_int", [1]]), "must be [\"list_str\""),
    (lambda g: g["attrs"]["dltype"][1].append(F), "4 values for 3 entries"),
    (lambda g: g["node_row_ptr"].pop(), "node_row_ptr has 3 values for 3 nodes"),
    (lambda g: g["nodes"][1].update(inputs=[[7, 0, 0]]), "node 7, which does not exist"),
    (lambda g: g["nodes"][1].update(inputs=[[2, 0, 0]]), "topological order"),
    (lambda g: g.update(heads=[[2, 3, 0]]), "output 3 of node 2"),
    (lambda g: g["attrs"]["dltype"][1].__setitem__(1, "floaty"), "unknown dtype 'floaty'"),
    (lambda g: g.pop("nodes"), "missing 'nodes'"),
    (lambda g: g["attrs"]["shape"][1].__setitem__(0, [3, 1.5]), "entry 0 has shape [3, 1.5]"),
    (lambda g: g["attrs"]["shape"][1].__setitem__(0, [-1]), "non-negative ints"),
    (lambda g: g.update(node_row_ptr=[0, 2, 1, 3]), "non-decreasing ints from 0"),
])
def test_malformed_graphs(mutate, msg):
    b = G()
    x = b.input("x", (3,))
    (a,) = b.op("a", [x], [((3,), F)])
    (c,) = b.op("c", [a], [((3,), F)])
    g = b.graph([c])
    mutate(g)
    with pytest.raises(ValueError, match=pytest.importorskip("re").escape(msg)):
        plan_memory(g)


def test_plan_is_json_serializable_and_idempotent():
    b = G()
    x = b.input("x", (3, 5))
    refs = [x]
    for k in range(4):
        refs = b.op(f"f{k}", refs, [((3, 5), F)])
    g = b.graph(refs)
    p1 = plan_memory(g).storage_id
    p2 = plan_memory(json.loads(json.dumps(g))).storage_id
    assert p1 == p2


# ---- property test over random DAGs -------------------------------------------------------------
DTYPES = ["float32", "float16", "int8", "int64", "bool"]


@st.composite
def random_graphs(draw):
    b = G()
    entries = []
    for k in range(draw(st.integers(1, 3))):
        entries.append(b.input(f"in{k}", (draw(st.integers(0, 9)),),
                               draw(st.sampled_from(DTYPES))))
    for k in range(draw(st.integers(1, 14))):
        ins = draw(st.lists(st.sampled_from(entries), min_size=1, max_size=3))
        nout = draw(st.integers(1, 3))
        outs = [((draw(st.integers(0, 40)),), draw(st.sampled_from(DTYPES))) for _ in range(nout)]
        entries.extend(b.op(f"op{k}", ins, outs))
    heads = draw(st.lists(st.sampled_from(entries), min_size=1, max_size=3))
    return b.graph(heads)


def check_plan(g, plan):
    row, nodes = g["node_row_ptr"], g["nodes"]
    n_entries = row[-1]
    sid = plan.storage_id
    assert len(sid) == n_entries and g["attrs"]["storage_id"] == ["list_int", sid]
    size = [entry_nbytes(tuple(s), d) for s, d in zip(g["attrs"]["shape"][1],
                                                      g["attrs"]["dltype"][1])]
    node_of = [nid for nid in range(len(nodes)) for _ in range(row[nid], row[nid + 1])]
    last_use = list(node_of)
    for nid, n in enumerate(nodes):
        for ref in n["inputs"]:
            e = row[ref[0]] + ref[1]
            last_use[e] = max(last_use[e], nid)
    pinned = {row[h[0]] + h[1] for h in g["heads"]}
    pinned |= {row[nid] for nid, n in enumerate(nodes) if n["op"] == "null"}
    inf = len(nodes) + 1
    life = [(node_of[e], inf if e in pinned else last_use[e]) for e in range(n_entries)]
    for e in range(n_entries):
        assert plan.storage_sizes[sid[e]] >= size[e]
    for e1 in range(n_entries):
        for e2 in range(e1 + 1, n_entries):
            if sid[e1] != sid[e2]:
                continue
            assert e1 not in pinned and e2 not in pinned
            u1, d2 = life[e1][1], life[e2][0]
            # e2 (later) may only take e1's storage after e1's last reader ran
            assert d2 > u1, f"entries {e1} {life[e1]} and {e2} {life[e2]} overlap in {sid[e1]}"
    assert plan.planned_bytes <= plan.naive_bytes
    assert plan.naive_bytes == sum(size)
    assert plan.intermediate_planned_bytes <= plan.intermediate_naive_bytes
    assert plan.planned_bytes - plan.intermediate_planned_bytes == sum(
        size[e] for e in pinned)


@settings(max_examples=300, deadline=None)
@given(random_graphs())
def test_random_dags_property(g):
    check_plan(g, plan_memory(g))


def test_reuse_actually_happens_on_long_random_graphs():
    rng = np.random.default_rng(0)
    b = G()
    entries = [b.input("x", (32,))]
    for k in range(60):
        ins = [entries[-1]] + ([entries[int(rng.integers(max(0, len(entries) - 4),
                                                         len(entries)))]] if k % 3 else [])
        entries.extend(b.op(f"op{k}", ins, [((32,), F)]))
    g = b.graph([entries[-1]])
    plan = plan_memory(g)
    check_plan(g, plan)
    assert plan.num_storages <= 8 and plan.planned_bytes * 5 < plan.naive_bytes
