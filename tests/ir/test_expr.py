"""The expression language: construction, dtype rules, errors, printing, structural equality."""

import pytest

import tvmpy as tvm
from tvmpy import te, tir
from tvmpy.ir.node import structural_equal, structural_hash


def test_arithmetic_builds_nodes_with_dtypes():
    i, j = te.var("i"), te.var("j")
    e = (i + 3) * (j // 4) - i % 5
    assert isinstance(e, tir.Sub)
    assert e.dtype == "int32"
    assert str(e) == "(i + 3) * (j // 4) - i % 5"
    f = te.var("x", "float32") / 2
    assert isinstance(f, tir.Div) and f.dtype == "float32"


def test_type_promotion_follows_tvm_rules():
    i32, i64 = te.var("a", "int32"), te.var("b", "int64")
    assert (i32 + i64).dtype == "int64"
    f32, f64 = te.var("x", "float32"), te.var("y", "float64")
    assert (f32 + f64).dtype == "float64"
    assert (i32 * f32).dtype == "float32"
    # a python scalar takes the expression's dtype
    h = te.var("h", "float16")
    assert (h + 1.5).dtype == "float16"
    u8 = te.var("u", "uint8")
    assert (u8 + 1).dtype == "uint8"
    assert (i32 + 1.5).dtype == "float32"


def test_comparisons_and_logic():
    i, j = te.var("i"), te.var("j")
    c = (i < j) & (j >= 2)
    assert isinstance(c, tir.And) and c.dtype == "bool"
    assert isinstance(~(i < j), tir.Not)
    assert isinstance(tir.all(i < 1, j < 2, i > j), tir.And)
    assert isinstance(tir.any(i < 1, j < 2), tir.Or)
    with pytest.raises(TypeError, match="bool operands"):
        tir.And(i, j)


def test_bool_of_symbolic_expression_explains_what_to_use():
    i = te.var("i")
    with pytest.raises(TypeError, match="can_prove"):
        bool(i < 3)
    with pytest.raises(TypeError, match="symbolic"):
        if i + 1:  # noqa: SIM102
            pass
    # constants and identity tests keep working
    assert bool(tir.const(1) == tir.const(1))
    d = {i: 1}
    assert i in d and te.var("i") not in d
    assert i in [te.var("k"), i]


def test_constants_and_casts():
    assert tir.const(3).dtype == "int32"
    assert tir.const(2**40).dtype == "int64"
    assert tir.const(1.0).dtype == "float32"
    assert tir.const(True).dtype == "bool"
    assert tir.const(5, "float64").value == 5.0
    c = tir.cast(tir.const(300), "int8")
    assert isinstance(c, tir.IntImm) and c.value == 44  # wraps like a C cast
    c = tir.cast(tir.const(-2.7), "int32")
    assert c.value == -2  # truncation toward zero
    with pytest.raises(ValueError, match="unsupported dtype"):
        te.var("z", "float8")
    with pytest.raises(ZeroDivisionError):
        te.var("i") // 0


@pytest.mark.parametrize("dtype", ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
                                   "uint32", "float16", "float32", "float64"])
def test_every_dtype_makes_placeholders_and_constants(dtype):
    A = te.placeholder((3,), dtype=dtype, name="A")
    assert A.dtype == dtype and A[0].dtype == dtype
    assert tir.const(1, dtype).dtype == dtype


def test_intrinsics_build_calls():
    x = te.var("x", "float32")
    for fn in (te.exp, te.exp2, te.log, te.log2, te.sqrt, te.rsqrt, te.tanh, te.sigmoid, te.erf,
               te.floor, te.ceil, te.round, te.trunc, te.abs):
        e = fn(x)
        assert e.dtype == "float32", fn
    assert te.pow(x, 2.0).dtype == "float32"
    assert te.fmod(x, 2.0).dtype == "float32"
    assert te.isnan(x).dtype == "bool"
    assert te.popcount(te.var("n", "uint32")).dtype == "uint32"
    with pytest.raises(TypeError):
        te.popcount(x)
    # integer abs becomes a select, not a float call
    assert isinstance(te.abs(te.var("n")), tir.Select)
    assert str(te.if_then_else(x > 0, x, 0.0)) == "if_then_else(x > 0.0f, x, 0.0f)"


def test_div_mod_flavours_print_distinctly():
    a, b = te.var("a"), te.var("b")
    assert str(tir.floordiv(a, b)) == "a // b"
    assert str(tir.floormod(a, b)) == "a % b"
    assert str(tir.truncdiv(a, b)) == "truncdiv(a, b)"
    assert str(tir.truncmod(a, b)) == "truncmod(a, b)"
    assert str(tir.min(a, b)) == "min(a, b)"


def test_structural_equality_and_hash():
    def make():
        i = te.var("i")
        A = tir.decl_buffer((8,), "float32", "A")
        return tir.For(i, 0, 8, tir.ForKind.SERIAL, tir.BufferStore(A, A[i] * 2.0, [i])), A

    (s1, _), (s2, _) = make(), make()
    assert not structural_equal(s1, s2)  # different free buffers
    assert structural_equal(s1, s2, map_free_vars=True)
    i, j = te.var("i"), te.var("j")
    assert structural_equal(i + 1, i + 1)
    assert not structural_equal(i + 1, j + 1)
    assert structural_equal(i + 1, j + 1, map_free_vars=True)
    assert structural_hash(i + 1) == structural_hash(j + 1)
    # loop variables are bound: two loops differing only in the var name are equal
    k1, k2 = te.var("k"), te.var("m")
    A = tir.decl_buffer((8,), "float32", "A")
    l1 = tir.For(k1, 0, 8, tir.ForKind.SERIAL, tir.BufferStore(A, A[k1], [k1]))
    l2 = tir.For(k2, 0, 8, tir.ForKind.SERIAL, tir.BufferStore(A, A[k2], [k2]))
    assert structural_equal(l1, l2)


