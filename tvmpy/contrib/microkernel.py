"""CPU micro-kernels for tensorize: fp32 GEMM tiles written in C, and their tensor intrinsics.

``gemm_intrin(m, n, k, b_layout)`` declares (``te.decl_tensor_intrin``) the update of an
``m x n`` tile of C by an ``m x k`` tile of A and a k-tile of B:

- ``b_layout="nk"`` (the paper's gemm8x8): ``C[i, j] += A[i, r] * B[j, r]`` (B stored n x k);
- ``b_layout="kn"``: ``C[i, j] += A[i, r] * B[r, j]`` (B stored k x n, the usual matmul).

Its lowering rule returns (body, reset, update) calls of three C functions (``int32_t`` result 0)::

    tvmpy_gemm{m}x{n}x{k}_{layout}_body  (float* C, const float* A, const float* B,
                                          int32_t ldc, int32_t lda, int32_t ldb)   C = A.B
    tvmpy_gemm{m}x{n}x{k}_{layout}_update(same arguments)                          C += A.B
    tvmpy_gemm{m}x{n}x{k}_{layout}_reset (float* C, int32_t ldc)                   C = 0

(``ld*``: row strides in elements). The tile of C stays in registers across the k loop; the
source is compiled with ``cc -O3 -march=native -fPIC`` on first use and linked into every module
whose code calls it (:mod:`tvmpy.codegen.extern_link`), so ``tvm.build(s, args, "llvm")`` and
``"c"`` need nothing more, and exported libraries are self-contained. For the ``interp`` target the
same functions are registered with the interpreter as numpy implementations. Note: the C kernel
may contract ``a * b + c`` into FMA, so it rounds differently from a separate multiply and add.
The kernels are compiled for the host (``-march=native``); for a foreign target (e.g.
``-mtriple=aarch64-linux-gnu``) with the target's cross compiler and ``-mcpu`` (the same vector
C: 4-lane NEON vectors there).

Example (the paper's gemm8x8; ``C[i, j] = sum_k A[i, k] * B[j, k]``)::

    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 8)
    ko, ki = s[C].split(k, factor=8)
    s[C].reorder(xo, yo, ko, xi, yi, ki)
    s[C].tensorize(xi, gemm_intrin(8, 8, 8, "nk"))
    f = tvm.build(s, [A, B, C], "llvm")      # links tvmpy_gemm8x8x8_nk_*

With AVX-512, ``gemm_intrin(8, 32, k, "kn")`` (16 accumulator registers) was the fastest tile
measured here.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from .. import te
from ..codegen.extern_link import register_extern_object
from ..runtime.linker import compile_c, cross_compiler
from ..te.tensor_intrin import TensorIntrin
from ..tir import interpreter
from ..tir.buffer import decl_buffer
from ..tir.op import call_extern

__all__ = ["gemm_intrin", "gemm_source", "gemm_object", "gemm_symbols", "CFLAGS"]

CFLAGS = ("-O3", "-march=native", "-fPIC", "-std=gnu11")
_LAYOUTS = ("nk", "kn")
_lock = threading.Lock()
_objects: dict[tuple, bytes] = {}


def _check(m: int, n: int, k: int, b_layout: str) -> None:
    for name, v, hi in (("m", m, 64), ("n", n, 64), ("k", k, 1024)):
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= hi:
            raise ValueError(f"gemm micro-kernel: {name} must be an int in [1, {hi}], got {v!r}")
    if b_layout not in _LAYOUTS:
        raise ValueError(f"gemm micro-kernel: b_layout must be one of {_LAYOUTS}, got {b_layout!r}")
    if b_layout == "nk" and n * k > 16384:
        raise ValueError(f"gemm micro-kernel: the 'nk' kernel copies the {n}x{k} B tile to the "
                         "stack; keep n * k <= 16384")


def gemm_symbols(m: int, n: int, k: int, b_layout: str = "nk") -> dict[str, str]:
    """The C function names: {"body": ..., "reset": ..., "update": ...}."""
    _check(m, n, k, b_layout)
    base = f"tvmpy_gemm{m}x{n}x{k}_{b_layout}"
    return {"body": base + "_body", "reset": base + "_reset", "update": base + "_update"}


def gemm_source(m: int, n: int, k: int, b_layout: str = "nk") -> str:
    """C source of the three kernels (GCC/Clang vector extensions: the C tile lives in vector
    registers, ``VW`` lanes wide: 16 with AVX-512, 8 with AVX, 4 otherwise, or fewer when that
    does not divide n)."""
    sym = gemm_symbols(m, n, k, b_layout)
    if b_layout == "kn":
        b_row = "const float* Bp = B + p * ldb;"
        transpose = ""
    else:  # copy the n x k tile of B transposed, so the inner loop runs over contiguous j
        b_row = "const float* Bp = Bt + p * N;"
        transpose = """
  float Bt[K * N];
  for (int j = 0; j < N; ++j)
    for (int p = 0; p < K; ++p) Bt[p * N + j] = B[j * ldb + p];"""
    return f"""/* tvmpy.contrib.microkernel: fp32 GEMM tile {m}x{n}x{k}, B layout {b_layout} */
