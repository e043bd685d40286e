"""The C backend (tvmpy/codegen/c*.py): the shared codegen cases against numpy, the readability
of the source, errors, and the runtime Module it builds."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.codegen import cases
from tvmpy.codegen import c as cgen
from tvmpy.tir import expr as E
from tvmpy.tir import stmt as S
from tvmpy.tir.buffer import decl_buffer
from tvmpy.tir.function import PrimFunc


def make_lib(funcs: list[PrimFunc], extra_c: str = "") -> cases.CtypesLib:
    obj = cgen.compile_source(cgen.emit_c(funcs), "c", funcs[0].name).read_bytes()
    objects = [obj] + ([cases.compile_extra_c(extra_c)] if extra_c else [])
    return cases.CtypesLib(funcs, objects, cgen.LINK_LIBS)


all_cases, batch_lib, test_case, test_batch_builds = cases.backend_suite(make_lib, "C source")


# ---------------------------------------------------------------------------------------------
# the source
def _vadd(kind=S.ForKind.PARALLEL) -> PrimFunc:
    n = E.Var("n")
    A, B, C = (cases.buf(x, n) for x in "ABC")
    i = E.Var("i.outer")
    return cases.func("vadd", [A, B, C], cases.loop(i, n, S.BufferStore(C, A[i] + B[i], [i]), kind))


def test_source_is_readable():
    src = cgen.emit_c([_vadd()])
    assert "int32_t vadd(void* restrict A_handle, void* restrict B_handle, " \
           "void* restrict C_handle, int32_t n) {" in src
    assert "float* restrict A = (float*)__builtin_assume_aligned(A_handle, 64);" in src
    assert "/* the body of a parallel loop of vadd */\n" \
           "static void vadd_parallel_body(int32_t i_outer, float* restrict A, " \
           "float* restrict B, float* restrict C) {\n" \
           "  A = (float*)__builtin_assume_aligned(A, 64);\n" in src
    assert "  C[i_outer] = A[i_outer] + B[i_outer];\n}" in src
    assert "#pragma omp parallel for schedule(guided)\n" \
           "  for (int32_t i_outer = 0; i_outer < n; ++i_outer) {\n" \
           "    vadd_parallel_body(i_outer, A, B, C);\n" \
           "  }\n" \
           "  return 0;\n}" in src
    assert "extern const char* __tvmpy_last_error;" in src
    assert "tvmpy_floordiv" not in src  # helpers appear only when used


def test_no_redundant_parentheses():
    n = E.Var("n")
    A, B = cases.buf("A", n, "float32"), cases.buf("B", n, "int32")
    i = E.Var("i")
    value = E.And((A[i] * 3.0 + A[i + 1] * (A[i] - 2.0)) < 7.0, E.Or(i > 2, i < 1))
    body = cases.loop(i, n - 1, S.BufferStore(B, E.Select(value, (i << 2) + 1, i & 5), [i]))
    src = cgen.emit_c([cases.func("prec", [A, B], body)])
    assert "B[i] = A[i] * 3.0f + A[i + 1] * (A[i] - 2.0f) < 7.0f && (i > 2 || i < 1) ? " \
           "(i << 2) + 1 : i & 5;" in src


def test_data_arithmetic_wraps_index_arithmetic_is_plain():
    n = E.Var("n")
    A, B = cases.buf("A", n, "int32"), cases.buf("B", n, "int32")
    i = E.Var("i")
    body = cases.loop(i, n - 1, S.BufferStore(B, A[i * 2 - i] * A[i + 1] + 7 + i * 3, [i + 1]))
    src = cgen.emit_c([cases.func("wrap", [A, B], body)])
    assert "B[i + 1] = (int32_t)((uint32_t)A[i * 2 - i] * (uint32_t)A[i + 1] + 7u " \
           "+ (uint32_t)i * 3u);" in src


def test_unrolled_and_vector_source():
    A, C = cases.buf("A", 64), cases.buf("C", 64)
    i = E.Var("i")
    r = E.Ramp(i * 16, E.const(1), 16)
    f = cases.func("vec", [A, C], cases.loop(i, 4, S.BufferStore(C, A[r] * 2.0, [r]),
                                             S.ForKind.UNROLLED))
    src = cgen.emit_c([f])
    assert "#pragma GCC unroll 4" in src
    assert "for (int32_t lane = 0; lane < 16; ++lane) {\n" \
           "      C[i * 16 + lane] = A[i * 16 + lane] * 2.0f;" in src


def test_names_are_unique_and_sanitized():
    f = cases.make_case("reserved_names").func
    src = cgen.emit_c([f])
    assert "float* restrict int_ = (float*)" in src
    assert "float* restrict B_local = (float*)" in src
    assert re.search(r"for \(int32_t for_ = 0; for_ < 37; \+\+for_\)", src)
    assert "const int32_t y0_ = for_;" in src
    assert "const float exp_ = int_[y0_];" in src
    assert "expf(exp_) + exp_" in src


def test_assert_in_parallel_loop_source():
    src = cgen.emit_c([cases.make_case("assert_fail_parallel").func])
    body = src[src.index("static int32_t assert_fail_parallel_parallel_body("):]
    body, main = body.split("\nint32_t assert_fail_parallel(")
    assert "__atomic_store_n(&__tvmpy_last_error, \"negative input\", __ATOMIC_RELAXED);" in body
    assert body.count("free(row);") == 2 and body.count("return -1;") == 2
    assert "int32_t parallel_failed = 0;" in main
    assert "if (assert_fail_parallel_parallel_body(i, A, tmp, B) != 0) {\n" \
           "      __atomic_store_n(&parallel_failed, 1, __ATOMIC_RELAXED);" in main
    assert "  if (parallel_failed) {\n    free(tmp);\n    return -1;\n  }" in main


def test_get_source_of_module():
    m = cgen.build([_vadd()], "c")
    assert m.get_source() == m.get_source("c") == cgen.emit_c([_vadd()], "c")
    assert m.type_key == "c"


# ---------------------------------------------------------------------------------------------
# the runtime Module built by cgen.build
def test_build_module_runs_with_ndarrays(tmp_path):
    import tvmpy as tvm

    m = cgen.build([_vadd()], "c")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(1001).astype("float32"), rng.standard_normal(1001).astype("float32")
    x, y, z = tvm.nd.array(a), tvm.nd.array(b), tvm.nd.array(np.zeros(1001, "float32"))
    m(x, y, z)
    np.testing.assert_allclose(z.numpy(), a + b, rtol=1e-6)
    path = tmp_path / "vadd.so"
    m.export_library(str(path))
    g = tvm.runtime.load_module(str(path))
    z2 = tvm.nd.array(np.zeros(1001, "float32"))
    g(x, y, z2)
    np.testing.assert_allclose(z2.numpy(), a + b, rtol=1e-6)


def test_module_raises_failed_assert_message():
    import tvmpy as tvm

    case = cases.make_case("assert_fail_top")
    m = cgen.build([case.func], "c")
    a = tvm.nd.array(case.args[0])
    b = tvm.nd.array(case.args[1])
    with pytest.raises(Exception, match="n must be > 3"):
        m(a, b)


def test_tvm_build_of_lowered_primfunc():
    import tvmpy as tvm

    try:
        m = tvm.build(_vadd(S.ForKind.SERIAL), target="c")
    except ModuleNotFoundError as err:  # the tir pipeline is not in the tree yet
        pytest.skip(str(err))
    a = np.arange(10, dtype="float32")
    z = tvm.nd.array(np.zeros(10, "float32"))
    m(tvm.nd.array(a), tvm.nd.array(a), z)
    np.testing.assert_array_equal(z.numpy(), 2 * a)


# ---------------------------------------------------------------------------------------------
# errors
def test_thread_extent_is_rejected():
    n = E.Var("n")
    A = cases.buf("A", n)
    tx = E.IterVar(E.Range(0, 64), E.Var("threadIdx.x"), E.IterVar.ThreadIndex, "threadIdx.x")
    body = S.AttrStmt(tx, "thread_extent", 64, S.BufferStore(A, E.const(1.0), [tx.var]))
    with pytest.raises(cgen.CCodegenError, match="thread_extent.*threadIdx.x"):
        cgen.emit_c([cases.func("gpu", [A], body)])


def test_virtual_thread_is_rejected():
    A = cases.buf("A", 4)
    vt = E.IterVar(E.Range(0, 2), E.Var("vx"), E.IterVar.ThreadIndex, "vthread")
    body = S.AttrStmt(vt, "virtual_thread", 2, S.BufferStore(A, E.const(1.0), [0]))
    with pytest.raises(cgen.CCodegenError, match="virtual_thread"):
        cgen.emit_c([cases.func("vt", [A], body)])


def test_unlowered_multidim_access_is_rejected():
    A = decl_buffer((4, 4), "float32", "A")
    f = PrimFunc([A.data], S.BufferStore(A, E.const(1.0), [0, 1]), {A.data: A},
                 {"global_symbol": "md"})
    with pytest.raises(cgen.CCodegenError, match="2 indices.*1-D"):
        cgen.emit_c([f])


def test_undefined_variable_is_rejected():
    A = cases.buf("A", 4)
    k = E.Var("k")
    with pytest.raises(cgen.CCodegenError, match="variable k .* never defined"):
        cgen.emit_c([cases.func("undef", [A], S.BufferStore(A, E.const(1.0), [k]))])


def test_bad_function_name_is_rejected():
    A = cases.buf("A", 4)
    with pytest.raises(cgen.CCodegenError, match="not usable as a C symbol"):
        cgen.emit_c([cases.func("my-func", [A], S.BufferStore(A, E.const(1.0), [0]))])
    with pytest.raises(cgen.CCodegenError, match="not usable as a C symbol"):
        cgen.emit_c([cases.func("float", [A], S.BufferStore(A, E.const(1.0), [0]))])


def test_compiler_error_names_the_source():
    with pytest.raises(cgen.CCompileError) as info:
        cgen.compile_source("int broken( {\n", "c", "broken")
    msg = str(info.value)
    assert "broken.c" in msg and "error" in msg
    path = re.search(r"for (\S+broken\.c)", msg).group(1)
    assert open(path).read() == "int broken( {\n"  # kept for debugging


def test_unknown_cpu_has_a_hint():
    with pytest.raises(cgen.CCompileError, match="does not know the CPU"):
        cgen.compile_source("int f(void) { return 0; }\n", "c -mcpu=notacpu", "f")


def test_compile_flags():
    flags = cgen.compile_flags("c -mattr=+avx2,-avx512f")
    assert "-march=native" in flags and "-mavx2" in flags and "-mno-avx512f" in flags
    assert {"-fno-strict-aliasing", "-fopenmp", "-fPIC"} <= set(flags)
    assert "-fwrapv" not in flags  # gcc could not vectorize wrapping index arithmetic
    assert not any("fast-math" in f for f in flags)


def test_target_kind_must_be_c():
    with pytest.raises(ValueError, match="target kind 'c'"):
        cgen.emit_c([_vadd()], "llvm")
    with pytest.raises(ValueError, match="no functions"):
        cgen.build([], "c")


# ---------------------------------------------------------------------------------------------
# C vocabulary
def test_literals_and_identifiers():
    from tvmpy.codegen.c_prelude import c_string, float_literal, int_literal, sanitize

    assert int_literal(-(2**31), "int32") == "(-2147483647 - 1)"
    assert int_literal(5, "int64") == "5L" and int_literal(5, "uint32") == "5u"
    assert int_literal(1, "bool") == "true"
    assert float_literal(0.1, "float32") == "0.1f"  # reads back as float32(0.1) exactly
    assert float_literal(0.1, "float16") == "0.0999755859375f"  # the half nearest 0.1
    assert float_literal(float("-inf"), "float64") == "-(double)INFINITY"
    assert float_literal(float("nan"), "float32") == "NAN"
    assert float_literal(2.0, "float64") == "2.0"
    assert c_string('a "b"\n\\?é') == '"a \\"b\\"\\n\\\\\\077\\303\\251"'
    assert sanitize("i.outer") == "i_outer" and sanitize("0x") == "v_0x"
    assert sanitize("float") == "float_" and sanitize("__x") == "x_" and sanitize("expf") == "expf_"


def test_compile_cache_reuses_objects():
    src = "int cached_fn(void) { return 7; }\n"
    first = cgen.compile_source(src, "c", "cached")
    mtime = first.stat().st_mtime_ns
    second = cgen.compile_source(src, "c", "cached")
    assert first == second and second.stat().st_mtime_ns == mtime
    assert first.with_suffix(".c").read_text() == src


def test_gcc_if_conversion_miscompile():
    """gcc 12.2 -O3 vectorized this select (an `or` of comparisons on float->int casts) wrongly
    in lanes 29 and 30 (found by test_c_fuzz); the C backend turns loop if-conversion off."""
    import numpy as np

    from tvmpy.tir import expr as E
    from tvmpy.tir import interpreter
    from tvmpy.tir import op as O
    from tvmpy.tir import stmt as S

    from .cases import aligned, buf, func

    lanes, n = 8, 40
    f32, i8, i32, out = buf("f32", n, "float32"), buf("i8", n, "int8"), buf("i32", n, "int32"), \
        buf("out", n, "int32")
    i = E.Var("i")
    idx = E.Ramp(i * lanes, 1, lanes)
    x = f32[idx]
    clamp = E.Select(O.isnan(x), E.Broadcast(E.const(0.0), lanes),
                     O.min(O.max(x, E.Broadcast(E.const(-100.0), lanes)), E.Broadcast(E.const(100.0), lanes)))
    xi, ii = E.cast(clamp, f"int32x{lanes}"), E.cast(i8[idx], f"int32x{lanes}")
    value = E.Select(E.Or(xi < ii, E.Broadcast(E.const(0), lanes) == i32[idx]), ii, xi)
    f = func("gcc_ifcvt", [i32, i8, f32, out], S.For(i, 0, n // lanes, S.ForKind.SERIAL, S.BufferStore(out, value, [idx])))
    rng = np.random.default_rng(0)
    a_f32 = rng.uniform(-50, 50, n).astype("float32")
    a_f32[:3] = [np.nan, -0.0, np.inf]
    a_i8 = rng.integers(-128, 128, n).astype("int8")
    a_i32 = rng.integers(-(2**31), 2**31, n).astype("int32")
    a_i32[5] = 0
    got = aligned(np.zeros(n, "int32"))
    want = np.zeros(n, "int32")
    lib = make_lib([f])
    assert lib("gcc_ifcvt", aligned(a_i32), aligned(a_i8), aligned(a_f32), got) == 0
    interpreter.run(f, [a_i32, a_i8, a_f32, want])
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------------------------
# float16: the same bits as the LLVM backend on every CPU (issue 24)
def _f16_chain() -> PrimFunc:
    """Candidates for fusion (a*b + c, a*b - c*a), division, float32 and float64 products
    cast to half, an int cast to half (beyond 65519: inf): every float16 operation rounds once
    to half."""
    n = E.Var("n")
    A, B, Cb = (cases.buf(x, n, "float16") for x in "ABC")
    O1, O2, O3, O4 = (cases.buf(f"O{k}", n, "float16") for k in range(1, 5))
    i = E.Var("i")
    a, b, c = A[i], B[i], Cb[i]
    f32, f64 = (lambda v: E.cast(v, "float32")), (lambda v: E.cast(v, "float64"))
    body = S.seq(
        S.BufferStore(O1, a * b + c, [i]),
        S.BufferStore(O2, (a * b - c * a) / b + a * a, [i]),
        S.BufferStore(O3, E.cast(f32(a) * f32(b) * f32(c), "float16") + c, [i]),
        S.BufferStore(O4, E.cast(f64(a) * f64(b) * 1.0009765625, "float16")
                      + E.cast(i * 17, "float16"), [i]))
    return cases.func("f16_chain", [A, B, Cb, O1, O2, O3, O4], cases.loop(i, n, body))


def _f16_inputs(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    """Random halves of every magnitude: subnormals, near the overflow threshold, signs."""
    out = []
    for _ in range(3):
        bits = rng.integers(0, 0x7c00, n, dtype=np.uint16)  # every finite half magnitude
        bits |= rng.integers(0, 2, n, dtype=np.uint16) << 15
        x = bits.view(np.float16)
        x[: n // 2] = rng.uniform(-4, 4, n // 2).astype(np.float16)  # and ordinary values
        out.append(cases.aligned(x))
    return out


def test_float16_same_bits_as_llvm_and_numpy():
    """The C target's float16 results are bit-identical to the LLVM target's and to numpy's
    (each operation rounded once to half), whatever this CPU is."""
    from tests.codegen.llvm_helpers import Lib

    f = _f16_chain()
    n = 4099
    a, b, c = _f16_inputs(np.random.default_rng(24), n)
    outs = {}
    for name, lib in (("c", make_lib([f])), ("llvm", Lib([f]))):
        o = [cases.aligned(np.zeros(n, np.float16)) for _ in range(4)]
        with np.errstate(all="ignore"):
            assert lib("f16_chain", a, b, c, *o) == 0
        outs[name] = [x.view(np.uint16).copy() for x in o]
    with np.errstate(all="ignore"):
        want1 = a * b + c
        want2 = (a * b - c * a) / b + a * a
        want3 = (a.astype(np.float32) * b * c).astype(np.float16) + c
    for k, want in enumerate((want1, want2, want3)):
        same = (outs["c"][k] == want.view(np.uint16)) | (np.isnan(want) & np.isnan(
            outs["c"][k].view(np.float16)))
        assert same.all(), (k, np.flatnonzero(~same)[:5])
    for k in range(4):
        diff = np.flatnonzero(outs["c"][k] != outs["llvm"][k])
        assert diff.size == 0, (k, diff[:5], outs["c"][k][diff[:5]], outs["llvm"][k][diff[:5]])


_HALF_ARITHMETIC = re.compile(
    r"\bv(add|sub|mul|div|sqrt|min|max|f[n]?m(add|sub)\d*|fmaddsub\d*|fmsubadd\d*|rcp|rsqrt|"
    r"scalef|getexp|reduce|rndscale)[sp]h\b")


def test_float16_source_has_no_native_half_arithmetic():
    """Compiled for a CPU with AVX512-FP16 (sapphirerapids; to assembly only, never run), the
    generated C computes no float16 arithmetic natively: gcc would otherwise fuse a*b+c into
    one half FMA and the results would change with the CPU."""
    src = cgen.emit_c([_f16_chain()])
    assert "(_Float16)" not in src.split("int32_t f16_chain")[1]  # rounding is not a conversion
    # (a later -march wins over the target's -march=native)
    asm = cgen.compile_source(src, "c", "f16_sapphirerapids", ["-S", "-march=sapphirerapids"])
    text = asm.read_text()
    assert "vcvtsh2ss" in text or "vcvtph2ps" in text  # the AVX512-FP16 conversions are used
    assert not _HALF_ARITHMETIC.search(text), _HALF_ARITHMETIC.search(text)
