"""ToMixedPrecision: a float32 model computed in float16 (or bfloat16) where that is safe and pays,
with float32 accumulation in the heavy operators (TVM's ``relay.transform.ToMixedPrecision``).

What it does
Every operator call is of one of three categories, read from the per-operator attribute
``FTVMMixedPrecisionConversionType`` (``relay.op.register_mixed_precision_conversion``; the
defaults are registered below, a higher ``level`` overrides them)::

    ALWAYS  (convolutions, dense / matmul / batch_matmul): float32 operands are cast to the
            mixed precision type; an ``out_dtype`` attribute becomes the accumulation dtype
            (float32), and the result is cast to the mixed precision type once;
    FOLLOW  (elementwise arithmetic, activations, pooling, shape and layout operators): computed
            in the mixed precision type when every float32 operand already is of that type or
            is a variable or a constant (which can be cast); otherwise as NEVER;
    NEVER   (exp, log, power, erf / gelu, softmax, layer / group / instance norm, sums, means,
            variances, global average pooling, ...): operands cast back to their original
            dtype; computed as before.

A FOLLOW call with no float result (shape_of, comparisons, argmax) takes the side that needs
fewer casts (its operands as they are). Calls of operators with no registration count as FOLLOW (and are reported: ``missing_op_mode``
0 raises, 1 logs a warning, 2 is silent; TVM's modes). Calls of functions (global or local) get
their original argument types. Only float32 tensors change type (float64, float16 or integer
parts of a model stay as they are).

Casts: one per (value, dtype), shared by every user. A cast back to the dtype a value came from
returns that value (``cast(conv_f32acc, f16)`` feeding a softmax gives the float32 accumulator
itself, not a second rounding), a cast of a lossless widening (``cast(cast(x_f16, f32), f16)``)
returns ``x``, and a constant is cast at once (a new constant: casts of constants never reach
the graph). So the result has no cast of a cast made by the pass. Model parameters that are
function parameters (``from_onnx(..., freeze_params=False)``) are cast in the graph and folded by
``relay.build`` once bound (its FoldConstant); bind them first (``bind_params_by_name``) to have
them folded here. A ``cast`` of the model itself that converted to the dtype its operand now has
(or did nothing) is dropped.

Every function keeps its signature: parameters keep their types, and the result is cast back to
the original dtype (a model's outputs stay float32).

When valid
Opt-in: it changes the numerics (float16 carries ~3 significant decimal digits, bfloat16 ~2).
A constant that does not fit the mixed precision type (|x| > 65504 for float16: e.g. an
attention mask of -1e9) keeps its operator out of it (FOLLOW and ALWAYS alike). The pass is
idempotent (a second run returns a structurally equal module).

Example (ToMixedPrecision("float16"))
    before:  %0 = nn.conv2d(%x, %w); %1 = nn.relu(%0); nn.softmax(%1)
    after:   %0 = nn.conv2d(cast(%x, "float16"), cast(%w, "float16"), out_dtype="float32");
             %1 = nn.relu(cast(%0, "float16")); nn.softmax(cast(%1, "float32"))
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from ...ir import dtype as _dt
from ...ir.module import IRModule
from ...transform import Pass, PassContext
from ..expr import Call, Constant, Function, If, Let, RelayExpr, Tuple, TupleGetItem, Var
from ..op import transform as _tf
from ..op.registry import (
    _REGISTRY,
    MIXED_PRECISION_CONVERSION,
    Op,
    register_mixed_precision_conversion,
)
from ..ty import TensorType, TupleType, Type
from ..type_infer import RelayTypeError, TypeInferencer
from ..visitor import ExprMutator

__all__ = [
    "ToMixedPrecision", "to_mixed_precision", "MIXED_PRECISION_ALWAYS", "MIXED_PRECISION_FOLLOW",
    "MIXED_PRECISION_NEVER", "DEFAULT_ALWAYS_LIST", "DEFAULT_FOLLOW_LIST", "DEFAULT_NEVER_LIST",
    "get_generic_out_dtypes", "register_func_to_op_list",
]

log = logging.getLogger(__name__)

MIXED_PRECISION_ALWAYS = 0
MIXED_PRECISION_FOLLOW = 1
MIXED_PRECISION_NEVER = 2

_F32 = "float32"
_TYPES = ("float16", "bfloat16")

# TVM's default lists (after TensorFlow's auto mixed precision lists), with tvmpy's operators
DEFAULT_ALWAYS_LIST = [
    "nn.conv1d", "nn.conv2d", "nn.conv3d", "nn.conv2d_transpose", "nn.dense", "nn.matmul",
    "nn.batch_matmul", "nn.contrib_conv2d_NCHWc", "nn.contrib_dense_pack",
    "nn.contrib_conv2d_winograd_nchwc",
]
DEFAULT_FOLLOW_LIST = [
    # new data or new shapes
    "nn.pad", "dyn.nn.pad", "nn.batch_flatten", "concatenate", "stack", "zeros", "ones",
    "zeros_like", "ones_like", "full", "dyn.full", "split", "dyn.split", "squeeze",
    "dyn.squeeze", "transpose", "expand_dims", "dyn.expand_dims", "reshape", "dyn.reshape",
    "reshape_like", "broadcast_to", "dyn.broadcast_to", "strided_slice", "dyn.strided_slice",
    "take", "gather", "gather_nd", "argwhere", "where", "tile", "dyn.tile", "repeat", "reverse",
    "nn.depth_to_space", "nn.space_to_depth", "layout_transform", "one_hot", "dyn.one_hot",
    "check_indices", "annotation.stop_fusion", "nn.contrib_conv2d_winograd_weight_transform",
    "dyn.topk", "dyn.trilu", "compress", "unique", "nn.stride_interleave",
    # integer and boolean operators (no float operand: nothing to change)
    "all", "any", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "left_shift",
    "right_shift", "logical_and", "logical_or", "logical_xor", "logical_not",
    "mod", "floor_mod", "floor_divide",
    # comparisons
    "less", "greater", "less_equal", "greater_equal", "equal", "not_equal", "isnan",
    "isfinite", "isinf",
    # copies (``cast`` itself is handled by the pass: see the module docstring)
    "copy",
    # simple arithmetic
    "add", "subtract", "multiply", "divide", "negative", "abs", "sign", "floor", "ceil",
    "round", "trunc", "nearbyint", "nn.bias_add", "nn.batch_norm", "sqrt", "rsqrt",
    "shape_of",
    # simple activations
    "max", "min", "dyn.max", "dyn.min", "maximum", "minimum", "argmax", "argmin", "nn.relu",
    "nn.leaky_relu", "nn.prelu", "nn.dropout", "dyn.dropout",
    # activations that saturate in a narrow range
    "sigmoid", "tanh", "clip", "sin", "cos", "atan",
    # pooling over small windows
    "nn.max_pool1d", "nn.max_pool2d", "nn.max_pool3d", "nn.avg_pool1d", "nn.avg_pool2d",
    "nn.avg_pool3d", "nn.global_max_pool2d", "image.resize2d", "dyn.image.resize",
]
DEFAULT_NEVER_LIST = [
    # |f(x)| >> |x| for common inputs
    "exp", "power", "sinh", "cosh", "tan", "asin", "acos", "asinh", "acosh", "atanh",
    "nn.softmax", "nn.log_softmax", "log", "log1p", "log2",
    # erf (and GELU, built on it) as TVM: kept in float32
    "erf", "nn.gelu",
    # an end of arange may not fit float16
    "arange", "dyn.arange",
    # large sums
    "nn.global_avg_pool2d", "nn.adaptive_avg_pool2d", "sum", "mean", "variance", "prod",
    "cumsum", "dyn.sum", "dyn.mean", "dyn.prod", "dyn.cumsum", "dyn.cumprod",
    "nn.layer_norm", "nn.group_norm", "nn.instance_norm", "nn.attention",
    # quantized, recurrent, host and list operators keep their types
    "qnn.quantize", "qnn.dequantize", "qnn.requantize", "qnn.conv2d", "qnn.dense",
    "qnn.batch_matmul", "qnn.add", "qnn.mul", "qnn.subtract", "qnn.concatenate",
    "qnn.avg_pool2d", "qnn.global_avg_pool2d", "qnn.leaky_relu", "qnn.sigmoid", "qnn.softmax",
    "nn.rnn_scan", "image.decode", "vision.all_class_non_max_suppression", "dyn.dft",
    "dyn.stft", "dyn.window", "dyn.col2im", "dyn.affine_grid", "dyn.max_unpool",
    "nn.bitpack", "nn.bitserial_conv2d", "nn.bitserial_dense", "nn.contrib_conv2d_NCHWc_int8",
    "nn.contrib_dense_pack_int8", "nn.contrib_depthwise_conv2d_NCHWc_int8",
    "list.at", "list.concat", "list.empty", "list.erase", "list.from_tuple", "list.insert",
    "list.length", "list.split",
    # the bits of a float are its dtype's
    "reinterpret",
    # the GPU Winograd of a weight transformed at build time (the GPU AlterOpLayout's): float32
    # only, as the nn.conv2d it came from (a float16 conv2d takes the direct template there;
    # the transforms' rounding in float16 is not the direct convolution's)
    "nn.contrib_conv2d_winograd_without_weight_transform",
]

# operators creating a tensor of their ``dtype`` attribute (TVM's InitOpAttrs)
_INIT_OPS = ("zeros", "ones", "full", "dyn.full")


def register_func_to_op_list(list_ops: list[str], level: int = 10) -> Callable[[Any], Any]:
    """A decorator registering ``func(call, mixed_precision_type)`` for every operator of
    ``list_ops`` (TVM's helper of the same name)."""

    def decorator(func: Any) -> Any:
        for name in list_ops:
            if name in _REGISTRY:
                register_mixed_precision_conversion(name, func, level)
            else:  # registered on first use (qnn's operators come with relay.qnn)
                _PENDING.append((name, func, level))
        return func

    return decorator


_PENDING: list[tuple[str, Any, int]] = []


def _register_pending() -> None:
    """The registrations of operators that did not exist when they were made, for those that
    exist now (kept if the operator got a conversion of its own meanwhile)."""
    left = []
    for name, func, level in _PENDING:
        if name not in _REGISTRY:
            left.append((name, func, level))
        elif _REGISTRY[name].attrs.get(MIXED_PRECISION_CONVERSION) is None:
            register_mixed_precision_conversion(name, func, level)
    _PENDING[:] = left


def _has_out_dtype(call: Call) -> bool:
    return isinstance(call.op, Op) and "out_dtype" in call.op.attrs_schema


def get_generic_out_dtypes(call: Call, mixed_precision_type: str) -> list[str]:
    """``[accumulation_dtype, output_dtype]``: float32 accumulation for operators with an
    ``out_dtype`` attribute (the result then cast to the mixed precision type), else the mixed
    precision type for both."""
    if _has_out_dtype(call):
        return [_F32, mixed_precision_type]
    return [mixed_precision_type, mixed_precision_type]


@register_func_to_op_list(DEFAULT_ALWAYS_LIST)
def generic_always_op(call: Call, mixed_precision_type: str) -> list[Any]:
    return [MIXED_PRECISION_ALWAYS, *get_generic_out_dtypes(call, mixed_precision_type)]


@register_func_to_op_list(DEFAULT_FOLLOW_LIST)
def generic_follow_op(call: Call, mixed_precision_type: str) -> list[Any]:
    return [MIXED_PRECISION_FOLLOW, mixed_precision_type, mixed_precision_type]


@register_func_to_op_list(DEFAULT_NEVER_LIST)
def generic_never_op(call: Call, mixed_precision_type: str) -> list[Any]:
    return [MIXED_PRECISION_NEVER, mixed_precision_type, mixed_precision_type]


# ---- the rewrite ----------------------------------------------------------------------------------
def _tensor_dtypes(t: Type) -> list[str]:
    if isinstance(t, TensorType):
        return [str(t.dtype)]
    if isinstance(t, TupleType):
        return [d for f in t.fields for d in _tensor_dtypes(f)]
    return []


# lossless float widenings: cast(cast(x, wide), narrow) == x
_WIDENS = {("float16", "float32"), ("bfloat16", "float32"), ("float16", "float64"),
           ("bfloat16", "float64"), ("float32", "float64")}


def _floating(dtype: str) -> bool:
    return bool(dtype) and (_dt.is_float(dtype) or _dt.is_low_float(dtype))


def _cast_call(e: Any) -> bool:
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == "cast"


class _Rewriter(ExprMutator):
    def __init__(self, mp: str, mod: IRModule | None) -> None:
        super().__init__()
        self.mp = mp
        self.np_mp = _dt.to_numpy(mp)
        self.typer = TypeInferencer(mod)
        self.cache: dict[tuple[int, str], RelayExpr] = {}
        self.source: dict[int, RelayExpr] = {}  # id(cast made here) -> the value it casts
        self.fits: dict[int, bool] = {}
        self.missing: Counter[str] = Counter()
        self.hold: list[Any] = []  # keeps the ids of the maps above alive

    # types -----------------------------------------------------------------------------------
    def typed(self, e: RelayExpr) -> RelayExpr:
        self.typer.visit(e)
        return e

    def type_of(self, e: RelayExpr) -> Type:
        t = getattr(e, "_checked_type", None)
        return t if t is not None else self.typer.visit(e)

    def dtype_of(self, e: RelayExpr) -> str:
        t = self.type_of(e)
        return str(t.dtype) if isinstance(t, TensorType) else ""

    # casts -----------------------------------------------------------------------------------
    def cast(self, e: RelayExpr, dtype: str) -> RelayExpr:
        """``e`` as ``dtype``: cached, never a cast of a cast (see the module docstring)."""
        cur = self.dtype_of(e)
        if cur == dtype or not _floating(cur):
            return e
        hit = self.cache.get((id(e), dtype))
        if hit is not None:
            return hit
        src = self.source.get(id(e))
        if src is None and _cast_call(e) and (self.dtype_of(e.args[0]), cur) in _WIDENS:
            src = e.args[0]
        if src is not None:  # a cast made here / a lossless widening: cast what it cast
            if self.dtype_of(src) == dtype:
                return src
            out = self.cast(src, dtype)
        elif isinstance(e, Constant):
            out = Constant(e.data.numpy().astype(_dt.to_numpy(dtype)))
        else:
            out = _tf.cast(e, dtype)
        self.typed(out)
        self.cache[(id(e), dtype)] = out
        if (id(out), cur) not in self.cache and self.dtype_of(out) == dtype:
            self.cache[(id(out), cur)] = e  # casting back gives the value itself
            self.source.setdefault(id(out), e)
        self.hold += [e, out]
        return out

    def cast_to(self, e: RelayExpr, orig: Type, narrow: bool) -> RelayExpr:
        """``e`` (the rewritten value of a node of type ``orig``) with its float32 parts in the
        mixed precision type (``narrow``) or with its original types."""
        if isinstance(orig, TensorType):
            want = self.mp if narrow and str(orig.dtype) == _F32 else str(orig.dtype)
            return self.cast(e, want)
        if isinstance(orig, TupleType):
            fields = e.fields if isinstance(e, Tuple) else [
                self.typed(TupleGetItem(e, i)) for i in range(len(orig.fields))]
            new = [self.cast_to(f, t, narrow) for f, t in zip(fields, orig.fields)]
            if all(a is b for a, b in zip(new, fields)):
                return e
            return self.typed(Tuple(new))
        return e

    def fits_mp(self, c: Constant) -> bool:
        """Whether the float32 constant ``c`` keeps its finite values in the mixed precision
        type (no overflow to infinity)."""
        ok = self.fits.get(id(c))
        if ok is None:
            a = c.data.numpy()
            ok = True
            if a.dtype == np.float32:
                with np.errstate(over="ignore"):
                    b = a.astype(self.np_mp).astype(np.float32)
                ok = not bool((np.isfinite(a) & ~np.isfinite(b)).any())
            self.fits[id(c)] = ok
            self.hold.append(c)
        return ok

    def castable(self, e: RelayExpr, orig: Type) -> bool:
        """FOLLOW's test on one operand: its float32 parts are in the mixed precision type
        already or are variables / constants (that fit)."""
        if isinstance(e, Var):
            return True
        if isinstance(e, Constant):
            return self.fits_mp(e)
        if isinstance(orig, TupleType) and isinstance(e, Tuple):
            return all(self.castable(f, t) for f, t in zip(e.fields, orig.fields))
        new = _tensor_dtypes(self.type_of(e))
        old = _tensor_dtypes(orig)
        return len(new) == len(old) and all(o != _F32 or n == self.mp for n, o in zip(new, old))

    def casts_needed(self, args: list[RelayExpr], orig: list[RelayExpr], narrow: bool) -> int:
        """How many operands (constants aside: cast at once) ``cast_to`` would cast."""
        n = 0
        for a, o in zip(args, orig):
            if isinstance(a, Constant):
                continue
            want = [self.mp if narrow and d == _F32 else d for d in _tensor_dtypes(o.checked_type)]
            n += sum(1 for h, w in zip(_tensor_dtypes(self.type_of(a)), want) if h != w)
        return n

    # nodes -----------------------------------------------------------------------------------
    def category(self, c: Call) -> tuple[int, str, str]:
        f = c.op.get_attr(MIXED_PRECISION_CONVERSION)
        if f is None:
            self.missing[c.op.name] += 1
            return MIXED_PRECISION_FOLLOW, self.mp, self.mp
        kind, acc, out = f(c, self.mp)
        return int(kind), str(acc), str(out)

    def never(self, c: Call, args: list[RelayExpr], op: Any = None) -> RelayExpr:
        new = [self.cast_to(a, o.checked_type, False) for a, o in zip(args, c.args)]
        op = c.op if op is None else op
        if op is c.op and all(a is b for a, b in zip(new, c.args)):
            return c
        return self.typed(Call(op, new, c.attrs))

    def visit_call(self, c: Call) -> RelayExpr:
        args = [self.visit(a) for a in c.args]
        if not isinstance(c.op, Op):  # a function: its signature is kept
            return self.never(c, args, self.visit(c.op))
        if c.op.name == "cast":
            return self.rewrite_cast(c, args[0])
        orig_out = c.checked_type
        floats32 = [d == _F32 for a in c.args for d in _tensor_dtypes(a.checked_type)]
        if not any(floats32) and _F32 not in _tensor_dtypes(orig_out):
            return self.never(c, args)  # nothing of float32 here: nothing to change
        kind, acc, out = self.category(c)
        if kind == MIXED_PRECISION_FOLLOW:
            ok = all(self.castable(a, o.checked_type) for a, o in zip(args, c.args))
            if ok and _F32 not in _tensor_dtypes(orig_out):
                # no float result (shape_of, comparisons, argmax): the side needing fewer casts
                ok = self.casts_needed(args, c.args, True) < self.casts_needed(args, c.args,
                                                                               False)
            kind = MIXED_PRECISION_ALWAYS if ok else MIXED_PRECISION_NEVER
        elif kind == MIXED_PRECISION_ALWAYS:  # a constant that would overflow: keep float32
            if any(isinstance(a, Constant) and not self.fits_mp(a) for a in args):
                kind = MIXED_PRECISION_NEVER
        if kind != MIXED_PRECISION_ALWAYS:
            return self.never(c, args)
        attrs = dict(c.attrs.items()) if c.attrs is not None else {}
        single = isinstance(orig_out, TensorType) and str(orig_out.dtype) == _F32
        if single and "out_dtype" in attrs and str(attrs["out_dtype"]) in ("", _F32):
            attrs["out_dtype"] = acc
        if single and c.op.name in _INIT_OPS and str(attrs.get("dtype")) == _F32:
            attrs["dtype"] = acc
        new = Call(c.op, [self.cast_to(a, o.checked_type, True) for a, o in zip(args, c.args)],
                   attrs)
        try:
            self.typed(new)
        except RelayTypeError:  # the operator does not take the mixed precision type
            return self.never(c, args)
        if single and self.dtype_of(new) == acc != out:
            new = self.cast(new, out)
        got, want = _tensor_dtypes(self.type_of(new)), _tensor_dtypes(orig_out)
        if len(got) != len(want) or any(g != w and not (w == _F32 and g == self.mp)
                                        for g, w in zip(got, want)):
            return self.never(c, args)
        return new

    def rewrite_cast(self, c: Call, x: RelayExpr) -> RelayExpr:
        """A cast of the model: dropped when its operand has its dtype already or when it did
        nothing (float32 -> float32, now in the mixed precision type); else cast as the pass
        casts (cached, no chains)."""
        want, was = str(c.attrs.dtype), _tensor_dtypes(c.args[0].checked_type)
        now = self.dtype_of(x)
        if now == want or (was == [want] and was == [_F32] and now == self.mp):
            return x
        if x is c.args[0]:
            return c
        return self.cast(x, want) if _floating(now) else self.typed(_tf.cast(x, want))

    def visit_tuple(self, t: Tuple) -> RelayExpr:
        return self.typed(super().visit_tuple(t))

    def visit_tuple_getitem(self, t: TupleGetItem) -> RelayExpr:
        return self.typed(super().visit_tuple_getitem(t))

    def visit_let(self, let: Let) -> RelayExpr:
        value = self.visit(let.value)
        var = let.var
        if value is not let.value and not _same_type(self.type_of(value), let.var.checked_type):
            var = Var(let.var.name_hint, self.type_of(value))
            self.memo[id(let.var)] = var
        body = self.visit(let.body)
        if var is let.var and value is let.value and body is let.body:
            return let
        return self.typed(Let(var, value, body))

    def visit_if(self, i: If) -> RelayExpr:
        cond = self.visit(i.cond)
        t = self.cast_to(self.visit(i.true_branch), i.true_branch.checked_type, False)
        f = self.cast_to(self.visit(i.false_branch), i.false_branch.checked_type, False)
        if cond is i.cond and t is i.true_branch and f is i.false_branch:
            return i
        return self.typed(If(cond, t, f))

    def visit_function(self, f: Function) -> RelayExpr:
        if f.attrs.get("Primitive"):
            return f
        body = self.cast_to(self.visit(f.body), f.body.checked_type, False)
        if body is f.body:
            return f
        return self.typed(Function(f.params, body, f.ret_type, attrs=f.attrs))


def _same_type(a: Type, b: Type) -> bool:
    return _tensor_dtypes(a) == _tensor_dtypes(b)


def _check_type(mixed_precision_type: str) -> str:
    t = str(mixed_precision_type)
    if t not in _TYPES:
        raise ValueError(f"ToMixedPrecision: mixed_precision_type must be one of {_TYPES}, "
                         f"got {t!r}")
    return t


def to_mixed_precision(func: Function, mixed_precision_type: str = "float16",
                       missing_op_mode: int = 1, mod: IRModule | None = None) -> Function:
    """``func`` (type-checked) rewritten by ToMixedPrecision (see the module docstring)."""
    mp = _check_type(mixed_precision_type)
    if missing_op_mode not in (0, 1, 2):
        raise ValueError(f"missing_op_mode must be 0, 1 or 2, got {missing_op_mode}")
    _register_pending()
    rw = _Rewriter(mp, mod)
    out = rw.visit(func)
    if rw.missing and missing_op_mode != 2:
        for name, n in sorted(rw.missing.items()):
            log.warning("ToMixedPrecision: operator %s (%d calls) has no "
                        "FTVMMixedPrecisionConversionType: treated as FOLLOW", name, n)
        if missing_op_mode == 0:
            raise ValueError("ToMixedPrecision: operators without a mixed precision "
                             f"conversion: {sorted(rw.missing)} (missing_op_mode=0)")
    return out


class ToMixedPrecision(Pass):
    """``relay.transform.ToMixedPrecision(mixed_precision_type="float16",
    missing_op_mode=1)(mod)``: every relay function of ``mod`` rewritten (see the module
    docstring); opt-in (not part of relay.build). ``mixed_precision_type``: "float16" or
    "bfloat16"."""

    def __init__(self, mixed_precision_type: str = "float16", missing_op_mode: int = 1) -> None:
        super().__init__("ToMixedPrecision", 0)
        self.mixed_precision_type = _check_type(mixed_precision_type)
        self.missing_op_mode = int(missing_op_mode)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        from . import InferType

        mod = InferType()(mod)
        out = IRModule()
        for gv, func in mod.items():
            if isinstance(func, Function) and not func.attrs.get("Primitive"):
                func = to_mixed_precision(func, self.mixed_precision_type,
                                          self.missing_op_mode, mod)
            out[gv] = func
        return InferType()(out)

