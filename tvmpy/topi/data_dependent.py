"""Kernels whose output size depends on the data: ``argwhere``, ``compress``, ``unique`` and
ONNX's non-max suppression, each one ``te.extern`` stage written with ``tir.ir_builder``.

The output extent that depends on the data (``count``) is a symbolic size of the output tensor,
bound from the array the caller allocates. Two ways to call them: exact (the caller runs the
operator's shape function on the host first) or ``bounded`` (``relay.op.upper_bound``: the VM
allocates an upper bound from the input shapes, the kernel writes the exact layout at the
buffer's start and reports the actual count in an extra small int64 output: the work is done
once, here). Every store is guarded by ``position < extent``, so a buffer smaller than the
data needs is never overrun. The loops are plain serial ones (the counts are running sums);
unique orders the positions by a stable merge sort (O(n log n) comparisons); NMS pops its
candidates from a heap (higher score, then lower index) only while boxes may still be kept, and
the greedy suppression compares each with the boxes kept so far.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import te
from ..tir import expr as E
from ..tir import ir_builder
from ..tir.expr import PrimExpr, const
from ..tir.op import if_then_else, isnan
from ..tir.op import max as tmax
from ..tir.op import min as tmin

__all__ = ["argwhere", "compress", "unique", "all_class_non_max_suppression"]


def _prod(dims: Sequence[Any]) -> PrimExpr:
    n: PrimExpr = const(1, "int32")
    for d in dims:
        n = n * d
    return n


def _nonzero(v: PrimExpr) -> PrimExpr:
    return v if v.dtype == "bool" else v != const(0, v.dtype)


def argwhere(condition: te.Tensor, count: Any, bounded: bool = False) -> Any:
    """``(count, ndim)`` int32 indices of the non-zero elements of ``condition``, row-major
    (``bounded``: also the ``(1,)`` int64 number of them, the rows written; see the module
    docstring)."""
    shape = list(condition.shape)
    ndim = len(shape)
    # a constant 0 extent: no element, the loop never runs; 1 keeps its index arithmetic legal
    unravel = [1 if isinstance(d, (int, E.IntImm)) and int(d) == 0 else d for d in shape]

    def body(ins: list, outs: list) -> Any:
        ib = ir_builder.create()
        c = ib.buffer_ptr(ins[0])
        o = ib.buffer_ptr(outs[0]) if ndim else None
        m = outs[0].shape[0]
        k = ib.allocate("int32", (1,), name="k", scope="local")
        k[0] = 0
        with ib.for_range(0, _prod(shape), name="i") as i:
            with ib.if_scope(_nonzero(c[i])):
                if o is not None:
                    with ib.if_scope(k[0] < m):
                        rem: PrimExpr = i
                        for d in reversed(range(ndim)):
                            o[k[0] * ndim + d] = rem % unravel[d] if d else rem
                            rem = rem // unravel[d]
                k[0] = k[0] + 1
        if bounded:
            ib.buffer_ptr(outs[1])[0] = E.cast(k[0], "int64")
        return ib.get()

    if bounded:
        return list(te.extern([(count, ndim), (1,)], [condition], body, name="argwhere",
                              dtype=["int32", "int64"], tag="argwhere"))
    return te.extern((count, ndim), [condition], body, name="argwhere", dtype="int32",
                     tag="argwhere")


def _axis_split(shape: Sequence[Any], axis: int | None) -> tuple[PrimExpr, PrimExpr, PrimExpr]:
    if axis is None:
        return const(1, "int32"), _prod(shape), const(1, "int32")
    return _prod(shape[:axis]), shape[axis], _prod(shape[axis + 1:])


def compress(data: te.Tensor, condition: te.Tensor, axis: int | None, count: Any,
             bounded: bool = False) -> Any:
    """The slices of ``data`` along ``axis`` (flattened when None) where ``condition`` is
    non-zero; ``count`` of them (the output's extent there). ``bounded``: the output buffer is
    an upper bound; a first pass over the condition counts the selected slices, which are then
    written compactly at the buffer's start, and a ``(2,)`` int64 output gets [the count, the
    first selected index past the end of the axis or -1]."""
    shape = list(data.shape)
    if axis is not None:
        axis %= len(shape)
    outer, n, inner = _axis_split(shape, axis)
    out_shape = [count] if axis is None else [count if d == axis else s for d, s in enumerate(shape)]

    def body(ins: list, outs: list) -> Any:
        ib = ir_builder.create()
        x, c, o = ib.buffer_ptr(ins[0]), ib.buffer_ptr(ins[1]), ib.buffer_ptr(outs[0])
        m = outs[0].shape[0 if axis is None else axis]
        k = ib.allocate("int32", (1,), name="k", scope="local")
        if bounded:  # the count first (the condition only), the stride of the compact layout
            cnt = ib.buffer_ptr(outs[1])
            total = ib.allocate("int32", (1,), name="total", scope="local")
            k[0] = 0
            with ib.for_range(0, tmin(ins[1].shape[0], n), name="j") as j:
                with ib.if_scope(_nonzero(c[j])):
                    k[0] = k[0] + 1
            cnt[0] = E.cast(k[0], "int64")
            cnt[1] = const(-1, "int64")
            with ib.for_range(0, ins[1].shape[0] - tmin(ins[1].shape[0], n), name="j") as j:
                with ib.if_scope(E.And(_nonzero(c[n + j]), cnt[1] < 0)):
                    cnt[1] = E.cast(n + j, "int64")
            total[0] = k[0]
            m = tmin(m, total[0])
        k[0] = 0
        with ib.for_range(0, tmin(ins[1].shape[0], n), name="j") as j:
            with ib.if_scope(_nonzero(c[j])):
                with ib.if_scope(k[0] < m):
                    with ib.for_range(0, outer, name="a") as a:
                        with ib.for_range(0, inner, name="b") as b:
                            o[(a * m + k[0]) * inner + b] = x[(a * n + j) * inner + b]
                k[0] = k[0] + 1
        return ib.get()

    if bounded:
        return list(te.extern([out_shape, (2,)], [data, condition], body, name="compress",
                              dtype=[data.dtype, "int64"], tag="compress"))
    return te.extern(out_shape, [data, condition], body, name="compress", dtype=data.dtype,
                     tag="compress")


def _merge_sort(ib: Any, idx: Any, tmp: Any, n: PrimExpr, right_first: Any, flag: Any) -> None:
    """Stable bottom-up merge sort of the ``n`` entries of ``idx`` (``tmp``: scratch of the same
    size). ``right_first(flag, a, b)`` emits code setting ``flag[0]`` to 1 when entry ``a`` (from
    the right run) must come before ``b`` (from the left run), else 0."""
    i = ib.allocate("int32", (1,), name="ms_i", scope="local")
    j = ib.allocate("int32", (1,), name="ms_j", scope="local")
    with ib.for_range(0, 31, name="pass_") as p:
        width = const(1, "int32") << p
        with ib.if_scope(width < n):
            with ib.for_range(0, (n + 2 * width - 1) // (2 * width), name="blk") as blk:
                lo = blk * 2 * width
                mid = tmin(lo + width, n)
                hi = tmin(lo + 2 * width, n)
                i[0] = lo
                j[0] = mid
                with ib.for_range(0, hi - lo, name="t") as t:
                    flag[0] = 0
                    with ib.if_scope(E.And(i[0] < mid, j[0] < hi)):
                        right_first(flag, idx[j[0]], idx[i[0]])
                    with ib.if_scope(E.And(i[0] < mid, E.Or(j[0] >= hi, flag[0] == 0))):
                        tmp[lo + t] = idx[i[0]]
                        i[0] = i[0] + 1
                    with ib.else_scope():
                        tmp[lo + t] = idx[j[0]]
                        j[0] = j[0] + 1
            with ib.for_range(0, n, name="t") as t:
                idx[t] = tmp[t]


def _sift_down(ib: Any, key: Any, idx: Any, start: PrimExpr, size: PrimExpr, pos: Any,
               tk: Any, ti: Any) -> None:
    """Restore the max-heap order (higher ``key`` first, then lower ``idx``) of the first
    ``size`` (key, idx) pairs below ``start``; ``pos``: an int32 local, ``tk``/``ti``: scratch
    (entry 0 used for the swap)."""
    def better(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        return E.Or(key[a] > key[b], E.And(key[a] == key[b], idx[a] < idx[b]))

    best = ib.allocate("int32", (1,), name="best", scope="local")
    pos[0] = start
    with ib.for_range(0, 31, name="lvl"):
        with ib.if_scope(pos[0] >= 0):
            child = pos[0] * 2 + 1
            best[0] = pos[0]
            with ib.if_scope(child < size):
                with ib.if_scope(better(child, best[0])):
                    best[0] = child
                with ib.if_scope(child + 1 < size):
                    with ib.if_scope(better(child + 1, best[0])):
                        best[0] = child + 1
            with ib.if_scope(best[0] != pos[0]):
                tk[0] = key[pos[0]]
                ti[0] = idx[pos[0]]
                key[pos[0]] = key[best[0]]
                idx[pos[0]] = idx[best[0]]
                key[best[0]] = tk[0]
                idx[best[0]] = ti[0]
                pos[0] = best[0]
            with ib.else_scope():
                pos[0] = -1


def unique(data: te.Tensor, is_sorted: bool, axis: int | None, count: Any,
           bounded: bool = False) -> list[te.Tensor]:
    """ONNX Unique: ``(Y, indices, inverse_indices, counts)`` with ``count`` unique elements
    (``axis=None``: flattened; NaNs are one value, sorted last, as numpy) or slices along
    ``axis``; sorted ascending (slices lexicographically, in row-major order of the other axes)
    or in order of first occurrence.

    A stable merge sort of the positions (O(n log n) comparisons) groups equal values; the first
    of each group is its first occurrence; for the unsorted order the groups are re-ranked by
    their first occurrence. ``bounded``: the buffers of Y, indices and counts are upper bounds
    (the input's extent), Y is written compactly at its start, and a fifth ``(1,)`` int64
    output gets the number of unique values."""
    shape = list(data.shape)
    if axis is not None:
        axis %= len(shape)
    outer, n, inner = _axis_split(shape, axis)
    y_shape = [count] if axis is None else [count if d == axis else s for d, s in enumerate(shape)]
    span = outer * inner
    nan_aware = axis is None and data.dtype.startswith(("float", "bfloat"))

    def body(ins: list, outs: list) -> Any:
        ib = ir_builder.create()
        x = ib.buffer_ptr(ins[0])
        y, idx, inv, cnt = (ib.buffer_ptr(b) for b in outs[:4])
        m = outs[1].shape[0]

        def elem(j: PrimExpr, e: PrimExpr) -> PrimExpr:
            return x[((e // inner) * n + j) * inner + e % inner]

        def compare(state: Any, a: PrimExpr, b: PrimExpr) -> None:
            """state[0] = 1 when slice a < slice b (lexicographically), 2 when greater, else 0."""
            state[0] = 0
            if nan_aware:  # one element: NaN equals NaN and sorts after every number
                va, vb = x[a], x[b]
                na, nb_ = isnan(va), isnan(vb)
                with ib.if_scope(E.Or(E.And(E.Not(na), nb_), va < vb)):
                    state[0] = 1
                with ib.else_scope():
                    with ib.if_scope(E.Or(E.And(na, E.Not(nb_)), va > vb)):
                        state[0] = 2
                return
            with ib.for_range(0, span, name="e") as e:
                with ib.if_scope(state[0] == 0):
                    with ib.if_scope(elem(a, e) < elem(b, e)):
                        state[0] = 1
                    with ib.else_scope():
                        with ib.if_scope(elem(a, e) > elem(b, e)):
                            state[0] = 2

        order = ib.allocate("int32", (n,), name="order")
        tmp = ib.allocate("int32", (n,), name="tmp")
        group = ib.allocate("int32", (n,), name="group")  # position -> its group
        first = ib.allocate("int32", (n,), name="first")  # group -> its first position
        st = ib.allocate("int32", (1,), name="st", scope="local")
        g = ib.allocate("int32", (1,), name="g", scope="local")
        with ib.for_range(0, n, name="t") as t:
            order[t] = t

        def right_first(flag: Any, a: PrimExpr, b: PrimExpr) -> None:
            compare(flag, a, b)
            with ib.if_scope(flag[0] != 1):
                flag[0] = 0

        _merge_sort(ib, order, tmp, n, right_first, st)
        # groups of equal slices, in sorted order; a stable sort puts each first occurrence first
        g[0] = -1
        with ib.for_range(0, n, name="t") as t:
            st[0] = 1
            with ib.if_scope(t > 0):
                compare(st, order[t - 1], order[t])
                with ib.if_scope(st[0] != 0):
                    st[0] = 1
            with ib.if_scope(st[0] != 0):
                g[0] = g[0] + 1
                first[g[0]] = order[t]
            group[order[t]] = g[0]
        # rank: group -> output position (tmp reused): sorted, the group itself; else the
        # groups by first occurrence (a scan of the positions, counting the first ones)
        if is_sorted:
            with ib.for_range(0, n, name="t") as t:
                tmp[t] = t
        else:
            st[0] = 0
            with ib.for_range(0, n, name="t") as t:
                with ib.if_scope(first[group[t]] == t):
                    tmp[group[t]] = st[0]
                    st[0] = st[0] + 1
        stride = m
        if bounded:  # the number of groups is Y's extent along the axis: compact layout
            ib.buffer_ptr(outs[4])[0] = E.cast(g[0] + 1, "int64")
            stride = tmin(m, g[0] + 1)
        with ib.for_range(0, g[0] + 1, name="h") as h:
            pos = tmp[h]
            with ib.if_scope(pos < m):
                idx[pos] = E.cast(first[h], "int64")
                cnt[pos] = const(0, "int64")
                with ib.for_range(0, span, name="e") as e:
                    y[((e // inner) * stride + pos) * inner + e % inner] = elem(first[h], e)
        with ib.for_range(0, n, name="t") as t:
            pos = tmp[group[t]]
            inv[t] = E.cast(pos, "int64")
            with ib.if_scope(pos < m):
                cnt[pos] = cnt[pos] + const(1, "int64")
        return ib.get()

    shapes: list[Any] = [y_shape, [count], [n], [count]]
    dtypes = [data.dtype, "int64", "int64", "int64"]
    if bounded:
        shapes.append([1])
        dtypes.append("int64")
    outs = te.extern(shapes, [data], body, name="unique", dtype=dtypes, tag="unique")
    return list(outs)


def _box_extents(bx: Any, b: PrimExpr, i: PrimExpr, nbox: PrimExpr, center: bool
                 ) -> tuple[PrimExpr, PrimExpr, PrimExpr, PrimExpr]:
    """(x_min, x_max, y_min, y_max) of box i of batch b, as onnx's reference computes them (in
    the boxes' dtype): corners [y1, x1, y2, x2] in either order, or [x, y, w, h]."""
    def c(k: int) -> PrimExpr:
        return bx[(b * nbox + i) * 4 + k]

    if center:
        two = const(2, bx.dtype)
        return c(0) - c(2) / two, c(0) + c(2) / two, c(1) - c(3) / two, c(1) + c(3) / two
    return tmin(c(1), c(3)), tmax(c(1), c(3)), tmin(c(0), c(2)), tmax(c(0), c(2))


def _iou_above(a: Sequence[PrimExpr], e: Sequence[PrimExpr], iou: PrimExpr) -> PrimExpr:
    """onnx's suppression test of two boxes given by their extents and areas (x_min, x_max,
    y_min, y_max, area), in the boxes' dtype and the reference's operation order: the
    intersection over union is above ``iou`` (and every area is positive)."""
    ix0, ix1 = tmax(a[0], e[0]), tmin(a[1], e[1])
    iy0, iy1 = tmax(a[2], e[2]), tmin(a[3], e[3])
    inter = (ix1 - ix0) * (iy1 - iy0)
    union = a[4] + e[4] - inter
    zero = const(0, a[4].dtype)
    return E.And(E.And(E.And(ix1 > ix0, iy1 > iy0), E.And(inter > zero, E.And(a[4] > zero, e[4] > zero))),
                 E.And(union > zero, inter / union > iou))


def all_class_non_max_suppression(boxes: te.Tensor, scores: te.Tensor, max_output: te.Tensor,
                                  iou_threshold: te.Tensor, score_threshold: te.Tensor,
                                  center_point_box: int, count: Any, bounded: bool = False
                                  ) -> Any:
    """ONNX NonMaxSuppression: ``(count, 3)`` int64 rows [batch, class, box] (see
    ``relay.op.vision``). An empty threshold tensor means: no score threshold, IoU 0, at most 0
    boxes, as onnx's reference. ``bounded``: also a ``(1,)`` int64 output, the number of rows
    selected (the rows buffer is an upper bound)."""
    nb, nc, n = scores.shape

    def size(t: te.Tensor) -> PrimExpr:
        return _prod(t.shape)

    def body(ins: list, outs: list) -> Any:
        ib = ir_builder.create()
        bx, sc, mo, io, so = (ib.buffer_ptr(b, (_prod(b.shape),)) for b in ins)
        o = ib.buffer_ptr(outs[0])
        m = outs[0].shape[0]
        dt = bx.dtype
        limit = ib.let("limit", if_then_else(size(max_output) > 0,
                                                tmax(E.cast(mo[0], "int64"), const(0, "int64")),
                                                const(0, "int64")))
        iou = ib.let("iou", if_then_else(size(iou_threshold) > 0, E.cast(io[0], dt), const(0, dt)))
        has_s = size(score_threshold) > 0
        order = ib.allocate("int32", (n,), name="order")
        key = ib.allocate(sc.dtype, (n,), name="key")  # the candidates' scores (a heap)
        tkey = ib.allocate(sc.dtype, (1,), name="tkey", scope="local")
        r2 = ib.allocate("int32", (1,), name="r2", scope="local")
        ext = ib.allocate(dt, (n * 5,), name="ext")  # per box: x_min, x_max, y_min, y_max, area
        kx = ib.allocate(dt, (n * 5,), name="kx")  # the same of the boxes kept, in order
        tmp = ib.allocate("int32", (1,), name="tmp", scope="local")
        total = ib.allocate("int32", (1,), name="total", scope="local")
        ncand = ib.allocate("int32", (1,), name="ncand", scope="local")
        nk = ib.allocate("int32", (1,), name="nk", scope="local")
        r = ib.allocate("int32", (1,), name="r", scope="local")
        keep = ib.allocate("int32", (1,), name="keep", scope="local")
        total[0] = 0
        with ib.for_range(0, nb, name="b") as b:
            with ib.for_range(0, n, name="i") as i:
                x0, x1, y0, y1 = _box_extents(bx, b, i, n, bool(center_point_box))
                for k, v in enumerate((x0, x1, y0, y1)):
                    ext[i * 5 + k] = v
                ext[i * 5 + 4] = (ext[i * 5 + 1] - ext[i * 5]) * (ext[i * 5 + 3] - ext[i * 5 + 2])
            with ib.for_range(0, nc, name="c") as c:
                base = (b * nc + c) * n

                def cand(i: PrimExpr) -> PrimExpr:
                    return E.Or(E.Not(has_s), sc[base + i] > E.cast(so[0], sc.dtype))

                # the candidates (in index order), stably sorted by decreasing score: ties
                # keep the lower box index first
                ncand[0] = 0
                with ib.for_range(0, n, name="i") as i:
                    with ib.if_scope(cand(i)):
                        order[ncand[0]] = i
                        key[ncand[0]] = sc[base + i]
                        ncand[0] = ncand[0] + 1
                # a heap of the candidates (best: higher score, then lower index), popped one
                # at a time only while boxes may still be kept (the limit)
                hsize = r2
                hsize[0] = ncand[0]
                with ib.for_range(0, ncand[0] // 2, name="h") as h:
                    _sift_down(ib, key, order, ncand[0] // 2 - 1 - h, hsize[0], r, tkey, tmp)
                nk[0] = 0
                with ib.for_range(0, ncand[0], name="k") as k:
                    with ib.if_scope(E.cast(nk[0], "int64") < limit):
                        keep[0] = 1
                        box = ib.let("box", order[0])
                        hsize[0] = hsize[0] - 1
                        key[0] = key[hsize[0]]
                        order[0] = order[hsize[0]]
                        _sift_down(ib, key, order, const(0, "int32"), hsize[0], r, tkey, tmp)
                        cur = [ib.let(f"e{j}", ext[box * 5 + j]) for j in range(5)]
                        with ib.for_range(0, nk[0], name="q") as q:  # the boxes kept so far
                            with ib.if_scope(keep[0] == 1):
                                with ib.if_scope(_iou_above(cur, [kx[q * 5 + j] for j in range(5)],
                                                            iou)):
                                    keep[0] = 0
                        with ib.if_scope(keep[0] == 1):
                            for j in range(5):
                                kx[nk[0] * 5 + j] = cur[j]
                            nk[0] = nk[0] + 1
                            with ib.if_scope(total[0] < m):
                                o[total[0] * 3] = E.cast(b, "int64")
                                o[total[0] * 3 + 1] = E.cast(c, "int64")
                                o[total[0] * 3 + 2] = E.cast(box, "int64")
                            total[0] = total[0] + 1
        if bounded:
            ib.buffer_ptr(outs[1])[0] = E.cast(total[0], "int64")
        return ib.get()

    ins = [boxes, scores, max_output, iou_threshold, score_threshold]
    if bounded:
        return list(te.extern([(count, 3), (1,)], ins, body, name="non_max_suppression",
                              dtype=["int64", "int64"], tag="non_max_suppression"))
    return te.extern((count, 3), [boxes, scores, max_output, iou_threshold, score_threshold], body,
                     name="non_max_suppression", dtype="int64", tag="non_max_suppression")
