"""ConfigSpace: subspace sizes per policy, entity <-> index mapping, apply() on real schedules,
JSON round trip, fallback defaults."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tvmpy as tvm
from tvmpy import te
from tvmpy.autotvm.space import (
    AnnotateEntity,
    ConfigEntity,
    ConfigSpace,
    FallbackConfigEntity,
    InstantiationError,
    ReorderEntity,
    SplitEntity,
    get_factors,
    get_pow2s,
)

RNG = np.random.default_rng(7)


def _count_ordered_factorizations(n: int, parts: int) -> int:
    """Ordered (parts-1)-tuples of inner sizes whose product divides n (brute force)."""
    if parts == 1:
        return 1
    return sum(_count_ordered_factorizations(n // f, parts - 1) for f in get_factors(n))


# ---------------------------------------------------------------------------------------------
# sizes of each policy, against hand-computed counts
@pytest.mark.parametrize("extent,n,expect", [
    (12, 2, 6),      # divisors of 12
    (12, 3, 18),     # ordered x*y*z = 12: C(4,2) * C(3,2)
    (8, 4, 20),      # 2^3 into 4 ordered parts: C(6,3)
    (1024, 2, 11),
    (7, 2, 2),
    (1, 3, 1),
])
def test_split_factors_count(extent, n, expect):
    cfg = ConfigSpace()
    cfg.define_split("t", extent, num_outputs=n)
    assert len(cfg) == expect == _count_ordered_factorizations(extent, n)
    for e in cfg.space_map["t"].entities:
        assert e.size[0] == -1 and extent % math.prod(e.size[1:]) == 0


def test_split_power2_verbose_candidate_max_factor():
    cfg = ConfigSpace()
    cfg.define_split("p2", 12, policy="power2")                 # 1 2 4 8
    cfg.define_split("p3", 12, policy="power2", num_outputs=3)  # pairs of pow2 with product <= 12
    cfg.define_split("vb", 12, policy="verbose")                # {1,2,3,4,6,12} | {8}
    cfg.define_split("mf", 12, max_factor=4)                    # 1 2 3 4
    cfg.define_split("cd", 100, policy="candidate", num_outputs=3,
                     candidate=[[-1, 5, 4], [-1, 3, 7], [1, 1, 1]])
    assert cfg.dims() == [4, 10, 7, 4, 3]
    assert len(cfg) == 4 * 10 * 7 * 4 * 3
    assert sorted(e.size[1] for e in cfg.space_map["vb"].entities) == [1, 2, 3, 4, 6, 8, 12]
    assert [e.size for e in cfg.space_map["cd"].entities] == [[-1, 5, 4], [-1, 3, 7], [-1, 1, 1]]
    assert get_pow2s(12) == [1, 2, 4, 8] and get_factors(12) == [1, 2, 3, 4, 6, 12]


def test_reorder_annotate_knob_counts():
    s = _matmul_schedule(8, 8, 8)[0]
    C = s.outputs[0]
    i, j = C.axis
    k = C.reduce_axis[0]
    cfg = ConfigSpace()
    cfg.define_reorder("all", [i, j, k, i], policy="all")               # 4! (duplicate objects ok)
    cfg.define_reorder("iv", [i, j, k, i], policy="interval_all", interval=(1, 3))  # 2!
    cfg.define_reorder("cd", [i, j, k], policy="candidate", candidate=[[i, j, k], [k, j, i]])
    cfg.define_reorder("id", [i, j, k], policy="identity")
    cfg.define_annotate("tu", [i, j, k], policy="try_unroll")            # 2^3
    cfg.define_annotate("tv", [i, j, k], policy="try_vec")               # 2
    cfg.define_annotate("tuv", [i, j, k], policy="try_unroll_vec")       # 2^2 * 3
    cfg.define_annotate("un", [i, j], policy="unroll")
    cfg.define_annotate("no", [i, j], policy="none")
    cfg.define_knob("kn", [1, "a", 2.5, True])
    assert cfg.dims() == [24, 2, 2, 1, 8, 2, 12, 1, 1, 4]
    assert [e.perm for e in cfg.space_map["iv"].entities] == [[0, 1, 2, 3], [0, 2, 1, 3]]
    assert [e.perm for e in cfg.space_map["cd"].entities] == [[0, 1, 2], [2, 1, 0]]
    assert cfg.space_map["tv"].entities[1].anns == ["none", "none", "vec"]
    assert cfg.space_map["un"].entities[0].anns == ["unroll", "unroll"]
    assert all(e.anns[:2].count("vec") == 0 for e in cfg.space_map["tuv"].entities)


def test_bad_definitions_raise():
    cfg = ConfigSpace()
    with pytest.raises(ValueError, match="num_outputs"):
        cfg.define_split("a", 16, num_outputs=5)
    with pytest.raises(ValueError, match="policy"):
        cfg.define_split("b", 16, policy="nope")
    with pytest.raises(ValueError, match="candidate"):
        cfg.define_split("c", 16, policy="candidate")
    with pytest.raises(ValueError, match="positive"):
        cfg.define_split("d", 0)
    cfg.define_knob("k", [1, 2])
    with pytest.raises(ValueError, match="twice"):
        cfg.define_knob("k", [3])
    with pytest.raises(ValueError, match="non-empty"):
        cfg.define_knob("e", [])
    with pytest.raises(ValueError, match="interval"):
        cfg.define_reorder("r", [1, 2, 3], policy="interval_all", interval=(2, 9))
    with pytest.raises(ValueError, match="policy"):
        cfg.define_annotate("an", [1, 2], policy="magic")
    with pytest.raises(KeyError, match="not defined"):
        cfg["missing"]
    with pytest.raises(IndexError):
        cfg.get(len(cfg))
    with pytest.raises(IndexError):
        cfg.get(-1)


# ---------------------------------------------------------------------------------------------
# entity <-> index mapping
_knob = st.one_of(
    st.tuples(st.just("split"), st.integers(1, 40), st.integers(2, 4),
              st.sampled_from(["factors", "power2", "verbose"])),
    st.tuples(st.just("knob"), st.integers(1, 5)),
    st.tuples(st.just("reorder"), st.integers(1, 4), st.sampled_from(["all", "identity"])),
    st.tuples(st.just("annotate"), st.integers(1, 3),
              st.sampled_from(["try_unroll", "try_vec", "try_unroll_vec", "none"])),
)


def _build_space(knobs) -> ConfigSpace:
    cfg = ConfigSpace()
    for n, kd in enumerate(knobs):
        name = f"k{n}"
        if kd[0] == "split":
            cfg.define_split(name, kd[1], num_outputs=kd[2], policy=kd[3])
        elif kd[0] == "knob":
            cfg.define_knob(name, list(range(10, 10 + kd[1])))
        elif kd[0] == "reorder":
            cfg.define_reorder(name, list(range(kd[1])), policy=kd[2])
        else:
            cfg.define_annotate(name, list(range(kd[1])), policy=kd[2])
    return cfg


@settings(max_examples=40, deadline=None)
@given(st.lists(_knob, min_size=0, max_size=4), st.data())
def test_index_mapping_round_trips(knobs, data):
    cfg = _build_space(knobs)
    assert len(cfg) == math.prod(cfg.dims())
    n = len(cfg)
    if n <= 3000:
        indices = range(n)
    else:
        indices = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=200))
    seen = set()
    for i in indices:
        e = cfg.get(i)
        assert e.index == i
        knob = cfg.point2knob(i)
        assert cfg.knob2point(knob) == i
        assert all(0 <= k < d for k, d in zip(knob, cfg.dims()))
        # the entity of each knob is the subspace's entity at that digit
        for (name, space), k in zip(cfg.space_map.items(), knob):
            assert e[name] == space[k]
        key = tuple(repr(v) for v in e._entity_map.values())
        seen.add(key)
        back = ConfigEntity.from_json_dict(e.to_json_dict())
        assert back == e and back.index == i
        np.testing.assert_array_equal(back.get_flatten_feature(), e.get_flatten_feature())
    assert len(seen) == len(set(indices))  # distinct indices are distinct configs
    with pytest.raises(IndexError):
        cfg.get(n)


def test_first_knob_is_least_significant_digit():
    cfg = ConfigSpace()
    cfg.define_knob("a", [0, 1, 2])
    cfg.define_knob("b", ["x", "y"])
    assert [(e["a"].val, e["b"].val) for e in cfg] == [
        (0, "x"), (1, "x"), (2, "x"), (0, "y"), (1, "y"), (2, "y")]


def test_flatten_feature_values():
    cfg = ConfigSpace()
    cfg.define_split("s", 16, num_outputs=3)
    cfg.define_annotate("a", [0, 1], policy="try_unroll_vec")
    cfg.define_knob("k", [4, 7])
    e = ConfigEntity(0, None, {"s": SplitEntity([-1, 2, 4]), "a": AnnotateEntity(["unroll", "vec"]),
                               "k": cfg.space_map["k"][1]})
    f = e.get_flatten_feature()
    assert f.dtype == np.float32
    np.testing.assert_array_equal(f, [-1, 2, 4, 0, 1, 0, 0, 0, 0, 1, 0, 7])


# ---------------------------------------------------------------------------------------------
# apply() on real schedules: build and compare with numpy
def _matmul_schedule(n, l, m):
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((l, m), name="B")
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_schedule(C.op), A, B, C


def _run_matmul(s, A, B, C, n, l, m):
    f = tvm.build(s, [A, B, C], "llvm")
    a = RNG.standard_normal((n, l)).astype("float32")
    b = RNG.standard_normal((l, m)).astype("float32")
    c = tvm.nd.array(np.zeros((n, m), "float32"))
    f(tvm.nd.array(a), tvm.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("size", [[-1, 4], [-1, 3, 4], [-1, 2, 5, 3], [-1, 64]])
def test_split_apply_non_divisible(size):
    n, l, m = 37, 11, 29
    s, A, B, C = _matmul_schedule(n, l, m)
    y, x = s[C].op.axis
    ys = SplitEntity(size).apply(s, C, y)
    xs = SplitEntity([-1, 8]).apply(s[C], s[C], x)  # a stage works as well as a tensor
    assert len(ys) == len(size) and len(xs) == 2
    leaf = s[C].leaf_iter_vars
    assert ys[-1] in leaf and ys[0] in leaf
    _run_matmul(s, A, B, C, n, l, m)


def test_reorder_and_annotate_apply():
    n, l, m = 19, 13, 24
    s, A, B, C = _matmul_schedule(n, l, m)
    cfg = ConfigSpace()
    y, x = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    cfg.define_split("ty", y, num_outputs=2, policy="verbose")
    cfg.define_split("tx", x, num_outputs=2)
    yo, yi = SplitEntity([-1, 4]).apply(s, C, y)
    xo, xi = SplitEntity([-1, 8]).apply(s, C, x)
    order = ReorderEntity([0, 2, 4, 1, 3]).apply(s, C, [yo, yi, xo, xi, k])
    assert order == [yo, xo, k, yi, xi]
    assert list(s[C].leaf_iter_vars) == [yo, xo, k, yi, xi]
    AnnotateEntity(["unroll", "vec"]).apply(s, C, [yi, xi], axis_lens=[4, 8], max_unroll=16,
                                          vec_size=[4, 8, 16])
    from tvmpy.tir.expr import IterVar

    assert s[C].iter_var_attrs[yi].kind == IterVar.Unrolled
    assert s[C].iter_var_attrs[xi].kind == IterVar.Vectorized
    _run_matmul(s, A, B, C, n, l, m)


def test_annotate_limits_raise_instantiation_error():
    s, A, B, C = _matmul_schedule(8, 8, 8)
    y, x = s[C].op.axis
    with pytest.raises(InstantiationError, match="unrolling"):
        AnnotateEntity(["unroll", "none"]).apply(s, C, [y, x], axis_lens=[8, 8], max_unroll=4)
    with pytest.raises(InstantiationError, match="vectorization"):
        AnnotateEntity(["none", "vec"]).apply(s, C, [y, x], axis_lens=[8, 8], vec_size=[4])


def test_collecting_space_entity_applies():
    """While collecting, cfg[name] is the subspace's first entity and applies."""
    s, A, B, C = _matmul_schedule(12, 5, 10)
    cfg = ConfigSpace()
    y, x = s[C].op.axis
    cfg.define_split("ty", y, num_outputs=3)
    cfg.define_annotate("an", [x], policy="try_vec")
    yo, ym, yi = cfg["ty"].apply(s, C, y)
    cfg["an"].apply(s, C, [x])
    assert cfg["ty"].size == [-1, 1, 1]
    _run_matmul(s, A, B, C, 12, 5, 10)


