"""Printed IR of schedule lowering (IR form 1) for canonical schedules, and the IR-level
primitives (bind, vthread, double_buffer, storage_align, set_scope)."""

from __future__ import annotations

import textwrap

from te_check import check, lower_text

from tvmpy import te, tir
from tvmpy.te.schedule_ops import schedule_to_primfunc


def _expect(s, args, text):
    got = lower_text(s, args)
    assert got == textwrap.dedent(text).strip("\n"), got


def test_split_divisible_has_no_guard():
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=4)
    _expect(s, [A, B], """
        def f(A: Buffer((16,), 'float32'), B: Buffer((16,), 'float32')):
            for i.outer in range(0, 4):
                for i.inner in range(0, 4):
                    B[i.outer * 4 + i.inner] = A[i.outer * 4 + i.inner] + 1.0f
        """)


def test_split_nondivisible_has_likely_guard():
    A = te.placeholder((10,), name="A")
    B = te.compute((10,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=4)
    _expect(s, [A, B], """
        def f(A: Buffer((10,), 'float32'), B: Buffer((10,), 'float32')):
            for i.outer in range(0, 3):
                for i.inner in range(0, 4):
                    if likely(i.outer * 4 + i.inner < 10):
                        B[i.outer * 4 + i.inner] = A[i.outer * 4 + i.inner] + 1.0f
        """)


def test_fuse_index_expressions():
    A = te.placeholder((3, 5), name="A")
    B = te.compute((3, 5), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].fuse(*B.op.axis)
    _expect(s, [A, B], """
        def f(A: Buffer((3, 5), 'float32'), B: Buffer((3, 5), 'float32')):
            for i.j.fused in range(0, 15):
                B[i.j.fused // 5, i.j.fused % 5] = A[i.j.fused // 5, i.j.fused % 5] * 2.0f
        """)


def test_reduction_init_outside_outermost_reduce_loop():
    A = te.placeholder((4, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    _expect(s, [A, B], """
        def f(A: Buffer((4, 6), 'float32'), B: Buffer((4,), 'float32')):
            for i in range(0, 4):
                B[i] = 0.0f
                for k in range(0, 6):
                    B[i] = B[i] + A[i, k]
        """)


def test_reduction_reduce_loop_outermost_init_loops_over_inner_spatial():
    A = te.placeholder((4, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    s[B].reorder(k, B.op.axis[0])
    _expect(s, [A, B], """
        def f(A: Buffer((4, 6), 'float32'), B: Buffer((4,), 'float32')):
            for i.init in range(0, 4):
                B[i.init] = 0.0f
            for k in range(0, 6):
                for i in range(0, 4):
                    B[i] = B[i] + A[i, k]
        """)


def test_compute_at_allocates_region_with_relative_indices():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((6,), lambda i: B[i] + B[i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=3)
    s[B].compute_at(s[C], xo)
    _expect(s, [A, C], """
        def f(A: Buffer((8,), 'float32'), C: Buffer((6,), 'float32')):
            for i.outer in range(0, 2):
                B = allocate((5,), 'float32', 'global')
                for i in range(0, 5):
                    B[i] = A[i.outer * 3 + i] * 2.0f
                for i.inner in range(0, 3):
                    C[i.outer * 3 + i.inner] = B[i.inner] + B[i.inner + 2]
        """)
    check(s, [A, C], lambda a: 2 * a[:6] + 2 * a[2:])


def test_thread_binding_replaces_loops():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=16)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    f = schedule_to_primfunc(s, [A, B], "f")
    assert isinstance(f.body, tir.AttrStmt) and f.body.attr_key == "thread_extent"
    assert f.body.node.thread_tag == "blockIdx.x" and f.body.value.value == 4
    inner = f.body.body
    assert inner.attr_key == "thread_extent" and inner.node.thread_tag == "threadIdx.x"
    assert "for " not in str(f)
    check(s, [A, B], lambda a: a + 1, backends=("interp",))


def test_vthread_attr():
    A = te.placeholder((12,), name="A")
    B = te.compute((12,), lambda i: A[i] * 3.0, name="B")
    s = te.create_schedule(B.op)
    vo, vi = s[B].split(B.op.axis[0], nparts=2)
    s[B].bind(vo, te.thread_axis("vthread"))
    f = schedule_to_primfunc(s, [A, B], "f")
    assert f.body.attr_key == "virtual_thread" and f.body.value.value == 2
    check(s, [A, B], lambda a: a * 3)


def test_double_buffer_scope_inside_allocate():
    A = te.placeholder((8, 4), name="A")
    B = te.compute((8, 4), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((8, 4), lambda i, j: B[i, j] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[B].set_scope("shared")
    s[B].compute_at(s[C], C.op.axis[0])
    s[B].double_buffer()
    txt = lower_text(s, [A, C])
    assert "B = allocate((1, 4), 'float32', 'shared')" in txt
    assert "with attr(B, 'double_buffer_scope', 1):" in txt
    check(s, [A, C], lambda a: (a + 1) * 2)


def test_storage_align_strides():
    A = te.placeholder((6, 5), name="A")
    B = te.compute((6, 5), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((6, 5), lambda i, j: B[i, j] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[B].storage_align(B.op.axis[0], 8, 1)
    f = schedule_to_primfunc(s, [A, C], "f")
    alloc = f.body
    assert isinstance(alloc, tir.Allocate)
    assert [int(x) for x in alloc.buffer.strides] == [9, 1]
    check(s, [A, C], lambda a: (a + 1) * 2)


def test_unused_symbolic_and_scalar_params():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    f = schedule_to_primfunc(s, [A, B, n], "f")
    assert f.params[2] is n
    assert len(f.buffer_map) == 2


def test_intermediate_tensor_as_argument_is_not_allocated():
    A = te.placeholder((5,), name="A")
    B = te.compute((5,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((5,), lambda i: B[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    txt = lower_text(s, [A, B, C])
    assert "allocate" not in txt
    check(s, [A, B, C], lambda a: [a + 1, (a + 1) * 2])


def test_binds_use_given_buffer():
    A = te.placeholder((4, 4), name="A")
    B = te.compute((4, 4), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    Ab = tir.decl_buffer((4, 4), "float32", "Abuf", strides=(8, 1))
    f = schedule_to_primfunc(s, [A, B], "f", {A: Ab})
    assert f.buffer_map[f.params[0]] is Ab


def test_store_predicate():
    A = te.placeholder((6, 4), name="A")
    B = te.compute((6, 4), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    i, j = B.op.axis
    s[B].set_store_predicate(i % 2 == 0)
    txt = lower_text(s, [A, B])
    assert "if i % 2 == 0:" in txt and "likely" not in txt
    import numpy as np

    a = np.random.default_rng(3).uniform(-1, 1, (6, 4)).astype("float32")
    b = np.full((6, 4), 7.0, "float32")
    from tvmpy.tir.interpreter import run

    run(schedule_to_primfunc(s, [A, B], "f"), [a, b])
    exp = np.full((6, 4), 7.0, "float32")
    exp[::2] = a[::2] + 1
    np.testing.assert_allclose(b, exp)


def test_gpu_style_matmul_shared_tiles_cover_the_block():
    n = 16
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "shared", [C])
    BB = s.cache_read(B, "shared", [C])
    CL = s.cache_write(C, "local")
    bx, tx = s[C].split(C.op.axis[0], factor=4)
    by, ty = s[C].split(C.op.axis[1], factor=4)
    s[C].reorder(bx, by, tx, ty)
    for iv, tag in ((bx, "blockIdx.x"), (by, "blockIdx.y"), (tx, "threadIdx.x"), (ty, "threadIdx.y")):
        s[C].bind(iv, te.thread_axis(tag))
    s[CL].compute_at(s[C], ty)
    ko, ki = s[CL].split(s[CL].op.reduce_axis[0], factor=4)
    s[AA].compute_at(s[CL], ko)
    s[BB].compute_at(s[CL], ko)
    txt = lower_text(s, [A, B, C])
    assert "A.shared = allocate((4, 4), 'float32', 'shared')" in txt
    assert "C.local = allocate((1, 1), 'float32', 'local')" in txt
    assert "A.shared[threadIdx.x, k.c.inner]" in txt
    check(s, [A, B, C], lambda a, b: a @ b, backends=("interp",))


def test_unused_input_is_still_a_parameter():
    A = te.placeholder((4,), name="A")
    U = te.placeholder((3,), name="U")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    f = schedule_to_primfunc(s, [A, U, B], "f")
    assert [f.buffer_map[p].name for p in f.params] == ["A", "U", "B"]


def test_inlined_stage_in_args_stays_an_unused_parameter():
    """TVM keeps an inlined tensor named in args as a parameter nothing writes:
    ``s[B].compute_inline(); tvm.lower(s, [A, B, C])``."""
    import numpy as np

    import tvmpy as tvm

    A = te.placeholder((7, 3), name="A")
    B = te.compute((7, 3), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((7, 3), lambda i, j: B[i, j] + B[6 - i, j], name="C")
    s = te.create_schedule(C.op)
    s[B].compute_inline()
    _expect(s, [A, B, C], """
        def f(A: Buffer((7, 3), 'float32'), B: Buffer((7, 3), 'float32'), C: Buffer((7, 3), 'float32')):
            for i in range(0, 7):
                for j in range(0, 3):
                    C[i, j] = A[i, j] * 2.0f + A[6 - i, j] * 2.0f
        """)
    a = np.random.default_rng(3).uniform(1, 2, (7, 3)).astype("float32")
    for target in ("llvm", "c"):
        f = tvm.build(s, [A, B, C], target)
        b = tvm.nd.array(np.full((7, 3), -5.0, "float32"))
        c = tvm.nd.empty((7, 3), "float32")
        f(tvm.nd.array(a), b, c)
        tvm.testing.assert_allclose(c.numpy(), 2 * a + 2 * a[::-1])
        tvm.testing.assert_allclose(b.numpy(), np.full((7, 3), -5.0, "float32"))  # untouched
