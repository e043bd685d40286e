"""``tvm.contrib.cblas.*``: BLAS matrix products as C packed functions of the registry.

TVM builds these into its runtime when compiled with ``USE_BLAS``; tvmpy compiles a small C shim
(:data:`SOURCE`) with the system C compiler on first use (cached per user, like the parallel
pool) and points it at a CBLAS ``sgemm``/``dgemm`` found in the process: numpy's bundled
OpenBLAS (``numpy.libs``; its ILP64 ``scipy_cblas_*64_`` entry points), scipy's, or a system
``libopenblas``/``libcblas``/``libblas`` (``TVMPY_BLAS_LIB``: a path to use first). Generated
code calls the shim's functions directly (one C call per ``call_packed``; no Python on the way).

Registered names (TVM's, same arguments): ``tvm.contrib.cblas.matmul(A, B, C, transa, transb
[, alpha, beta])`` (2-D, float32/float64) and ``tvm.contrib.cblas.batch_matmul`` /
``batch_matmul_iterative(A, B, C, transa, transb)`` (3-D; a batch of 1 in A or B broadcasts).
Every argument is checked (type codes, devices, dtypes, ranks, shapes, inner strides): a bad one
is a clear error (``__tvmpy_packed_set_error``), never a wild memory access.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading

from .linker import compiler

__all__ = ["SOURCE", "register", "blas_description"]

SOURCE = r"""
/* tvmpy BLAS shim (generated from tvmpy/runtime/blas.py). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef union { int64_t v_int64; double v_float64; void* v_handle; } TVMValue;
typedef struct { int32_t device_type, device_id; } DLDevice;
typedef struct { uint8_t code, bits; uint16_t lanes; } DLDataType;
typedef struct {
  void* data; DLDevice device; int32_t ndim; DLDataType dtype;
  int64_t* shape; int64_t* strides; uint64_t byte_offset;
} DLTensor;

#define EXPORT __attribute__((visibility("default")))
EXPORT void (*__tvmpy_packed_set_error)(const char*) = 0;
EXPORT void* tvmpy_blas_gemm[2] = {0, 0};  /* sgemm, dgemm */
EXPORT int tvmpy_blas_ilp64 = 0;

typedef void (*gemm32_s)(int, int, int, int32_t, int32_t, int32_t, float, const float*, int32_t,
                         const float*, int32_t, float, float*, int32_t);
typedef void (*gemm64_s)(int, int, int, int64_t, int64_t, int64_t, float, const float*, int64_t,
                         const float*, int64_t, float, float*, int64_t);
typedef void (*gemm32_d)(int, int, int, int32_t, int32_t, int32_t, double, const double*, int32_t,
                         const double*, int32_t, double, double*, int32_t);
typedef void (*gemm64_d)(int, int, int, int64_t, int64_t, int64_t, double, const double*, int64_t,
                         const double*, int64_t, double, double*, int64_t);

static int fail(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (__tvmpy_packed_set_error) __tvmpy_packed_set_error(buf);
  return -1;
}

typedef struct { char* data; int64_t rows, cols, ld, batch, bstride; } Mat;

/* a float matrix argument (ndim 2, or 3 with a batch); inner stride 1 */
static int get_mat(const char* fn, TVMValue* args, int* codes, int n, int i, int ndim, int dl_bits,
                   Mat* m) {
  if (i >= n) return fail("%s: missing argument %d", fn, i);
  if (codes[i] != 7) return fail("%s: argument %d must be an array (DLTensor), got type code %d",
                                 fn, i, codes[i]);
  DLTensor* t = (DLTensor*)args[i].v_handle;
  if (!t || !t->shape) return fail("%s: argument %d is a NULL array", fn, i);
  if (t->device.device_type != 1) return fail("%s: argument %d is not in CPU memory", fn, i);
  if (t->ndim != ndim) return fail("%s: argument %d must have %d dimensions, got %d", fn, i, ndim,
                                   t->ndim);
  if (t->dtype.code != 2 || t->dtype.lanes != 1 || t->dtype.bits != dl_bits)
    return fail("%s: argument %d has dtype (code %d, bits %d), expected float%d like argument 0",
                fn, i, t->dtype.code, t->dtype.bits, dl_bits);
  for (int k = 0; k < ndim; ++k)
    if (t->shape[k] < 0) return fail("%s: argument %d has a negative extent", fn, i);
  int b = ndim == 3;
  m->batch = b ? t->shape[0] : 1;
  m->rows = t->shape[b];
  m->cols = t->shape[b + 1];
  m->ld = m->cols;
  m->bstride = m->rows * m->cols;
  if (t->strides) {
    if (t->strides[b + 1] != 1 && m->cols > 1)
      return fail("%s: argument %d: the last axis must be contiguous (stride %lld)", fn, i,
                  (long long)t->strides[b + 1]);
    if (m->rows > 1) m->ld = t->strides[b];
    if (m->ld < m->cols && m->rows > 1)
      return fail("%s: argument %d: row stride %lld is below the row length %lld", fn, i,
                  (long long)m->ld, (long long)m->cols);
    if (b) m->bstride = t->strides[0];
  }
  if (m->ld < 1) m->ld = 1;
  if (!t->data && m->rows * m->cols * m->batch > 0)
    return fail("%s: argument %d has a NULL data pointer", fn, i);
  m->data = (char*)t->data + t->byte_offset;
  return 0;
}

