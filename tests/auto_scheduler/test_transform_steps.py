"""Every transform step replays on a fresh DAG into a schedule that computes numpy's result;
the State's view follows the steps; bad steps are refused with a message."""

from __future__ import annotations

import pytest
from as_workloads import check_state, elementwise, make_task, matmul, matmul_relu, row_sum

from tvmpy.auto_scheduler import transform_step as ts
from tvmpy.auto_scheduler.loop_state import ComputeAtKind


@pytest.fixture(scope="module")
def mm():
    return make_task(matmul_relu, (37, 24, 19))  # prime and non-divisible extents


def test_init_state_is_correct(mm):
    s = mm.compute_dag.init_state()
    assert [st.op_name for st in s.stages] == ["A", "B", "C", "D"]
    assert [(i.name, i.extent, i.iter_kind) for i in s.stages[2].iters] == [
        ("i", 37, 0), ("j", 24, 0), ("k", 19, 1)]
    check_state(mm, s)


@pytest.mark.parametrize("lengths,inner_to_outer", [
    ((4, 3), True), ((5, 2), False), ((1,), True), ((37,), True), ((40,), True), ((6, 7), True)])
def test_split(mm, lengths, inner_to_outer):
    s = mm.compute_dag.init_state()
    its = s.split(2, 0, lengths, inner_to_outer)
    assert len(its) == len(lengths) + 1 and len(s.stages[2].iters) == 3 + len(lengths)
    if inner_to_outer:
        assert [i.extent for i in its[1:]] == list(lengths)
    else:
        assert [i.extent for i in its[:-1]] == list(lengths)
    check_state(mm, s)


def test_split_reduction_and_reorder(mm):
    s = mm.compute_dag.init_state()
    io, ii = s.split(2, 0, [8])
    ko, ki = s.split(2, s.stages[2].iters[3], [4])
    s.reorder(2, [0, 3, 2, 1, 4])  # io, ko, j, ii, ki
    assert [i.name for i in s.stages[2].iters] == [io.name, ko.name, "j", ii.name, ki.name]
    check_state(mm, s)


def test_fuse_parallel_vectorize_unroll_pragma(mm):
    s = mm.compute_dag.init_state()
    f = s.fuse(3, [0, 1])
    assert f.extent == 37 * 24
    s.parallel(3, f)
    jo, ji = s.split(2, 1, [8])
    s.reorder(2, [0, 1, 3, 2])
    s.vectorize(2, 3)
    s.unroll(2, 2)
    s.pragma(2, 0, "auto_unroll_max_step$16")
    st = s.stages[2]
    assert [i.annotation for i in st.iters] == [0, 0, 1, 2]
    assert s.stages[3].iters[0].annotation == 3
    check_state(mm, s)


def test_compute_at_inline_root(mm):
    s = mm.compute_dag.init_state()
    io, ii = s.split(3, 0, [5])
    s.compute_at(2, 3, io)
    assert s.stages[2].compute_at == ComputeAtKind.ITER and s.stages[2].attach == (3, 0)
    check_state(mm, s)
    s.fuse(3, [0, 1])  # the attached stage follows the fused loop
    assert s.stages[2].attach == (3, 0)
    check_state(mm, s)
    s.compute_root(2)
    assert s.stages[2].compute_at == ComputeAtKind.ROOT
    check_state(mm, s)
    s = mm.compute_dag.init_state()
    s.compute_at(2, 3, 0)
    s.split(3, 0, [5])  # the attached stage moves to the innermost part, as TVM's state
    assert s.stages[2].attach == (3, 1)
    check_state(mm, s)
    t = make_task(elementwise, (5, 11))
    s = t.compute_dag.init_state()
    s.compute_inline(3)
    s.compute_inline(2)
    assert s.stages[2].compute_at == ComputeAtKind.INLINED
    check_state(t, s)


