/* A stand-in for libcuda.so.1 with host memory: the CUDA driver API's C signatures, so the
   ctypes binding (runtime/cuda_module.py CtypesDriver) is exercised argument by argument
   without a GPU. Its one "kernel", vadd(float* a, float* b, float* c, int n), runs on the CPU
   over the launch grid; fake_last_* record what the last launch received. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;
typedef void (*kernel_fn)(unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void**);

static int ctx_token, mod_token, ev_token;
unsigned fake_last_grid[3], fake_last_block[3], fake_last_shared, fake_dyn_shared;
int fake_attr_major = 9, fake_attr_minor = 0, fake_loaded_elf = -1;

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
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t n) {
  void* m = malloc(n); if (!m) return 2; *p = (CUdeviceptr)(uintptr_t)m; return 0; }
CUresult cuMemFree_v2(CUdeviceptr p) { free((void*)(uintptr_t)p); return 0; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void* s, size_t n) {
  memcpy((void*)(uintptr_t)d, s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void* d, CUdeviceptr s, size_t n) {
  memcpy(d, (void*)(uintptr_t)s, n); return 0; }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) {
  memcpy((void*)(uintptr_t)d, (void*)(uintptr_t)s, n); return 0; }
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
  if (stream != 0 || extra != 0) return 1;
  ((kernel_fn)f)(gx, gy, gz, bx, by, bz, params); return 0; }
CUresult cuEventCreate(void** ev, unsigned flags) {
  *ev = &ev_token; return flags == 0 ? 0 : 1; }
CUresult cuEventRecord(void* ev, void* stream) { return stream == 0 ? 0 : 1; }
CUresult cuEventSynchronize(void* ev) { return 0; }
CUresult cuEventElapsedTime(float* ms, void* a, void* b) { *ms = 2.5f; return 0; }
CUresult cuEventDestroy_v2(void* ev) { return 0; }
CUresult cuGetErrorName(CUresult rc, const char** s) {
  *s = rc == 500 ? "CUDA_ERROR_NOT_FOUND" : rc == 101 ? "CUDA_ERROR_INVALID_DEVICE"
                                                      : "CUDA_ERROR_UNKNOWN";
  return 0; }
