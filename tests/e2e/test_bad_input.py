"""A sweep of the public API with wrong arguments: each call raises a clear Python exception
(its type and a message naming the argument, what was expected and what was got), never a
crash, a hang, an internal AttributeError/KeyError or a silently wrong answer.

Calls that could take the process down (LLVM aborts, dlopen of junk) run in a subprocess and must
end with a Python exception, not a signal.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te

from .util import HAVE_CC


def _mm():
    A = te.placeholder((8, 8), name="A")
    B = te.placeholder((8, 8), name="B")
    k = te.reduce_axis((0, 8), name="k")
    C = te.compute((8, 8), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((8, 8), lambda i, j: C[i, j] + 1.0, name="D")
    return A, B, C, D, k, te.create_schedule(D.op)


A8 = te.placeholder((8,), name="A")
A88 = te.placeholder((8, 8), name="A2")
K8 = te.reduce_axis((0, 8), name="k")


def _cases(rows):
    return [pytest.param(call, exc, match, id=name) for name, call, exc, match in rows]


# ---- tensor expressions ----------------------------------------------------------------------
TE_CASES = [
    ("placeholder-shape-None", lambda: te.placeholder(None), TypeError, "shape entries must be integers.*got None"),
    ("placeholder-shape-float", lambda: te.placeholder((1.5,)), TypeError, "shape entries must be integers.*1.5"),
    ("placeholder-shape-negative", lambda: te.placeholder((4, -1)), ValueError, "negative dimension -1"),
    ("placeholder-shape-str", lambda: te.placeholder("ab"), TypeError, "shape entries must be integers.*'ab'"),
    ("placeholder-shape-bool", lambda: te.placeholder((True,)), TypeError, "shape entries must be integers.*True"),
    ("placeholder-dtype", lambda: te.placeholder((3,), dtype="float33"), ValueError, "unsupported dtype 'float33'"),
    ("placeholder-dtype-None", lambda: te.placeholder((3,), dtype=None), ValueError, "unsupported dtype 'None'"),
    ("placeholder-name", lambda: te.placeholder((3,), name=5), TypeError, "name must be a non-empty string, got int 5"),
    ("compute-not-callable", lambda: te.compute((8,), 5), TypeError, "fcompute must be a function.*got int 5"),
    ("compute-returns-None", lambda: te.compute((8,), lambda i: None), TypeError,
     "fcompute must return an expression.*got NoneType"),
    ("compute-returns-str", lambda: te.compute((8,), lambda i: "x"), TypeError,
     "fcompute must return an expression.*got str"),
    ("compute-returns-Tensor", lambda: te.compute((8,), lambda i: A8), TypeError,
     r"got Tensor A \(index it: A\[i, \.\.\.\]\)"),
    ("compute-returns-array", lambda: te.compute((8,), lambda i: np.ones(3)), TypeError, "got ndarray"),
    ("compute-returns-empty", lambda: te.compute((8,), lambda i: []), ValueError, "returned an empty list"),
    ("compute-arity", lambda: te.compute((8,), lambda i, j: A8[i]), ValueError,
     "fcompute takes 2 arguments but the shape has 1 dimensions"),
    ("compute-kwargs-only", lambda: te.compute((8,), lambda **kw: 1.0), ValueError, "takes 0 arguments"),
    ("compute-name", lambda: te.compute((8,), lambda i: A8[i], name=None), TypeError, "name must be a non-empty"),
    ("index-float", lambda: te.compute((8,), lambda i: A8[1.5]), TypeError,
     "index of A must be an integer expression, got 1.5"),
    ("index-float-expr", lambda: te.compute((8,), lambda i: A8[i * 1.5]), TypeError,
     "index of A must be an integer expression"),
    ("index-slice", lambda: te.compute((8,), lambda i: A8[0:2]), TypeError, "index of A must be an integer.*slice"),
    ("index-too-many", lambda: te.compute((8,), lambda i: A8[i, i]), IndexError,
     "tensor A has 1 dimensions, indexed with 2"),
    ("index-too-few", lambda: te.compute((8, 8), lambda i, j: A88[i]), IndexError,
     "tensor A2 has 2 dimensions, indexed with 1"),
    ("reduce_axis-None", lambda: te.reduce_axis(None), TypeError, "needs a domain"),
    ("reduce_axis-float", lambda: te.reduce_axis((0, 1.5)), TypeError, r"bounds must be integers.*got 1\.5"),
    ("reduce_axis-str", lambda: te.reduce_axis("ab"), TypeError, "bounds must be integers.*'ab'"),
    ("reduce_axis-3-tuple", lambda: te.reduce_axis((0, 1, 2)), ValueError, r"a domain is \(begin, end\)"),
    ("reduce_axis-backwards", lambda: te.reduce_axis((5, 2)), ValueError, "end < begin"),
    ("sum-over-data-axis", lambda: te.compute((8,), lambda i: te.sum(A8[i], axis=i)), TypeError,
     "sum: axis must be te.reduce_axis IterVars, got Var i"),
    ("sum-over-int", lambda: te.compute((8,), lambda i: te.sum(A8[i], axis=3)), TypeError,
     "axis must be te.reduce_axis IterVars, got int 3"),
    ("sum-over-None", lambda: te.compute((8,), lambda i: te.sum(A8[i], axis=None)), TypeError,
     "got NoneType None"),
    ("sum-without-axis", lambda: te.compute((8,), lambda i: te.sum(A8[i])), TypeError, "sum: needs axis="),
    ("sum-over-thread-axis", lambda: te.compute((8,), lambda i: te.sum(A8[i], axis=te.thread_axis("threadIdx.x"))),
     TypeError, "axis must be te.reduce_axis IterVars"),
    ("sum-over-no-axes", lambda: te.compute((1,), lambda i: te.sum(A8[i], axis=[])), ValueError, "empty list"),
    ("sum-duplicate-axes", lambda: te.compute((1,), lambda i: te.sum(A8[K8], axis=[K8, K8])), ValueError,
     r"an axis appears twice in \['k', 'k'\]"),
    ("sum-of-None", lambda: te.compute((1,), lambda i: te.sum(None, axis=K8)), TypeError,
     "reduced value must be a numeric expression, got NoneType"),
    ("sum-of-str", lambda: te.compute((1,), lambda i: te.sum("x", axis=K8)), TypeError, "got str 'x'"),
    ("sum-where-str", lambda: te.compute((1,), lambda i: te.sum(A8[K8], axis=K8, where="x")), TypeError,
     "where= must be a boolean expression"),
    # an element plus a whole tensor is topi's broadcast add (TVM's te.Tensor arithmetic): a
    # tensor, not the element the compute body must return (or, before tvmpy.topi is loaded,
    # the error that says arithmetic on tensors needs it)
    ("arith-with-Tensor", lambda: te.compute((8,), lambda i: A8[i] + A8), TypeError,
     r"fcompute must return an expression .*got Tensor add \(index it|te.Tensor arithmetic"),
    ("arith-with-None", lambda: te.compute((8,), lambda i: A8[i] * None), TypeError,
     "cannot use NoneType None in arithmetic"),
    ("arith-with-str", lambda: te.compute((8,), lambda i: A8[i] + "x"), TypeError, "cannot use string 'x'"),
    ("var-name", lambda: te.var(5), TypeError, "var: name must be a non-empty string, got int 5"),
    ("var-dtype", lambda: te.var("x", "float33"), ValueError, "unsupported dtype 'float33'"),
    ("comm_reducer-not-callable", lambda: te.comm_reducer(None, lambda t: 0), TypeError,
     "fcombine must be a function, got NoneType"),
    ("create_schedule-None", lambda: te.create_schedule(None), TypeError, "expected Operations or Tensors, got NoneType"),
    ("create_schedule-str", lambda: te.create_schedule("C"), TypeError, "got str"),
    ("create_schedule-placeholder", lambda: te.create_schedule(A8.op), ValueError, "A is a placeholder"),
]


@pytest.mark.parametrize(("call", "exc", "match"), _cases(TE_CASES))
def test_tensor_expression_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_elementwise_max_still_works():
    """te.max(a, b) with positional values stays TVM's element-wise max."""
    C = te.compute((8,), lambda i: te.max(A8[i], 0.5), name="C")
    f = tvm.build(te.create_schedule(C.op), [A8, C])
    a = np.random.default_rng(0).uniform(-1, 1, 8).astype("float32")
    c = np.empty(8, "float32")
    f(a, c)
    np.testing.assert_allclose(c, np.maximum(a, 0.5))


