"""ONNX If, Loop and Scan.

- If: a condition known at import time (it often tests a shape or an attribute) converts the
  chosen branch in place; otherwise both branches become a ``relay.If`` (their outputs may
  differ in sizes: type inference gives ``?`` where they do).
- Loop: a recursive global function ``@loop_N`` of the module (TVM's ONNX frontend design):
  ``(iter, cond, trip_count, loop-carried..., scan accumulators..., outer tensors...)`` ->
  ``(loop-carried..., scan outputs...)``; it tests ``iter < trip_count and cond``, runs the
  body and calls itself with the body's results, else returns what it was given. The body's
  outer-scope tensors are passed in as parameters (the function is closed). A loop-carried
  value whose shape changes between iterations is typed with ``?`` there (found by converting
  the body until the types stop changing); scan outputs are stacked on a new first axis, one
  row per iteration (as onnxruntime does).
- Scan (opset 9+): unrolled over a static length (each iteration converts the body: the
  kernels stay static and fuse); a scan axis known only at run time runs as a loop whose
  function takes the scan inputs' rows at the iteration number. Scan-8 (a batch axis first):
  unrolled per batch row.
- ``while_loop``: the same recursion for loops built in relay directly (RNNs over a run-time
  sequence length, SequenceMap over run-time lists).

Subgraph bodies read outer-scope tensors by name, as ONNX scoping allows; names a body defines
are local to it.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...expr import (
    Call,
    Constant,
    Function,
    GlobalVar,
    If,
    RelayExpr,
    Tuple,
    TupleGetItem,
    const,
    var,
)
from ...op import reduce as _reduce
from ...op import sequence as seq
from ...op import tensor, transform
from ...ty import Any as AnyDim
from ...ty import ListType, TensorType, TupleType, Type, type_str
from ...type_infer import infer_type, unify
from .context import EMPTY_OPTIONAL, ImportContext, RuntimeOptional, shape_of
from .importer import convert_nodes
from .registry import Attrs, Inputs, Names, Output, converter

_loop_ids = itertools.count()


@contextlib.contextmanager
def _scope(ctx: ImportContext) -> Iterator[None]:
    """Names bound inside (a subgraph's) are forgotten after."""
    exprs, values, node = dict(ctx.exprs), dict(ctx.values), ctx.node
    try:
        yield
    finally:
        ctx.exprs, ctx.values, ctx.node = exprs, values, node


def _run_graph(ctx: ImportContext, g: Any) -> list[RelayExpr]:
    from onnx import numpy_helper

    node = ctx.node
    for init in g.initializer:
        ctx.bind(init.name, const(numpy_helper.to_array(init)))
    convert_nodes(ctx, list(g.node), ctx.opset)
    ctx.node = node
    missing = [o.name for o in g.output if o.name not in ctx.exprs]
    if missing:
        raise ctx.fail(f"subgraph outputs {missing} are not computed by its nodes")
    return [ctx.exprs[o.name] for o in g.output]


def free_names(g: Any) -> list[str]:
    """The outer-scope tensors graph ``g`` (and its nested subgraphs) reads, in first-read order."""
    defined = {i.name for i in g.input} | {t.name for t in g.initializer}
    out: list[str] = []
    for node in g.node:
        reads = [nm for nm in node.input if nm]
        for at in node.attribute:
            if at.HasField("g"):
                reads += free_names(at.g)
        out += [nm for nm in reads if nm not in defined and nm not in out]
        defined |= {o for o in node.output if o}
    return out


def type_of(e: Any) -> Type:
    return infer_type(e).checked_type


def _scalar(ctx: ImportContext, e: RelayExpr, dtype: str, what: str) -> RelayExpr:
    """A one-element tensor as a scalar of ``dtype``."""
    t = type_of(e)
    if not isinstance(t, TensorType) or any(d != 1 for d in t.shape):
        raise ctx.fail(f"{what} must be a scalar (or a 1-element tensor), got "
                       f"{type_str(t)}")
    if t.shape:
        e = transform.reshape(e, ())
    return e if t.dtype == dtype else transform.cast(e, dtype)


def _as_list(e: RelayExpr) -> RelayExpr:
    t = type_of(e)
    if isinstance(t, TupleType):
        dt = t.fields[0].dtype if t.fields else "float32"
        return seq.from_tuple(e, dt)
    return e


def _join(ctx: ImportContext, a: Type, b: Type, what: str) -> Type:
    """The type of a value that is ``a`` or ``b`` (a branch's, an iteration's): sizes that
    differ become ``?``; sequences of different lengths become run-time lists."""
    u = unify(a, b)
    if u is not None:
        return u
    if isinstance(a, (TupleType, ListType)) and isinstance(b, (TupleType, ListType)):
        elems = []
        for t in (a, b):
            elems += list(t.fields) if isinstance(t, TupleType) else (
                [t.elem] if t.elem is not None else [])
        dts = {t.dtype for t in elems} | {t.dtype for t in (a, b) if isinstance(t, ListType)}
        if len(dts) <= 1:
            elem = None
            for t in elems:
                elem = t if elem is None else unify(elem, t)
                if elem is None:
                    break
            else:
                return ListType(elem, dts.pop() if dts else "float32")
    raise ctx.fail(f"{what}: types {type_str(a)} and {type_str(b)} cannot be joined (only "
                   "sizes and sequence lengths may differ)")


def _coerce(e: RelayExpr, t: Type) -> RelayExpr:
    """``e`` as a value of type ``t`` (a static sequence where a list is expected: of the
    list's element type, which for an empty sequence comes from what the loop puts in it)."""
    if isinstance(t, ListType) and isinstance(type_of(e), TupleType):
        return seq.from_tuple(e, t.dtype)
    return _as_list(e) if isinstance(t, ListType) else e


def _is_empty_optional(e: Any) -> bool:
    return e is EMPTY_OPTIONAL


def axis_length(x: RelayExpr, axis: int) -> RelayExpr:
    """The run-time size of ``x``'s axis (an int64 scalar): the other axes taken at 0, the rest
    counted (no shape operator is needed; ``x`` must not be empty along the other axes)."""
    r = len(shape_of(x))
    y = x
    for k in reversed(range(r)):
        if k != axis % r:
            y = transform.take(y, const(np.int64(0)), axis=k)
    return _reduce.sum(tensor.ones_like(transform.cast(y, "int64")))


def while_loop(ctx: ImportContext, n: RelayExpr, init: list[RelayExpr], step: Any,
               name: str = "loop") -> list[RelayExpr]:
    """``for it in range(n): states = step(it, states)`` as a recursive global function;
    ``step(it, vars) -> new states`` builds relay from the states' Vars and constants only
    (anything else it needs is one more state). Returns the final states."""
    from ...analysis import free_vars

    types = [type_of(v) for v in init]
    it = var("iter", TensorType((), "int64"))
    nv = var("n", TensorType((), "int64"))
    for _ in range(8):  # until the states' types cover every iteration's (sizes -> ?)
        vs = [var(f"s{k}", t) for k, t in enumerate(types)]
        new = step(it, vs)
        joined = [_join(ctx, t, type_of(e), f"{name}: state {k}")
                  for k, (t, e) in enumerate(zip(types, new))]
        if all(a is b for a, b in zip(joined, types)):
            break
        types = joined
    else:
        raise ctx.fail(f"{name}: the state types do not settle")
    gv = GlobalVar(f"{name}_{next(_loop_ids)}")
    fn = Function([it, nv] + vs,
                  If(tensor.less(it, nv),
                     Call(gv, [tensor.add(it, const(np.int64(1))), nv] + list(new)), Tuple(vs)),
                  ret_type=TupleType(types))
    stray = [v.name_hint for v in free_vars(fn)]
    if stray:
        raise ctx.fail(f"{name}: the loop body reads outer values {stray}")
    ctx.mod[gv] = fn
    call = Call(gv, [const(np.int64(0)), _scalar(ctx, n, "int64", "the trip count")] + init)
    infer_type(call, ctx.mod)
    return [TupleGetItem(call, k) for k in range(len(init))]


def append_step(acc: RelayExpr, it: RelayExpr, x: RelayExpr, front: bool = False
                ) -> RelayExpr:
    """``acc`` with ``x`` added as a new last (first, when ``front``) entry of axis 0; at
    iteration 0 ``x`` alone (``acc`` then is a placeholder)."""
    step = transform.expand_dims(x, 0)
    both = [step, acc] if front else [acc, step]
    return If(tensor.equal(it, const(np.int64(0))), step, transform.concatenate(both, 0))


def empty_rows(row: RelayExpr) -> RelayExpr:
    """A placeholder for rows shaped like ``row`` stacked on a new axis 0: 0 rows of ``row``'s
    shape. With symbolic sizes (a run-time batch) it is sliced from ``row`` itself, so it has
    the same symbolic dimensions, not 0s that the first concatenation could not unify."""
    t = type_of(row)
    if all(isinstance(d, int) for d in t.shape):
        return const(np.zeros([0, *t.shape], t.dtype))
    return transform.strided_slice(transform.expand_dims(row, 0), [0], [0], axes=[0])


@converter("If")
def _if(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    then_g, else_g = attrs["then_branch"], attrs["else_branch"]
    if names[0] in ctx.values:
        cond = np.asarray(ctx.values[names[0]])
        with _scope(ctx):
            outs = _run_graph(ctx, then_g if bool(cond.reshape(-1)[0]) else else_g)
        return outs
    c = _scalar(ctx, inputs[0], "bool", "the condition")
    with _scope(ctx):
        t_outs = _run_graph(ctx, then_g)
    with _scope(ctx):
        e_outs = _run_graph(ctx, else_g)
    if len(t_outs) != len(e_outs):
        raise ctx.fail(f"the branches have {len(t_outs)} and {len(e_outs)} outputs")
    ts: list[RelayExpr] = []
    es: list[RelayExpr] = []
    slots: list[tuple[str, int]] = []  # per output: ("empty"|"value"|"optional", first field)
    for k, (a, b) in enumerate(zip(t_outs, e_outs)):
        what = f"output {k} of the branches"
        if _is_empty_optional(a) and _is_empty_optional(b):
            slots.append(("empty", -1))
            continue
        if any(_is_empty_optional(x) or isinstance(x, RuntimeOptional) for x in (a, b)):
            # present in one branch only: a presence flag and the value (or a placeholder)
            (ha, va), (hb, vb) = _optional_pair(a, b), _optional_pair(b, a)
            t = _join(ctx, type_of(va), type_of(vb), what)
            slots.append(("optional", len(ts)))
            ts += [ha, _coerce(va, t)]
            es += [hb, _coerce(vb, t)]
            continue
        t = _join(ctx, type_of(a), type_of(b), what)
        slots.append(("value", len(ts)))
        ts.append(_coerce(a, t))
        es.append(_coerce(b, t))
    if not ts:
        return [EMPTY_OPTIONAL] * len(slots)
    res = If(c, ts[0], es[0]) if len(ts) == 1 else If(c, Tuple(ts), Tuple(es))

    def field(i: int) -> RelayExpr:
        return res if len(ts) == 1 else TupleGetItem(res, i)

    return [EMPTY_OPTIONAL if kind == "empty" else field(i) if kind == "value"
            else RuntimeOptional(field(i), field(i + 1)) for kind, i in slots]


def _placeholder(t: Type) -> RelayExpr:
    """A value of type ``t`` (zeros; 0 for the unknown sizes; an empty list) standing for the
    value of an optional that is empty."""
    if isinstance(t, TensorType):
        return const(np.zeros([d if isinstance(d, int) else 0 for d in t.shape], t.dtype))
    if isinstance(t, TupleType):
        return Tuple([_placeholder(f) for f in t.fields])
    if isinstance(t, ListType):
        return seq.from_tuple(Tuple([]), t.dtype)
    raise TypeError(f"no placeholder for {type_str(t)}")


def _optional_pair(x: Any, other: Any) -> tuple[RelayExpr, RelayExpr]:
    """(presence, value) of branch output ``x`` (``other``: the other branch's output, whose
    type an empty optional's placeholder takes)."""
    if isinstance(x, RuntimeOptional):
        return x.has, x.value
    if _is_empty_optional(x):
        v = other.value if isinstance(other, RuntimeOptional) else other
        return const(np.bool_(False)), _placeholder(type_of(v))
    return const(np.bool_(True)), x


def _outer_params(ctx: ImportContext, g: Any) -> list[tuple[str, Any]]:
    """The outer tensors body ``g`` reads that become parameters of its function (the others
    are constants, used as they are): (name, value) pairs."""
    params = []
    for nm in free_names(g):
        if nm not in ctx.exprs:
            continue  # a name bound later inside the body (the body reports it if not)
        e = ctx.exprs[nm]
        if isinstance(e, Constant) or _is_empty_optional(e):
            continue
        if isinstance(e, RuntimeOptional):
            raise ctx.fail(f"the body reads {nm!r}, an optional whose presence is known only "
                           "at run time (not supported inside a Loop/Scan body)")
        params.append((nm, e))
    return params


def build_loop(ctx: ImportContext, body: Any, trip: RelayExpr | None, cond: RelayExpr | None,
               init: list[RelayExpr], n_scan: int, what: str = "Loop",
               scan_xs: list[RelayExpr] | None = None
               ) -> tuple[list[RelayExpr], list[RelayExpr]]:
    """A recursive function running ONNX loop body ``body`` (inputs: iteration number,
    condition, the loop-carried values; outputs: condition, loop-carried values, scan
    outputs); returns the final loop-carried values and the scan outputs (each the
    iteration's outputs stacked on a new first axis). With ``scan_xs`` it is a Scan body
    (inputs: the states, then one row of each of ``scan_xs`` per iteration, along axis 0;
    outputs: the states, then the scan outputs)."""
    n = len(init)
    m = len(scan_xs or [])
    head = 0 if scan_xs is not None else 2  # iteration number and condition inputs
    if len(body.input) != n + head + m or len(body.output) != n + (head > 0) + n_scan:
        raise ctx.fail(f"the body has {len(body.input)} inputs and {len(body.output)} outputs "
                       f"for {n} loop-carried values")
    for k, v in enumerate(init):
        if _is_empty_optional(v):
            raise ctx.fail(f"loop-carried value {k} is an empty optional (not supported)")
    outer = _outer_params(ctx, body)
    outer += [(f"__scan_input{k}", x) for k, x in enumerate(scan_xs or [])]
    types = [type_of(v) for v in init]
    i64 = TensorType((), "int64")
    for _ in range(16):
        it = var("iter", i64)
        cv = var("cond", TensorType((), "bool"))
        vs = [var(body.input[head + k].name or f"v{k}", t) for k, t in enumerate(types)]
        ov = [var(nm, type_of(e)) for nm, e in outer]
        with _scope(ctx):
            if head:
                ctx.bind(body.input[0].name, it)
                ctx.bind(body.input[1].name, cv)
            for k in range(n):
                ctx.bind(body.input[head + k].name, vs[k])
            for (nm, _), v in zip(outer, ov):
                ctx.bind(nm, v)
            for k, xv in enumerate(ov[len(ov) - m:]):
                ctx.bind(body.input[n + k].name, transform.take(xv, it, axis=0))
            outs = _run_graph(ctx, body)
        if not head:
            outs = [cv] + outs
        if any(_is_empty_optional(o) for o in outs):
            raise ctx.fail("a body output is an empty optional (not supported)")
        new = [_join(ctx, t, type_of(o), f"loop-carried value {k} "
                     f"({body.input[head + k].name!r})")
               for k, (t, o) in enumerate(zip(types, outs[1:1 + n]))]
        if all(a is b for a, b in zip(new, types)):
            break
        types = new
    else:
        raise ctx.fail("the loop-carried types do not settle")
    scan_vals = outs[1 + n:]
    scan_t = []
    for k, s in enumerate(scan_vals):
        st = type_of(s)
        if not isinstance(st, TensorType):
            raise ctx.fail(f"scan output {k} is not a tensor ({type_str(st)})")
        scan_t.append(TensorType([AnyDim("iters")] + [d if isinstance(d, int) else AnyDim()
                                                      for d in st.shape], st.dtype))
    accs = [var(f"scan{k}", t) for k, t in enumerate(scan_t)]
    mv = var("trip_count", i64)
    go = cv if trip is None else tensor.logical_and(cv, tensor.less(it, mv))
    new_accs = []
    for s, a in zip(scan_vals, accs):
        step = transform.expand_dims(s, 0)
        new_accs.append(If(tensor.equal(it, const(np.int64(0))), step,
                           transform.concatenate([a, step], 0)))
    next_cond = cv if cond is None else _scalar(ctx, outs[0], "bool", "the body's condition")
    gv = GlobalVar(f"loop_{next(_loop_ids)}")
    carried = [_coerce(o, t) for o, t in zip(outs[1:1 + n], types)]
    again = Call(gv, [tensor.add(it, const(np.int64(1))), next_cond, mv] + carried + new_accs
                 + ov)
    done = Tuple(vs + accs)
    ret = TupleType(types + scan_t)
    fn = Function([it, cv, mv] + vs + accs + ov, If(go, again, done), ret_type=ret)
    ctx.mod[gv] = fn
    start = [const(np.int64(0)),
             const(np.bool_(True)) if cond is None else _scalar(ctx, cond, "bool", "cond"),
             const(np.int64(0)) if trip is None else _scalar(ctx, trip, "int64", "M")]
    empties = [const(np.zeros([0] + [d if isinstance(d, int) else 0 for d in t.shape[1:]],
                              t.dtype)) for t in scan_t]
    call = Call(gv, start + [_coerce(v, t) for v, t in zip(init, types)] + empties
                + [e for _, e in outer])
    try:
        infer_type(call, ctx.mod)
    except TypeError as e:
        raise ctx.fail(f"{what} body: {e}") from None
    res = [TupleGetItem(call, k) for k in range(n + n_scan)]
    return res[:n], res[n:]


@converter("Loop")
def _loop(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    trip = inputs[0] if len(names) > 0 and names[0] else None
    cond = inputs[1] if len(names) > 1 and names[1] else None
    if trip is None and cond is None:
        raise ctx.fail("neither a trip count nor a condition: the loop would not end")
    body = attrs["body"]
    init = list(inputs[2:])
    n_scan = len(body.output) - 1 - len(init)
    carried, scans = build_loop(ctx, body, trip, cond, init, n_scan)
    return carried + scans


@converter("Scan")
def _scan(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    if ctx.opset < 9:
        return _scan8(ctx, inputs, attrs, names)
    body = attrs["body"]
    M = int(attrs["num_scan_inputs"])
    N = len(body.input) - M
    K = len(body.output) - N
    states, xs = list(inputs[:N]), list(inputs[N:])
    in_axes = [int(v) % len(shape_of(x)) for v, x in zip(attrs.get("scan_input_axes", [0] * M), xs)]
    in_dirs = list(attrs.get("scan_input_directions", [0] * M))
    out_axes = list(attrs.get("scan_output_axes", [0] * K))
    out_dirs = list(attrs.get("scan_output_directions", [0] * K))
    lengths = [shape_of(x)[ax] for x, ax in zip(xs, in_axes)]
    static = {d for d in lengths if isinstance(d, int)}
    if len(static) > 1:
        raise ctx.fail(f"scan inputs have different lengths {sorted(static)}")
    if len(static) == 1 and len(set(map(str, lengths))) == 1:
        return _scan_unrolled(ctx, body, states, xs, in_axes, in_dirs, out_axes, out_dirs,
                              static.pop())
    return _scan_loop(ctx, body, states, xs, in_axes, in_dirs, out_axes, out_dirs)


def _scan8(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    """Scan-8: a batch axis first (states (batch, ...), scan inputs (batch, seq, ...)), an
    optional sequence_lens: each batch row scanned as Scan-9 does, the results stacked."""
    body = attrs["body"]
    M = int(attrs["num_scan_inputs"])
    N = len(body.input) - M
    states, xs = list(inputs[1:1 + N]), list(inputs[1 + N:])
    dirs = list(attrs.get("directions", [0] * M))
    B, T = (shape_of(xs[0]) + [None, None])[:2]
    if not isinstance(B, int) or not isinstance(T, int):
        raise ctx.fail(f"Scan-8 needs a static batch and sequence length, got {B} and {T}")
    if names[0]:
        lens = np.asarray(ctx.value(names[0], "sequence_lens")).reshape(-1)
        if not np.all(lens == T):
            raise ctx.fail(f"sequence_lens {lens.tolist()} shorter than the sequence ({T}) "
                           "are not supported")
    rows = []
    for b in range(B):
        ib = const(np.int64(b))
        rows.append(_scan_unrolled(
            ctx, body, [transform.take(s, ib, axis=0) for s in states],
            [transform.take(x, ib, axis=0) for x in xs], [0] * M, dirs,
            [0] * (len(body.output) - N), [0] * (len(body.output) - N), T))
    return [tensor.stack([r[k] for r in rows], 0) for k in range(len(rows[0]))]


def _scan_unrolled(ctx: ImportContext, body: Any, states: list, xs: list, in_axes: list,
                   in_dirs: list, out_axes: list, out_dirs: list, T: int) -> Output:
    N, M = len(states), len(xs)
    K = len(body.output) - N
    outs: list[list[RelayExpr]] = [[] for _ in range(K)]
    for t in range(T):
        with _scope(ctx):
            for j in range(N):
                ctx.bind(body.input[j].name, states[j])
            for m in range(M):
                k = t if not in_dirs[m] else T - 1 - t
                sl = transform.take(xs[m], const(np.int64(k)), axis=in_axes[m])
                ctx.bind(body.input[N + m].name, sl)
            res = _run_graph(ctx, body)
        states = res[:N]
        for k in range(K):
            outs[k].append(res[N + k])
    stacked = []
    for k in range(K):
        seq_ = outs[k][::-1] if out_dirs[k] else outs[k]
        r = len(shape_of(seq_[0])) + 1
        stacked.append(tensor.stack(seq_, int(out_axes[k]) % r))
    return states + stacked


def _scan_loop(ctx: ImportContext, body: Any, states: list, xs: list, in_axes: list,
               in_dirs: list, out_axes: list, out_dirs: list) -> Output:
    """A Scan whose length is known only at run time, as a Loop over a synthesized body: the
    scan inputs (moved to axis 0, reversed where scanned backwards) are outer tensors read at
    the iteration number."""
    N = len(states)
    K = len(body.output) - N
    prepared = []
    for m, x in enumerate(xs):
        r = len(shape_of(x))
        if in_axes[m]:
            perm = [in_axes[m]] + [d for d in range(r) if d != in_axes[m]]
            x = transform.transpose(x, perm)
        if in_dirs[m]:
            x = transform.reverse(x, 0)
        prepared.append(x)
    trip = axis_length(prepared[0], 0)
    final, scans = build_loop(ctx, body, trip, None, states, K, "Scan", scan_xs=prepared)
    outs = []
    for k, s in enumerate(scans):
        if out_dirs[k]:
            s = transform.reverse(s, 0)
        r = len(shape_of(s))
        ax = int(out_axes[k]) % r
        if ax:
            perm = list(range(1, ax + 1)) + [0] + list(range(ax + 1, r))
            s = transform.transpose(s, perm)
        outs.append(s)
    return final + outs
