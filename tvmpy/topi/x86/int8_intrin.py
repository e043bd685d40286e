"""The x86 int8 micro-kernel: a tensor intrinsic for ``out[16] += sum_k u8 data[k] * s8 w[16, k]``
(k < 4, int32 accumulation) and the instruction set that performs it on a target.

The intrinsic describes one AVX-512 VNNI ``vpdpbusd``: 16 int32 lanes, each the dot product of
the same 4 unsigned bytes of data (broadcast) with its own 4 signed bytes of weight, added to the
lane. The int8 kernels (``conv2d_int8.py``, ``dense_int8.py``) lay their weights out as
``[..., 16, 4]`` so that one 64-byte load feeds it, and tensorize their inner loops with it.

ISAs (:func:`int8_isa`, from the target's instruction-set features as LLVM defines its CPU,
plus ``-mattr``: ``Target.isa_features``):

- ``"vnni"``: ``llvm.x86.avx512.vpdpbusd.512`` (exact: products and sums in int32, no saturation);
- ``"avx512bw"`` / ``"avx2"``: data zero- and weight sign-extended to int16, ``vpmaddwd`` (pairs
  of int16 products summed into int32: exact, unlike ``vpmaddubsw`` whose int16 sum of two
  u8 x s8 products saturates), then the pairs' sums added (512-bit, or two 256-bit halves);
- ``"generic"``: the same arithmetic as plain int32 vector expressions (any LLVM or C target).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ... import te, tir
from ...tir import expr as E

__all__ = ["int8_isa", "dot_16x4_intrin", "LANES", "K_GROUP", "INT8_ISAS"]

LANES = 16
"""int32 output lanes of one micro-kernel call (one 512-bit register)."""
K_GROUP = 4
"""Reduction elements per lane per call (bytes in a 32-bit lane)."""
INT8_ISAS = ("vnni", "avx512bw", "avx2", "generic")

def int8_isa(target: Any) -> str:
    """The instruction set of the int8 micro-kernel for ``target`` (one of :data:`INT8_ISAS`),
    from the instruction-set features LLVM gives its CPU and ``-mattr``
    (``Target.isa_features``: the host's for this machine). Non-x86 or non-LLVM targets:
    ``"generic"``."""
    if target is None or getattr(target, "kind", None) is None:
        return "generic"
    if str(target.kind) != "llvm" or target.arch not in ("x86_64", "x86-64", "amd64", "i386",
                                                         "i686", "x86"):
        return "generic"
    feats = target.isa_features
    if "avx512vnni" in feats:  # (implies AVX-512F, all vpdpbusd.512 needs)
        return "vnni"
    if "avx512bw" in feats:
        return "avx512bw"
    if "avx2" in feats:
        return "avx2"
    return "generic"


def _vload(buf: Any, indices: list, lanes: int) -> E.PrimExpr:
    """``lanes`` consecutive elements of ``buf`` from ``indices`` (the last index a Ramp)."""
    return E.BufferLoad(buf, [*indices[:-1], E.Ramp(indices[-1], 1, lanes)])


def _vstore(buf: Any, value: E.PrimExpr) -> Any:
    return tir.BufferStore(buf, value, [E.Ramp(0, 1, LANES)])


def _i32x16(v: E.PrimExpr) -> E.PrimExpr:
    return tir.reinterpret(f"int32x{LANES}", v)


def _bcast_data(d: Any, dtype: str, lanes: int) -> E.PrimExpr:
    """The 4 data bytes repeated to ``lanes`` elements of ``dtype``."""
    x = _vload(d, [0], K_GROUP)
    return E.cast(E.Shuffle([x], [i % K_GROUP for i in range(lanes)]), f"{dtype}x{lanes}")


def _pairs_to_lanes(parts: list[E.PrimExpr]) -> E.PrimExpr:
    """int32 pair sums (lane 2m, 2m + 1 -> output m, over the concatenated ``parts``) ->
    ``int32x16``."""
    n = sum(int(p.dtype.split("x")[1]) for p in parts)
    even = E.Shuffle(parts, list(range(0, n, 2)))
    odd = E.Shuffle(parts, list(range(1, n, 2)))
    return even + odd


def _dot(isa: str, d: Any, w: Any) -> E.PrimExpr:
    """``int32x16``: lane m = sum_k data[k] * w[m, k] (the intrinsic's arithmetic) for ``isa``."""
    if isa == "vnni":
        raise AssertionError("vnni accumulates in place: see _update")
    if isa in ("avx512bw", "avx2"):
        width, name = (32, "llvm.x86.avx512.pmaddw.d.512") if isa == "avx512bw" else \
            (16, "llvm.x86.avx2.pmadd.wd")
        data = _bcast_data(d, "int16", width)
        parts = []
        for c in range(LANES * K_GROUP // width):
            wv = E.cast(_vload(w, [c * width // K_GROUP, 0], width), f"int16x{width}")
            parts.append(tir.call_llvm_pure_intrin(f"int32x{width // 2}", name, data, wv))
        return _pairs_to_lanes(parts)
    total = None
    for k in range(K_GROUP):  # generic: lane-wise int32 products of strided weight bytes
        dk = E.cast(d[k], "int32")
        wk = E.cast(E.BufferLoad(w, [E.Ramp(0, 1, LANES), k]), f"int32x{LANES}")
        term = E.Broadcast(dk, LANES) * wk
        total = term if total is None else total + term
    assert total is not None
    return total


@cache
def dot_16x4_intrin(isa: str) -> Any:
    """The tensor intrinsic ``out[i] += sum_{k<4} int32(data[k]) * int32(w[i, k])`` (``i < 16``;
    data uint8, w int8 ``[16, 4]`` contiguous, out int32) performed with ``isa``."""
    if isa not in INT8_ISAS:
        raise ValueError(f"int8 micro-kernel: unknown ISA {isa!r}; known: {INT8_ISAS}")
    data = te.placeholder((K_GROUP,), "uint8", name="data")
    weight = te.placeholder((LANES, K_GROUP), "int8", name="weight")
    k = te.reduce_axis((0, K_GROUP), name="k")
    out = te.compute((LANES,), lambda i: te.sum(data[k].astype("int32") *
                                                weight[i, k].astype("int32"), axis=k), name="out")
    bufs = {
        data: tir.decl_buffer(data.shape, "uint8", "data_buf", offset_factor=1),
        weight: tir.decl_buffer(weight.shape, "int8", "weight_buf", offset_factor=1),
        out: tir.decl_buffer(out.shape, "int32", "out_buf", offset_factor=1),
    }

    def fintrin(ins: list, outs: list) -> tuple:
        d, w = ins
        (o,) = outs
        zero = E.Broadcast(tir.const(0, "int32"), LANES)

        def acc(init: E.PrimExpr) -> Any:
            if isa == "vnni":
                a = E.Broadcast(tir.reinterpret("int32", _vload(d, [0], K_GROUP)), LANES)
                b = _i32x16(_vload(w, [0, 0], LANES * K_GROUP))
                return _vstore(o, tir.call_llvm_pure_intrin(
                    f"int32x{LANES}", "llvm.x86.avx512.vpdpbusd.512", init, a, b))
            return _vstore(o, init + _dot(isa, d, w))

        return acc(zero), _vstore(o, zero), acc(_vload(o, [0], LANES))

    return te.decl_tensor_intrin(out.op, fintrin, name=f"dot_16x4_u8s8i32_{isa}", binds=bufs)