# ---------------------------------------------------------------------------------------------
# fallback configurations
def test_fallback_defaults():
    cfg = FallbackConfigEntity(vector_size=16)
    cfg.define_split("a", 64)
    cfg.define_split("b", 12, num_outputs=3)
    cfg.define_split("c", 7)
    cfg.define_split("d", 96, num_outputs=4)
    cfg.define_split("e", 10, policy="candidate", candidate=[[-1, 2], [-1, 5]])
    cfg.define_reorder("r", [0, 1, 2])
    cfg.define_annotate("an", [0, 1], policy="try_unroll_vec")
    cfg.define_knob("k", [3, 1, 2])
    assert cfg.is_fallback
    assert cfg["a"].size == [-1, 16]
    assert cfg["b"].size == [-1, 1, 12]
    assert cfg["c"].size == [-1, 7]
    assert cfg["d"].size == [-1, 1, 1, 16]
    assert cfg["e"].size == [-1, 5]
    assert cfg["r"].perm == [0, 1, 2]
    assert cfg["an"].anns == ["none", "none"]
    assert cfg["k"].val == 3
    # defaults stay inside the space: power2 prefers a divisor, filters and candidates hold
    cfg.define_split("p", 12, policy="power2")
    cfg.define_split("f", 64, filter=lambda e: e.size[-1] <= 4)
    cfg.define_split("g", 64, policy="candidate", candidate=[[-1, 64], [-1, 32]])
    assert (cfg["p"].size, cfg["f"].size, cfg["g"].size) == ([-1, 4], [-1, 4], [-1, 32])
    cfg.fallback_split("b", [-1, 2, 4])
    assert cfg["b"].size == [-1, 1, 4]  # 12 = 3 * 4: no divisor of 3 within 2
    cfg.fallback_split("d", [-1, 3, 4, 8])
    assert cfg["d"].size == [-1, 3, 4, 8]
    with pytest.raises(ValueError, match="constraints"):
        cfg.fallback_split("a", [-1])
    cfg["a"] = SplitEntity([-1, 4])
    assert cfg["a"].size == [-1, 4]


