"""The x86 dense schedules prefetch a prepacked weight's panel ahead of its register tile.

They mark the tile's reduction loop with the ``prefetch`` pragma (tvmpy/topi/x86/dense.py
``_prefetch_bytes``); InjectPrefetch (tvmpy/tir/transform/inject_prefetch.py) puts a
``prefetch`` of the address that many bytes ahead of each contiguous vector load of an argument
(one per 64-byte line) at the top of the loop's body, and LLVM emits ``llvm.prefetch``.
Prefetches are hints: results must not change, and loops without such loads are left as they
are.
"""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.codegen.llvm import emit_llvm_ir
from tvmpy.topi.x86 import dense as D

RNG = np.random.default_rng(7)


def _prepacked(m, n, k):
    nr = D.panel_width(n)
    npanel = -(-n // nr)
    a = te.placeholder((m, k), name="A")
    w = te.placeholder((npanel, k, nr), name="W")
    out = D.dense_prepacked(a, w, units=n)
    s = D.schedule_dense_pack([out])
    an = RNG.standard_normal((m, k)).astype("float32")
    wn = RNG.standard_normal((n, k)).astype("float32")
    wp = np.zeros((npanel * nr, k), "float32")
    wp[:n] = wn
    wp = np.ascontiguousarray(wp.reshape(npanel, nr, k).transpose(0, 2, 1))
    return s, [a, w, out], (an, wp, an @ wn.T)


@pytest.mark.parametrize("m,n,k", [(1, 1000, 512), (2, 37, 64), (5, 97, 131), (8, 1000, 512),
                                   (32, 300, 509), (13, 7, 3), (61, 997, 509), (3, 16, 1)])
def test_prefetching_dense_matches_numpy(m, n, k):
    s, args, (an, wp, want) = _prepacked(m, n, k)
    f = tvm.lower(s, args, name="dense")["dense"]
    assert k == 1 or "prefetch(" in str(f)  # (K = 1: no reduction loop)
    mod = tvm.build(s, args, "llvm")
    out = tvm.nd.empty((m, n))
    mod(tvm.nd.array(an), tvm.nd.array(wp), out)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_the_llvm_ir_prefetches_the_panel_ahead():
    s, args, _ = _prepacked(8, 1000, 512)
    f = tvm.lower(s, args, name="dense")["dense"]
    ir = emit_llvm_ir([f])
    assert "declare void @llvm.prefetch.p0(ptr, i32, i32, i32)" in ir
    # one prefetch per 64-byte line of the 4 x 32-float step (unroll_k 4), in each of the two
    # copies of the tile loop (whole panels, the guarded last one)
    assert ir.count("call void @llvm.prefetch.p0(") == 2 * 4 * 2
    # the addresses run past the weight's end in the last panel: no ``inbounds`` (poison) GEPs
    assert ir.count("getelementptr float") == 2 * 4 * 2


def test_no_prefetch_for_many_row_tiles_or_in_kernel_packing():
    s, args, _ = _prepacked(D.tile_rows() * (D.PREFETCH_MAX_ROW_TILES + 1), 64, 64)
    assert "prefetch" not in str(tvm.lower(s, args, name="f")["f"])
    a = te.placeholder((8, 64), name="A")
    w = te.placeholder((64, 64), name="W")
    out = D.dense_pack(a, w)
    s = D.schedule_dense_pack([out])
    assert "prefetch" not in str(tvm.lower(s, [a, w, out], name="g")["g"])


def test_pragma_without_streamed_loads_changes_nothing_and_c_ignores_it():
    n = 64
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n), "k")
    B = te.compute((1,), lambda i: te.sum(A[k], axis=k), name="B")  # scalar loads only
    s = te.create_schedule(B.op)
    s[B].pragma(s[B].op.reduce_axis[0], "prefetch", 4096)
    f = tvm.lower(s, [A, B], name="h")["h"]
    assert "llvm.prefetch" not in emit_llvm_ir([f])
    an = RNG.standard_normal(n).astype("float32")
    for target in ("llvm", "c"):
        mod = tvm.build(s, [A, B], target)
        out = tvm.nd.empty((1,))
        mod(tvm.nd.array(an), out)
        np.testing.assert_allclose(out.numpy(), [an.sum()], rtol=1e-5)
