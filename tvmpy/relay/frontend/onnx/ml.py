"""ONNX ``ai.onnx.ml`` operators: Binarizer, ArrayFeatureExtractor and TreeEnsemble.

TreeEnsemble (ai.onnx.ml opset 5) becomes a level-by-level walk of every tree at once: the
nodes and the leaves share one index space (leaf ``k`` is entry ``n_nodes + k``, a leaf points
to itself), the state is one index per (row, tree) starting at the roots, and each of
``depth`` steps gathers the current nodes' feature ids, splits and modes from constant tables,
gathers the rows' feature values and moves to the true or false child. After the deepest path
every state is a leaf; its weight and target id are gathered and aggregated per target (sum,
average, min, max, as onnx's reference: targets no tree reaches are 0 for sum/average and the
dtype's max/min for min/max). Set membership (``BRANCH_MEMBER``) compares the feature value
with the node's row of a NaN-padded table of members.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...expr import RelayExpr, const
from ...op import reduce, tensor, transform
from .context import ImportContext, dtype_of, shape_of
from .registry import Attrs, Inputs, Names, Output, converter

_LEQ, _LT, _GTE, _GT, _EQ, _NEQ, _MEMBER = range(7)


@converter("ai.onnx.ml.Binarizer")
def _binarizer(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    dt = dtype_of(x)
    t = const(np.asarray(attrs.get("threshold", 0.0), dtype=dt))
    return transform.cast(tensor.greater(x, t), dt)


@converter("ai.onnx.ml.ArrayFeatureExtractor")
def _array_feature_extractor(ctx: ImportContext, inputs: Inputs, attrs: Attrs,
                             names: Names) -> Output:
    """``data[..., indices.ravel()]`` with the last axis of ``data`` (a vector: one row)
    replaced by the indices, as onnx's reference and onnxruntime; negative indices count from
    the end."""
    data, idx = inputs
    ds, n = shape_of(data), int(np.prod([int(s) for s in shape_of(idx)]))
    if not all(isinstance(s, int) for s in shape_of(idx)):
        raise ctx.fail("the indices need a static shape")
    flat = transform.reshape(idx, [n])
    if dtype_of(idx) != "int64":
        flat = transform.cast(flat, "int64")
    out = transform.take(data, flat, axis=len(ds) - 1, mode="wrap")
    return transform.reshape(out, [1, n]) if len(ds) == 1 else out


def _array(v: Any) -> np.ndarray:
    """An attribute value (a list, or a TensorProto) as a flat array."""
    from onnx import TensorProto, numpy_helper

    return np.asarray(numpy_helper.to_array(v) if isinstance(v, TensorProto) else v).reshape(-1)


def _member_sets(ctx: ImportContext, modes: np.ndarray, attrs: Attrs) -> list[list[float]]:
    """The members of each BRANCH_MEMBER node, in node order (NaN-separated in the attribute)."""
    n_member = int(np.sum(modes == _MEMBER))
    if not n_member:
        return []
    if "membership_values" not in attrs:
        raise ctx.fail("set membership nodes without membership_values")
    values = _array(attrs["membership_values"])
    sets: list[list[float]] = [[]]
    for v in values:
        if np.isnan(v):
            sets.append([])
        else:
            sets[-1].append(float(v))
    sets = sets[:-1] if not sets[-1] else sets
    if len(sets) != n_member:
        raise ctx.fail(f"membership_values holds {len(sets)} sets for {n_member} set "
                       "membership nodes")
    return sets


def _depth(starts: list[int], true_next: np.ndarray, false_next: np.ndarray,
           n_nodes: int) -> int:
    """The number of steps from the roots to the deepest leaf (rejecting cycles)."""
    depth, level = 0, set(starts)
    while any(s < n_nodes for s in level):
        level = {int(c) for s in level if s < n_nodes for c in (true_next[s], false_next[s])}
        depth += 1
        if depth > n_nodes:
            raise ValueError("the trees have a cycle")
    return depth


@converter("ai.onnx.ml.TreeEnsemble")
def _tree_ensemble(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    x = inputs[0]
    dt = dtype_of(x)
    if len(shape_of(x)) != 2:
        raise ctx.fail(f"X must be 2-D (rows, features), got rank {len(shape_of(x))}")
    post = int(attrs.get("post_transform", 0))
    if post != 0:
        raise ctx.fail(f"post_transform={post} is not supported (only 0, NONE)")
    agg = int(attrs.get("aggregate_function", 1))
    if agg not in (0, 1, 2, 3):
        raise ctx.fail(f"aggregate_function={agg} is not one of 0..3")

    def arr(name: str, dtype: Any) -> np.ndarray:
        if name not in attrs:
            raise ctx.fail(f"attribute {name} is required")
        return _array(attrs[name]).astype(dtype)

    splits = arr("nodes_splits", dt)
    feats = arr("nodes_featureids", np.int64)
    modes = arr("nodes_modes", np.int64)
    t_ids, f_ids = arr("nodes_truenodeids", np.int64), arr("nodes_falsenodeids", np.int64)
    t_leaf, f_leaf = arr("nodes_trueleafs", bool), arr("nodes_falseleafs", bool)
    l_targets, l_weights = arr("leaf_targetids", np.int64), arr("leaf_weights", dt)
    roots = arr("tree_roots", np.int64)
    n_targets = int(attrs["n_targets"]) if "n_targets" in attrs else int(l_targets.max()) + 1
    miss = (arr("nodes_missing_value_tracks_true", bool) if "nodes_missing_value_tracks_true"
            in attrs else np.zeros(len(modes), bool))
    n, n_leaves = len(modes), len(l_weights)
    if not (len(splits) == len(feats) == len(t_ids) == len(f_ids) == len(t_leaf) == len(f_leaf)
            == n) or len(l_targets) != n_leaves:
        raise ctx.fail("the nodes_* (and the leaf_*) attributes differ in length")
    if ((modes < 0) | (modes > _MEMBER)).any() or (l_targets >= n_targets).any():
        raise ctx.fail("a node mode is not 0..6 or a leaf target id is not below n_targets")
    n_feat = shape_of(x)[1]
    if isinstance(n_feat, int) and (feats >= n_feat).any():
        raise ctx.fail(f"a node reads feature {int(feats.max())} of {n_feat}")
    sets = _member_sets(ctx, modes, attrs)

    # one index space: node i, leaf k at n + k (pointing to itself)
    ext = np.arange(n + n_leaves, dtype=np.int64)
    true_next = np.concatenate([np.where(t_leaf, t_ids + n, t_ids), ext[n:]])
    false_next = np.concatenate([np.where(f_leaf, f_ids + n, f_ids), ext[n:]])
    if ((true_next >= n + n_leaves) | (false_next >= n + n_leaves)).any():
        raise ctx.fail("a child id is out of range")
    starts = [int(r) + n if t_leaf[r] and f_leaf[r] and t_ids[r] == f_ids[r] else int(r)
              for r in roots]  # a tree that is one leaf: that leaf (as onnx's reference)
    try:
        depth = _depth(starts, true_next, false_next, n)
    except ValueError as e:
        raise ctx.fail(str(e)) from None

    def table(v: np.ndarray, pad: Any) -> RelayExpr:
        return const(np.concatenate([v, np.full(n_leaves, pad, dtype=v.dtype)]))

    c_feat, c_split, c_mode = table(feats, 0), table(splits, 0), table(modes, _LEQ)
    c_miss = table(miss, False)
    c_true, c_false = const(true_next), const(false_next)
    member = None
    if sets:
        k = max(1, max(len(s) for s in sets))
        m = np.full((n + n_leaves, k), np.nan, dtype=dt)
        for node, s in zip(np.flatnonzero(modes == _MEMBER), sets):
            m[node, :len(s)] = s
        member = const(m)
    present = sorted({int(v) for v in modes})

    # the state: (rows, trees); rows may be symbolic, so broadcast the roots against X's rows
    s0 = const(np.asarray(starts, dtype=np.int64).reshape(1, -1))
    zero_col = transform.cast(reduce.sum(tensor.zeros_like(x), axis=1, keepdims=True), "int64")
    state = tensor.add(s0, zero_col)
    for _ in range(depth):
        v = transform.gather(x, 1, transform.take(c_feat, state, axis=0))
        split = transform.take(c_split, state, axis=0)
        mode = transform.take(c_mode, state, axis=0)
        cond = None
        for md in present:
            if md == _MEMBER:
                ms = transform.take(member, state, axis=0)
                c = reduce.any(tensor.equal(transform.expand_dims(v, 2), ms), axis=2)
            else:
                c = {_LEQ: tensor.less_equal, _LT: tensor.less, _GTE: tensor.greater_equal,
                     _GT: tensor.greater, _EQ: tensor.equal, _NEQ: tensor.not_equal}[md](v, split)
            cond = c if cond is None else tensor.where(
                tensor.equal(mode, const(np.asarray(md, np.int64))), c, cond)
        if miss.any():
            cond = tensor.logical_or(cond, tensor.logical_and(
                transform.take(c_miss, state, axis=0), tensor.isnan(v)))
        state = tensor.where(cond, transform.take(c_true, state, axis=0),
                             transform.take(c_false, state, axis=0))

    leaf = tensor.subtract(state, const(np.asarray(n, np.int64)))
    w = transform.take(const(l_weights), leaf, axis=0)        # (rows, trees)
    tgt = transform.take(const(l_targets), leaf, axis=0)
    hit = tensor.equal(transform.expand_dims(tgt, 2),
                       const(np.arange(n_targets, dtype=np.int64)))  # (rows, trees, targets)
    w3 = transform.expand_dims(w, 2)
    if agg in (0, 1):
        if agg == 0:
            w3 = tensor.divide(w3, const(np.asarray(len(starts), dtype=dt)))
        out = reduce.sum(tensor.where(hit, w3, const(np.asarray(0, dt))), axis=1)
    else:
        fi = np.finfo(dt)
        init = const(np.asarray(fi.max if agg == 2 else fi.min, dtype=dt))
        picked = tensor.where(hit, w3, init)
        out = (reduce.min if agg == 2 else reduce.max)(picked, axis=1)
    return out