# ---- schedule primitives ---------------------------------------------------------------------
def _sched(fn):
    def call():
        A, B, C, D, k, s = _mm()
        return fn(s, A, C, D, k)
    return call


def _twice(s, st, prims, iv):
    for p in prims:
        getattr(st, p)(iv)


SCHED_CASES = [
    ("split-factor-float", _sched(lambda s, A, C, D, k: s[C].split(C.op.axis[0], factor=1.5)), TypeError,
     "split: factor/nparts must be an integer, got 1.5"),
    ("split-factor-str", _sched(lambda s, A, C, D, k: s[C].split(C.op.axis[0], factor="2")), TypeError,
     "must be an integer, got '2'"),
    ("split-factor-0", _sched(lambda s, A, C, D, k: s[C].split(C.op.axis[0], factor=0)), ValueError,
     "factor must be positive, got 0"),
    ("split-nparts-negative", _sched(lambda s, A, C, D, k: s[C].split(C.op.axis[0], nparts=-1)), ValueError,
     "nparts must be positive, got -1"),
    ("split-neither", _sched(lambda s, A, C, D, k: s[C].split(C.op.axis[0])), ValueError,
     "exactly one of factor= or nparts="),
    ("split-factor-too-big", _sched(lambda s, A, C, D, k: s[C].split(C.op.axis[0], factor=2**40)), ValueError,
     "split: factor=1099511627776 does not fit the int32 loop variable of axis i"),
    ("decl_tensor_intrin-fintrin", _sched(lambda s, A, C, D, k: te.decl_tensor_intrin(C.op, 5)), TypeError,
     "fintrin must be a function"),
    ("split-axis-int", _sched(lambda s, A, C, D, k: s[C].split(0, factor=2)), TypeError,
     "split: expected an IterVar of stage C, got int 0"),
    ("tile-factor-0", _sched(lambda s, A, C, D, k: s[C].tile(*C.op.axis, 0, 2)), ValueError,
     "factor must be positive, got 0"),
    ("fuse-other-stage", _sched(lambda s, A, C, D, k: s[C].fuse(C.op.axis[0], D.op.axis[0])), ValueError,
     r"fuse: axis i is not an axis of stage C \(it belongs to stage D\)"),
    ("fuse-nothing", _sched(lambda s, A, C, D, k: s[C].fuse()), ValueError, "needs at least one axis"),
    ("reorder-duplicate", _sched(lambda s, A, C, D, k: s[C].reorder(C.op.axis[0], C.op.axis[0])), ValueError,
     "an axis appears twice"),
    ("reorder-int", _sched(lambda s, A, C, D, k: s[C].reorder(0, 1)), TypeError, "expected an IterVar"),
    ("compute_at-tensor", _sched(lambda s, A, C, D, k: s[C].compute_at(D, D.op.axis[0])), TypeError,
     r"parent must be a Stage \(s\[tensor\]\), got Tensor"),
    ("compute_at-int-axis", _sched(lambda s, A, C, D, k: s[C].compute_at(s[D], 0)), ValueError,
     "0 is not an axis of stage D"),
    ("compute_at-foreign-axis", _sched(lambda s, A, C, D, k: s[C].compute_at(s[D], C.op.axis[0])), ValueError,
     "is not an axis of stage D"),
    ("pragma-int-key", _sched(lambda s, A, C, D, k: s[C].pragma(C.op.axis[0], 5)), TypeError,
     "pragma type must be a non-empty string, got 5"),
    ("pragma-None-key", _sched(lambda s, A, C, D, k: s[C].pragma(C.op.axis[0], None)), TypeError,
     "pragma type must be a non-empty string"),
    ("bind-data-axis", _sched(lambda s, A, C, D, k: s[C].bind(C.op.axis[0], D.op.axis[0])), TypeError,
     "bind: expected a te.thread_axis"),
    ("bind-str", _sched(lambda s, A, C, D, k: s[C].bind(C.op.axis[0], "threadIdx.x")), TypeError,
     "expected a te.thread_axis, got 'threadIdx.x'"),
    ("vectorize-then-parallel", _sched(lambda s, A, C, D, k: _twice(s, s[D], ["vectorize", "parallel"],
                                                                    D.op.axis[1])),
     ValueError, "parallel: axis j of D is already marked vectorize"),
    ("unroll-then-vectorize", _sched(lambda s, A, C, D, k: _twice(s, s[D], ["unroll", "vectorize"],
                                                                  D.op.axis[1])),
     ValueError, "vectorize: axis j of D is already marked unroll"),
    ("vectorize-int", _sched(lambda s, A, C, D, k: s[D].vectorize(0)), TypeError, "expected an IterVar"),
    ("cache_read-non-reader", _sched(lambda s, A, C, D, k: s.cache_read(A, "local", [D])), ValueError,
     "cache_read: D does not read A"),
    ("cache_read-scope-int", _sched(lambda s, A, C, D, k: s.cache_read(A, 3, [C])), TypeError,
     "cache_read: scope must be a string.*got int 3"),
    ("cache_read-readers-None", _sched(lambda s, A, C, D, k: s.cache_read(A, "local", None)), TypeError,
     "takes a Tensor or an Operation, got NoneType"),
    ("cache_write-scope-None", _sched(lambda s, A, C, D, k: s.cache_write(D, None)), TypeError,
     "cache_write: scope must be a string"),
    ("cache_write-placeholder", _sched(lambda s, A, C, D, k: s.cache_write(A, "local")), TypeError,
     "A is a placeholder"),
    ("set_scope-int", _sched(lambda s, A, C, D, k: s[C].set_scope(3)), TypeError, "scope must be a string"),
    ("storage_align-float", _sched(lambda s, A, C, D, k: s[C].storage_align(C.op.axis[0], 1.5, 0)), TypeError,
     "storage_align: factor must be an int, got float 1.5"),
    ("storage_align-0", _sched(lambda s, A, C, D, k: s[C].storage_align(C.op.axis[0], 0, 0)), ValueError,
     "factor must be positive"),
    ("schedule-getitem-str", _sched(lambda s, A, C, D, k: s["C"]), TypeError,
     r"schedule\[\.\.\.\] takes a Tensor or an Operation, got str"),
    ("rfactor-int", _sched(lambda s, A, C, D, k: s.rfactor(C, 0)), TypeError, "axis must be an IterVar, got int"),
    ("compute_root-placeholder", _sched(lambda s, A, C, D, k: s[A].compute_root()), TypeError,
     "stage A is a placeholder"),
]


