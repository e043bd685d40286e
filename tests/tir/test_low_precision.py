"""Storage-only dtypes in TIR: the bit conversions of tir.low_precision checked exhaustively
against ml_dtypes (every float8/float4 and sub-byte code; float32 -> bfloat16/float8 on random bit
patterns, NaN/inf/denormals and every tie), and LegalizeStorageDtypes through the code
generators (llvm, c, the loop-IR interpreter), scalar and vectorized."""

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")

import tvmpy as tvm  # noqa: E402
from tvmpy import te, tir  # noqa: E402
from tvmpy.ir import dtype as dt  # noqa: E402
from tvmpy.tir import low_precision as lp  # noqa: E402
from tvmpy.tir.transform import legalize_storage_dtypes_func  # noqa: E402

FLOAT8 = ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"]
SMALL = FLOAT8 + ["float4_e2m1fn"]
SUBBYTE = ["int4", "uint4", "int2", "uint2"]
TARGETS = ["llvm", "c"]


def _np(name):
    return np.dtype(getattr(ml_dtypes, name))


def _same(out, ref):
    """Bit-equal, except that any NaN matches any NaN (as float32 values)."""
    assert out.dtype == ref.dtype
    bits = np.dtype(f"uint{8 * out.itemsize}")
    fo, fr = out.astype(np.float32), ref.astype(np.float32)
    return (out.view(bits) == ref.view(bits)) | (np.isnan(fo) & np.isnan(fr))


def _run(f, inp, out_dtype, n):
    out = tvm.nd.array(np.zeros(n, dtype=out_dtype))
    f(tvm.nd.array(inp), out)
    return out.numpy()


def _float_probe():
    """float32 values: random bit patterns (NaN payloads, denormals, all exponents), specials,
    and every float8/bfloat16 neighbourhood below."""
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, 60000, dtype=np.uint64).astype(np.uint32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40,
                        float.fromhex("0x1.fep127"), float.fromhex("0x1.ff8p127"), 3.4e38],
                       np.float32)
    small = (rng.standard_normal(20000) * rng.choice([1e-3, 1.0, 300.0, 6e4], 20000))
    # e8m0's rounding edges: denormals around 2**-127, mantissa 1.5, the top exponent
    edges = np.array([0x400000, 0x400001, 0x3FFFFF, 0x600000, 0x5FFFFF, 0x600001, 0x3FC00000, 0x3FBFFFFF,
                      0x7F400000, 0x7F3FFFFF, 0x80400001, 0x80000000], np.uint32)
    return np.concatenate([bits.view(np.float32), special, small.astype(np.float32),
                           edges.view(np.float32)])


def _with_ties(name, x):
    """``x`` plus every representable value of ``name`` and every midpoint between neighbours
    (the ties that round-to-nearest-even decides), and just beyond the largest."""
    codes = np.arange(2 ** dt.bits_of(name), dtype=dt.storage_of(name))
    if name == "bfloat16":
        codes = np.random.default_rng(1).choice(codes, 4000, replace=False)
    with np.errstate(all="ignore"):
        v = np.unique(codes.view(_np(name)).astype(np.float64))
        v = v[np.isfinite(v)]
        mids = (v[1:] + v[:-1]) / 2
        m = float(ml_dtypes.finfo(_np(name)).max)
        extra = np.array([m * 1.03, -m * 1.03, m * 1.1, m * 2], np.float64)  # inf in bfloat16
        return np.concatenate([x, v.astype(np.float32), mids.astype(np.float32),
                               extra.astype(np.float32)])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", SMALL + ["float8_e8m0fnu"])
def test_small_float_decode_every_code(name, target):
    n = 2 ** dt.bits_of(name)
    A = te.placeholder((n,), dt.storage_of(name), "A")
    B = te.compute((n,), lambda i: lp.decode(A[i], name), "B")
    f = tvm.build(te.create_schedule(B.op), [A, B], target)
    codes = np.arange(n, dtype=np.uint8)
    out = _run(f, codes, np.float32, n)
    ref = codes.view(_np(name)).astype(np.float32)
    assert np.all(_same(out, ref))
    # signed zeros and infinities bit-exact, NaN where the format has NaN
    assert np.array_equal(out.view(np.uint32)[~np.isnan(ref)], ref.view(np.uint32)[~np.isnan(ref)])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("saturate", [False, True])