def test_nodes_are_immutable():
    i = te.var("i")
    with pytest.raises(AttributeError, match="immutable"):
        i.name = "j"
    e = i + 1
    e2 = e.replace(b=tir.const(2))
    assert str(e2) == "i + 2" and str(e) == "i + 1"


def test_compute_and_reduction_construction():
    n = te.var("n")
    A = te.placeholder((n, 16), name="A")
    B = te.placeholder((16, 16), name="B")
    k = te.reduce_axis((0, 16), name="k")
    C = te.compute((n, 16), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    assert C.shape[0] is n and C.op.reduce_axis[0] is k
    assert [t.op.name for t in C.op.input_tensors] == ["A", "B"]
    with pytest.raises(ValueError, match="top-level"):
        te.compute((n,), lambda i: te.sum(A[i, k], axis=k) + 1.0)
    with pytest.raises(ValueError, match="arguments"):
        te.compute((n, 16), lambda i: A[i, 0])
    with pytest.raises(IndexError, match="2 dimensions"):
        te.compute((n,), lambda i: A[i])


def test_multi_output_compute_and_tuple_reducer():
    A = te.placeholder((10, 7), name="A")
    X, Y = te.compute((10,), lambda i: (A[i, 0] + 1.0, A[i, 1] * 2.0), name="XY")
    assert X.op is Y.op and (X.value_index, Y.value_index) == (0, 1)

    def fcombine(x, y):
        # (index, value) argmax: keep the larger value, ties -> smaller index
        take_lhs = tir.Or(x[1] > y[1], tir.And(x[1] == y[1], x[0] <= y[0]))
        return tir.Select(take_lhs, x[0], y[0]), tir.Select(take_lhs, x[1], y[1])

    def fidentity(t0, t1):
        return tir.const(-1, t0), tir.min_value(t1)

    argmax = te.comm_reducer(lambda xi, xv, yi, yv: fcombine((xi, xv), (yi, yv)), fidentity, name="argmax")
    k = te.reduce_axis((0, 7), name="k")
    idx, val = te.compute((10,), lambda i: argmax((k.var, A[i, k]), axis=k), name="T")
    assert idx.dtype == "int32" and val.dtype == "float32"
    assert idx.op.num_outputs == 2


def test_range_and_thread_axis():
    r = tir.Range(2, 10)
    assert r.min.value == 2 and r.extent.value == 8
    tx = te.thread_axis("threadIdx.x")
    assert tx.thread_tag == "threadIdx.x" and tx.iter_type == tir.IterVar.ThreadIndex
    with pytest.raises(ValueError, match="tag"):
        te.thread_axis()


def test_target_parsing():
    t = tvm.target.Target("llvm -mcpu=znver4 -mattr=+avx512f")
    assert t.kind == "llvm" and t.mcpu == "znver4" and t.vector_width_bits == 512
    assert t.vector_lanes("float32") == 16
    with pytest.raises(ValueError, match="unknown target option"):
        tvm.target.Target("llvm -foo=1")
    with pytest.raises(ValueError, match="unknown target kind"):
        tvm.target.Target("cuda2")


def test_structural_equal_and_hash_on_deep_graphs() -> None:
    """A relay chain thousands of operators deep hashes and compares without RecursionError
    (both are iterative), and a difference at the bottom of the chain is still seen."""
    import numpy as np

    import tvmpy as tvm
    from tvmpy import relay

    def chain(n: int, first: float) -> tvm.IRModule:
        x = relay.var("x", shape=(4,), dtype="float32")
        y = relay.add(x, relay.const(np.float32(first)))
        for _ in range(n):
            y = relay.nn.relu(relay.add(y, relay.const(np.float32(1.0))))
        return tvm.IRModule.from_expr(relay.Function([x], y))

    a, b, c = chain(3000, 2.0), chain(3000, 2.0), chain(3000, 3.0)
    assert tvm.ir.structural_equal(a, b)
    assert tvm.ir.structural_hash(a) == tvm.ir.structural_hash(b)
    assert not tvm.ir.structural_equal(a, c)
    assert tvm.ir.structural_hash(a) != tvm.ir.structural_hash(c)


def test_storage_only_dtypes():
    from tvmpy.ir import dtype as dt

    for name, (store, compute) in dt.STORAGE_ONLY.items():
        assert str(dt.parse(name)) == name
        assert dt.with_lanes(name, 4) == f"{name}x4" and dt.element_of(f"{name}x4") == name
        assert dt.storage_of(f"{name}x4") == f"{store}x4" and dt.compute_of(name) == compute
        assert dt.is_storage_only(name) and not dt.is_storage_only(store)
        assert not dt.is_float(name)  # no code generator computes on them
    assert dt.bits_of("int4") == 4 and dt.bytes_of("int4") == 1 and dt.bytes_of("bfloat16") == 2
    assert dt.is_low_float("float8_e5m2") and not dt.is_low_float("int4")
    assert str(tir.const(1.5, "bfloat16").dtype) == "bfloat16"
    with pytest.raises(ValueError, match="unsupported dtype 'float8_e3m4'"):
        dt.parse("float8_e3m4")
