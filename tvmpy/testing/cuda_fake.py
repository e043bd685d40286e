"""A fake CUDA driver (the methods of runtime.cuda_module.CtypesDriver) backed by host memory, whose
kernels are Python functions: runs the runtime's launch, packing and copy paths without a GPU.
:class:`HostKernels` supplies such kernels from generated CUDA C compiled for the host."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

_CT = {"handle": ctypes.c_uint64, "int8": ctypes.c_int8, "int16": ctypes.c_int16,
       "int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint8": ctypes.c_uint8,
       "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
       "float32": ctypes.c_float, "float64": ctypes.c_double, "bool": ctypes.c_bool,
       "float16": ctypes.c_uint16}


def _err(what: str, name: str) -> Exception:
    from ..runtime.cuda_module import CUDAError

    return CUDAError(f"CUDA {what} failed: {name}")


class FakeStream:
    """A stream of the fake driver: while capturing, ``recording`` collects its launches."""

    def __init__(self, n: int):
        self.n = n
        self.recording: list[tuple] | None = None
        self.invalid: str | None = None

    def __repr__(self) -> str:
        return f"<fake stream {self.n}>"


class FakeGraphExec:
    """An instantiated graph of the fake driver: the launches recorded, replayed in order."""

    def __init__(self, launches: list[tuple]):
        self.launches = launches
        self.destroyed = False


class FakeDriver:
    """``kernels``: name -> (param dtypes, fn(driver, grid, block, shared, *values)).

    Streams and CUDA graphs as the driver has them: a launch on a capturing stream is recorded
    (its parameter *values*, read at capture, as ``cuStreamEndCapture``'s graph holds them), not
    run; ``graph_launch`` runs the recorded launches in order (``replayed`` counts them,
    ``launches`` only what ran outside graphs). What a capture must not contain fails as on a
    GPU and invalidates it: a launch or synchronous copy on the legacy stream, an allocation,
    a synchronization, a copy on the capturing stream (``capture_errors`` lists them).
    ``fail_capture``: an error name ``begin_capture`` raises (a driver without the API);
    ``fail_kernels``: kernels whose launches (direct or replayed) raise a launch failure."""

    def __init__(self, kernels: dict[str, tuple[list[str], Callable]] | None = None,
                 arch: tuple[int, int] = (9, 0), ndev: int = 1):
        self.kernels = dict(kernels or {})
        self.arch = arch
        self.ndev = ndev
        self.mem: dict[int, np.ndarray] = {}
        self.loaded: list[bytes] = []
        self.launches: list[tuple] = []
        self.syncs = 0
        self.events = 0
        self.dyn_shared: dict[str, int] = {}
        self.streams: list[FakeStream] = []
        self.stream_launches = 0  # launches run (not recorded) on a stream of ours
        self.async_copies = 0
        self.graph_launches = 0
        self.replayed = 0
        self.graphs_made = 0
        self.graphs_freed = 0
        self.capture_errors: list[str] = []
        self.fail_capture: str | None = None
        self.fail_kernels: set[str] = set()

    # ---- capture state ---------------------------------------------------------------------
    def _capturing(self) -> FakeStream | None:
        return next((s for s in self.streams if s.recording is not None), None)

    def _unsafe(self, what: str, name: str = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED") -> None:
        s = self._capturing()
        if s is not None:
            s.invalid = s.invalid or f"{what} during capture"
            self.capture_errors.append(what)
            raise _err(what, name)

    def device_count(self) -> int:
        return self.ndev

    def device_name(self, dev: int) -> str:
        return "Fake H100"

    def device_attribute(self, dev: int, attr: int) -> int:
        return {75: self.arch[0], 76: self.arch[1], 1: 1024, 8: 49152, 10: 32,
                16: 132}.get(attr, 0)

    def mem_alloc(self, dev: int, nbytes: int) -> int:
        self._unsafe("cuMemAlloc")
        buf = np.zeros(max(nbytes, 1) + 256, np.uint8)
        ptr = buf.ctypes.data + (-buf.ctypes.data) % 256
        self.mem[ptr] = buf
        return ptr

    def mem_free(self, dev: int, ptr: int) -> None:
        self.mem.pop(ptr)

    def _check(self, ptr: int) -> None:
        assert any(p <= ptr < p + b.size for p, b in self.mem.items()), "not device memory"

    def memcpy_htod(self, dev: int, dst: int, src: int, nbytes: int) -> None:
        self._unsafe("cuMemcpyHtoD", "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT")
        self._check(dst)
        ctypes.memmove(dst, src, nbytes)

    def memcpy_dtoh(self, dev: int, dst: int, src: int, nbytes: int) -> None:
        self._unsafe("cuMemcpyDtoH", "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT")
        self._check(src)
        ctypes.memmove(dst, src, nbytes)

    def memcpy_htod_async(self, dev: int, dst: int, src: int, nbytes: int, stream: Any) -> None:
        self._unsafe("cuMemcpyHtoDAsync")  # pageable memory: not capturable
        self._check(dst)
        self.async_copies += 1
        ctypes.memmove(dst, src, nbytes)

    def memcpy_dtoh_async(self, dev: int, dst: int, src: int, nbytes: int, stream: Any) -> None:
        self._unsafe("cuMemcpyDtoHAsync")
        self._check(src)
        self.async_copies += 1
        ctypes.memmove(dst, src, nbytes)

    def memcpy_dtod(self, dev: int, dst: int, src: int, nbytes: int) -> None:
        self._unsafe("cuMemcpyDtoD", "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT")
        self._check(src)
        self._check(dst)
        ctypes.memmove(dst, src, nbytes)

    def module_load(self, dev: int, image: bytes) -> Any:
        self.loaded.append(image)
        return len(self.loaded)

    def module_function(self, dev: int, module: Any, name: str) -> Any:
        if name not in self.kernels:
            raise RuntimeError(f"CUDA cuModuleGetFunction({name}) failed: CUDA_ERROR_NOT_FOUND")
        return name

    def set_max_dynamic_shared(self, dev: int, func: Any, nbytes: int) -> None:
        self.dyn_shared[func] = nbytes

    def launch(self, dev: int, func: Any, grid: Any, block: Any, shared: int, params: Any,
               stream: Any = None) -> None:
        types, fn = self.kernels[func]
        vals = [_CT[t].from_address(params[i]).value for i, t in enumerate(types)]
        rec = (func, tuple(grid), tuple(block), shared, vals)
        if stream is None:
            self._unsafe("cuLaunchKernel on the legacy stream", "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT")
        elif stream.recording is not None:
            stream.recording.append(rec)
            return
        else:
            self.stream_launches += 1
        if func in self.fail_kernels:
            raise _err("cuLaunchKernel", "CUDA_ERROR_LAUNCH_FAILED")
        self.launches.append(rec)
        fn(self, tuple(grid), tuple(block), shared, *vals)

    def synchronize(self, dev: int) -> None:
        self._unsafe("cuCtxSynchronize")
        self.syncs += 1

    # ---- streams and graphs ------------------------------------------------------------------
    def stream_create(self, dev: int) -> FakeStream:
        self._unsafe("cuStreamCreate")
        s = FakeStream(len(self.streams) + 1)
        self.streams.append(s)
        return s

    def stream_destroy(self, dev: int, stream: FakeStream) -> None:
        self.streams.remove(stream)

    def stream_synchronize(self, dev: int, stream: FakeStream) -> None:
        self._unsafe("cuStreamSynchronize")
        self.syncs += 1

    def begin_capture(self, dev: int, stream: FakeStream) -> None:
        if self.fail_capture:
            raise _err("cuStreamBeginCapture", self.fail_capture)
        if stream.recording is not None:
            raise _err("cuStreamBeginCapture", "CUDA_ERROR_ILLEGAL_STATE")
        stream.recording, stream.invalid = [], None

    def end_capture(self, dev: int, stream: FakeStream) -> Any:
        if stream.recording is None:
            raise _err("cuStreamEndCapture", "CUDA_ERROR_ILLEGAL_STATE")
        rec, stream.recording = stream.recording, None
        if stream.invalid:
            raise _err("cuStreamEndCapture", "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")
        return ("graph", rec)

    def graph_num_nodes(self, dev: int, graph: Any) -> int:
        return len(graph[1])

    def graph_instantiate(self, dev: int, graph: Any) -> FakeGraphExec:
        self.graphs_made += 1
        return FakeGraphExec(list(graph[1]))

    def graph_destroy(self, dev: int, graph: Any) -> None:
        pass

    def graph_exec_destroy(self, dev: int, graph_exec: FakeGraphExec) -> None:
        graph_exec.destroyed = True
        self.graphs_freed += 1

    def graph_launcher(self, dev: int, graph_exec: FakeGraphExec,
                       stream: FakeStream) -> Callable[[], None]:
        return lambda: self.graph_launch(dev, graph_exec, stream)

    def graph_launch(self, dev: int, graph_exec: FakeGraphExec, stream: FakeStream) -> None:
        assert not graph_exec.destroyed, "launch of a destroyed graph"
        self._unsafe("cuGraphLaunch")
        self.graph_launches += 1
        for func, grid, block, shared, vals in graph_exec.launches:
            if func in self.fail_kernels:
                raise _err("cuGraphLaunch", "CUDA_ERROR_LAUNCH_FAILED")
            self.replayed += 1
            self.kernels[func][1](self, grid, block, shared, *vals)

    def event_create(self, dev: int) -> Any:
        self.events += 1
        return self.events

    def event_record(self, dev: int, ev: Any) -> None:
        pass

    def event_elapsed_ms(self, dev: int, start: Any, end: Any) -> float:
        return 1.0

    def event_destroy(self, dev: int, ev: Any) -> None:
        pass


def view(ptr: int, n: int, dtype: str) -> np.ndarray:
    """A numpy view of n elements of fake device memory at ``ptr``."""
    return np.ctypeslib.as_array((ctypes.c_char * (n * np.dtype(dtype).itemsize)).from_address(
        ptr)).view(dtype)


# ---- CUDA C kernels run on the host ---------------------------------------------------------
HOST_HEADER = r"""
#include <cstring>
#include <cmath>
#include <chrono>
#include <condition_variable>
#include <mutex>
using std::isfinite;
using std::isinf;
using std::isnan;
struct tvmpy_dim3 { unsigned x, y, z; };
static tvmpy_dim3 blockIdx, blockDim;
static thread_local tvmpy_dim3 threadIdx;
static std::mutex tvmpy_m;
static std::condition_variable tvmpy_cv;
static unsigned tvmpy_n, tvmpy_count, tvmpy_gen;
static unsigned long long tvmpy_slots[1024];
extern "C" int tvmpy_failed = 0;
extern "C" void tvmpy_set_block(unsigned x, unsigned y, unsigned z, unsigned dx, unsigned dy,
                                unsigned dz) {
  blockIdx = {x, y, z}; blockDim = {dx, dy, dz};
  tvmpy_n = dx * dy * dz; tvmpy_count = 0;
}
extern "C" void tvmpy_set_thread(unsigned x, unsigned y, unsigned z) { threadIdx = {x, y, z}; }
/* __syncthreads: a block-wide barrier of OS threads (a missed one times out, not hangs) */
static void tvmpy_sync() {
  std::unique_lock<std::mutex> l(tvmpy_m);
  unsigned g = tvmpy_gen;
  if (++tvmpy_count == tvmpy_n) { tvmpy_count = 0; ++tvmpy_gen; tvmpy_cv.notify_all(); return; }
  if (!tvmpy_cv.wait_for(l, std::chrono::seconds(20), [&] { return tvmpy_gen != g; }))
    tvmpy_failed = 1;
}
static unsigned tvmpy_tid() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
/* warp shuffles: every thread of the block publishes its value, then reads its source lane */
template <typename T> static T tvmpy_shfl(T v, int src_in_segment, bool valid, int width) {
  unsigned t = tvmpy_tid(), lane = t % 32, base = t - lane;
  unsigned long long bits = 0;
  memcpy(&bits, &v, sizeof(T));
  tvmpy_slots[t] = bits;
  tvmpy_sync();
  T out = v;
  if (valid) {
    unsigned src = base + (lane / width) * width + src_in_segment;
    memcpy(&out, &tvmpy_slots[src], sizeof(T));
  }
  tvmpy_sync();
  return out;
}
template <typename T> static T __shfl_sync(unsigned, T v, int src, int width = 32) {
  return tvmpy_shfl(v, ((src % width) + width) % width, true, width);
}
template <typename T> static T __shfl_down_sync(unsigned, T v, unsigned d, int width = 32) {
  int pos = (int)(tvmpy_tid() % 32 % width) + (int)d;
  return tvmpy_shfl(v, pos, pos < width, width);
}
template <typename T> static T __shfl_up_sync(unsigned, T v, unsigned d, int width = 32) {
  int pos = (int)(tvmpy_tid() % 32 % width) - (int)d;
  return tvmpy_shfl(v, pos, pos >= 0, width);
}
static unsigned __activemask() { return 0xffffffffu; }
#define __global__
#define __device__
#define __shared__ static
#define __launch_bounds__(n)
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __syncthreads() tvmpy_sync()
#define __syncwarp() tvmpy_sync()
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) double2 { double x, y; };
static inline float __int_as_float(int v) { float f; memcpy(&f, &v, 4); return f; }
struct alignas(8) uint2 { unsigned x, y; };  /* the vector copies' types */
struct alignas(16) uint4 { unsigned x, y, z, w; };
/* tensor cores (codegen/cuda_wmma.py): a fragment holds its whole tile (rows x cols, row by
   row, as floats rounded to its element type) in every thread; the threads of a warp compute
   the same values, a store writes them (identical) once per thread */