#include <stdint.h>
#define M {m}
#define N {n}
#define K {k}
#if defined(__AVX512F__)
#define VWMAX 16
#elif defined(__AVX__)
#define VWMAX 8
#else
#define VWMAX 4
#endif
#if N % 16 == 0 && VWMAX >= 16
#define VW 16
#elif N % 8 == 0 && VWMAX >= 8
#define VW 8
#elif N % 4 == 0
#define VW 4
#elif N % 2 == 0
#define VW 2
#else
#define VW 1
#endif
#define NV (N / VW)
typedef float vf __attribute__((vector_size(VW * sizeof(float))));

static inline vf loadu(const float* p) {{ vf v; __builtin_memcpy(&v, p, sizeof v); return v; }}
static inline void storeu(float* p, vf v) {{ __builtin_memcpy(p, &v, sizeof v); }}

static inline __attribute__((always_inline)) void
gemm_tile(float* restrict C, const float* restrict A, const float* restrict B,
          int32_t ldc, int32_t lda, int32_t ldb, int accumulate) {{
  vf acc[M][NV];{transpose}
#pragma GCC unroll 64
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 64
    for (int v = 0; v < NV; ++v)
      acc[i][v] = accumulate ? loadu(C + i * ldc + v * VW) : (vf){{0}};
  for (int p = 0; p < K; ++p) {{
    {b_row}
    vf b[NV];
#pragma GCC unroll 64
    for (int v = 0; v < NV; ++v) b[v] = loadu(Bp + v * VW);
#pragma GCC unroll 64
    for (int i = 0; i < M; ++i) {{
      const float a = A[i * lda + p];
#pragma GCC unroll 64
      for (int v = 0; v < NV; ++v) acc[i][v] += a * b[v];
    }}
  }}
#pragma GCC unroll 64
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 64
    for (int v = 0; v < NV; ++v) storeu(C + i * ldc + v * VW, acc[i][v]);
}}

int32_t {sym["update"]}(float* restrict C, const float* restrict A, const float* restrict B,
                        int32_t ldc, int32_t lda, int32_t ldb) {{
  gemm_tile(C, A, B, ldc, lda, ldb, 1);
  return 0;
}}

int32_t {sym["body"]}(float* restrict C, const float* restrict A, const float* restrict B,
                      int32_t ldc, int32_t lda, int32_t ldb) {{
  gemm_tile(C, A, B, ldc, lda, ldb, 0);
  return 0;
}}

