"""Random legal schedules (including rfactor, nested compute_at, stencils, symbolic sizes and
virtual threads) lowered to IR form 1 and run by the loop-IR interpreter against numpy."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tvmpy import te, tir
from tvmpy.te.schedule_ops import schedule_to_primfunc
from tvmpy.tir.interpreter import run

_KINDS = {"unroll": "Unrolled", "vectorize": "Vectorized", "parallel": "Parallelized"}


def stencil(n):
    A = te.placeholder((n + 2,), name="A")
    B = te.compute((n + 2,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[i] + B[i + 1] * B[i + 2], name="C")
    D = te.compute((n,), lambda i: C[i] - 1.0, name="D")
    return [A], [D], lambda a: (2 * a[:-2] + 4 * a[1:-1] * a[2:]) - 1


def reduce2d(n):
    A = te.placeholder((n, 2 * n + 1), name="A")
    B = te.compute((n, 2 * n + 1), lambda i, j: A[i, j] * A[i, j], name="B")
    k = te.reduce_axis((0, 2 * n + 1), name="k")
    C = te.compute((n,), lambda i: te.sum(B[i, k], axis=k), name="C")
    D = te.compute((n,), lambda i: C[i] + 1.0, name="D")
    return [A], [D], lambda a: (a * a).sum(1) + 1


def matmul(n):
    A = te.placeholder((n, 5), name="A")
    B = te.placeholder((5, n + 1), name="B")
    k = te.reduce_axis((0, 5), name="k")
    C = te.compute((n, n + 1), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((n, n + 1), lambda i, j: C[i, j] * 0.5, name="D")
    return [A, B], [D], lambda a, b: (a @ b) * 0.5


def transpose_add(n):
    A = te.placeholder((n, 3), name="A")
    B = te.compute((3, n), lambda i, j: A[j, i] + 1.0, name="B")
    C = te.compute((n, 3), lambda i, j: B[j, i] * A[i, j], name="C")
    return [A], [C], lambda a: (a + 1) * a


WORKLOADS = [stencil, reduce2d, matmul, transpose_add]


def _consumers(s, stage):
    return [c for c in s.stages if isinstance(c.op, te.ComputeOp)
            and any(t.op is stage.op for t in c.op.input_tensors)]


def _schedule(draw, s, outputs, log):
    out_stages = [s[t] for t in outputs]
    for _ in range(draw(st.integers(0, 8))):
        stages = [x for x in s.stages if isinstance(x.op, te.ComputeOp) and x.attach_type != "inline"]
        stage = draw(st.sampled_from(stages))
        leaves = list(stage.leaf_iter_vars)
        prim = draw(st.sampled_from(["split", "fuse", "reorder", "compute_at", "inline", "rfactor",
                                     "annotate", "vthread", "root"]))
        if prim == "split":
            iv = draw(st.sampled_from(leaves))
            f = draw(st.integers(1, 5))
            kw = {"factor": f} if draw(st.booleans()) else {"nparts": f}
            stage.split(iv, **kw)
            log.append(f"{stage.op.name}.split({iv.var.name}, {kw})")
        elif prim == "fuse" and len(leaves) > 1:
            k = draw(st.integers(0, len(leaves) - 2))
            a, b = leaves[k], leaves[k + 1]
            if a.iter_type == b.iter_type:
                stage.fuse(a, b)
                log.append(f"{stage.op.name}.fuse({a.var.name}, {b.var.name})")
        elif prim == "reorder" and len(leaves) > 1:
            perm = draw(st.permutations(leaves))
            stage.reorder(*perm)
            log.append(f"{stage.op.name}.reorder({[iv.var.name for iv in perm]})")
        elif prim == "compute_at" and all(stage is not o for o in out_stages):
            cons = [c for c in _consumers(s, stage) if c.attach_type != "inline"]
            if len(cons) == 1 and len(_consumers(s, stage)) == 1:
                iv = draw(st.sampled_from(list(cons[0].leaf_iter_vars)))
                stage.compute_at(cons[0], iv)
                log.append(f"{stage.op.name}.compute_at({cons[0].op.name}, {iv.var.name})")
        elif prim == "inline" and all(stage is not o for o in out_stages) and not stage.op.reduce_axis:
            stage.compute_inline()
            log.append(f"{stage.op.name}.compute_inline()")
        elif prim == "root":
            stage.compute_root()
            log.append(f"{stage.op.name}.compute_root()")
        elif prim == "rfactor" and stage.op.reduce_axis and stage.attach_type == "root":
            red = [iv for iv in leaves if iv.iter_type == tir.IterVar.CommReduce]
            if red:
                iv = draw(st.sampled_from(red))
                try:
                    s.rfactor(stage.op.output(0), iv, draw(st.integers(0, len(stage.op.axis))))
                except ValueError as err:  # axis fused with a spatial one, or stages attached
                    assert "data-parallel" in str(err) or "before compute_at" in str(err)
                    return
                log.append(f"rfactor({stage.op.name}, {iv.var.name})")
        elif prim == "annotate":
            iv = draw(st.sampled_from(leaves))
            kind = draw(st.sampled_from(["unroll", "vectorize", "parallel", "pragma"]))
            if kind in ("vectorize", "parallel") and iv.iter_type == tir.IterVar.CommReduce:
                return
            marked = stage.iter_var_attrs.get(iv)
            if kind != "pragma" and marked is not None and marked.kind != tir.IterVar.DataPar \
                    and marked.kind != getattr(tir.IterVar, _KINDS[kind]):
                return  # a loop takes one of vectorize/unroll/parallel
            if kind == "pragma":
                stage.pragma(iv, "auto_unroll_max_step", 8)
            else:
                getattr(stage, kind)(iv)
            log.append(f"{stage.op.name}.{kind}({iv.var.name})")
        elif prim == "vthread" and leaves and leaves[0].iter_type == tir.IterVar.DataPar \
                and stage.attach_type == "root":
            stage.bind(leaves[0], te.thread_axis("vthread"))
            log.append(f"{stage.op.name}.bind({leaves[0].var.name}, vthread)")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_schedules_interpreter(data):
    workload = data.draw(st.sampled_from(WORKLOADS), label="workload")
    n = data.draw(st.sampled_from([1, 2, 3, 5, 7]), label="n")
    inputs, outputs, ref = workload(n)
    s = te.create_schedule([t.op for t in outputs])
    log: list[str] = []
    _schedule(data.draw, s, outputs, log)
    rng = np.random.default_rng(0)
    args = [rng.uniform(-1, 1, [int(d) for d in t.shape]).astype(t.dtype) for t in inputs]
    out = np.full([int(d) for d in outputs[0].shape], np.nan, outputs[0].dtype)
    f = schedule_to_primfunc(s, inputs + outputs, "f")
    run(f, [*args, out])
    np.testing.assert_allclose(out, ref(*args), rtol=1e-4, atol=1e-5,
                               err_msg="schedule: " + "; ".join(log) + "\n" + str(f))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(factor=st.integers(1, 9), nv=st.integers(1, 12), inline=st.booleans())
def test_symbolic_size_compute_at(factor, nv, inline):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((n,), lambda i: B[i] * 3.0, name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=factor)
    if inline:
        s[B].compute_inline()
    else:
        s[B].compute_at(s[C], xo)
    a = np.random.default_rng(nv).uniform(-1, 1, nv).astype("float32")
    c = np.full(nv, np.nan, "float32")
    run(schedule_to_primfunc(s, [A, C], "f"), [a, c])
    np.testing.assert_allclose(c, (a + 1) * 3, rtol=1e-6)
