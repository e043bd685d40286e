"""Tensor intrinsics for CUDA's tensor cores (TVM's ``topi/cuda/tensor_intrin.py`` wmma ones):
declared with ``te.decl_tensor_intrin`` for ``s[stage].tensorize(axis, intrin)``, lowered to
the ``tvm_*_matrix_sync`` / ``tvm_mma_sync`` / ``tvm_fill_fragment`` calls that
``codegen/cuda_wmma.py`` turns into ``nvcuda::wmma`` calls.

- :func:`intrin_wmma_load_matrix_a` / :func:`intrin_wmma_load_matrix_b`: copy an ``m x k``
  (``n x k`` or ``k x n`` for B) tile from memory (usually ``shared``) into a fragment of
  scope ``wmma.matrix_a`` / ``wmma.matrix_b``; ``layout`` is the tile's layout in memory as the
  wmma operand sees it ("row_major" A[m, k]; B stored ``[n, k]`` is "col_major" as a k x n matrix).
- :func:`intrin_wmma_gemm`: ``C[i, j] += A[i, r] * B[j, r]`` (``b_layout="col_major"``) or
  ``A[i, r] * B[r, j]`` ("row_major"), accumulators of scope ``wmma.accumulator``; its reset
  fills the fragment with zeros.
- :func:`intrin_wmma_store_matrix`: accumulator tile -> memory (``shared`` or ``global``).

Fragment buffers are compact 2-D arrays of tiles; the fragment of the tile at element offset
``off`` of a buffer whose rows are ``s`` elements long is ``off // (rows * s) * (s // cols) +
off % s // cols`` (rows x cols: the tile's shape in that buffer): the strides are bound by
tensorize to the real buffer's, so any number of tiles per warp works.
"""

from __future__ import annotations

from typing import Any

from ... import te
from ...tir import stmt as S
from ...tir.buffer import decl_buffer
from ...tir.op import call_intrin

__all__ = ["intrin_wmma_load_matrix_a", "intrin_wmma_load_matrix_b", "intrin_wmma_gemm",
           "intrin_wmma_store_matrix", "WMMA_SHAPES"]

WMMA_SHAPES = ((16, 16, 16), (32, 8, 16), (8, 32, 16))


def _check_shape(shape: tuple[int, int, int]) -> tuple[int, int, int]:
    shape = tuple(int(x) for x in shape)  # type: ignore[assignment]
    if shape not in WMMA_SHAPES:
        raise ValueError(f"wmma shape (m, n, k) = {shape}: tensor cores take "
                         f"{', '.join(map(str, WMMA_SHAPES))}")
    return shape


def _buf(shape: tuple[int, ...], dtype: str, name: str, scope: str) -> Any:
    strides = [te.var(f"{name}_s0"), 1]
    return decl_buffer(shape, dtype, name, scope=scope, strides=strides, offset_factor=1)


def fragment_index(buf: Any, rows: int, cols: int) -> Any:
    """Which fragment of ``buf`` (a compact 2-D fragment buffer bound by tensorize) holds the
    ``rows x cols`` tile at ``buf.elem_offset``."""
    s = buf.strides[0]
    off = buf.elem_offset
    return off // (rows * s) * (s // cols) + off % s // cols


def _load(shape: tuple[int, int, int], dtype: str, layout: str, use: str,
          tile: tuple[int, int], scope_from: str) -> Any:
    m, n, k = _check_shape(shape)
    if layout not in ("row_major", "col_major"):
        raise ValueError(f"wmma load layout must be row_major or col_major, got {layout!r}")
    src = te.placeholder(tile, dtype, name="src")
    dst = te.compute(tile, lambda i, j: src[i, j], name="frag")
    binds = {src: _buf(tile, dtype, "src", scope_from),
             dst: _buf(tile, dtype, "frag", f"wmma.{use}")}

    def lower(ins: Any, outs: Any) -> Any:
        bs, bf = ins[0], outs[0]
        idx = fragment_index(bf, *tile)
        return call_intrin("handle", "tir.tvm_load_matrix_sync", bf.data, m, n, k, idx,
                           bs.access_ptr("r"), bs.strides[0], layout)

    return te.decl_tensor_intrin(dst.op, lower, name=f"wmma_load_{use}", binds=binds)