int32_t {sym["reset"]}(float* restrict C, int32_t ldc) {{
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) C[i * ldc + j] = 0.0f;
  return 0;
}}
"""


def gemm_object(m: int, n: int, k: int, b_layout: str = "nk", target: Any = None) -> bytes:
    """The compiled object file of :func:`gemm_source` for ``target`` (None: this machine;
    cached per process)."""
    foreign = target is not None and target.is_foreign
    cpu = target.mcpu if foreign else None
    key = (m, n, k, b_layout, target.arch if foreign else None, cpu)
    with _lock:
        obj = _objects.get(key)
        if obj is None:
            if foreign:
                cc = cross_compiler(target.arch)
                flags = [f for f in CFLAGS if f != "-march=native"]
                if cpu and target.arch == "aarch64":  # zig spells LLVM's CPU names with "_"
                    zig = any("zig" in os.path.basename(c) for c in cc)
                    flags.append(f"-mcpu={cpu.replace('-', '_') if zig else cpu}")
                obj = compile_c(gemm_source(m, n, k, b_layout), flags, name=f"gemm{m}x{n}x{k}",
                                cc=cc)
            else:
                obj = compile_c(gemm_source(m, n, k, b_layout), CFLAGS, name=f"gemm{m}x{n}x{k}")
            _objects[key] = obj
    return obj


def _tile(view: np.ndarray, rows: int, cols: int, ld: Any, what: str) -> np.ndarray:
    """A writable (rows, cols) view with row stride ``ld`` elements, bounds-checked."""
    ld = int(ld)
    if ld < cols or (rows - 1) * ld + cols > view.size:
        raise IndexError(f"gemm micro-kernel: {what} tile {rows}x{cols} with row stride {ld} does "
                         f"not fit the {view.size} elements after its start")
    s = view.itemsize
    return np.lib.stride_tricks.as_strided(view, (rows, cols), (ld * s, s))


def _register_python(m: int, n: int, k: int, b_layout: str) -> None:
    sym = gemm_symbols(m, n, k, b_layout)
    bshape = (n, k) if b_layout == "nk" else (k, n)

    def product(a: np.ndarray, b: np.ndarray, lda: Any, ldb: Any) -> np.ndarray:
        ta = _tile(a, m, k, lda, "A")
        tb = _tile(b, *bshape, ldb, "B")
        return ta @ (tb.T if b_layout == "nk" else tb)

    def update(c, a, b, ldc, lda, ldb):  # noqa: ANN001 - numpy views and ints
        _tile(c, m, n, ldc, "C")[...] += product(a, b, lda, ldb)
        return 0

    def body(c, a, b, ldc, lda, ldb):  # noqa: ANN001
        _tile(c, m, n, ldc, "C")[...] = product(a, b, lda, ldb)
        return 0

    def reset(c, ldc):  # noqa: ANN001
        _tile(c, m, n, ldc, "C")[...] = 0
        return 0

    interpreter.register_extern(sym["update"], update)
    interpreter.register_extern(sym["body"], body)
    interpreter.register_extern(sym["reset"], reset)


def gemm_intrin(m: int = 8, n: int = 8, k: int = 8, b_layout: str = "nk") -> TensorIntrin:
    """The tensor intrinsic of an ``m x n x k`` fp32 GEMM tile (see the module docstring);
    its C kernels are linked into modules that use it."""
    _check(m, n, k, b_layout)
    sym = gemm_symbols(m, n, k, b_layout)
    a = te.placeholder((m, k), "float32", name="a")
    if b_layout == "nk":
        b = te.placeholder((n, k), "float32", name="b")
    else:
        b = te.placeholder((k, n), "float32", name="b")
    r = te.reduce_axis((0, k), name="r")
    if b_layout == "nk":
        c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[j, r], axis=r), name="c")
    else:
        c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="c")
    binds = {t: decl_buffer(t.shape, "float32", t.op.name.upper(), offset_factor=1,
                            strides=[te.var(f"ld{t.op.name}"), 1]) for t in (a, b, c)}

    def lower(ins, outs):  # noqa: ANN001 - Buffers
        ba, bb = ins
        bc = outs[0]
        args = (bc.strides[0], ba.strides[0], bb.strides[0])

        def call(name: str):
            return call_extern("int32", name, bc.access_ptr("w"), ba.access_ptr("r"),
                               bb.access_ptr("r"), *args)

        reset = call_extern("int32", sym["reset"], bc.access_ptr("w"), bc.strides[0])
        return call(sym["body"]), reset, call(sym["update"])

    intrin = te.decl_tensor_intrin(c.op, lower, name=f"gemm{m}x{n}x{k}_{b_layout}", binds=binds)
    register_extern_object(sym.values(), f"gemm{m}x{n}x{k}_{b_layout}",
                           lambda target=None: gemm_object(m, n, k, b_layout, target))
    _register_python(m, n, k, b_layout)
    return intrin