static int get_flag(const char* fn, TVMValue* args, int* codes, int n, int i, int* out) {
  *out = 0;
  if (i >= n) return 0;
  if (codes[i] != 0 && codes[i] != 1)
    return fail("%s: argument %d (a transpose flag) must be a bool/int, got type code %d", fn, i,
                codes[i]);
  *out = args[i].v_int64 != 0;
  return 0;
}

static int get_real(const char* fn, TVMValue* args, int* codes, int n, int i, double dflt,
                    double* out) {
  *out = dflt;
  if (i >= n) return 0;
  if (codes[i] == 2) *out = args[i].v_float64;
  else if (codes[i] == 0) *out = (double)args[i].v_int64;
  else return fail("%s: argument %d must be a number, got type code %d", fn, i, codes[i]);
  return 0;
}

static int gemm(const char* fn, int dbl, int ta, int tb, int64_t M, int64_t N, int64_t K,
                double alpha, const char* A, int64_t lda, const char* B, int64_t ldb, double beta,
                char* C, int64_t ldc) {
  if (M == 0 || N == 0) return 0;
  if (K == 0) { /* C = beta * C */
    for (int64_t r = 0; r < M; ++r)
      for (int64_t c = 0; c < N; ++c) {
        if (dbl) { double* p = (double*)C + r * ldc + c; *p = beta == 0 ? 0 : beta * *p; }
        else { float* p = (float*)C + r * ldc + c; *p = beta == 0 ? 0 : (float)(beta * *p); }
      }
    return 0;
  }
  void* g = tvmpy_blas_gemm[dbl];
  if (!g) return fail("%s: no BLAS %cgemm was found", fn, dbl ? 'd' : 's');
  int o = 101, a = ta ? 112 : 111, b = tb ? 112 : 111;
  if (tvmpy_blas_ilp64) {
    if (dbl) ((gemm64_d)g)(o, a, b, M, N, K, alpha, (const double*)A, lda, (const double*)B, ldb,
                           beta, (double*)C, ldc);
    else ((gemm64_s)g)(o, a, b, M, N, K, (float)alpha, (const float*)A, lda, (const float*)B, ldb,
                       (float)beta, (float*)C, ldc);
  } else {
    const int64_t lim = 0x7fffffff;
    if (M > lim || N > lim || K > lim || lda > lim || ldb > lim || ldc > lim)
      return fail("%s: a dimension exceeds the 32-bit BLAS in use", fn);
    if (dbl) ((gemm32_d)g)(o, a, b, (int32_t)M, (int32_t)N, (int32_t)K, alpha, (const double*)A,
                           (int32_t)lda, (const double*)B, (int32_t)ldb, beta, (double*)C,
                           (int32_t)ldc);
    else ((gemm32_s)g)(o, a, b, (int32_t)M, (int32_t)N, (int32_t)K, (float)alpha,
                       (const float*)A, (int32_t)lda, (const float*)B, (int32_t)ldb, (float)beta,
                       (float*)C, (int32_t)ldc);
  }
  return 0;
}

static int dtype_bits(const char* fn, TVMValue* args, int* codes, int n, int* dbl) {
  if (n < 1 || codes[0] != 7 || !args[0].v_handle)
    return fail("%s: argument 0 must be an array (DLTensor)", fn);
  DLTensor* t = (DLTensor*)args[0].v_handle;
  if (t->dtype.code != 2 || (t->dtype.bits != 32 && t->dtype.bits != 64))
    return fail("%s: BLAS needs float32 or float64 arrays, got dtype (code %d, bits %d)", fn,
                t->dtype.code, t->dtype.bits);
  *dbl = t->dtype.bits == 64;
  return 0;
}