namespace nvcuda { namespace wmma {
struct matrix_a {}; struct matrix_b {}; struct accumulator {};
struct row_major {}; struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <typename Use, int M, int N, int K> struct tvmpy_dims;
template <int M, int N, int K> struct tvmpy_dims<matrix_a, M, N, K> { enum { R = M, C = K }; };
template <int M, int N, int K> struct tvmpy_dims<matrix_b, M, N, K> { enum { R = K, C = N }; };
template <int M, int N, int K> struct tvmpy_dims<accumulator, M, N, K> { enum { R = M, C = N }; };
template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
  enum { R = tvmpy_dims<Use, M, N, K>::R, C = tvmpy_dims<Use, M, N, K>::C };
  typedef T elem;
  float x[R * C];
};
}}  /* namespace nvcuda::wmma */
struct tvmpy_bf16_tag {};  /* bfloat16 fragments: their memory holds the bits (uint16) */
namespace nvcuda { namespace wmma {
template <typename T, typename P> static float tvmpy_from(P v) { return (float)v; }
template <> float tvmpy_from<tvmpy_bf16_tag, unsigned short>(unsigned short v) {
  unsigned bits = (unsigned)v << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}
template <typename Use, int M, int N, int K, typename T, typename L, typename V>
static void fill_fragment(fragment<Use, M, N, K, T, L>& f, V v) {
  typedef fragment<Use, M, N, K, T, L> F;
  for (int i = 0; i < F::R * F::C; ++i) f.x[i] = (float)T((float)v);
}
template <typename F, typename P> static void tvmpy_load(F& f, const P* p, unsigned ldm, bool col) {
  for (int r = 0; r < F::R; ++r)
    for (int c = 0; c < F::C; ++c)
      f.x[r * F::C + c] = tvmpy_from<typename F::elem>(col ? p[c * ldm + r] : p[r * ldm + c]);
}
template <typename Use, int M, int N, int K, typename T, typename P>
static void load_matrix_sync(fragment<Use, M, N, K, T, row_major>& f, const P* p, unsigned ldm) {
  tvmpy_load(f, p, ldm, false);
}
template <typename Use, int M, int N, int K, typename T, typename P>
static void load_matrix_sync(fragment<Use, M, N, K, T, col_major>& f, const P* p, unsigned ldm) {
  tvmpy_load(f, p, ldm, true);
}
template <int M, int N, int K, typename T, typename P>
static void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const P* p, unsigned ldm,
                             layout_t l) {
  tvmpy_load(f, p, ldm, l == mem_col_major);
  for (int i = 0; i < M * N; ++i) f.x[i] = (float)T(f.x[i]);
}
template <int M, int N, int K, typename T, typename P>
static void store_matrix_sync(P* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm,
                              layout_t l) {
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) {
      P v = P(f.x[r * N + c]);
      if (l == mem_col_major) p[c * ldm + r] = v; else p[r * ldm + c] = v;
    }
}
template <int M, int N, int K, typename TD, typename TA, typename LA, typename TB, typename LB,
          typename TC>
