"""FuseAttention: the scaled dot-product attention chain of an exported transformer as one
``nn.attention`` call (relay/op/nn_attention.py), whose x86 kernel computes the scores per block
of query rows instead of writing the whole ``[batch * heads, M, N]`` score tensor and reading it
back twice (softmax, then the product with V).

What it does
Matched, from the product with V backwards (every intermediate used once, float32/float64)::

    s = nn.batch_matmul(q, k, transpose_b=tb)          # q [B, M, D]; k [B, N, D] / [B, D, N]
    ... multiply / divide by scalar constants, add a bias (any number, in any order: a mask,
        T5's relative position bias, Swin's window bias and shift mask), reshapes of the
        scores that keep their last two axes (the 3-D product seen as [G, H, M, N], Swin's
        [G1, G2, H, M, N]), casts to the same dtype ...
    p = nn.softmax(., axis=-1)  (+ reshapes / same-dtype casts)
    out = nn.batch_matmul(p, v, transpose_b=False)     # v [B, N, E]

When valid
A bias must broadcast against the view it is added in and be expressible as a 4-D bias over
``[B / heads, heads, M, N]`` (``heads``: the last leading axes of the views that make the same
count); where a form does not fit (a scale that is not a scalar constant, a bias that varies
along merged axes, K's batch broadcast, an intermediate with another use), nothing changes.
Runs at opt_level 3 after SinkReshape, on CPU (llvm) targets: the generic schedule of
``nn.attention`` computes every stage whole.

Example
    before:  %0 = nn.batch_matmul(%q, %k, transpose_b=True); %1 = multiply(%0, 0.25f);
             %2 = nn.softmax(add(%1, %mask), axis=-1); nn.batch_matmul(%2, %v, transpose_b=False)
    after:   nn.attention(%q, %k, %v, reshape(%mask, newshape=[4, 1, 8, 8]), scale=0.25)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..expr import Call, Constant, Function, RelayExpr
from ..op import transform as _tr
from ..op.nn_attention import attention
from ..op.registry import Op, make_call
from ..ty import TensorType, dim_equal
from ..visitor import ExprMutator
from .pass_infra import FunctionPass
from .sink_reshape import _use_counts

__all__ = ["FuseAttention"]

_DTYPES = ("float32", "float64")


def _name(e: Any) -> str | None:
    return e.op.name if isinstance(e, Call) and isinstance(e.op, Op) else None


def _dims(e: Any) -> tuple | None:
    t = getattr(e, "_checked_type", None)
    if not isinstance(t, TensorType):
        return None
    return tuple(getattr(d, "value", d) for d in t.shape)


def _dtype(e: Any) -> str | None:
    t = getattr(e, "_checked_type", None)
    return t.dtype if isinstance(t, TensorType) else None


def _scalar(e: Any) -> float | None:
    """The value of a constant with one element, else None."""
    if not isinstance(e, Constant):
        return None
    a = e.data.numpy()
    return float(a.reshape(())) if a.size == 1 else None


def _same(a: Any, b: Any) -> bool:
    """Provably the same size (a run-time ``Any`` only equals itself)."""
    return a is b or dim_equal(a, b)


def _one(d: Any) -> bool:
    """Statically 1 (a run-time ``Any`` may be 1 too, but is not known to be)."""
    return isinstance(d, int) and d == 1


def _same_shape(a: tuple | None, b: tuple | None) -> bool:
    return a is not None and b is not None and len(a) == len(b) and all(
        _same(x, y) for x, y in zip(a, b))


def _split_heads(view: tuple, bias: tuple, heads: int) -> tuple | None:
    """``bias`` (right-aligned against ``view``, whose last two axes are the scores' M, N) as a
    4-D shape over ``[B / heads, heads, M, N]``, else None. The view's leading axes are split
    into two groups, the second of ``heads`` elements; each group's bias axes must be all 1
    (broadcast) or all equal to the view's (view axes of static size 1 are ignored)."""
    lead_v, lead_b = list(view[:-2]), list(bias[:-2])
    if len(lead_b) > len(lead_v):
        if not all(_one(d) for d in lead_b[:len(lead_b) - len(lead_v)]):
            return None
        lead_b = lead_b[len(lead_b) - len(lead_v):]
    lead_b = [1] * (len(lead_v) - len(lead_b)) + lead_b

    def merged(vs: list, bs: list) -> Any:
        keep = [(v, b) for v, b in zip(vs, bs) if not _one(v)]
        if all(_one(b) for _, b in keep):
            return 1
        if all(_same(v, b) for v, b in keep) and all(isinstance(v, int) for v, _ in keep):
            return math.prod(v for v, _ in keep)
        if len(keep) == 1 and _same(*keep[0]):
            return keep[0][1]  # one symbolic axis (a run-time batch) carried as is
        return None

    for p in range(len(lead_v), -1, -1):
        tail = lead_v[p:]
        if not all(isinstance(v, int) for v in tail) or math.prod(tail) != heads:
            continue
        g, h = merged(lead_v[:p], lead_b[:p]), merged(tail, lead_b[p:])
        if g is not None and h is not None:
            return (g, h, *bias[-2:])
    return None


def _unit_axes(have: tuple, want: tuple) -> list[int] | None:
    """The axes at which inserting unit axes into shape ``have`` gives ``want``, else None."""
    axes, i = [], 0
    for ax, d in enumerate(want):
        if i < len(have) and _same(have[i], d):
            i += 1
        elif _one(d):
            axes.append(ax)
        else:
            return None
    return axes if i == len(have) else None


def _reaches_product(e: Any, depth: int = 16) -> bool:
    """Whether ``e`` is a batch_matmul seen through at most ``depth`` chain ops."""
    for _ in range(depth):
        name = _name(e)
        if name == "nn.batch_matmul":
            return True
        if name not in ("reshape", "cast", "multiply", "divide", "add"):
            return False
        nxt = [a for a in e.args if not isinstance(a, Constant) and _same_shape(_dims(a), _dims(e))]
        if len(nxt) != 1:
            return False
        e = nxt[0]
    return False


class _Fuse(ExprMutator):
    def __init__(self, uses: dict[int, int]) -> None:
        super().__init__()
        self.uses = uses

    def _once(self, e: Any) -> bool:
        return self.uses.get(id(e), 0) == 1

    def visit_call(self, c: Call) -> RelayExpr:
        found = self._match(c)
        if found is None:
            return super().visit_call(c)
        return found

    def _match(self, pv: Call) -> RelayExpr | None:
        if _name(pv) != "nn.batch_matmul" or pv.attrs.transpose_a or pv.attrs.transpose_b:
            return None
        dtype = _dtype(pv)
        if dtype not in _DTYPES or pv.attrs.out_dtype not in ("", dtype):
            return None
        p, v = pv.args
        # back from the product with V to the softmax: reshapes and same-dtype casts
        e = p
        while _name(e) in ("reshape", "cast") and self._once(e):
            e = e.args[0]
        if _name(e) != "nn.softmax" or not self._once(e):
            return None
        rank = len(_dims(e) or ())
        if rank < 2 or int(e.attrs.axis) % rank != rank - 1:
            return None
        # the score chain, from the softmax back to the product Q K^T
        chain: list[Call] = []
        e = e.args[0]
        while _name(e) != "nn.batch_matmul":
            if not self._once(e) or _name(e) not in ("reshape", "cast", "multiply", "divide",
                                                      "add"):
                return None
            chain.append(e)
            e = self._score_arg(e)
            if e is None:
                return None
        qk = e
        if not self._once(qk) or qk.attrs.transpose_a or qk.attrs.out_dtype not in ("", dtype):
            return None
        q, k = qk.args
        qd, kd, vd, sd = _dims(q), _dims(k), _dims(v), _dims(qk)
        if None in (qd, kd, vd, sd) or _dtype(q) != dtype or _dtype(k) != dtype \
                or _dtype(v) != dtype:
            return None
        if not (_same(qd[0], kd[0]) and _same(qd[0], vd[0])):
            return None  # a broadcast batch: not this operator's
        m, n = sd[1], sd[2]
        heads = self._heads(chain, sd[0])
        if heads is None:
            return None
        k_transposed = not qk.attrs.transpose_b
        scale, biases = 1.0, []
        for op in reversed(chain):  # forward, from Q K^T to the softmax
            name = _name(op)
            view = _dims(op)
            if view is None or len(view) < 2 or not (_same(view[-2], m) and _same(view[-1], n)):
                return None
            if name in ("reshape", "cast"):
                if _dtype(op) != dtype:
                    return None
                continue
            other = self._other(op)
            if name in ("multiply", "divide"):
                c = _scalar(other)
                if c is None or c == 0.0 or name == "divide" and other is op.args[0]:
                    return None
                f = c if name == "multiply" else 1.0 / c
                scale *= f
                biases = [(self._scaled(b, f, dtype), shp, have) for b, shp, have in biases]
                continue
            bshape = _dims(other)
            if bshape is None or _dtype(other) != dtype or len(bshape) > len(view):
                return None
            b4 = _split_heads(view, (1,) * (len(view) - len(bshape)) + bshape, heads)
            if b4 is None:
                return None
            biases.append((other, b4, bshape))
        ok, bias = self._bias(biases)
        if not ok:
            return None
        untransposed = self._untransposed(k) if k_transposed else None
        if untransposed is not None:  # k as [B, N, D]: the transpose its export made, undone
            kv, factor = untransposed
            k_transposed, scale = False, scale * factor
        else:
            kv = self.visit(k)
        qv, qf = self._unscaled(q)
        vv = self.visit(v)
        return attention(qv, kv, vv, bias, scale * qf, k_transposed=k_transposed, heads=heads)

    def _unscaled(self, q: Any) -> tuple[Any, float]:
        """``(q', f)``: ``q`` with the scalar constant factors (multiply / divide) found along
        its chain of views (reshape / transpose, each used once) dropped, ``f`` their product
        (folded into the attention's scale, as ViT's Q scaled before its head split: the
        kernel that reads Q through the view would multiply every load). Else ``(q, 1)``."""
        ops: list[Call] = []  # the views on the way, outermost first
        e, factor = q, 1.0
        for _ in range(16):
            name = _name(e)
            if not self._once(e) or name not in ("reshape", "transpose", "multiply", "divide"):
                break
            if name in ("multiply", "divide"):
                a, b = e.args
                data, other = (b, a) if name == "multiply" and isinstance(a, Constant) else (a, b)
                c = _scalar(other)
                if c is None or c == 0.0 or not _same_shape(_dims(data), _dims(e)) \
                        or _dtype(data) != _dtype(e):
                    break
                factor *= c if name == "multiply" else 1.0 / c
            else:
                ops.append(e)
                data = e.args[0]
            e = data
        if factor == 1.0:
            return self.visit(q), 1.0
        out = self.visit(e)
        for op in reversed(ops):
            out = Call(op.op, [out], op.attrs)
        return out, factor

    def _untransposed(self, k: Any) -> tuple[Any, float] | None:
        """``(k', f)`` when ``k [B, D, N]`` is ``f * x`` transposed (``K^T`` as exports write
        it: a transpose of the projected keys whose last two axes are D, N, maybe a scalar
        constant factor and reshapes that keep the last two axes): ``k'`` is ``x`` as
        ``[B, N, D]`` (the same transpose with its last two axes swapped back, dropped when it
        is then the identity). The attention kernel transposes k per head (cheap, the
        head's keys are in cache) while the separate transpose kernel gathered each element
        from a whole [N, heads * D] projection row. Else None."""
        kd = _dims(k)
        if kd is None or not all(isinstance(x, int) for x in kd[1:]):
            return None
        d, n = kd[1], kd[2]
        e, factor = k, 1.0
        for _ in range(16):
            ed = _dims(e)
            if not self._once(e) or ed is None or len(ed) < 2 or not (
                    _same(ed[-2], d) and _same(ed[-1], n)):
                return None
            name = _name(e)
            if name == "reshape":
                e = e.args[0]
            elif name in ("multiply", "divide"):
                a, b = e.args
                data, other = (b, a) if name == "multiply" and isinstance(a, Constant) else (a, b)
                c = _scalar(other)
                if c is None or c == 0.0 or not _same_shape(_dims(data), ed):
                    return None
                factor *= c if name == "multiply" else 1.0 / c
                e = data
            elif name == "transpose":
                x = e.args[0]
                rank = len(ed)
                axes = e.attrs.axes
                perm = ([int(a) % rank for a in axes] if axes is not None
                        else list(range(rank))[::-1])
                back = perm[:-2] + [perm[-1], perm[-2]]
                xv = self.visit(x)
                if back != list(range(rank)):
                    xv = _tr.transpose(xv, back)
                return _tr.reshape(xv, [-1, n, d]), factor
            else:
                return None
        return None

    @staticmethod
    def _score_arg(e: Call) -> Any:
        """The argument of a chain op that carries the scores (the other is a constant or a
        bias): the first of a divide; of add / multiply the one of the op's own shape that is
        not a constant and leads back to a batch_matmul through chain ops."""
        if _name(e) in ("reshape", "cast"):
            return e.args[0]
        a, b = e.args
        if _name(e) == "divide":
            return a
        out = _dims(e)
        sides = [x for x in (a, b) if _same_shape(_dims(x), out) and not isinstance(x, Constant)]
        if len(sides) == 2:
            sides = [x for x in sides if _reaches_product(x)]
        return sides[0] if len(sides) == 1 else None

    def _other(self, op: Call) -> Any:
        a, b = op.args
        return b if self._score_arg(op) is a else a

    @staticmethod
    def _heads(chain: list[Call], batch: Any) -> int | None:
        """The head count: axis 1 of the first 4-D view of the scores, else 1."""
        for op in reversed(chain):
            d = _dims(op)
            if d is not None and len(d) == 4:
                return d[1] if isinstance(d[1], int) and d[1] > 0 else None
        return 1

    @staticmethod
    def _scaled(b: Any, f: float, dtype: str) -> Any:
        if isinstance(b, Constant):
            return Constant((b.data.numpy() * np.asarray(f, dtype)).astype(dtype))
        return make_call("multiply", [b, Constant(np.asarray(f, dtype))], {})

    def _bias(self, biases: list) -> tuple[bool, Any]:
        """(ok, one 4-D bias or None): the sum of every bias found, each reshaped to its 4-D
        form (constants folded here); not ok when a bias with a run-time axis would need more
        than axes prepended."""
        total = None
        for b, shape, have in biases:
            if all(isinstance(d, int) for d in shape):
                b4: Any = (Constant(b.data.numpy().reshape(shape)) if isinstance(b, Constant)
                           else _tr.reshape(self.visit(b), list(shape)))
            else:  # a run-time axis: the 4-D form by inserting unit axes, when it is that
                new_axes = _unit_axes(tuple(have), tuple(shape))
                if new_axes is None:
                    return False, None
                b4 = self.visit(b)
                for ax in new_axes:
                    b4 = _tr.expand_dims(b4, ax)
            if total is None:
                total = b4
            elif isinstance(total, Constant) and isinstance(b4, Constant):
                total = Constant(total.data.numpy() + b4.data.numpy())
            else:
                total = make_call("add", [total, b4], {})
        return True, total


class FuseAttention(FunctionPass):
    """``relay.transform.FuseAttention()`` (opt_level 3): see the module docstring."""

    def __init__(self) -> None:
        super().__init__(name="FuseAttention", opt_level=3)

    def transform_function(self, func: Any, mod: Any, ctx: Any) -> Any:
        from ...target import Target

        tgt = Target.current()
        if func.attrs.get("Primitive") or (tgt is not None and tgt.kind != "llvm"):
            return func
        body = _Fuse(_use_counts(func.body)).visit(func.body)
        if body is func.body:
            return func
        return Function(func.params, body, func.ret_type, attrs=func.attrs)