EXPORT int32_t tvmpy_cblas_matmul(TVMValue* args, int* codes, int n, TVMValue* ret,
                                  int* ret_code, void* res) {
  const char* fn = "tvm.contrib.cblas.matmul";
  int dbl, ta, tb;
  double alpha, beta;
  Mat A, B, C;
  if (n < 3 || n > 7) return fail("%s: expected (A, B, C, transa, transb[, alpha, beta]), got %d "
                                  "arguments", fn, n);
  if (dtype_bits(fn, args, codes, n, &dbl)) return -1;
  int bits = dbl ? 64 : 32;
  if (get_mat(fn, args, codes, n, 0, 2, bits, &A) || get_mat(fn, args, codes, n, 1, 2, bits, &B) ||
      get_mat(fn, args, codes, n, 2, 2, bits, &C) || get_flag(fn, args, codes, n, 3, &ta) ||
      get_flag(fn, args, codes, n, 4, &tb) || get_real(fn, args, codes, n, 5, 1.0, &alpha) ||
      get_real(fn, args, codes, n, 6, 0.0, &beta))
    return -1;
  int64_t M = ta ? A.cols : A.rows, K = ta ? A.rows : A.cols;
  int64_t K2 = tb ? B.cols : B.rows, N = tb ? B.rows : B.cols;
  if (K != K2 || C.rows != M || C.cols != N)
    return fail("%s: shapes do not match: A %lldx%lld%s, B %lldx%lld%s, C %lldx%lld", fn,
                (long long)A.rows, (long long)A.cols, ta ? " (transposed)" : "",
                (long long)B.rows, (long long)B.cols, tb ? " (transposed)" : "",
                (long long)C.rows, (long long)C.cols);
  if (ret_code) *ret_code = 4;
  return gemm(fn, dbl, ta, tb, M, N, K, alpha, A.data, A.ld, B.data, B.ld, beta, C.data, C.ld);
}