def test_fallback_with_reference_log():
    class Inp:
        def __init__(self, config):
            self.config = config

    ref = []
    for size, k in (([-1, 8], 2), ([-1, 32], 1)):
        ref.append((Inp(ConfigEntity(0, None, {"t": SplitEntity([4, size[1]]),
                                                "k": _ot(k)})), None))
    cfg = FallbackConfigEntity(vector_size=8)
    cfg.define_split("t", 64)
    cfg.define_knob("k", [0, 1, 2])
    cfg.fallback_with_reference_log(ref)  # 4*32=128 shares 7 factors of 64, 4*8=32 shares 6
    assert cfg["t"].size == [-1, 32]
    assert cfg["k"].val == 1


def _ot(v):
    from tvmpy.autotvm.space import OtherOptionEntity

    return OtherOptionEntity(v)


def test_split_filter_and_virtual_axis():
    s, A, B, C = _matmul_schedule(64, 8, 8)
    cfg = ConfigSpace()
    va = cfg.axis(s[C].op.axis[0])
    assert va.length == 64
    cfg.define_split("a", va, num_outputs=3, filter=lambda e: e.size[-1] <= 4)
    cfg.define_split("b", cfg.reduce_axis(10))
    # 64 = 2^6: innermost exponent 0..2, middle 0..(6 - inner): 7 + 6 + 5
    assert cfg.dims() == [18, 4]
    assert all(e.size[-1] <= 4 for e in cfg.space_map["a"].entities)
    with pytest.raises(ValueError, match="filter rejects"):
        cfg.define_split("c", 16, filter=lambda e: False)


@pytest.mark.parametrize("ann", [["none", "vec"], ["unroll", "vec"], ["parallel", "unroll"]])
def test_annotate_on_a_tail_split(ann):
    """37 = 4 * 8 + 5: annotations of the inner loop of a non-divisible split still compute."""
    A = te.placeholder((37,), name="A")
    B = te.compute((37,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    o, i = SplitEntity([-1, 8]).apply(s, B, B.op.axis[0])
    AnnotateEntity(ann).apply(s, B, [o, i])
    f = tvm.build(s, [A, B], "llvm")
    a = RNG.standard_normal(37).astype("float32")
    b = tvm.nd.array(np.zeros(37, "float32"))
    f(tvm.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), a * 2.0 + 1.0, rtol=1e-5, atol=1e-6)
