/* A stand-in for libcuda.so.1 with host memory: the CUDA driver API's C signatures, so the
   ctypes binding (runtime/cuda_module.py CtypesDriver) is exercised argument by argument
   without a GPU. Its one "kernel", vadd(float* a, float* b, float* c, int n), runs on the CPU
   over the launch grid; fake_last_* record what the last launch received. Streams and CUDA
   graphs: a launch on a capturing stream is recorded (the parameter values read at capture)
   and not run; cuGraphLaunch runs the recorded launches in order; a launch or synchronous
   copy on the legacy stream, an allocation or a synchronization during a capture fails and
   invalidates it (cuStreamEndCapture then fails), as on a GPU. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;
typedef void (*kernel_fn)(unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void**);

static int ctx_token, mod_token, ev_token;
unsigned fake_last_grid[3], fake_last_block[3], fake_last_shared, fake_dyn_shared;
int fake_attr_major = 9, fake_attr_minor = 0, fake_loaded_elf = -1;
/* kernels run, graph launches, graphs instantiated / destroyed, streams alive, async copies */
int fake_kernel_runs, fake_graph_launches, fake_graphs_made, fake_graphs_freed, fake_streams,
    fake_async_copies, fake_capture_mode = -1;

typedef struct { kernel_fn f; unsigned g[3], b[3]; void* a[3]; int n; } launch_rec;
typedef struct { int capturing, invalid, n; launch_rec* recs; } fake_stream;
typedef struct { int n; launch_rec* recs; } fake_graph;
static fake_stream* capturing_stream;

/* an operation a capture may not contain: invalidates it (906: CAPTURE_IMPLICIT / 900:
   CAPTURE_UNSUPPORTED) */
static int unsafe(int rc) {
  if (!capturing_stream) return 0;
  capturing_stream->invalid = 1;
  return rc;
}
static void run_rec(const launch_rec* r) {
  void* p[4] = {(void*)&r->a[0], (void*)&r->a[1], (void*)&r->a[2], (void*)&r->n};
  ++fake_kernel_runs;
  r->f(r->g[0], r->g[1], r->g[2], r->b[0], r->b[1], r->b[2], p);
}

static void vadd(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                 void** p) {
  float* a = *(float**)p[0]; float* b = *(float**)p[1]; float* c = *(float**)p[2];
  int n = *(int*)p[3];
  for (unsigned i = 0; i < gx * bx; ++i) if ((int)i < n) c[i] = a[i] + b[i];
}

CUresult cuInit(unsigned flags) { return flags == 0 ? 0 : 1; }
CUresult cuDriverGetVersion(int* v) { *v = 12090; return 0; }
CUresult cuDeviceGetCount(int* n) { *n = 1; return 0; }
CUresult cuDeviceGet(int* d, int ordinal) { if (ordinal != 0) return 101; *d = 0; return 0; }
CUresult cuDeviceGetName(char* name, int len, int dev) {
  strncpy(name, "Fake GPU", len); return dev == 0 ? 0 : 101; }
CUresult cuDeviceGetAttribute(int* v, int attr, int dev) {
  *v = attr == 75 ? fake_attr_major : attr == 76 ? fake_attr_minor : 0; return dev == 0 ? 0 : 101; }
CUresult cuDevicePrimaryCtxRetain(void** ctx, int dev) { *ctx = &ctx_token; return 0; }
CUresult cuCtxSetCurrent(void* ctx) { return ctx == &ctx_token ? 0 : 201; }
CUresult cuCtxSynchronize(void) { return unsafe(900); }
CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t n) {
  if (unsafe(900)) return 900;
  void* m = malloc(n); if (!m) return 2; *p = (CUdeviceptr)(uintptr_t)m; return 0; }
CUresult cuMemFree_v2(CUdeviceptr p) { free((void*)(uintptr_t)p); return 0; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void* s, size_t n) {
  if (unsafe(906)) return 906;
  memcpy((void*)(uintptr_t)d, s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void* d, CUdeviceptr s, size_t n) {
  if (unsafe(906)) return 906;
  memcpy(d, (void*)(uintptr_t)s, n); return 0; }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) {
  if (unsafe(906)) return 906;
  memcpy((void*)(uintptr_t)d, (void*)(uintptr_t)s, n); return 0; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* s, size_t n, void* stream) {
  if (unsafe(900)) return 900;
  ++fake_async_copies; memcpy((void*)(uintptr_t)d, s, n); return 0; }
CUresult cuMemcpyDtoHAsync_v2(void* d, CUdeviceptr s, size_t n, void* stream) {
  if (unsafe(900)) return 900;
  ++fake_async_copies; memcpy(d, (void*)(uintptr_t)s, n); return 0; }
CUresult cuStreamCreate(void** s, unsigned flags) {
  if (flags != 0) return 1;  /* the executor asks for a blocking stream */
  fake_stream* st = calloc(1, sizeof(fake_stream)); *s = st; ++fake_streams; return 0; }