EXPORT int32_t tvmpy_cblas_batch_matmul(TVMValue* args, int* codes, int n, TVMValue* ret,
                                        int* ret_code, void* res) {
  const char* fn = "tvm.contrib.cblas.batch_matmul";
  int dbl, ta, tb;
  Mat A, B, C;
  if (n < 3 || n > 5) return fail("%s: expected (A, B, C, transa, transb), got %d arguments", fn,
                                  n);
  if (dtype_bits(fn, args, codes, n, &dbl)) return -1;
  int bits = dbl ? 64 : 32;
  if (get_mat(fn, args, codes, n, 0, 3, bits, &A) || get_mat(fn, args, codes, n, 1, 3, bits, &B) ||
      get_mat(fn, args, codes, n, 2, 3, bits, &C) || get_flag(fn, args, codes, n, 3, &ta) ||
      get_flag(fn, args, codes, n, 4, &tb))
    return -1;
  int64_t M = ta ? A.cols : A.rows, K = ta ? A.rows : A.cols;
  int64_t K2 = tb ? B.cols : B.rows, N = tb ? B.rows : B.cols;
  if (K != K2 || C.rows != M || C.cols != N || (A.batch != C.batch && A.batch != 1) ||
      (B.batch != C.batch && B.batch != 1))
    return fail("%s: shapes do not match: A %lldx%lldx%lld%s, B %lldx%lldx%lld%s, C "
                "%lldx%lldx%lld", fn, (long long)A.batch, (long long)A.rows, (long long)A.cols,
                ta ? " (transposed)" : "", (long long)B.batch, (long long)B.rows,
                (long long)B.cols, tb ? " (transposed)" : "", (long long)C.batch,
                (long long)C.rows, (long long)C.cols);
  size_t es = dbl ? 8 : 4;
  if (ret_code) *ret_code = 4;
  for (int64_t i = 0; i < C.batch; ++i) {
    const char* a = A.data + (A.batch == 1 ? 0 : i * A.bstride * es);
    const char* b = B.data + (B.batch == 1 ? 0 : i * B.bstride * es);
    char* c = C.data + i * C.bstride * es;
    if (gemm(fn, dbl, ta, tb, M, N, K, 1.0, a, A.ld, b, B.ld, 0.0, c, C.ld)) return -1;
  }
  return 0;
}
"""

# (sgemm symbol, dgemm symbol, ILP64) in the order they are tried in each library
_SYMBOLS = (("scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_", True),
            ("cblas_sgemm64_", "cblas_dgemm64_", True),
            ("scipy_cblas_sgemm", "scipy_cblas_dgemm", False),
            ("cblas_sgemm", "cblas_dgemm", False))

_lock = threading.Lock()
_state: dict[str, object] = {}
_blas_libs: list[ctypes.CDLL] = []


def _candidate_libraries() -> list[str]:
    out: list[str] = []
    env = os.environ.get("TVMPY_BLAS_LIB")
    if env:
        out.append(env)
    try:
        import numpy

        root = os.path.dirname(os.path.dirname(numpy.__file__))
        for pkg in ("numpy.libs", "scipy.libs", "scipy_openblas64/lib", "scipy_openblas32/lib"):
            out += sorted(glob.glob(os.path.join(root, pkg, "*openblas*.so*")))
    except ImportError:  # pragma: no cover - numpy is a dependency of the runtime
        pass
    for name in ("openblas", "cblas", "blas"):
        path = ctypes.util.find_library(name)
        if path:
            out.append(path)
    return out


def _find_blas() -> tuple[int, int, bool, str]:
    tried = []
    for path in _candidate_libraries():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            tried.append(f"{path} (cannot load)")
            continue
        for s, d, ilp64 in _SYMBOLS:
            try:
                fs, fd = lib[s], lib[d]
            except AttributeError:
                continue
            _blas_libs.append(lib)  # kept loaded
            return (ctypes.cast(fs, ctypes.c_void_p).value or 0,
                    ctypes.cast(fd, ctypes.c_void_p).value or 0, ilp64, f"{path}:{s}")
        tried.append(f"{path} (no CBLAS gemm symbols)")
    raise RuntimeError("no CBLAS library found (tried: " + ("; ".join(tried) or "none") +
                       "); install numpy's wheel (it bundles OpenBLAS) or libopenblas, or set "
                       "TVMPY_BLAS_LIB to a CBLAS shared library")


def _shim_path(cmd: list[str]) -> str:
    key = hashlib.sha256((SOURCE + "\0" + " ".join(cmd)).encode()).hexdigest()[:16]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tvmpy", f"blas_shim-{key}.so")


def _build_shim() -> str:
    """The shim's shared library: from the user cache when there, else compiled now (into a
    folder of its own, then copied into the cache when that is writable)."""
    cmd = compiler()
    path = _shim_path(cmd)
    if os.path.exists(path):
        return path
    folder = tempfile.mkdtemp(prefix="tvmpy_blas_")  # kept when the cache is not writable
    src, out = os.path.join(folder, "blas_shim.c"), os.path.join(folder, "blas_shim.so")
    with open(src, "w") as f:
        f.write(SOURCE)
    proc = subprocess.run(cmd + ["-O2", "-std=gnu11", "-fPIC", "-shared", src, "-o", out],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"compiling the BLAS shim failed ({' '.join(cmd)}):\n"
                           f"{proc.stdout}{proc.stderr}")
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        shutil.copyfile(out, tmp)
        os.replace(tmp, path)  # atomic: a concurrent process loads either none or a whole file
    except OSError:
        return out
    shutil.rmtree(folder, ignore_errors=True)
    return path


def register() -> None:
    """Compile/load the shim, bind it to a BLAS and register its functions (once)."""
    from .packed_func import PackedFunc, bind_library, register_func

    with _lock:
        if "lib" in _state:
            return
        sgemm, dgemm, ilp64, desc = _find_blas()
        lib = ctypes.CDLL(_build_shim())
        bind_library(lib)
        table = (ctypes.c_void_p * 2).in_dll(lib, "tvmpy_blas_gemm")
        table[0], table[1] = sgemm, dgemm
        ctypes.c_int.in_dll(lib, "tvmpy_blas_ilp64").value = int(ilp64)
        _state["lib"], _state["desc"] = lib, desc
        for name, sym in (("matmul", "tvmpy_cblas_matmul"),
                          ("batch_matmul", "tvmpy_cblas_batch_matmul"),
                          ("batch_matmul_iterative", "tvmpy_cblas_batch_matmul")):
            addr = ctypes.cast(lib[sym], ctypes.c_void_p).value or 0
            register_func(f"tvm.contrib.cblas.{name}",
                          PackedFunc.from_address(addr, f"tvm.contrib.cblas.{name}",
                                                  keepalive=lib), override=True)


def blas_description() -> str:
    """Which BLAS the functions call (``path:symbol``), after :func:`register`."""
    register()
    return str(_state["desc"])
