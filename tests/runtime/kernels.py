"""Hand-written C kernels that follow runtime/abi.py, with their signatures (computed from
PrimFuncs by codegen/abi.py, so the tests also check abi.signature <-> runtime agreement)."""

from __future__ import annotations

from tvmpy import te
from tvmpy.codegen.abi import signature
from tvmpy.runtime import Module
from tvmpy.tir import stmt as S
from tvmpy.tir.buffer import decl_buffer
from tvmpy.tir.function import PrimFunc

C_SOURCE = r"""
#include <stdint.h>
#include <string.h>
extern const char* __tvmpy_last_error;

/* C[i] = A[i] + B[i], A/B/C: float32[n] */
int32_t vadd(void* A, void* B, void* C, int32_t n) {
  const float* a = A; const float* b = B; float* c = C;
  for (int32_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
  return 0;
}

/* an AssertStmt that fails when A[0] < 0 */
int32_t check_positive(void* A, int32_t n) {
  const float* a = A;
  if (n > 0 && a[0] < 0) { __tvmpy_last_error = "Assert fail: A[0] >= 0f"; return -1; }
  return 0;
}

/* C[n, m] = A[n, k] @ B[k, m], float64 */
int32_t mm(void* A, void* B, void* C, int32_t n, int32_t k, int32_t m) {
  const double* a = A; const double* b = B; double* c = C;
  for (int32_t i = 0; i < n; ++i)
    for (int32_t j = 0; j < m; ++j) {
      double s = 0;
      for (int32_t r = 0; r < k; ++r) s += a[i * k + r] * b[r * m + j];
      c[i * m + j] = s;
    }
  return 0;
}

/* B[i] = A[i / 2], A: int32[n], B: int32[n * 2] (a composite dim) */
int32_t repeat2(void* A, void* B, int32_t n) {
  const int32_t* a = A; int32_t* b = B;
  for (int32_t i = 0; i < n * 2; ++i) b[i] = a[i / 2];
  return 0;
}

/* B = A * alpha + k, with scalar parameters; A, B: float32[4, 5] */
int32_t axpk(void* A, void* B, float alpha, int32_t k) {
  const float* a = A; float* b = B;
  for (int i = 0; i < 20; ++i) b[i] = a[i] * alpha + (float)k;
  return 0;
}

/* A[i] = i for i < n, where n is an explicit scalar parameter (A: int64[n]) */
int32_t iota(void* A, int64_t n) {
  int64_t* a = A;
  for (int64_t i = 0; i < n; ++i) a[i] = i;
  return 0;
}

/* A: float32[3, 4] stored with row stride 8 (declared strides [8, 1]); B = A * 2 compact */
int32_t strided_double(void* A, void* B) {
  const float* a = A; float* b = B;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) b[i * 4 + j] = a[i * 8 + j] * 2.0f;
  return 0;
}

/* bool and float16 storage: B = !A, D = C (bit copy); A,B: bool[n], C,D: float16[n] */
int32_t not_and_copy16(void* A, void* B, void* C, void* D, int32_t n) {
  const uint8_t* a = A; uint8_t* b = B;
  for (int32_t i = 0; i < n; ++i) b[i] = !a[i];
  memcpy(D, C, (size_t)n * 2);
  return 0;
}

/* Out[i] = In[i] * 3: the output comes first (in-place use: both the same array) */
int32_t triple_into(void* Out, void* In, int32_t n) {
  float* o = Out; const float* in = In;
  for (int32_t i = 0; i < n; ++i) o[i] = in[i] * 3.0f;
  return 0;
}

/* fails without a message */
int32_t fail_silently(void* A, int32_t n) { return -2; }

/* reports the alignment of its argument: 0 when 64-byte aligned */
int32_t misalign(void* A, void* out, int32_t n) {
  ((int64_t*)out)[0] = (int64_t)((uintptr_t)A % 64);
  return 0;
}
"""


def _func(name, bufs, scalars=()):
    params, bmap = [], {}
    for b in bufs:
        params.append(b.data)
        bmap[b.data] = b
    params.extend(scalars)
    return PrimFunc(params, S.Evaluate(0), bmap, {"global_symbol": name})


def signatures():
    n, k, m = te.var("n"), te.var("k"), te.var("m")
    n64 = te.var("n", "int64")
    f = []
    f.append(_func("vadd", [decl_buffer((n,), "float32", nm) for nm in "ABC"]))
    f.append(_func("check_positive", [decl_buffer((n,), "float32", "A")]))
    f.append(_func("mm", [decl_buffer((n, k), "float64", "A"), decl_buffer((k, m), "float64", "B"),
                          decl_buffer((n, m), "float64", "C")]))
    f.append(_func("repeat2", [decl_buffer((n,), "int32", "A"),
                               decl_buffer((n * 2,), "int32", "B")]))
    f.append(_func("axpk", [decl_buffer((4, 5), "float32", "A"), decl_buffer((4, 5), "float32", "B")],
                   [te.var("alpha", "float32"), te.var("k", "int32")]))
    f.append(_func("iota", [decl_buffer((n64,), "int64", "A")], [n64]))
    f.append(_func("strided_double", [decl_buffer((3, 4), "float32", "A", strides=(8, 1)),
                                      decl_buffer((3, 4), "float32", "B")]))
    f.append(_func("not_and_copy16", [decl_buffer((n,), "bool", "A"), decl_buffer((n,), "bool", "B"),
                                      decl_buffer((n,), "float16", "C"),
                                      decl_buffer((n,), "float16", "D")]))
    f.append(_func("triple_into", [decl_buffer((n,), "float32", "Out"),
                                   decl_buffer((n,), "float32", "In")]))
    f.append(_func("fail_silently", [decl_buffer((n,), "float32", "A")]))
    f.append(_func("misalign", [decl_buffer((n,), "float32", "A"), decl_buffer((1,), "int64", "out")]))
    return [signature(func) for func in f]


def build() -> Module:
    return Module.from_c_source(C_SOURCE, signatures(), "vadd")
