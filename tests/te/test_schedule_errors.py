"""Illegal schedules raise clear errors (what is wrong, and with which axis/stage)."""

from __future__ import annotations

import pytest

from tvmpy import te
from tvmpy.te.schedule_ops import schedule_to_primfunc


def _chain():
    A = te.placeholder((8, 8), name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((8, 8), lambda i, j: B[i, j] * 2.0, name="C")
    D = te.compute((8, 8), lambda i, j: A[i, j] - 1.0, name="D")
    E = te.compute((8, 8), lambda i, j: C[i, j] + D[i, j], name="E")
    return A, B, C, D, E


def test_compute_at_non_consumer():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    with pytest.raises(ValueError, match="does not consume B"):
        s[B].compute_at(s[D], D.op.axis[0])


def test_compute_at_producer_onto_its_own_producer():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    with pytest.raises(ValueError, match="does not consume C"):
        s[C].compute_at(s[B], B.op.axis[0])


def test_compute_at_self():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    with pytest.raises(ValueError, match="itself"):
        s[B].compute_at(s[B], B.op.axis[0])


def test_compute_at_axis_of_other_stage():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    with pytest.raises(ValueError, match="not an axis of stage C.*belongs to stage E"):
        s[B].compute_at(s[C], E.op.axis[0])


def test_compute_at_transitive_consumer_is_allowed_and_checked_at_lowering():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    s[B].compute_at(s[E], E.op.axis[0])  # E reads B through C
    with pytest.raises(ValueError, match="consumer C is computed outside"):
        schedule_to_primfunc(s, [A, E])
    s[C].compute_inline()
    schedule_to_primfunc(s, [A, E])


def test_reorder_axis_of_another_stage():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    with pytest.raises(ValueError, match="not an axis of stage B.*belongs to stage C"):
        s[B].reorder(C.op.axis[1], B.op.axis[0])


def test_reorder_duplicate():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    with pytest.raises(ValueError, match="twice"):
        s[B].reorder(B.op.axis[0], B.op.axis[0])


def test_split_of_split_away_axis():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    s[B].split(B.op.axis[0], factor=2)
    with pytest.raises(ValueError, match="no longer a leaf"):
        s[B].split(B.op.axis[0], factor=2)


def test_split_of_fused_away_axis():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    s[B].fuse(B.op.axis[0], B.op.axis[1])
    with pytest.raises(ValueError, match="axis j of stage B is no longer a leaf"):
        s[B].split(B.op.axis[1], factor=2)
    with pytest.raises(ValueError, match="no longer a leaf"):
        s[B].reorder(B.op.axis[0])
    with pytest.raises(ValueError, match="no longer a leaf"):
        s[B].vectorize(B.op.axis[1])


def test_fuse_non_adjacent_and_wrong_order():
    A = te.placeholder((2, 3, 4), name="A")
    B = te.compute((2, 3, 4), lambda i, j, k: A[i, j, k] + 1.0, name="B")
    s = te.create_schedule(B.op)
    i, j, k = B.op.axis
    with pytest.raises(ValueError, match="adjacent"):
        s[B].fuse(i, k)
    with pytest.raises(ValueError, match="adjacent"):
        s[B].fuse(j, i)


def test_fuse_reduce_with_spatial():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(ValueError, match="reduction axis with the data-parallel"):
        s[B].fuse(B.op.axis[0], k)


@pytest.mark.parametrize("prim", ["vectorize", "parallel"])
def test_vectorize_parallel_reduction_axis(prim):
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(ValueError, match=f"cannot {prim} the reduction axis k"):
        getattr(s[B], prim)(k)
    ko, ki = s[B].split(k, factor=2)
    with pytest.raises(ValueError, match="reduction axis k.inner"):
        getattr(s[B], prim)(ki)


def test_compute_inline_reduction_and_output():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    C = te.compute((4,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    with pytest.raises(ValueError, match="cannot inline the reduction B"):
        s[B].compute_inline()
    with pytest.raises(ValueError, match="output"):
        s[C].compute_inline()


@pytest.mark.parametrize("kw", [{"factor": 0}, {"factor": -2}, {"nparts": 0}])
def test_split_nonpositive(kw):
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    with pytest.raises(ValueError, match="must be positive"):
        s[B].split(B.op.axis[0], **kw)


def test_split_both_or_neither():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    with pytest.raises(ValueError, match="exactly one of factor= or nparts="):
        s[B].split(B.op.axis[0])
    with pytest.raises(ValueError, match="exactly one"):
        s[B].split(B.op.axis[0], factor=2, nparts=2)
    with pytest.raises(TypeError, match="integer"):
        s[B].split(B.op.axis[0], factor=2.5)


def test_split_non_itervar():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    with pytest.raises(TypeError, match="expected an IterVar"):
        s[B].split(3, factor=2)


def test_attach_to_axis_split_and_fused_still_resolves_but_cycles_fail():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    s[C].compute_at(s[E], E.op.axis[0])
    with pytest.raises(ValueError, match="does not consume E"):
        s[E].compute_at(s[C], C.op.axis[0])


def test_placeholder_stage_primitives():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    with pytest.raises(TypeError, match="placeholder"):
        s[A].compute_inline()


def test_missing_placeholder_arg():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    with pytest.raises(ValueError, match="placeholder A is read .* not in args"):
        schedule_to_primfunc(s, [E])


def test_bad_args():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    with pytest.raises(TypeError, match="args must be"):
        schedule_to_primfunc(s, [A, E, 3])
    with pytest.raises(ValueError, match="twice"):
        schedule_to_primfunc(s, [A, E, E])


def test_tensor_not_in_schedule():
    A, B, C, D, E = _chain()
    s = te.create_schedule(C.op)
    with pytest.raises(ValueError, match="E is not part of this schedule"):
        s[E]


def test_bind_errors():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    with pytest.raises(TypeError, match="thread_axis"):
        s[E].bind(E.op.axis[0], E.op.axis[1])
    tx = te.thread_axis("threadIdx.x")
    s[E].bind(E.op.axis[0], tx)
    with pytest.raises(ValueError, match="already bound"):
        s[E].bind(E.op.axis[1], tx)


def test_cache_write_after_scheduling():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    s[E].split(E.op.axis[0], factor=2)
    with pytest.raises(ValueError, match="already scheduled"):
        s.cache_write(E, "local")


def test_cache_read_non_reader():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    with pytest.raises(ValueError, match="C does not read A"):
        s.cache_read(A, "local", [C])


def test_rfactor_errors():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    C = te.compute((4,), lambda i: B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    with pytest.raises(ValueError, match="C is not a reduction"):
        s.rfactor(C, C.op.axis[0])
    with pytest.raises(ValueError, match="is not a reduction axis"):
        s.rfactor(B, B.op.axis[0])


def test_storage_align_errors():
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    with pytest.raises(ValueError, match="not one of B.op.axis"):
        s[B].storage_align(C.op.axis[0], 8, 0)
    with pytest.raises(ValueError, match="offset"):
        s[B].storage_align(B.op.axis[0], 8, 8)


def test_inlined_argument_is_an_unused_parameter():
    """TVM keeps an inlined tensor named in args as a parameter (tests/te/test_lower.py runs it)."""
    A, B, C, D, E = _chain()
    s = te.create_schedule(E.op)
    s[B].compute_inline()
    f = schedule_to_primfunc(s, [A, B, E])
    assert [p.name for p in f.params] == ["A", "B", "E"]
    assert "B[" not in str(f)  # nothing reads or writes it


def test_rfactor_and_cache_write_after_compute_at_into_the_stage():
    A = te.placeholder((4, 6), name="A")
    B = te.compute((4, 6), lambda i, j: A[i, j] * 2.0, name="B")
    k = te.reduce_axis((0, 6), name="k")
    C = te.compute((4,), lambda i: te.sum(B[i, k], axis=k), name="C")
    s = te.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    with pytest.raises(ValueError, match="rfactor: stage B is computed at a loop of C"):
        s.rfactor(C, k)
    with pytest.raises(ValueError, match="cache_write: stage B is computed at a loop of C"):
        s.cache_write(C, "local")


def test_binds_and_args_outside_schedule():
    A, B, C, D, E = _chain()
    s = te.create_schedule(C.op)
    from tvmpy import tir

    with pytest.raises(ValueError, match="binds: .* is not one of the args"):
        schedule_to_primfunc(s, [A, C], "f", {B: tir.decl_buffer((8, 8), "float32", "B")})
    with pytest.raises(ValueError, match="argument E is not a tensor of this schedule"):
        schedule_to_primfunc(s, [A, C, E])