def test_follow_split(mm):
    s = mm.compute_dag.init_state()
    s.split(2, 0, [3, 2, 2])
    src = len(s.transform_steps) - 1
    for n_split in (1, 2, 3):
        t = s.copy()
        its = t.follow_split(3, 0, src, n_split)
        assert len(its) == n_split + 1
        ext = [3, 2, 2]
        want = ext[:n_split - 1] + [eval("*".join(map(str, ext[n_split - 1:])))]
        assert [i.extent for i in its[1:]] == want
        check_state(mm, t)


def test_cache_write_then_tile_and_fuse(mm):
    t = make_task(matmul, (37, 24, 19))
    s = t.compute_dag.init_state()
    cid = s.cache_write(2, "local")
    assert [st.op_name for st in s.stages] == ["A", "B", "C.local", "C"]
    s.split(cid, 0, [4, 2])
    s.split(cid + 1, 0, [8])
    s.compute_at(cid, cid + 1, 0)
    check_state(t, s)


def test_cache_read(mm):
    s = mm.compute_dag.init_state()
    new = s.cache_read(0, "global", [2])
    assert s.stages[new].op_name == "A.global"
    s.compute_at(new, 3, 0)  # a copy of A's rows per row of D
    check_state(mm, s)


@pytest.mark.parametrize("which", [0, 1])
def test_rfactor(which):
    t = make_task(row_sum, (3, 301))
    s = t.compute_dag.init_state()
    parts = s.split(1, 1, [16])
    rid = s.rfactor(1, parts[which], 1)
    assert s.stages[rid].op_name.endswith(".rf") and s.stages[rid + 1].op_name == "rowsum"
    s.parallel(rid, 0)
    check_state(t, s)


def test_bad_steps_are_refused_with_a_message(mm):
    s = mm.compute_dag.init_state()
    with pytest.raises(ValueError, match="out of range"):
        s.split(2, 7, [2])
    with pytest.raises(ValueError, match="positive integers"):
        s.split(2, 0, [0])
    with pytest.raises(ValueError, match="permutation"):
        s.reorder(2, [0, 0, 1])
    with pytest.raises(ValueError, match="consecutive"):
        s.fuse(2, [0, 2])
    with pytest.raises(ValueError, match="reduction"):
        s.parallel(2, 2)
    with pytest.raises(ValueError, match="not a stage"):
        s.compute_inline(make_task(elementwise, (2, 2)).compute_dag.ops[4])  # "E"
    # the failed steps left no trace: the state still replays
    assert s.transform_steps == []
    check_state(mm, s)
    s.split(2, 0, [None])
    with pytest.raises(ValueError, match="not chosen"):
        mm.compute_dag.apply_steps_from_state(s)


def test_print_python_code(mm):
    s = mm.compute_dag.init_state()
    io, _ = s.split(3, 0, [5])
    s.compute_at(2, 3, io)
    s.parallel(3, io)
    code = mm.compute_dag.print_python_code_from_state(s)
    assert "s[D].split(i_1, factor=5)" in code
    assert "s[C].compute_at(s[D], i_outer)" in code and "s[D].parallel(i_outer)" in code


def test_step_records_round_trip():
    steps = [ts.SplitStep(2, 0, 37, (4, None), True), ts.FollowSplitStep(3, 0, 0, 2),
             ts.FuseStep(2, (0, 1)), ts.ReorderStep(2, (1, 0)), ts.AnnotationStep(2, 0, 3),
             ts.PragmaStep(2, 0, "auto_unroll_max_step$64"), ts.ComputeAtStep(2, 3, 1),
             ts.ComputeInlineStep(1), ts.ComputeRootStep(1), ts.CacheWriteStep(2, "local"),
             ts.CacheReadStep(0, "shared", (2, 3)), ts.RfactorStep(1, 2, 1)]
    for st in steps:
        assert ts.step_from_record(st.to_record()) == st
    for bad in (["XX", 1], ["SP", 1], ["CA", "a", 1, 2], [], "SP"):
        with pytest.raises(ValueError, match="bad step record"):
            ts.step_from_record(bad)