@pytest.mark.parametrize(("call", "exc", "match"), _cases(SCHED_CASES))
def test_schedule_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_same_annotation_twice_is_idempotent():
    A, B, C, D, k, s = _mm()
    s[D].vectorize(D.op.axis[1])
    s[D].vectorize(D.op.axis[1])
    f = tvm.build(s, [A, B, D])
    a, b = (np.random.default_rng(1).uniform(0.25, 2, (8, 8)).astype("float32") for _ in range(2))
    d = np.empty((8, 8), "float32")
    f(a, b, d)
    np.testing.assert_allclose(d, a @ b + 1, rtol=1e-5)


# ---- lower / build ---------------------------------------------------------------------------
def _build(fn):
    def call():
        A, B, C, D, k, s = _mm()
        return fn(s, A, B, D)
    return call


BUILD_CASES = [
    ("missing-input", _build(lambda s, A, B, D: tvm.lower(s, [A, D])), ValueError,
     "placeholder B is read by the computation but is not in args"),
    ("duplicate-arg", _build(lambda s, A, B, D: tvm.lower(s, [A, A, B, D])), ValueError,
     "tensor A appears twice in args"),
    ("args-None", _build(lambda s, A, B, D: tvm.lower(s, None)), TypeError, "needs `args`"),
    ("args-not-a-list", _build(lambda s, A, B, D: tvm.lower(s, A)), TypeError,
     "args must be a list of tensors.*got Tensor"),
    ("args-has-None", _build(lambda s, A, B, D: tvm.lower(s, [A, None, D])), TypeError,
     "args must be te.Tensors or scalar te.var Vars, got NoneType"),
    ("args-has-str", _build(lambda s, A, B, D: tvm.build(s, [A, B, "x", D])), TypeError, "got str: 'x'"),
    ("schedule-None", lambda: tvm.lower(None, [A8]), TypeError, "expects a te.Schedule or a tir.PrimFunc"),
    ("name-int", _build(lambda s, A, B, D: tvm.lower(s, [A, B, D], name=3)), ValueError,
     "name must be a C identifier.*got int 3"),
    ("name-space", _build(lambda s, A, B, D: tvm.build(s, [A, B, D], name="my func")), ValueError,
     "name must be a C identifier.*'my func'"),
    ("name-dash-c", _build(lambda s, A, B, D: tvm.build(s, [A, B, D], name="my-func", target="c")), ValueError,
     "name must be a C identifier"),
    ("name-empty", _build(lambda s, A, B, D: tvm.build(s, [A, B, D], name="")), ValueError,
     "name must be a C identifier"),
    ("binds-int", _build(lambda s, A, B, D: tvm.build(s, [A, B, D], binds=5)), TypeError,
     "binds must be a dict"),
    ("target-unknown", _build(lambda s, A, B, D: tvm.build(s, [A, B, D], target="rocm")), ValueError,
     "unknown target kind 'rocm'"),
    ("target-int", _build(lambda s, A, B, D: tvm.build(s, [A, B, D], target=5)), TypeError,
     "target must be a string.*got int 5"),
    ("target-option", _build(lambda s, A, B, D: tvm.build(s, [A, B, D], target="llvm -foo=bar")), ValueError,
     "unknown target option -foo"),
    ("target-option-syntax", _build(lambda s, A, B, D: tvm.build(s, [A, B, D], target="llvm mcpu")), ValueError,
     "expected -key=value"),
]