@pytest.mark.parametrize("name", SMALL + ["bfloat16", "float8_e8m0fnu"])
def test_float32_encode_matches_ml_dtypes(name, saturate, target):
    if name in ("bfloat16", "float8_e8m0fnu") and saturate:
        pytest.skip("ONNX's saturate applies to float8 only (e8m0's: in the ONNX importer)")
    x = _with_ties(name, _float_probe())
    n = x.size
    A = te.placeholder((n,), "float32", "A")
    B = te.compute((n,), lambda i: lp.encode(A[i], name, saturate), "B")
    f = tvm.build(te.create_schedule(B.op), [A, B], target)
    out = _run(f, x, dt.storage_of(name), n).view(_np(name))
    with np.errstate(all="ignore"):
        if saturate:  # onnx.numpy_helper.saturate_cast: clip (NaN kept), then round
            m = float(ml_dtypes.finfo(_np(name)).max)
            ref = np.where(np.isnan(x), x, np.clip(x, -m, m)).astype(_np(name))
        else:
            ref = x.astype(_np(name))
    bad = ~_same(out, ref)
    assert not bad.any(), (x[bad][:5], out[bad][:5], ref[bad][:5])
    if name == "bfloat16":  # NaN bits too: ml_dtypes' canonical quiet NaN with the sign
        assert np.array_equal(out.view(np.uint16), ref.view(np.uint16))


@pytest.mark.parametrize("name", SUBBYTE)
def test_subbyte_ints_round_trip(name):
    """int32 -> int4/... wraps (two's complement), as ml_dtypes' astype; every code decodes."""
    x = np.concatenate([np.arange(-40, 40), [2**31 - 1, -(2**31), 123456789]]).astype(np.int32)
    n = x.size
    A = te.placeholder((n,), "int32", "A")
    B = te.compute((n,), lambda i: lp.encode(A[i], name), "B")
    C = te.compute((n,), lambda i: lp.decode(B[i], name), "C")
    f = tvm.build(te.create_schedule(C.op), [A, C], "llvm")
    out = _run(f, x, np.int32, n)
    assert np.array_equal(out, x.astype(_np(name)).astype(np.int32))


def _cast_chain(name, n, vector=False):
    """x (float32) -> name -> (add in name) -> float32, and the name-typed intermediate."""
    A = te.placeholder((n,), "float32", "A")
    B = te.compute((n,), lambda i: A[i].astype(name), "B")
    C = te.compute((n,), lambda i: B[i] + B[i] * tir.const(3, name), "C")
    D = te.compute((n,), lambda i: C[i].astype("float32"), "D")
    s = te.create_schedule(D.op)
    if vector:
        for t in (B, C, D):
            _, inner = s[t].split(t.op.axis[0], factor=8)
            s[t].vectorize(inner)
    return s, [A, C, D]


def _cast_chain_ref(name, a):
    b = a.astype(_np(name))
    if name in SUBBYTE:
        return (b.astype(np.int32) * 4).astype(_np(name))
    return (b.astype(np.float32) + (b.astype(np.float32) * np.float32(3)).astype(_np(name))
            .astype(np.float32)).astype(_np(name))


@pytest.mark.parametrize("vector", [False, True])
@pytest.mark.parametrize("target", TARGETS + ["interp"])
@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2fnuz",
                                  "float4_e2m1fn", "int4", "uint2"])
def test_legalized_compute_through_codegen(name, target, vector):
    n = 37  # not a multiple of the vector width
    s, args = _cast_chain(name, n, vector)
    f = tvm.build(s, args, target)
    rng = np.random.default_rng(3)
    a = (rng.standard_normal(n) * (3 if name in SUBBYTE else 20)).astype(np.float32)
    if name.startswith("u"):
        a = np.abs(a)
    if name in SUBBYTE:  # float -> int beyond the type's range is undefined (fptosi, C, numpy)
        info = ml_dtypes.iinfo(_np(name))
        a = np.clip(a, info.min, info.max + 0.99).astype(np.float32)
    c = tvm.nd.array(np.zeros(n, _np(name)))
    d = tvm.nd.array(np.zeros(n, np.float32))
    f(tvm.nd.array(a), c, d)
    with np.errstate(all="ignore"):
        ref = _cast_chain_ref(name, a)
    assert c.numpy().dtype == _np(name)
    assert np.all(_same(c.numpy(), ref))
    np.testing.assert_array_equal(d.numpy(), ref.astype(np.float32))


def test_legalize_leaves_no_storage_only_dtype():
    s, args = _cast_chain("bfloat16", 16)
    func = tvm.lower(s, args)
    body = "\n".join(str(func).splitlines()[1:])
    assert "bfloat16" not in body and "uint16" in body  # the function works on bits ...
    assert func.attrs["tir.logical_dtypes"] == {1: "bfloat16"}  # ... its ABI on bfloat16
    assert legalize_storage_dtypes_func(func) is func  # idempotent