def intrin_wmma_load_matrix_a(shape: tuple[int, int, int] = (16, 16, 16),
                              dtype: str = "float16", layout: str = "row_major",
                              scope_from: str = "shared") -> Any:
    """Load an ``m x k`` tile (``[m, k]`` in memory; "col_major": ``[k, m]``) into a
    ``wmma.matrix_a`` fragment."""
    m, _, k = _check_shape(shape)
    tile = (m, k) if layout == "row_major" else (k, m)
    return _load(shape, dtype, layout, "matrix_a", tile, scope_from)


def intrin_wmma_load_matrix_b(shape: tuple[int, int, int] = (16, 16, 16),
                              dtype: str = "float16", layout: str = "col_major",
                              scope_from: str = "shared") -> Any:
    """Load a ``k x n`` operand tile into a ``wmma.matrix_b`` fragment: "col_major" reads it
    from ``[n, k]`` memory (dense's weight), "row_major" from ``[k, n]``."""
    _, n, k = _check_shape(shape)
    tile = (n, k) if layout == "col_major" else (k, n)
    return _load(shape, dtype, layout, "matrix_b", tile, scope_from)


def intrin_wmma_gemm(shape: tuple[int, int, int] = (16, 16, 16), in_dtype: str = "float16",
                     out_dtype: str = "float32", b_layout: str = "col_major") -> Any:
    """``C[i, j] += cast(A[i, r]) * cast(B[j, r])`` on fragments (B ``[n, k]`` with
    "col_major", ``[k, n]`` with "row_major")."""
    m, n, k = _check_shape(shape)
    a = te.placeholder((m, k), in_dtype, name="a")
    b = te.placeholder((n, k) if b_layout == "col_major" else (k, n), in_dtype, name="b")
    r = te.reduce_axis((0, k), name="r")
    if b_layout == "col_major":
        c = te.compute((m, n), lambda i, j: te.sum(
            a[i, r].astype(out_dtype) * b[j, r].astype(out_dtype), axis=r), name="c")
    else:
        c = te.compute((m, n), lambda i, j: te.sum(
            a[i, r].astype(out_dtype) * b[r, j].astype(out_dtype), axis=r), name="c")
    binds = {a: _buf((m, k), in_dtype, "a", "wmma.matrix_a"),
             b: _buf(tuple(b.shape), in_dtype, "b", "wmma.matrix_b"),
             c: _buf((m, n), out_dtype, "c", "wmma.accumulator")}
    b_tile = (n, k) if b_layout == "col_major" else (k, n)

    def lower(ins: Any, outs: Any) -> Any:
        ba, bb = ins
        bc = outs[0]
        ia, ib, ic = (fragment_index(ba, m, k), fragment_index(bb, *b_tile),
                      fragment_index(bc, m, n))
        update = call_intrin("handle", "tir.tvm_mma_sync", bc.data, ic, ba.data, ia, bb.data,
                             ib, bc.data, ic)
        reset = call_intrin("handle", "tir.tvm_fill_fragment", bc.data, m, n, k, ic, 0.0)
        body = S.SeqStmt([S.Evaluate(reset), S.Evaluate(update)])  # the whole reduction here
        return body, reset, update

    return te.decl_tensor_intrin(c.op, lower, name="wmma_gemm", binds=binds)


def intrin_wmma_store_matrix(shape: tuple[int, int, int] = (16, 16, 16),
                             dtype: str = "float32", scope_to: str = "shared") -> Any:
    """Store an ``m x n`` accumulator fragment to memory (row-major)."""
    m, n, k = _check_shape(shape)
    src = te.placeholder((m, n), dtype, name="acc")
    dst = te.compute((m, n), lambda i, j: src[i, j], name="out")
    binds = {src: _buf((m, n), dtype, "acc", "wmma.accumulator"),
             dst: _buf((m, n), dtype, "out", scope_to)}

    def lower(ins: Any, outs: Any) -> Any:
        bf, bo = ins[0], outs[0]
        idx = fragment_index(bf, m, n)
        return call_intrin("handle", "tir.tvm_store_matrix_sync", bf.data, m, n, k, idx,
                           bo.access_ptr("w"), bo.strides[0], "row_major")

    return te.decl_tensor_intrin(dst.op, lower, name="wmma_store", binds=binds)