@pytest.mark.parametrize(("call", "exc", "match"), _cases(BUILD_CASES))
def test_lower_build_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def _subprocess(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, cwd=os.getcwd())


_MM_SRC = """
import numpy as np, tvmpy as tvm
from tvmpy import te
A = te.placeholder((8,), name="A")
B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
s = te.create_schedule(B.op)
"""


@pytest.mark.parametrize(("target", "match"), [
    ("llvm -mcpu=notacpu", "LLVM does not know the processor 'notacpu'"),
    ("llvm -mattr=+nonsense", "LLVM does not know the feature '\\+nonsense'"),
])
def test_unknown_cpu_or_feature_is_an_exception_not_an_abort(target, match):
    """LLVM only warns about an unknown -mcpu/-mattr and aborts the process in code generation."""
    r = _subprocess(_MM_SRC + f"""
try:
    f = tvm.build(s, [A, B], target={target!r})
    f(np.ones(8, "float32"), np.ones(8, "float32"))
except ValueError as err:
    print("ValueError:", err)
""")
    assert r.returncode == 0, r.stderr[-2000:]
    import re

    assert re.search(match, r.stdout), r.stdout + r.stderr


# ---- calls of built modules ------------------------------------------------------------------
_BUILT: dict[str, object] = {}
TARGETS = ("llvm", "c", "interp") if HAVE_CC else ("llvm", "interp")


