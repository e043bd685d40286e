"""``tir.call_packed`` from generated code: what one call costs, and cblas stages vs numpy.

1. Per-call cost: a kernel whose loop runs ``R`` iterations, each calling a packed function
   with two 1-element buffers (two DLTensors built on the stack), against the same loop storing
   without a call. Callees: a C no-op packed function (compiled here with the system cc and
   registered by address: TVM's C calling convention end to end), and a Python no-op registered
   with ``tvm.register_func`` (the ctypes callback path). Cost per call = (t_call - t_base) / R,
   best of ``--repeat`` rounds.
2. ``cblas.matmul`` as a te.extern stage (llvm) vs ``numpy.matmul`` on the same shapes, both on
   numpy's OpenBLAS with 1 thread: the ratio is the overhead of the tvmpy call path (the Python
   entry of the compiled function plus one call_packed).

    python bench/packed_call.py [--repeat 15] [--iters 20000]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import best_time, ensure_native_blas, machine_description, numpy_blas_threads  # noqa: E402

ensure_native_blas()
os.environ["TVM_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

import tvmpy as tvm  # noqa: E402
from tvmpy import te, tir  # noqa: E402
from tvmpy.contrib import cblas  # noqa: E402
from tvmpy.runtime.packed_func import PackedFunc  # noqa: E402

NOP_C = """
#include <stdint.h>
int32_t bench_nop(void* args, int32_t* codes, int32_t n, void* ret, int32_t* ret_code,
                  void* res) { return 0; }
"""


def c_nop() -> PackedFunc:
    tmp = tempfile.mkdtemp(prefix="tvmpy_bench_")
    src, lib = os.path.join(tmp, "nop.c"), os.path.join(tmp, "nop.so")
    with open(src, "w") as f:
        f.write(NOP_C)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", src, "-o", lib], check=True)
    so = ctypes.CDLL(lib)
    return PackedFunc.from_address(ctypes.cast(so.bench_nop, ctypes.c_void_p).value or 0,
                                   "bench.c_nop", keepalive=so)


def loop_kernel(iters: int, callee: str | None):
    A = te.placeholder((1,), name="A")

    def body(ins, outs):
        ib = tir.ir_builder.create()
        a, o = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, iters, name="r") as r:
            if callee is None:
                o[0] = a[0] + r.astype("float32")
            else:
                ib.emit(tir.call_packed(callee, ins[0], outs[0]))
        return ib.get()

    B = te.extern((1,), [A], body, name="B")
    return tvm.build(te.create_schedule(B.op), [A, B], "llvm")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--iters", type=int, default=20000)
    args = p.parse_args()
    numpy_blas_threads(1)
    print(f"# {machine_description()}; 1 thread; best of {args.repeat} rounds")

    tvm.register_func("bench.c_nop", c_nop(), override=True)
    tvm.register_func("bench.py_nop", lambda x, y: None, override=True)
    a, b = tvm.nd.array(np.ones(1, "float32")), tvm.nd.empty((1,), "float32")
    base = loop_kernel(args.iters, None)
    t_base = best_time(lambda: base(a, b), args.repeat)
    for callee in ("bench.c_nop", "bench.py_nop"):
        iters = args.iters if callee == "bench.c_nop" else max(args.iters // 20, 100)
        f = loop_kernel(iters, callee)
        base_i = loop_kernel(iters, None)
        t_b = best_time(lambda: base_i(a, b), args.repeat)  # noqa: B023
        t = best_time(lambda: f(a, b), args.repeat)  # noqa: B023
        print(f"call_packed -> {callee:13s}: {(t - t_b) / iters * 1e9:8.1f} ns per call "
              f"({iters} calls per kernel call)")
    del t_base

    rng = np.random.default_rng(0)
    print("cblas.matmul stage vs numpy.matmul (same OpenBLAS, 1 thread):")
    for n, l_, m in [(1024, 128, 235), (256, 256, 256), (64, 64, 64), (7, 13, 5)]:
        A = te.placeholder((n, l_), name="A")
        B = te.placeholder((l_, m), name="B")
        C = cblas.matmul(A, B)
        f = tvm.build(te.create_schedule(C.op), [A, B, C], "llvm")
        x = rng.uniform(-1, 1, (n, l_)).astype("float32")
        y = rng.uniform(-1, 1, (l_, m)).astype("float32")
        xa, ya, c = tvm.nd.array(x), tvm.nd.array(y), tvm.nd.empty((n, m), "float32")
        out = np.empty((n, m), "float32")
        number = max(1, int(2e7 / (n * l_ * m)))
        t_tvm = best_time(lambda: f(xa, ya, c), args.repeat, number)  # noqa: B023
        t_np = best_time(lambda: np.matmul(x, y, out=out), args.repeat, number)  # noqa: B023
        np.testing.assert_allclose(c.numpy(), x @ y, rtol=1e-4, atol=1e-4)
        print(f"  {n}x{l_}x{m}: tvmpy {t_tvm * 1e6:9.2f} us  numpy {t_np * 1e6:9.2f} us  "
              f"ratio {t_tvm / t_np:5.2f}")


if __name__ == "__main__":
    main()
