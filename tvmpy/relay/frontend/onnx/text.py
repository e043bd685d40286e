"""ONNX TfIdfVectorizer (integer pools): each pool n-gram's count is a sum over start positions
of the AND of shifted equality tests, for every skip distance (unigrams once)."""

from __future__ import annotations

import numpy as np

from ...expr import RelayExpr, const
from ...op import reduce as _red
from ...op import tensor, transform
from .context import ImportContext, dtype_of, shape_of
from .registry import Attrs, Inputs, Names, Output, converter


@converter("TfIdfVectorizer")
def _tfidf(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    s = shape_of(x)
    if len(s) not in (1, 2):
        raise ctx.fail(f"input must be [C] or [B, C], got {s}")
    if "pool_int64s" not in attrs:
        raise ctx.fail("only pool_int64s is supported (no strings)")
    pool = [int(v) for v in attrs["pool_int64s"]]
    counts = [int(v) for v in attrs["ngram_counts"]]
    indexes = [int(v) for v in attrs["ngram_indexes"]]
    lo, hi, skip = (
        int(attrs["min_gram_length"]),
        int(attrs["max_gram_length"]),
        int(attrs["max_skip_count"]),
    )
    mode = attrs["mode"]
    weights = list(attrs.get("weights", []))
    size = max(indexes) + 1
    C = s[-1]
    ax = len(s) - 1
    grams: list[tuple[list[int], int]] = []  # (n-gram, output index) in id order
    gid = 0
    for k, start in enumerate(counts):
        end = counts[k + 1] if k + 1 < len(counts) else len(pool)
        for j in range(start, end, k + 1):
            if lo <= k + 1 <= hi:
                grams.append((pool[j:j + k + 1], indexes[gid]))
            gid += 1
    per_out: dict[int, RelayExpr] = {}
    for gram, o in grams:
        k = len(gram)
        total = None
        for d in (range(1, 2) if k == 1 else range(1, skip + 2)):
            span = (k - 1) * d
            if span >= C:
                continue
            hit = None
            for j, g in enumerate(gram):
                part = transform.strided_slice(x, [j * d], [C - span + j * d], axes=[ax])
                eq = tensor.equal(part, const(np.asarray(g, dtype=dtype_of(x))))
                hit = eq if hit is None else tensor.logical_and(hit, eq)
            cnt = _red.sum(transform.cast(hit, "float32"), axis=[ax])
            total = cnt if total is None else tensor.add(total, cnt)
        if total is not None:
            per_out[o] = total if o not in per_out else tensor.add(per_out[o], total)
    zero = const(np.zeros(s[:-1], dtype=np.float32))
    y = tensor.stack([per_out.get(o, zero) for o in range(size)], ax)
    if mode == "TF":
        return y
    w = const(np.asarray(weights if weights else [1.0] * size, dtype=np.float32))
    if mode == "IDF":
        return tensor.where(tensor.greater(y, const(np.float32(0))), transform.broadcast_to(
            w, s[:-1] + [size]), const(np.zeros(s[:-1] + [size], np.float32)))
    if mode == "TFIDF":
        return tensor.multiply(y, w)
    raise ctx.fail(f"mode={mode!r} is not supported (TF, IDF, TFIDF)")