def _module(target):
    if target not in _BUILT:
        A = te.placeholder((8,), name="A")
        sv = te.var("s", "int32")
        B = te.compute((8,), lambda i: A[i] * 2.0 + sv.astype("float32"), name="B")
        _BUILT[target] = tvm.build(te.create_schedule(B.op), [A, sv, B], target=target, name="f")
    return _BUILT[target]


def _a():
    return tvm.nd.array(np.arange(1, 9, dtype="float32"))


# (name, args builder, exception, message regex matching the compiled modules and the interpreter)
CALL_CASES = [
    ("too-few", lambda: (_a(), tvm.nd.empty((8,))), TypeError, r"f\(?\)? takes 3 argument.*\(A, s, B\), got 2"),
    ("too-many", lambda: (_a(), 3, tvm.nd.empty((8,)), 1), TypeError, "got 4"),
    ("None-buffer", lambda: (None, 3, tvm.nd.empty((8,))), TypeError, "argument A.*got NoneType"),
    ("None-scalar", lambda: (_a(), None, tvm.nd.empty((8,))), TypeError, "argument s.*int32.*got NoneType"),
    ("list-buffer", lambda: ([1.0] * 8, 3, tvm.nd.empty((8,))), TypeError, "argument A.*got list"),
    ("numpy-wrong-dtype", lambda: (np.ones(8, "float64"), 3, tvm.nd.empty((8,))), (TypeError, ValueError),
     "argument A.*dtype float32, got float64"),
    ("nd-wrong-dtype", lambda: (_a(), 3, tvm.nd.empty((8,), "int32")), (TypeError, ValueError),
     "argument B.*dtype float32, got int32"),
    ("numpy-wrong-shape", lambda: (np.ones(9, "float32"), 3, tvm.nd.empty((8,))), ValueError,
     r"argument A.*shape \(8,\).*\(9,\)"),
    ("numpy-wrong-ndim", lambda: (np.ones((8, 1), "float32"), 3, tvm.nd.empty((8,))), ValueError,
     r"argument A.*1 dimension.*\(8, 1\)"),
    ("zero-size", lambda: (np.ones(0, "float32"), 3, tvm.nd.empty((8,))), ValueError,
     r"argument A.*shape \(8,\).*\(0,\)"),
    ("scalar-for-buffer", lambda: (1.0, 3, tvm.nd.empty((8,))), TypeError, "argument A.*got float"),
    ("buffer-for-scalar", lambda: (_a(), _a(), tvm.nd.empty((8,))), TypeError, "argument s.*int32.*got NDArray"),
    ("float-for-int-scalar", lambda: (_a(), 3.5, tvm.nd.empty((8,))), TypeError, "argument s.*int32.*got float 3.5"),
    ("str-scalar", lambda: (_a(), "3", tvm.nd.empty((8,))), TypeError, "argument s.*got str '3'"),
    ("bool-for-int-scalar", lambda: (_a(), True, tvm.nd.empty((8,))), TypeError, "argument s.*got bool"),
    ("array-for-scalar", lambda: (_a(), np.array([3]), tvm.nd.empty((8,))), TypeError, "argument s.*got ndarray"),
    ("huge-int", lambda: (_a(), 2**40, tvm.nd.empty((8,))), (ValueError, OverflowError),
     "argument s.*1099511627776 does not fit int32"),
    ("huge-negative-int", lambda: (_a(), -2**31 - 1, tvm.nd.empty((8,))), (ValueError, OverflowError),
     "argument s.*-2147483649 does not fit int32"),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("args", "exc", "match"), _cases(CALL_CASES))