static void mma_sync(fragment<accumulator, M, N, K, TD>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                     const fragment<matrix_b, M, N, K, TB, LB>& b,
                     const fragment<accumulator, M, N, K, TC>& c) {
  float out[M * N];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float acc = c.x[i * N + j];
      for (int k = 0; k < K; ++k) acc += a.x[i * K + k] * b.x[k * N + j];
      out[i * N + j] = acc;
    }
  for (int i = 0; i < M * N; ++i) d.x[i] = (float)TD(out[i]);
}
}}  /* namespace nvcuda::wmma */
static inline int __popc(unsigned v) { return __builtin_popcount(v); }
static inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
"""


# what the LLVM IR of target "nvptx" calls, for running it on the host (HostKernels.from_nvptx)
_NVPTX_HELPERS = r"""
#define TVMPY_SREG(k, v, a) extern "C" unsigned tvmpy_##k##_##a() { return v.a; }
TVMPY_SREG(tid, threadIdx, x) TVMPY_SREG(tid, threadIdx, y) TVMPY_SREG(tid, threadIdx, z)
TVMPY_SREG(ctaid, blockIdx, x) TVMPY_SREG(ctaid, blockIdx, y) TVMPY_SREG(ctaid, blockIdx, z)
extern "C" void tvmpy_barrier0() { tvmpy_sync(); }
extern "C" unsigned tvmpy_activemask() { return 0xffffffffu; }
/* llvm.nvvm.shfl.sync.<mode>.<type>(mask, value, lane/offset, clamp): width = 32 - (clamp >> 8) */
#define TVMPY_SHFL(T, t) \
  extern "C" T tvmpy_shfl_down_##t(unsigned m, T v, int d, int c) { \
    return __shfl_down_sync(m, v, d, 32 - (c >> 8)); } \
  extern "C" T tvmpy_shfl_up_##t(unsigned m, T v, int d, int c) { \
    return __shfl_up_sync(m, v, d, 32 - (c >> 8)); } \
  extern "C" T tvmpy_shfl_idx_##t(unsigned m, T v, int d, int c) { \
    return __shfl_sync(m, v, d, 32 - (c >> 8)); }