CUresult cuStreamDestroy_v2(void* s) {
  fake_stream* st = s; free(st->recs); free(st); --fake_streams; return 0; }
CUresult cuStreamSynchronize(void* s) { return unsafe(900); }
CUresult cuStreamBeginCapture_v2(void* s, int mode) {
  fake_stream* st = s;
  if (capturing_stream) return 401;  /* CUDA_ERROR_ILLEGAL_STATE */
  fake_capture_mode = mode;
  st->capturing = 1; st->invalid = 0; st->n = 0; free(st->recs); st->recs = 0;
  capturing_stream = st; return 0; }
CUresult cuStreamEndCapture(void* s, void** graph) {
  fake_stream* st = s;
  if (!st->capturing) return 401;
  st->capturing = 0; capturing_stream = 0;
  if (st->invalid) { *graph = 0; return 901; }  /* CAPTURE_INVALIDATED */
  fake_graph* g = calloc(1, sizeof(fake_graph));
  g->n = st->n; g->recs = st->recs; st->recs = 0; st->n = 0;
  *graph = g; return 0; }
CUresult cuGraphGetNodes(void* graph, void** nodes, size_t* n) {
  if (nodes) return 1;
  *n = ((fake_graph*)graph)->n; return 0; }
CUresult cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long flags) {
  fake_graph* g = graph; fake_graph* e = calloc(1, sizeof(fake_graph));
  if (flags != 0) return 1;
  e->n = g->n; e->recs = malloc(sizeof(launch_rec) * (g->n ? g->n : 1));
  memcpy(e->recs, g->recs, sizeof(launch_rec) * g->n);
  *exec = e; ++fake_graphs_made; return 0; }
CUresult cuGraphDestroy(void* graph) {
  fake_graph* g = graph; if (g) { free(g->recs); free(g); } return 0; }
CUresult cuGraphExecDestroy(void* exec) {
  fake_graph* g = exec; free(g->recs); free(g); ++fake_graphs_freed; return 0; }
CUresult cuGraphLaunch(void* exec, void* stream) {
  fake_graph* g = exec;
  if (!stream || unsafe(900)) return 900;
  ++fake_graph_launches;
  for (int i = 0; i < g->n; ++i) run_rec(&g->recs[i]);
  return 0; }
CUresult cuModuleLoadData(void** mod, const void* image) {
  fake_loaded_elf = memcmp(image, "\x7f" "ELF", 4) == 0;
  *mod = &mod_token; return 0; }
CUresult cuModuleGetFunction(void** f, void* mod, const char* name) {
  if (mod != &mod_token) return 400;
  if (strstr(name, "vadd") == 0) return 500;  /* CUDA_ERROR_NOT_FOUND */
  *f = (void*)vadd; return 0; }
CUresult cuFuncSetAttribute(void* f, int attr, int value) {
  if (attr == 8) fake_dyn_shared = (unsigned)value;
  return 0; }
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, void* stream, void** params, void** extra) {
  fake_last_grid[0] = gx; fake_last_grid[1] = gy; fake_last_grid[2] = gz;
  fake_last_block[0] = bx; fake_last_block[1] = by; fake_last_block[2] = bz;
  fake_last_shared = shared;
  if (extra != 0) return 1;
  if (stream == 0 && unsafe(906)) return 906;
  launch_rec r = {(kernel_fn)f, {gx, gy, gz}, {bx, by, bz},
                  {*(void**)params[0], *(void**)params[1], *(void**)params[2]}, *(int*)params[3]};
  fake_stream* st = stream;
  if (st && st->capturing) {  /* recorded with the parameter values of now */
    st->recs = realloc(st->recs, sizeof(launch_rec) * (st->n + 1));
    st->recs[st->n++] = r;
    return 0;
  }
  run_rec(&r); return 0; }
CUresult cuEventCreate(void** ev, unsigned flags) {
  *ev = &ev_token; return flags == 0 ? 0 : 1; }
CUresult cuEventRecord(void* ev, void* stream) { return stream == 0 ? 0 : 1; }
CUresult cuEventSynchronize(void* ev) { return 0; }
CUresult cuEventElapsedTime(float* ms, void* a, void* b) { *ms = 2.5f; return 0; }
CUresult cuEventDestroy_v2(void* ev) { return 0; }
CUresult cuGetErrorName(CUresult rc, const char** s) {
  *s = rc == 500 ? "CUDA_ERROR_NOT_FOUND" : rc == 101 ? "CUDA_ERROR_INVALID_DEVICE"
      : rc == 900 ? "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
      : rc == 901 ? "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"
      : rc == 906 ? "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"
      : rc == 401 ? "CUDA_ERROR_ILLEGAL_STATE" : "CUDA_ERROR_UNKNOWN";
  return 0; }