def test_call_bad_input(target, args, exc, match):
    f = _module(target)
    with pytest.raises(exc, match=match):
        f(*args())


@pytest.mark.parametrize("target", TARGETS)
def test_call_good_inputs_of_every_kind(target):
    """Non-contiguous views, numpy scalars, NDArrays made for another module: all correct."""
    f = _module(target)
    ref = np.arange(1, 9, dtype="float32") * 2 + 3
    out = np.zeros(16, "float32")
    f(np.arange(1, 17, dtype="float32")[::2] * 0 + np.arange(1, 9, dtype="float32"), np.int32(3), out[::2])
    np.testing.assert_array_equal(out[::2], ref)
    np.testing.assert_array_equal(out[1::2], 0)
    b = tvm.nd.empty((8,))
    other = _module("llvm" if target != "llvm" else TARGETS[-1])
    other(_a(), 3, b)  # an array another module wrote ...
    f(_a(), -2**31, b)  # ... passed to this one (int32 minimum fits)
    np.testing.assert_allclose(b.numpy(), np.arange(1, 9) * 2 - 2.0**31)


def test_read_only_output_is_refused():
    f = _module("llvm")
    with pytest.raises(ValueError, match="argument B is written by the kernel but the array passed is read-only"):
        f(_a(), 3, np.broadcast_to(np.float32(0), (8,)))


# ---- runtime API -----------------------------------------------------------------------------
def _evaluator(name="f", **kw):
    def call():
        f = _module("llvm")
        return f.time_evaluator(name, kw.pop("dev", tvm.cpu(0)), **kw)(_a(), 3, tvm.nd.empty((8,)))
    return call


