"""ONNX sequences and optionals.

Representation (chosen per value, at import time):

- a sequence whose length the importer knows (SequenceConstruct, SplitToSequence with static
  shapes, a sequence graph input fed with a given number of tensors, inserts/erases at known
  positions on those) is a relay **tuple**: static, typed per element, compiled like any tuple
  (its elements may differ in shape);
- a sequence whose length is a run-time value (grown in a Loop, read or changed at a run-time
  position, a graph input of unknown length) is a **run-time list** (``ListType``, the
  ``list.*`` builtins of relay/op/sequence.py; TVM's frontend uses the prelude's List ADT for
  the same purpose). A tuple meets a list context through ``list.from_tuple``.
- an **optional** is its value when it holds one, and ``EMPTY_OPTIONAL`` when it is known to be
  empty: whether an optional holds a value is fixed at import time (a graph input's presence
  is part of what the model is imported for, as its shapes are). An If whose branches differ
  in presence gives a ``RuntimeOptional`` (a presence flag and the value, or a placeholder of
  its type), which OptionalHasElement / OptionalGetElement and the graph outputs read.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...expr import RelayExpr, Tuple, TupleGetItem, const
from ...op import sequence as seq
from ...op import tensor, transform
from ...ty import ListType, TensorType, TupleType, type_str
from .context import EMPTY_OPTIONAL, ImportContext, RuntimeOptional, shape_of
from .control import _as_list, _run_graph, _scope, type_of
from .registry import Attrs, Inputs, Names, Output, converter


def _fields(e: RelayExpr) -> list[RelayExpr] | None:
    """The elements of a static sequence, or None for a run-time list."""
    t = type_of(e)
    if isinstance(t, TupleType):
        if isinstance(e, Tuple):
            return list(e.fields)
        return [TupleGetItem(e, k) for k in range(len(t.fields))]
    if isinstance(t, ListType):
        return None
    raise TypeError(f"expected a sequence, got {type_str(t)}")


def _seq_arg(ctx: ImportContext, e: Any, what: str = "input_sequence") -> list | None:
    if e is None or e is EMPTY_OPTIONAL:
        raise ctx.fail(f"{what} is missing")
    try:
        return _fields(e)
    except TypeError as err:
        raise ctx.fail(f"{what}: {err}") from None


def _known_pos(ctx: ImportContext, names: Names, k: int) -> int | None:
    if len(names) <= k or not names[k]:
        return None
    if names[k] not in ctx.values:
        return None
    return int(np.asarray(ctx.values[names[k]]).reshape(-1)[0])


def _check_pos(ctx: ImportContext, p: int, n: int, inclusive: bool) -> int:
    hi = n if inclusive else n - 1
    q = p + n if p < 0 else p
    if not 0 <= q <= hi:
        raise ctx.fail(f"position {p} is out of range for a sequence of {n} tensors "
                       f"(valid: {-n} .. {hi})")
    return q


def _pos_expr(ctx: ImportContext, e: RelayExpr) -> RelayExpr:
    t = type_of(e)
    if not isinstance(t, TensorType) or not t.dtype.startswith("int"):
        raise ctx.fail(f"position must be an integer scalar, got {type_str(t)}")
    return e


@converter("SequenceConstruct")
def _construct(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    dts = {type_of(x).dtype for x in inputs if x is not None}
    if len(dts) > 1:
        raise ctx.fail(f"inputs have different dtypes {sorted(dts)}")
    return Tuple([x for x in inputs if x is not None])


@converter("SequenceEmpty")
def _empty(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    # a static empty tuple: inserts at known positions keep it static; a Loop that grows it
    # makes it a list (of the inserted tensors' dtype)
    return Tuple([])


@converter("SequenceLength")
def _length(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    fs = _seq_arg(ctx, inputs[0])
    return const(np.int64(len(fs))) if fs is not None else seq.length(inputs[0])


@converter("SequenceAt")
def _at(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    fs = _seq_arg(ctx, inputs[0])
    p = _known_pos(ctx, names, 1)
    if fs is not None and p is not None:
        return fs[_check_pos(ctx, p, len(fs), False)]
    lst = _as_list(inputs[0])
    if isinstance(type_of(lst), ListType) and type_of(lst).elem is None:
        raise ctx.fail("reads an element of an empty sequence")
    return seq.at(lst, _pos_expr(ctx, inputs[1]))


@converter("SequenceInsert")
def _insert(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    fs = _seq_arg(ctx, inputs[0])
    x = inputs[1]
    st = type_of(inputs[0])
    dt = st.dtype if isinstance(st, ListType) else (st.fields[0].dtype if st.fields else None)
    if dt is not None and type_of(x).dtype != dt:
        raise ctx.fail(f"tensor dtype {type_of(x).dtype} differs from the sequence's {dt}")
    has_pos = len(names) > 2 and bool(names[2])
    p = _known_pos(ctx, names, 2)
    if fs is not None and (not has_pos or p is not None):
        q = len(fs) if not has_pos else _check_pos(ctx, p, len(fs), True)  # type: ignore[arg-type]
        return Tuple(fs[:q] + [x] + fs[q:])
    return seq.insert(_as_list(inputs[0]), x, _pos_expr(ctx, inputs[2]) if has_pos else None)


@converter("SequenceErase")
def _erase(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    fs = _seq_arg(ctx, inputs[0])
    has_pos = len(names) > 1 and bool(names[1])
    p = _known_pos(ctx, names, 1)
    if fs is not None and (not has_pos or p is not None):
        if not fs:
            raise ctx.fail("erases from an empty sequence")
        q = len(fs) - 1 if not has_pos else _check_pos(ctx, p, len(fs), False)  # type: ignore[arg-type]
        return Tuple(fs[:q] + fs[q + 1:])
    return seq.erase(_as_list(inputs[0]), _pos_expr(ctx, inputs[1]) if has_pos else None)


@converter("ConcatFromSequence")
def _concat(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    axis, new_axis = int(attrs["axis"]), bool(attrs.get("new_axis", 0))
    fs = _seq_arg(ctx, inputs[0])
    if fs is None:
        return seq.concat(inputs[0], axis, new_axis)
    if not fs:
        raise ctx.fail("concatenates an empty sequence")
    r = len(shape_of(fs[0])) + (1 if new_axis else 0)
    if not -r <= axis < r:
        raise ctx.fail(f"axis {axis} is out of range for rank {r}")
    if new_axis:
        return tensor.stack(fs, axis % r)
    return transform.concatenate(fs, axis % r)


@converter("SplitToSequence")
def _split_to_sequence(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names
                       ) -> Output:
    x = inputs[0]
    shp = shape_of(x)
    axis = int(attrs.get("axis", 0))
    if not -len(shp) <= axis < len(shp):
        raise ctx.fail(f"axis {axis} is out of range for rank {len(shp)}")
    axis %= len(shp)
    n = shp[axis]
    keepdims = bool(attrs.get("keepdims", 1))
    given = len(names) > 1 and bool(names[1])
    if not isinstance(n, int) or (given and names[1] not in ctx.values):
        # sizes known only at run time: a run-time list
        return seq.split(x, inputs[1] if given else None, axis, keepdims or given)
    if given:
        split = np.asarray(ctx.value(names[1], "split")).astype(np.int64)
        if split.ndim == 0:
            c = int(split)
            if c <= 0:
                raise ctx.fail(f"split {c} must be positive")
            sizes = [c] * (n // c) + ([n % c] if n % c else [])
        else:
            sizes = [int(v) for v in split]
            if sum(sizes) != n or any(v < 0 for v in sizes):
                raise ctx.fail(f"split {sizes} does not add up to the axis size {n}")
        keepdims = True  # ONNX: keepdims is ignored when split is given
    else:
        sizes = [1] * n
    idx = list(np.cumsum(sizes)[:-1])
    parts = [x] if len(sizes) == 1 else list(transform.split(x, idx, axis))
    if not keepdims:
        parts = [transform.squeeze(p, [axis]) for p in parts]
    return Tuple(parts)


@converter("SequenceMap")
def _sequence_map(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    body = attrs["body"]
    seqs = [(k, _fields(x)) for k, x in enumerate(inputs)
            if isinstance(type_of(x), (TupleType, ListType))]
    if any(fs is None for _, fs in seqs):
        return _sequence_map_loop(ctx, inputs, body)
    lens = {len(fs) for _, fs in seqs}  # type: ignore[arg-type]
    if len(lens) != 1:
        raise ctx.fail(f"the input sequences have different lengths {sorted(lens)}")
    n = lens.pop()
    by_k = dict(seqs)
    outs: list[list[RelayExpr]] = [[] for _ in body.output]
    for i in range(n):
        with _scope(ctx):
            for k, x in enumerate(inputs):
                ctx.bind(body.input[k].name, by_k[k][i] if k in by_k else x)  # type: ignore[index]
            res = _run_graph(ctx, body)
        for j, r in enumerate(res):
            outs[j].append(r)
    return [Tuple(o) for o in outs]


def _sequence_map_loop(ctx: ImportContext, inputs: Inputs, body: Any) -> Output:
    """SequenceMap over run-time lists: a loop over the positions of the first sequence; the
    body's outputs are appended to run-time lists."""
    from .control import while_loop

    is_seq = [isinstance(type_of(x), (TupleType, ListType)) for x in inputs]
    ins = [_as_list(x) if q else x for x, q in zip(inputs, is_seq)]
    n = seq.length(ins[0])
    dts = []
    with _scope(ctx):  # the output dtypes: the body on the first elements
        for k, x in enumerate(ins):
            ctx.bind(body.input[k].name, seq.at(x, const(np.int64(0))) if is_seq[k] else x)
        dts = [type_of(r).dtype for r in _run_graph(ctx, body)]
    k_out = len(body.output)

    def step(it: RelayExpr, vs: list) -> list:
        outs, xs = vs[:k_out], vs[k_out:]
        with _scope(ctx):
            for k, x in enumerate(xs):
                ctx.bind(body.input[k].name, seq.at(x, it) if is_seq[k] else x)
            res = _run_graph(ctx, body)
        return [seq.insert(o, r) for o, r in zip(outs, res)] + xs

    final = while_loop(ctx, n, [seq.empty(dt) for dt in dts] + ins, step, "sequence_map")
    return final[:k_out]


@converter("Optional")
def _optional(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    if inputs and inputs[0] is not None:
        return inputs[0]
    return EMPTY_OPTIONAL


@converter("OptionalHasElement")
def _has_element(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    if inputs and isinstance(inputs[0], RuntimeOptional):
        return inputs[0].has
    present = bool(inputs) and inputs[0] is not None and inputs[0] is not EMPTY_OPTIONAL
    return const(np.bool_(present))


@converter("OptionalGetElement")
def _get_element(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    if not inputs or inputs[0] is None or inputs[0] is EMPTY_OPTIONAL:
        raise ctx.fail("the optional is empty (it holds no value)")
    if isinstance(inputs[0], RuntimeOptional):  # (its placeholder when empty at run time)
        return inputs[0].value
    return inputs[0]