def test_argument_dtype_is_checked():
    s, args = _cast_chain("float8_e4m3fn", 8)
    f = tvm.build(s, args, "llvm")
    a = tvm.nd.array(np.ones(8, np.float32))
    d = tvm.nd.array(np.zeros(8, np.float32))
    with pytest.raises(ValueError, match="float8_e4m3fn"):
        f(a, tvm.nd.array(np.zeros(8, np.uint8)), d)  # the bits, not the type


def _gpu_build(name, target, encode):
    """decode of all 256 codes, or encode of the float32 probe, one element per thread."""
    if encode:
        x = _with_ties(name, _float_probe())
        A = te.placeholder((x.size,), "float32", "A")
        B = te.compute((x.size,), lambda i: lp.encode(A[i], name, name in FLOAT8), "B")
    else:
        x = np.arange(2 ** dt.bits_of(name), dtype=dt.storage_of(name))
        A = te.placeholder((x.size,), dt.storage_of(name), "A")
        B = te.compute((x.size,), lambda i: lp.decode(A[i], name), "B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=128)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    return tvm.build(s, [A, B], target), x


@pytest.mark.parametrize("target", ["cuda", "nvptx", "opencl"])
@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2fnuz", "int4"])
def test_gpu_codegen(name, target):
    """The conversions in CUDA C (NVRTC + ptxas), through LLVM's NVPTX back end and in OpenCL C;
    run where a device is present (OpenCL: PoCL on the CPU; CUDA: a GPU): saturating encode of
    the float32 probe, decode of every code. The toolchains (NVRTC, ptxas, pyopencl) are test
    dependencies: one that fails to load fails the test, as in every other target test."""
    fenc, x = _gpu_build(name, target, True) if name != "int4" else (None, None)
    fdec, codes = _gpu_build(name, target, False)
    dev = tvm.opencl(0) if target == "opencl" else tvm.cuda(0)
    if not dev.exist:
        return  # compiled (and assembled) only
    out = tvm.nd.array(np.zeros(codes.size, dt.compute_of(name)), dev)
    fdec(tvm.nd.array(codes, dev), out)
    ref = codes.view(_np(name)).astype(dt.compute_of(name))
    got = out.numpy()
    assert np.all((got == ref) | (np.isnan(got) & np.isnan(ref)))
    if fenc is not None:
        out = tvm.nd.array(np.zeros(x.size, dt.storage_of(name)), dev)
        fenc(tvm.nd.array(x, dev), out)
        m = float(ml_dtypes.finfo(_np(name)).max) if name in FLOAT8 else np.inf
        with np.errstate(all="ignore"):
            want = np.where(np.isnan(x), x, np.clip(x, -m, m)).astype(_np(name))
        assert np.all(_same(out.numpy().view(_np(name)), want))


@pytest.mark.parametrize("target", TARGETS + ["interp"])
def test_let_bound_low_precision_values(target):
    """A bfloat16 LetStmt variable and a float8 Let expression take the compute type; the
    stored results are rounded once per operation."""
    from tvmpy.tir import stmt as S
    from tvmpy.tir.buffer import decl_buffer
    from tvmpy.tir.function import PrimFunc

    a = decl_buffer((2,), "float32", "A")
    b = decl_buffer((2,), "bfloat16", "B")
    pa, pb = a.data, b.data
    v = tir.Var("v", "bfloat16")
    w = tir.Var("w", "float8_e4m3fn")
    e8 = tir.Let(w, a[1].astype("float8_e4m3fn"), (w * w).astype("bfloat16"))
    body = S.LetStmt(v, a[0].astype("bfloat16"),
                     S.SeqStmt([S.BufferStore(b, v + v * tir.const(3, "bfloat16"), [0]),
                                S.BufferStore(b, e8, [1])]))
    func = PrimFunc([pa, pb], body, {pa: a, pb: b}).with_attr("global_symbol", "lets")
    f = tvm.build(func, target=target)
    x = np.array([1.2345678, 3.3], np.float32)
    out = tvm.nd.array(np.zeros(2, ml_dtypes.bfloat16))
    f(tvm.nd.array(x), out)
    bf, f8 = ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn
    v0 = x[0].astype(bf)
    want0 = (v0.astype(np.float32) + (v0 * bf(3)).astype(np.float32)).astype(bf)
    w1 = x[1].astype(f8).astype(np.float32)
    want1 = np.float32((w1 * w1).astype(f8)).astype(bf)
    np.testing.assert_array_equal(out.numpy().view(np.uint16),
                                  np.array([want0, want1], bf).view(np.uint16))