RUNTIME_CASES = [
    ("nd.array-object", lambda: tvm.nd.array(np.array([object(), 1], dtype=object)), ValueError,
     "unsupported dtype 'object'"),
    ("nd.array-str", lambda: tvm.nd.array(np.array(["a", "b"])), ValueError, "unsupported dtype 'str32'"),
    ("nd.array-complex", lambda: tvm.nd.array(np.ones(3, "complex64")), ValueError, "unsupported dtype 'complex64'"),
    ("nd.array-None", lambda: tvm.nd.array(None), TypeError, "nd.array: expected a numpy array.*got NoneType"),
    ("nd.array-str-value", lambda: tvm.nd.array("abc"), TypeError, "got str"),
    ("nd.array-ragged", lambda: tvm.nd.array([[1.0], [2.0, 3.0]]), ValueError, "nd.array: cannot make an array"),
    ("nd.empty-negative", lambda: tvm.nd.empty((-1, 3)), ValueError, r"shape entries must be >= 0, got \(-1, 3\)"),
    ("nd.empty-float", lambda: tvm.nd.empty((1.5,)), TypeError, "shape entries must be ints, got 1.5"),
    ("nd.empty-None", lambda: tvm.nd.empty(None), TypeError, "shape must be a tuple of ints, got NoneType"),
    ("nd.empty-str", lambda: tvm.nd.empty("3"), TypeError, "shape must be a tuple of ints, got str"),
    ("nd.empty-dtype", lambda: tvm.nd.empty((3,), "float33"), ValueError, "unsupported dtype 'float33'"),
    ("copyfrom-shape", lambda: tvm.nd.empty((8,)).copyfrom(np.ones(9, "float32")), ValueError, "shape mismatch"),
    ("cpu-negative", lambda: tvm.cpu(-1), ValueError, "device id must be a non-negative int, got -1"),
    ("device-unknown", lambda: tvm.device("tpu"), ValueError, "unknown device 'tpu'"),
    ("get_function-missing", lambda: _module("llvm").get_function("nope"), AttributeError,
     "module has no function 'nope'; functions: f"),
    ("time_evaluator-name", _evaluator("nope"), AttributeError, "no function 'nope'"),
    ("time_evaluator-number-0", _evaluator(number=0), ValueError, "number must be a positive int, got 0"),
    ("time_evaluator-repeat-0", _evaluator(repeat=0), ValueError, "repeat must be a positive int, got 0"),
    ("time_evaluator-number-float", _evaluator(number=1.5), ValueError, "number must be a positive int, got 1.5"),
    ("time_evaluator-dev-str", _evaluator(dev="cpu"), TypeError, "dev must be a tvm Device, got str"),
    ("time_evaluator-min_repeat_ms", _evaluator(min_repeat_ms=-5), ValueError, "min_repeat_ms"),
    ("load_module-missing", lambda: tvm.runtime.load_module("/nonexistent/x.so"), FileNotFoundError,
     "load_module: no such file '/nonexistent/x.so'"),
    ("export-unwritable", lambda: _module("llvm").export_library("/proc/no/such/dir/m.so"), OSError, "/proc/no"),
    ("export-interp", lambda: _module("interp").export_library("/tmp/x.so"), NotImplementedError,
     "no machine code to export"),
]


@pytest.mark.parametrize(("call", "exc", "match"), _cases(RUNTIME_CASES))
def test_runtime_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("what", ["number", "repeat"])
def test_interpreter_time_evaluator_checks_counts(what):
    f = _module("interp")
    with pytest.raises(ValueError, match=f"{what} must be a positive int, got 0"):
        f.time_evaluator("f", tvm.cpu(0), **{what: 0})


@pytest.mark.parametrize("where", ["directory", "empty"])
def test_export_to_a_directory(tmp_path, where):
    path = str(tmp_path) if where == "directory" else ""
    with pytest.raises(ValueError, match="export_library: expected the path of the library file"):
        _module("llvm").export_library(path)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("where", ["missing-directory", "under-a-file"])
def test_export_into_a_directory_that_is_not_there(tmp_path, where):
    """No directory is created on the caller's behalf (TVM and onnxruntime do not either)."""
    (tmp_path / "file").write_text("a regular file")
    if where == "missing-directory":
        path, exc = tmp_path / "no" / "such" / "m.so", FileNotFoundError
        match = f"export_library: cannot write .*: the directory '{tmp_path / 'no' / 'such'}' does not exist"
    else:
        path, exc = tmp_path / "file" / "sub" / "m.so", NotADirectoryError
        match = f"export_library: cannot write .*: '{tmp_path / 'file'}' is a file, not a directory"
    with pytest.raises(exc, match=match):
        _module("llvm").export_library(str(path))
    assert sorted(os.listdir(tmp_path)) == ["file"]