TVMPY_SHFL(float, f32)
TVMPY_SHFL(int, i32)
/* compiler-rt's half conversions, which MCJIT does not resolve by itself */
extern "C" float tvmpy_extendhfsf2(_Float16 h) { return (float)h; }
extern "C" _Float16 tvmpy_truncsfhf2(float f) { return (_Float16)f; }
extern "C" _Float16 tvmpy_truncdfhf2(double f) { return (_Float16)f; }
"""


def _nvptx_ir_for_host(ir: str) -> str:
    """The LLVM IR of target nvptx, rewritten to run on the host: NVVM intrinsics -> the
    helpers above, shared memory -> module globals, libdevice -> libm."""
    import re

    ir = re.sub(r"^target (datalayout|triple) = .*$", "", ir, flags=re.M)
    ir = ir.replace("define ptx_kernel void", "define void")
    ir = ir.replace("internal addrspace(3) global", "internal global")
    ir = re.sub(r'addrspacecast ptr addrspace\(3\) (@"[^"]+") to ptr',
                r"getelementptr i8, ptr \1, i64 0", ir)
    ir = re.sub(r"@llvm\.nvvm\.read\.ptx\.sreg\.(tid|ctaid)\.([xyz])", r"@tvmpy_\1_\2", ir)
    ir = ir.replace("@llvm.nvvm.barrier0", "@tvmpy_barrier0")
    ir = ir.replace("@llvm.nvvm.activemask", "@tvmpy_activemask")
    ir = re.sub(r"@llvm\.nvvm\.shfl\.sync\.(down|up|idx)\.(f32|i32)", r"@tvmpy_shfl_\1_\2", ir)
    ir = re.sub(r'"target-cpu"="sm_\d+"', "", ir)
    return re.sub(r"@__nv_(\w+)", r"@\1", ir)


class HostKernels:
    """The CUDA C of a built module compiled for the host with g++ (HOST_HEADER emulates the
    CUDA keywords): ``kernels`` plugs into :class:`FakeDriver`. Blocks run one after another;
    the threads of a block run as OS threads (ctypes calls release the GIL) when the source has
    barriers or warp shuffles, so ``__syncthreads``, ``__shared__`` arrays and
    ``__shfl_*_sync`` behave as on a GPU (every thread of the block must reach each barrier or
    shuffle, as the generated kernels do); otherwise one after another."""

    def __init__(self, source: str, kernel_params: dict[str, list[str]], workdir: str,
                 _functions: dict[str, Any] | None = None):
        self.lib = _compile_host(HOST_HEADER + source, workdir)
        self.threaded = "__syncthreads" in source or "_sync(" in source
        self.kernels = {name: (types, self._runner(name, types, (_functions or {}).get(name)))
                        for name, types in kernel_params.items()}

    @classmethod
    def from_nvptx(cls, ir: str, kernel_params: dict[str, list[str]], workdir: str
                   ) -> HostKernels:
        """The LLVM IR of a target-"nvptx" module JIT-compiled for the host (llvmlite MCJIT),
        its NVVM intrinsics served by the same emulation as CUDA C."""
        import llvmlite.binding as llvm

        helpers = _compile_host(HOST_HEADER + _NVPTX_HELPERS, workdir)
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        import re

        for name in set(re.findall(r"@(tvmpy_\w+)", _nvptx_ir_for_host(ir))):
            llvm.add_symbol(name, ctypes.cast(getattr(helpers, name), ctypes.c_void_p).value)
        for rt in ("extendhfsf2", "truncsfhf2", "truncdfhf2"):
            llvm.add_symbol(f"__{rt}", ctypes.cast(getattr(helpers, f"tvmpy_{rt}"),
                                                   ctypes.c_void_p).value)
        mod = llvm.parse_assembly(_nvptx_ir_for_host(ir))
        tm = llvm.Target.from_default_triple().create_target_machine()
        mod.triple = tm.triple
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        funcs = {}
        for name, types in kernel_params.items():
            argtypes = [ctypes.c_void_p if t == "handle" else _CT[t] for t in types]
            funcs[name] = ctypes.CFUNCTYPE(None, *argtypes)(engine.get_function_address(name))
        self = cls.__new__(cls)
        self.lib = helpers
        self._engine = engine  # keeps the JIT-compiled code alive
        self.threaded = "tvmpy_barrier0" in _nvptx_ir_for_host(ir) or "tvmpy_shfl" in \
            _nvptx_ir_for_host(ir)
        self.kernels = {name: (types, self._runner(name, types, funcs[name]))
                        for name, types in kernel_params.items()}
        return self

    def _runner(self, name: str, types: list[str], fn: Any = None) -> Callable:
        import threading

        if fn is None:
            fn = getattr(self.lib, name)
            fn.argtypes = [ctypes.c_void_p if t == "handle" else _CT[t] for t in types]
            fn.restype = None
        set_block, set_thread = self.lib.tvmpy_set_block, self.lib.tvmpy_set_thread
        failed = ctypes.c_int.in_dll(self.lib, "tvmpy_failed")

        def thread(tx: int, ty: int, tz: int, vals: tuple) -> None:
            set_thread(tx, ty, tz)
            fn(*vals)

        def run(drv: Any, grid: tuple, block: tuple, shared: int, *vals: Any) -> None:
            n = block[0] * block[1] * block[2]
            if n > 1024:
                raise RuntimeError(f"{name}: {n} threads per block")
            for bz in range(grid[2]):
                for by in range(grid[1]):
                    for bx in range(grid[0]):
                        set_block(bx, by, bz, *block)
                        ids = [(x, y, z) for z in range(block[2]) for y in range(block[1])
                               for x in range(block[0])]
                        if not self.threaded:
                            for t in ids:
                                thread(*t, vals)
                            continue
                        ts = [threading.Thread(target=thread, args=(*t, vals)) for t in ids]
                        for t in ts:
                            t.start()
                        for t in ts:
                            t.join(60)
                        if failed.value or any(t.is_alive() for t in ts):
                            raise RuntimeError(f"{name}: a barrier was not reached by every "
                                               "thread of the block (divergent __syncthreads)")
        return run


def _compile_host(source: str, workdir: str) -> ctypes.CDLL:
    import hashlib
    import os
    import shutil
    import subprocess

    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        raise RuntimeError("no C++ compiler (g++) to emulate CUDA kernels on the host")
    tag = hashlib.sha256(source.encode()).hexdigest()[:16]  # dlopen caches by path
    src, lib = (os.path.join(workdir, f"kernels_{tag}.cc"),
                os.path.join(workdir, f"kernels_{tag}.so"))
    with open(src, "w") as f:
        f.write(source)
    proc = subprocess.run([cxx, "-std=c++17", "-O1", "-fno-strict-aliasing", "-shared", "-fPIC", "-w", "-pthread",
                           "-o", lib, src], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"host compile of the CUDA C failed:\n{proc.stderr[:4000]}")
    return ctypes.CDLL(lib)


class _Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]