def test_deeply_nested_graph_json_and_tuning_log(tmp_path):
    from tvmpy.autotvm import record
    from tvmpy.runtime.graph_json import GraphJSONError, parse_graph

    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(GraphJSONError, match="nested too deeply"):
        parse_graph('{"nodes": ' + deep + "}")
    log = tmp_path / "deep.log"
    log.write_text(deep + "\n")
    with pytest.raises(ValueError, match=f"{log} is not an autotvm tuning log.*maximum recursion"):
        record.load_from_file(str(log))


def test_tensor_sizes_are_exact():
    """An int64 product of the dimensions wrapped (to 0 for 2**96 elements): the planner then
    gave the tensor no memory. Sizes are exact, and past 2**63 bytes refused naming the node."""
    from tvmpy.relay.backend.graph_plan_memory import plan_memory
    from tvmpy.runtime.graph_json import entry_nbytes

    assert entry_nbytes((2**32, 2**32, 2**32), "float32") == 2**98
    graph = {"nodes": [{"op": "null", "name": "x", "inputs": []},
                       {"op": "tvm_op", "name": "big", "inputs": [[0, 0, 0]],
                        "attrs": {"func_name": "f", "num_inputs": "1", "num_outputs": "1"}}],
             "arg_nodes": [0], "heads": [[1, 0, 0]], "node_row_ptr": [0, 1, 2],
             "attrs": {"shape": ["list_shape", [[1], [2**32, 2**32, 2**32]]],
                       "dltype": ["list_str", ["float32", "float32"]]}}
    with pytest.raises(ValueError, match=r"output 0 of node 1 \(big\) is a tensor of shape "
                                         r"\(4294967296, 4294967296, 4294967296\) float32.*2\*\*63"):
        plan_memory(graph)


@pytest.mark.parametrize("content", ["text", "truncated-library", "one-byte-short"])
def test_load_module_of_a_non_library_raises(tmp_path, content):
    path = tmp_path / "junk.so"
    if content == "text":
        path.write_text("hello, not an ELF file\n")
    else:
        _module("llvm").export_library(str(path))
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 3] if content == "truncated-library" else data[:-1])
    r = _subprocess(f"""
import tvmpy as tvm
try:
    tvm.runtime.load_module({str(path)!r})
except (RuntimeError, OSError, ValueError) as err:
    print(type(err).__name__ + ":", err)
""")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "cannot load shared library" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("target", TARGETS)
def test_scalar_var_missing_from_args(target):
    """A te.var the computation reads but that is neither in args nor a shape variable."""
    n, m = te.var("n"), te.var("m")
    X = te.placeholder((n,), name="X")
    Z = te.compute((n,), lambda i: X[i] * m.astype("float32"), name="Z")
    s = te.create_schedule(Z.op)
    with pytest.raises(Exception, match="variable '?m'? .*(not defined|never defined|not bound)") as info:
        tvm.build(s, [X, Z], target=target)(np.ones(3, "float32"), np.ones(3, "float32"))
    assert not isinstance(info.value, (AttributeError, KeyError))


def test_tile_with_a_reduction_axis_is_legal_and_correct():
    """TVM allows tiling a spatial axis with a reduction axis (split + reorder): not an error."""
    A, B, C, D, k, s = _mm()
    s[C].tile(C.op.axis[0], k, 3, 5)
    f = tvm.build(s, [A, B, D])
    a, b = (np.random.default_rng(2).uniform(0.25, 2, (8, 8)).astype("float32") for _ in range(2))
    d = np.full((8, 8), np.nan, "float32")
    f(a, b, d)
    np.testing.assert_allclose(d, a @ b + 1, rtol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_zero_size_arrays_with_symbolic_shape(target):
    """n = 0 through a split, parallel and vectorized loop nest: runs, touches nothing."""
    n = te.var("n")
    A = te.placeholder((n, 4), name="A")
    B = te.compute((n, 4), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    s[B].parallel(xo)
    s[B].vectorize(B.op.axis[1])
    f = tvm.build(s, [A, B], target=target)
    f(np.zeros((0, 4), "float32"), np.zeros((0, 4), "float32"))
    b = tvm.nd.empty((0, 4))
    f(tvm.nd.array(np.zeros((0, 4), "float32")), b)
    assert b.shape == (0, 4)
    with pytest.raises(ValueError, match=r"argument B.*\(n, 4\).*\(0, 5\)"):
        f(np.zeros((0, 4), "float32"), np.zeros((0, 5), "float32"))
