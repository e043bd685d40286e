"""A numpy interpreter of the loop IR: the written definition of what the IR means, and a test
oracle independent of code generation.

``run(func, args)`` executes a :class:`~tvmpy.tir.PrimFunc` in either IR form (multi-dimensional
buffers after schedule lowering, or flat buffers with Ramp/Broadcast vectors and predicates after
the tir pipeline). ``build(funcs, target)`` wraps functions in an :class:`InterpModule` with the
runtime Module's call interface, so ``tvm.build(..., target="interp")`` works.

Semantics (what compiled code must also do):

- integers wrap around at their width (numpy fixed-width arithmetic); ``Div``/``Mod`` on integers
  truncate toward zero (C), ``FloorDiv``/``FloorMod`` round toward -inf; integer division by zero
  raises ZeroDivisionError. On floats ``Mod`` is C ``fmod``, ``FloorDiv`` is ``floor(a / b)`` and
  ``FloorMod`` is ``a - floor(a / b) * b``.
- float32 arithmetic happens in float32, float16 values are rounded to float16 after each
  operation; casts float -> int truncate toward zero; ``round`` rounds half to even.
- ``Min``/``Max`` propagate NaN like ``numpy.minimum``/``numpy.maximum``.
- ``Select`` and ``And``/``Or`` evaluate both operands; ``if_then_else`` only the chosen one.
- a vector value (dtype with lanes) is a numpy array of length ``lanes``; a predicated load
  yields 0 in masked-off lanes, a predicated store leaves them untouched.
- every load/store is bounds-checked (each index against its dimension, and the flat address
  against the memory behind the buffer): an out-of-range access raises IndexError.
- ``Allocate`` gives fresh memory filled with a poison pattern so reads of uninitialised memory
  show up: NaN for floats, bytes 0xA5 for integers, True for bools.
- ``AttrStmt`` "thread_extent"/"virtual_thread" run their body as a serial loop over the thread
  variable; every For kind (parallel, vectorized, unrolled, thread binding) runs serially;
  other attributes are hints and are ignored.
- ``AssertStmt`` raises RuntimeError with its message.
- ``call_extern``/``call_pure_extern`` call the Python function registered under that name with
  :func:`register_extern`; a ``tvm_access_ptr`` (or ``address_of``) argument arrives as a writable
  1-D numpy view of the buffer's memory starting at the pointed-to element, handles as the whole
  memory, scalars as numpy scalars, strings as str.

Speed: statements compile once to Python closures. An innermost loop whose iterations touch
disjoint memory (checked at run time from its index expressions) runs as one numpy evaluation over
all iterations; an innermost loop ``B[idx] = B[idx] op e`` (op in + * min max, idx invariant) runs
as a sequential ``ufunc.accumulate``, which rounds exactly like the serial loop. Everything else
runs serially.
"""

from __future__ import annotations

import math
import operator
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..ir import dtype as dt
from ..ir.functor import Functor
from ..ir.node import structural_equal
from ..runtime.device import Device
from ..runtime.module import Module
from ..runtime.ndarray import NDArray
from ..runtime.packed_func import get_global_func
from . import expr as E
from . import interpreter_gpu as _gpu
from . import stmt as S
from .analysis import written_data_vars
from .buffer import Buffer
from .function import PrimFunc
from .functor import collect_vars, post_order_visit
from .op import FLOAT_BINARY, FLOAT_PREDICATE, FLOAT_UNARY

__all__ = ["run", "build", "evaluate", "InterpModule", "register_extern", "unregister_extern",
           "get_extern"]

_MASK = 0  # env key of the active-lane mask (Python ids are never 0)
Env = dict
ExprFn = Callable[[Env], Any]
StmtFn = Callable[[Env], None]

# ---------------------------------------------------------------------------------------------
# external functions
_EXTERNS: dict[str, Callable[..., Any]] = {}


def register_extern(name: str, fn: Callable[..., Any] | None = None,
                    override: bool = True) -> Callable[..., Any]:
    """Register ``fn`` as the Python implementation of external function ``name`` (usable as a
    decorator: ``@register_extern("my_fn")``)."""

    def reg(f: Callable[..., Any]) -> Callable[..., Any]:
        if not override and name in _EXTERNS:
            raise KeyError(f"extern {name!r} is already registered")
        _EXTERNS[name] = f
        return f

    return reg if fn is None else reg(fn)


def unregister_extern(name: str) -> None:
    _EXTERNS.pop(name, None)


def get_extern(name: str) -> Callable[..., Any]:
    fn = _EXTERNS.get(name)
    if fn is None:
        raise RuntimeError(
            f"call_extern: no Python implementation of {name!r} is registered for the interpreter; "
            "register one with tvmpy.tir.interpreter.register_extern(name, fn)")
    return fn


# ---------------------------------------------------------------------------------------------
# helpers on values
def _np(dtype: str) -> np.dtype:
    return dt.to_numpy(dt.element_of(dtype))


def _is_batch(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.ndim > 0


def _lift(v: Any, from_vec: bool, to_vec: bool) -> Any:
    """Align a scalar-typed value (shape () or (n,)) with a vector-typed one ((L,) or (n, L))."""
    if to_vec and not from_vec and np.ndim(v) == 1:
        return np.asarray(v)[:, None]
    return v


def _mask_for(env: Env, vec: bool) -> Any:
    """The active-lane mask fitted to an access that is vector-typed (``vec``) or not; None when
    every lane is active."""
    m = env.get(_MASK)
    if m is None:
        return None
    mask, lane_level = m
    if vec and not lane_level and np.ndim(mask) == 1:
        return mask[:, None]
    if not vec and lane_level:
        return np.any(mask, axis=-1)
    return mask


def _push_mask(env: Env, cond: Any, lane_level: bool) -> Any:
    """Combine ``cond`` with the current mask; returns the previous mask entry to restore."""
    old = env.get(_MASK)
    if old is None:
        env[_MASK] = (cond, lane_level)
        return old
    mask, old_level = old
    if lane_level and not old_level:
        mask = _lift(mask, False, True)
    elif old_level and not lane_level:
        cond = _lift(cond, False, True)
        lane_level = True
    env[_MASK] = (np.logical_and(mask, cond), lane_level)
    return old


def _pop_mask(env: Env, old: Any) -> None:
    if old is None:
        env.pop(_MASK, None)
    else:
        env[_MASK] = old


def _any_active(mask: Any) -> bool:
    return mask is None or bool(np.any(mask))


def _poison(npd: np.dtype, size: int) -> np.ndarray:
    if npd.kind == "f":
        return np.full(size, np.nan, dtype=npd)
    if npd.kind == "b":
        return np.ones(size, dtype=npd)
    return np.full(size * npd.itemsize, 0xA5, dtype=np.uint8).view(npd)


def _to_int(x: Any) -> int:
    if _is_batch(x):
        raise TypeError("a loop bound, allocation size or buffer layout varies across vector lanes")
    return int(x)


class _Unbound(RuntimeError):
    pass


# ---------------------------------------------------------------------------------------------
# expression compiler
_ARITH = {E.Add: operator.add, E.Sub: operator.sub, E.Mul: operator.mul}
_CMP = {E.EQ: operator.eq, E.NE: operator.ne, E.LT: operator.lt, E.LE: operator.le,
        E.GT: operator.gt, E.GE: operator.ge}
_SIDE_EFFECT_CALLS = ("call_extern", "call_pure_extern", "tvm_access_ptr", "address_of",
                      "tvm_call_packed")


def _float_floordiv(a: Any, b: Any) -> Any:
    return np.floor(a / b)


def _float_floormod(a: Any, b: Any) -> Any:
    return a - np.floor(a / b) * b


_FLOAT_DIV: dict[type, Callable[[Any, Any], Any]] = {
    E.Div: operator.truediv, E.Mod: np.fmod, E.FloorDiv: _float_floordiv,
    E.FloorMod: _float_floormod}


def _vec_erf(x: Any, npd: np.dtype) -> Any:
    if np.ndim(x) == 0:
        return npd.type(math.erf(float(x)))
    return np.frompyfunc(math.erf, 1, 1)(x).astype(npd)


def _value_dtype(e: E.Call) -> np.dtype:
    """The numpy dtype of a numeric intrinsic's result; a handle-typed one is malformed IR."""
    if dt.is_handle(e.dtype):
        raise TypeError(f"interpreter: intrinsic {e.op!r} computes a number but has type "
                        f"{e.dtype}: {e}")
    return _np(e.dtype)


def _popcount(x: Any, npd: np.dtype) -> Any:
    unsigned = np.dtype(f"uint{npd.itemsize * 8}") if npd.kind != "b" else npd
    return np.bitwise_count(x.astype(unsigned)).astype(npd)


class _Compiler(Functor):
    """Turns expressions and statements into closures over an environment dict
    (``id(var) -> value``; a buffer's data Var maps to its 1-D memory). Expressions dispatch to
    ``e_<Class>``, statements to ``s_<Class>`` (``ir.functor``)."""

    _prefix = "e_"

    def generic_visit(self, node: Any) -> ExprFn:
        raise NotImplementedError(f"interpreter: no semantics for {type(node).__name__} nodes: "
                                  f"{node}")

    def expr(self, e: Any) -> ExprFn:
        return self.visit(E.convert(e))

    def stmt(self, s: S.Stmt) -> StmtFn:
        fn = type(self).dispatch_prefix(type(s), "s_")
        if fn is None:
            return self.generic_visit(s)
        return fn(self, s)

    # ---- leaves --------------------------------------------------------------------------------
    def e_IntImm(self, e: E.IntImm) -> ExprFn:
        v = _np(e.dtype).type(e.value)
        return lambda env: v

    def e_FloatImm(self, e: E.FloatImm) -> ExprFn:
        v = _np(e.dtype).type(e.value)
        return lambda env: v

    def e_StringImm(self, e: E.StringImm) -> ExprFn:
        v = e.value
        return lambda env: v

    def e_Var(self, e: E.Var) -> ExprFn:
        k, name = id(e), e.name

        def f(env: Env) -> Any:
            try:
                return env[k]
            except KeyError:
                raise _Unbound(f"variable {name!r} is used but not bound here") from None

        return f

    def e_Cast(self, e: E.Cast) -> ExprFn:
        v, npd = self.expr(e.value), _np(e.dtype)
        return lambda env: v(env).astype(npd)

    # ---- arithmetic ----------------------------------------------------------------------------
    def e_BinaryOp(self, e: E.BinaryOp) -> ExprFn:
        a, b = self.expr(e.a), self.expr(e.b)
        kind = dt.parse(e.a.dtype).kind
        vec = dt.lanes_of(e.dtype) > 1
        t = type(e)
        op: Callable[[Any, Any], Any]
        if t in _ARITH:
            op = _ARITH[t]
        elif t in _CMP:
            op = _CMP[t]
        elif t is E.Min:
            op = np.minimum
        elif t is E.Max:
            op = np.maximum
        elif t is E.And:
            op = np.logical_and
        elif t is E.Or:
            op = np.logical_or
        elif kind == "float":
            op = _FLOAT_DIV[t]
        else:
            return self._int_division(t, a, b, vec, kind == "uint")
        return lambda env: op(a(env), b(env))

    def _int_division(self, t: type, a: ExprFn, b: ExprFn, vec: bool, unsigned: bool) -> ExprFn:
        def divisor(env: Env) -> Any:
            d = b(env)
            if _is_batch(d):
                zero = d == 0
                if zero.any():
                    mask = _mask_for(env, vec)
                    if mask is None or np.any(zero & mask):
                        raise ZeroDivisionError("integer division by zero in the loop IR")
                    d = np.where(zero, d.dtype.type(1), d)
            elif d == 0 and _any_active(_mask_for(env, vec)):
                raise ZeroDivisionError("integer division by zero in the loop IR")
            elif d == 0:
                d = d.dtype.type(1)
            return d

        if t is E.FloorDiv:
            return lambda env: a(env) // divisor(env)
        if t is E.FloorMod:
            return lambda env: a(env) % divisor(env)
        if t is E.Mod:
            return lambda env: np.fmod(a(env), divisor(env))
        if unsigned:
            return lambda env: a(env) // divisor(env)

        def truncdiv(env: Env) -> Any:
            x, d = a(env), divisor(env)
            r = np.fmod(x, d)
            return (x - r) // d  # exact division: floor == trunc

        return truncdiv

    def e_Not(self, e: E.Not) -> ExprFn:
        a = self.expr(e.a)
        return lambda env: np.logical_not(a(env))

    def e_Select(self, e: E.Select) -> ExprFn:
        c, t, f = self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)
        cvec, vvec = dt.lanes_of(e.condition.dtype) > 1, dt.lanes_of(e.dtype) > 1

        def sel(env: Env) -> Any:
            cv, tv, fv = c(env), t(env), f(env)
            if not _is_batch(cv):
                return tv if cv else fv
            return np.where(_lift(cv, cvec, vvec), tv, fv)

        return sel

    # ---- vectors -------------------------------------------------------------------------------
    def e_Ramp(self, e: E.Ramp) -> ExprFn:
        base, stride = self.expr(e.base), self.expr(e.stride)
        lanes = np.arange(e.lanes, dtype=_np(e.dtype))
        if isinstance(e.base, E.IntImm) and isinstance(e.stride, E.IntImm):
            const_v = base({}) + stride({}) * lanes
            return lambda env: const_v

        def ramp(env: Env) -> Any:
            b, s = base(env), stride(env)
            if np.ndim(b) == 0 and np.ndim(s) == 0:
                return b + s * lanes
            return _lift(b, False, True) + _lift(s, False, True) * lanes

        return ramp

    def e_Broadcast(self, e: E.Broadcast) -> ExprFn:
        val, lanes, npd = self.expr(e.value), e.lanes, _np(e.dtype)

        def bcast(env: Env) -> Any:
            v = val(env)
            if np.ndim(v) == 0:
                return np.full(lanes, v, dtype=npd)
            v = np.asarray(v)
            return np.broadcast_to(v[:, None], v.shape + (lanes,))

        return bcast

    def e_Shuffle(self, e: E.Shuffle) -> ExprFn:
        vecs = [(self.expr(v), dt.lanes_of(v.dtype) > 1) for v in e.vectors]
        idx = [self.expr(i) for i in e.indices]

        def shuffle(env: Env) -> Any:
            parts = []
            for fn, is_vec in vecs:
                v = np.asarray(fn(env))
                parts.append(v if is_vec else v[..., None])
            if any(p.ndim > 1 for p in parts):
                n = max(p.shape[0] for p in parts if p.ndim > 1)
                parts = [p if p.ndim > 1 else np.broadcast_to(p, (n,) + p.shape) for p in parts]
            whole = np.concatenate(parts, axis=-1)
            sel = [_to_int(i(env)) for i in idx]
            return whole[..., sel]

        return shuffle

    def e_Let(self, e: E.Let) -> ExprFn:
        k, val, body = id(e.var), self.expr(e.value), self.expr(e.body)

        def let(env: Env) -> Any:
            env[k] = val(env)
            return body(env)

        return let

    # ---- calls ---------------------------------------------------------------------------------
    def e_Call(self, e: E.Call) -> ExprFn:
        op = e.op
        if op in ("call_extern", "call_pure_extern"):
            return self._extern(e)
        if op == "tvm_call_packed":
            return self._call_packed(e)
        if op == "if_then_else":
            return self._if_then_else(e)
        if op == "likely":
            return self.expr(e.args[0])
        if op == "tvm_access_ptr":
            return self._access_ptr(e)
        if op == "address_of":
            return self._address_of(e)
        if op == "type_annotation":
            return lambda env: None
        if op == "prefetch":  # a cache hint: no value, no effect here
            return lambda env: 0
        if op == _gpu.SYNC_OP:
            return self._sync(e)
        if op == _gpu.ACTIVEMASK_OP:
            ones = np.uint32(0xFFFFFFFF)
            return lambda env: ones
        if op == _gpu.SHUFFLE_DOWN_OP:
            return self._shuffle_down(e)
        if op == _gpu.SHUFFLE_OP:
            return self._shuffle(e)
        if op == "tir.gpu_launch":
            return self._launch(e)
        args = [self.expr(a) for a in e.args]
        if op == "reinterpret":
            npd = None if dt.is_handle(e.dtype) else _np(e.dtype)
            a0 = args[0]
            return lambda env: a0(env).view(npd)
        if op in FLOAT_PREDICATE:
            fn = getattr(np, FLOAT_PREDICATE[op])
            return lambda env: fn(args[0](env))
        if op in FLOAT_UNARY:
            return self._float_unary(op, args[0], _value_dtype(e))
        if op in FLOAT_BINARY:
            fn2 = getattr(np, FLOAT_BINARY[op])
            return lambda env: fn2(args[0](env), args[1](env))
        if op == "abs":
            return lambda env: np.abs(args[0](env))
        if op == "popcount":
            int_npd = _value_dtype(e)
            return lambda env: _popcount(args[0](env), int_npd)
        simple = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
                  "bitwise_xor": np.bitwise_xor, "shift_left": np.left_shift,
                  "shift_right": np.right_shift, "bitwise_not": np.invert}
        if op in simple:
            fn3 = simple[op]
            if op == "bitwise_not":
                return lambda env: fn3(args[0](env))
            return lambda env: fn3(args[0](env), args[1](env))
        raise NotImplementedError(f"interpreter: unknown intrinsic {op!r} in {e}")

    def _sync(self, e: E.Call) -> ExprFn:
        zero = np.int32(0)

        def sync(env: Env) -> Any:
            if _MASK in env and env[_MASK] is not None:
                raise RuntimeError("tir.tvm_storage_sync inside a vector lane mask")
            barrier = env.get(_gpu.BARRIER_KEY)
            if barrier is not None:
                barrier()
            return zero

        return sync

    def _shuffle_down(self, e: E.Call) -> ExprFn:
        if len(e.args) != 5:
            raise ValueError(f"tvm_warp_shuffle_down takes (mask, value, offset, width, "
                             f"warp_size), got {len(e.args)} arguments")
        val, off, width, warp = (self.expr(a) for a in e.args[1:])
        key = id(e)

        def shfl(env: Env) -> Any:
            return _gpu.warp_shuffle_down(env, key, val(env), _to_int(off(env)),
                                          _to_int(width(env)), _to_int(warp(env)))

        return shfl

    def _shuffle(self, e: E.Call) -> ExprFn:
        if len(e.args) != 5:
            raise ValueError(f"tvm_warp_shuffle takes (mask, value, src_lane, width, warp_size), "
                             f"got {len(e.args)} arguments")
        val, lane, width, warp = (self.expr(a) for a in e.args[1:])
        key = id(e)

        def shfl(env: Env) -> Any:
            return _gpu.warp_shuffle(env, key, val(env), _to_int(lane(env)), _to_int(width(env)),
                                     _to_int(warp(env)))

        return shfl

    def _launch(self, e: E.Call) -> ExprFn:
        name = e.args[0].value if isinstance(e.args[0], E.StringImm) else str(e.args[0])
        args = [self.expr(a) for a in e.args[8:]]
        zero = np.int32(0)

        def launch(env: Env) -> Any:
            kernels = env.get(_gpu.LAUNCH_KEY) or {}
            if name not in kernels:
                raise RuntimeError(f"tir.gpu_launch: no kernel {name!r} in the module")
            kernels[name]([a(env) for a in args])
            return zero

        return launch

    def _float_unary(self, op: str, a: ExprFn, npd: np.dtype) -> ExprFn:
        one = npd.type(1)
        if op == "exp10":
            ten = npd.type(10)
            return lambda env: np.power(ten, a(env))
        if op == "rsqrt":
            return lambda env: one / np.sqrt(a(env))
        if op == "sigmoid":
            return lambda env: one / (one + np.exp(-a(env)))
        if op == "erf":
            return lambda env: _vec_erf(a(env), npd)
        np_name = FLOAT_UNARY[op]
        assert np_name is not None, "the intrinsics without a numpy function are composed above"
        fn = getattr(np, np_name)
        return lambda env: fn(a(env))

    def _if_then_else(self, e: E.Call) -> ExprFn:
        c, t, f = (self.expr(x) for x in e.args)
        cvec, vvec = dt.lanes_of(e.args[0].dtype) > 1, dt.lanes_of(e.dtype) > 1

        def ite(env: Env) -> Any:
            cv = c(env)
            if not _is_batch(cv):
                return t(env) if cv else f(env)
            cv = _lift(cv, cvec, vvec)
            level = cvec or vvec
            old = _push_mask(env, cv, level)
            try:
                tv = t(env)
            finally:
                _pop_mask(env, old)
            old = _push_mask(env, np.logical_not(cv), level)
            try:
                fv = f(env)
            finally:
                _pop_mask(env, old)
            return np.where(cv, tv, fv)

        return ite

    def _extern(self, e: E.Call) -> ExprFn:
        if not e.args or not isinstance(e.args[0], E.StringImm):
            raise TypeError(f"{e.op} needs the function name (a string) as first argument: {e}")
        name = e.args[0].value
        args = [self.expr(a) for a in e.args[1:]]
        ret = None if dt.is_handle(e.dtype) else _np(e.dtype)

        def call(env: Env) -> Any:
            fn = get_extern(name)
            out = fn(*[a(env) for a in args])
            if ret is None:
                return out
            return ret.type(0 if out is None else out)

        return call

    def _call_packed(self, e: E.Call) -> ExprFn:
        """``tir.call_packed``: the registry's function, buffers as NDArray views."""
        name = e.args[0].value if isinstance(e.args[0], E.StringImm) else None
        if name is None:
            raise TypeError(f"tvm_call_packed needs the function name first: {e}")
        args = [self._packed_arg(a) for a in e.args[1:]]
        rty = _np(e.dtype)

        def call(env: Env) -> Any:
            f = get_global_func(name)
            assert f is not None  # get_global_func raises for an unknown name
            r = f(*[a(env) for a in args])
            return rty.type(r if isinstance(r, (int, float, np.number)) else 0)

        return call

    def _packed_arg(self, a: E.PrimExpr) -> ExprFn:
        if isinstance(a, E.StringImm):
            text = a.value
            return lambda env: text
        if not (isinstance(a, E.Call) and a.op == "tvm_stack_make_array"):
            scalar = self.expr(a)  # numbers arrive as Python numbers, as from compiled code
            return lambda env: (lambda v: v.item() if isinstance(v, np.generic) else v)(scalar(env))
        data, shape, strides, _, ann, offset = a.args[:6]
        npd = _np(ann.dtype)
        mem, off = self.expr(data), self.expr(offset)
        dims = [self.expr(d) for d in shape.args]  # type: ignore[attr-defined]
        steps = [self.expr(s) for s in strides.args] if isinstance(strides, E.Call) else None

        def view(env: Env) -> Any:
            m = mem(env)
            m = m.view(npd) if m.dtype != npd else m
            o, shp = _to_int(off(env)), tuple(_to_int(d(env)) for d in dims)
            if steps is None:
                v = m[o:o + int(np.prod(shp, dtype=np.int64))].reshape(shp)
            else:
                st = [_to_int(s(env)) * m.itemsize for s in steps]
                v = np.lib.stride_tricks.as_strided(m[o:], shp, st)
            return NDArray(v)

        return view

    def _access_ptr(self, e: E.Call) -> ExprFn:
        ann, data, offset = e.args[0], e.args[1], e.args[2]
        npd = None
        if isinstance(ann, E.Call) and ann.op == "type_annotation" and ann.args:
            npd = _np(ann.args[0].dtype)
        mem, off = self.expr(data), self.expr(offset)

        def ptr(env: Env) -> Any:
            m = mem(env)
            if npd is not None and m.dtype != npd:
                m = m.view(npd)
            o = _to_int(off(env))
            if not 0 <= o <= m.size:
                raise IndexError(f"tvm_access_ptr offset {o} outside the {m.size} elements of "
                                 f"{data}")
            return m[o:]

        return ptr

    def _address_of(self, e: E.Call) -> ExprFn:
        load = e.args[0]
        if not isinstance(load, E.BufferLoad):
            raise TypeError(f"address_of needs a buffer load, got {load}")
        acc = _Access(self, load.buffer, load.indices, None, load.dtype)

        def addr(env: Env) -> Any:
            m, a = acc.memory(env), _to_int(acc.address(env, check=True))
            acc.check_scalar(env, a, m)
            return m[a:]

        return addr

    # ---- memory --------------------------------------------------------------------------------
    def e_BufferLoad(self, e: E.BufferLoad) -> ExprFn:
        acc = _Access(self, e.buffer, e.indices, e.predicate, e.dtype)
        return acc.load

    def e_ProducerLoad(self, e: E.ProducerLoad) -> ExprFn:
        raise NotImplementedError(
            f"interpreter: {e} reads a te.Tensor directly; lower the schedule first (tvm.lower)")

    # ---- statements ----------------------------------------------------------------------------
    def s_SeqStmt(self, s: S.SeqStmt) -> StmtFn:
        fns = [self.stmt(x) for x in s.seq]

        def seq(env: Env) -> None:
            for f in fns:
                f(env)

        return seq

    def s_Evaluate(self, s: S.Evaluate) -> StmtFn:
        v = self.expr(s.value)
        return lambda env: (v(env), None)[1]

    def s_LetStmt(self, s: S.LetStmt) -> StmtFn:
        k, val, body = id(s.var), self.expr(s.value), self.stmt(s.body)

        def let(env: Env) -> None:
            env[k] = val(env)
            body(env)

        return let

    def s_AssertStmt(self, s: S.AssertStmt) -> StmtFn:
        cond, body = self.expr(s.condition), self.stmt(s.body)
        msg = s.message.value if isinstance(s.message, E.StringImm) else str(s.message)

        def check(env: Env) -> None:
            c = cond(env)
            mask = _mask_for(env, False)
            ok = np.all(c) if mask is None else np.all(np.logical_or(c, np.logical_not(mask)))
            if not ok:
                raise RuntimeError(msg)
            body(env)

        return check

    def s_AttrStmt(self, s: S.AttrStmt) -> StmtFn:
        if s.attr_key == "thread_extent":
            kernel = _gpu.kernel_chain(s)
            if kernel is not None:
                return self._kernel(s, *kernel)
        if s.attr_key in ("thread_extent", "virtual_thread"):
            iv = s.node
            var = iv.var if isinstance(iv, E.IterVar) else iv
            if not isinstance(var, E.Var):
                raise TypeError(f"{s.attr_key} attribute needs an IterVar node, got {iv!r}")
            return self._serial_loop(var, E.const(0, var.dtype), s.value, self.stmt(s.body))
        return self.stmt(s.body)

    def _kernel(self, s: S.AttrStmt, chain: list, body_s: S.Stmt, has_sync: bool) -> StmtFn:
        serial = self._serial_loop(s.node.var, E.const(0, s.node.var.dtype), s.value,
                                   self.stmt(s.body))
        extents = [self.expr(a.value) for a in chain]
        body = self.stmt(body_s)

        def kernel(env: Env) -> None:
            if _gpu.KERNEL_KEY in env:  # inside another kernel: the serial-loop meaning
                serial(env)
                return
            _gpu.run_kernel(env, chain, [x(env) for x in extents], body, has_sync, _to_int)

        return kernel

    def s_IfThenElse(self, s: S.IfThenElse) -> StmtFn:
        cond, then = self.expr(s.condition), self.stmt(s.then_case)
        other = self.stmt(s.else_case) if s.else_case is not None else None
        lane_level = dt.lanes_of(s.condition.dtype) > 1

        def branch(env: Env) -> None:
            c = cond(env)
            if not _is_batch(c):
                if c:
                    then(env)
                elif other is not None:
                    other(env)
                return
            old = _push_mask(env, c, lane_level)
            try:
                if _any_active(env[_MASK][0]):
                    then(env)
            finally:
                _pop_mask(env, old)
            if other is not None:
                old = _push_mask(env, np.logical_not(c), lane_level)
                try:
                    if _any_active(env[_MASK][0]):
                        other(env)
                finally:
                    _pop_mask(env, old)

        return branch

    def s_BufferStore(self, s: S.BufferStore) -> StmtFn:
        value_dtype = dt.element_of(s.value.dtype)
        if value_dtype != dt.element_of(s.buffer.dtype):
            raise TypeError(f"store of a {s.value.dtype} value into buffer {s.buffer.name} of dtype "
                            f"{s.buffer.dtype}: {s}")
        acc = _Access(self, s.buffer, s.indices, s.predicate, s.value.dtype)
        val = self.expr(s.value)
        return lambda env: acc.store(env, val(env))

    def s_Allocate(self, s: S.Allocate) -> StmtFn:
        b = s.buffer
        if dt.lanes_of(b.dtype) != 1:
            raise NotImplementedError(f"interpreter: buffer {b.name} has vector dtype {b.dtype}")
        npd, k = _np(b.dtype), id(b.data)
        shape = [self.expr(x) for x in b.shape]
        strides = [self.expr(x) for x in b.strides]
        body = self.stmt(s.body)
        name = b.name
        scope, key = b.scope, id(s)

        def alloc(env: Env) -> None:
            dims = [_to_int(x(env)) for x in shape]
            if any(d < 0 for d in dims):
                raise ValueError(f"allocate {name}: negative extent in shape {dims}")
            size = math.prod(dims)
            if strides and size:
                st = [_to_int(x(env)) for x in strides]
                size = max(size, 1 + sum((d - 1) * x for d, x in zip(dims, st)), dims[0] * st[0])
            old = env.get(k)
            shared = env.get(_gpu.KERNEL_KEY) if scope == "shared" else None
            if shared is not None:  # one memory per block
                mem = shared.get(key)
                if mem is None or mem.size != size:
                    mem = shared[key] = _poison(npd, size)
                env[k] = mem
            else:
                env[k] = _poison(npd, size)
            try:
                body(env)
            finally:
                if old is None:
                    env.pop(k, None)
                else:
                    env[k] = old

        return alloc

    def s_Prefetch(self, s: S.Prefetch) -> StmtFn:
        return lambda env: None

    def s_For(self, s: S.For) -> StmtFn:
        body = self.stmt(s.body)
        loop = self._serial_loop(s.loop_var, s.min, s.extent, body)
        fast = _FastLoop.analyse(self, s)
        if fast is None:
            return loop
        mn, ext = self.expr(s.min), self.expr(s.extent)
        return fast.wrap(loop, body, mn, ext)

    def _serial_loop(self, var: E.Var, mn_e: Any, ext_e: Any, body: StmtFn) -> StmtFn:
        k, npd = id(var), _np(var.dtype)
        mn, ext = self.expr(mn_e), self.expr(ext_e)

        def loop(env: Env) -> None:
            lo, n = _to_int(mn(env)), _to_int(ext(env))
            for v in np.arange(lo, lo + n, dtype=npd):
                env[k] = v
                body(env)

        return loop


# ---------------------------------------------------------------------------------------------
def _strides(buf: Buffer) -> list[Any]:
    """The buffer's strides, as Python ints where the shape is constant."""
    if buf.strides:
        return list(buf.strides)
    dims = [x for x in buf.shape if isinstance(x, E.IntImm)]
    if len(dims) == len(buf.shape):
        out, acc = [], 1
        for x in reversed(dims):
            out.append(E.const(acc, x.dtype))
            acc *= x.value
        return out[::-1]
    return list(buf.compact_strides())


def _const_or_fn(comp: _Compiler, e: Any) -> Any:
    return e.value if isinstance(e, E.IntImm) else comp.expr(e)


class _Access:
    """One buffer access (load or store): address computation, bounds and mask handling."""

    def __init__(self, comp: _Compiler, buf: Buffer, indices: Sequence[Any], predicate: Any,
                 dtype: str):
        if dt.lanes_of(buf.dtype) != 1:
            raise NotImplementedError(f"interpreter: buffer {buf.name} has vector dtype {buf.dtype}")
        self.buf = buf
        self.name = buf.name
        self.key = id(buf.data)
        self.npd = _np(buf.dtype)
        self.vec = dt.lanes_of(dtype) > 1
        if len(indices) != len(buf.shape):
            raise IndexError(f"buffer {buf.name} has {len(buf.shape)} dimensions but is accessed "
                             f"with {len(indices)} indices")
        self.idx = [(comp.expr(i), dt.lanes_of(i.dtype) > 1) for i in indices]
        self.pred = comp.expr(predicate) if predicate is not None else None
        # per dimension: (index fn, index is vector-typed, extent, stride); constants as ints
        self.dims = [(fn, is_vec, _const_or_fn(comp, n), _const_or_fn(comp, st))
                     for (fn, is_vec), n, st in zip(self.idx, buf.shape, _strides(buf))]
        self.offset = _const_or_fn(comp, buf.elem_offset)

    # ---- memory & addresses --------------------------------------------------------------------
    def memory(self, env: Env) -> np.ndarray:
        try:
            m = env[self.key]
        except KeyError:
            raise _Unbound(f"buffer {self.name}: its data pointer {self.buf.data.name!r} is not "
                           "bound (not a parameter and not allocated here)") from None
        if m.dtype is not self.npd and m.dtype != self.npd:
            try:
                m = m.view(self.npd)
            except ValueError as err:
                raise TypeError(f"buffer {self.name} views memory of dtype {m.dtype} as "
                                f"{self.npd}: sizes do not divide") from err
        return m

    def address(self, env: Env, mask: Any = None, check: bool = False) -> Any:
        """The flat element address: a Python int, or an int64 array for vector / batched
        indices. ``check``: raise IndexError for an index outside its dimension in an active
        lane (``mask``: active lanes, None = all)."""
        a = self.offset if self.offset.__class__ is int else _to_int(self.offset(env))
        for d, (fn, is_vec, n, st) in enumerate(self.dims):
            i = fn(env)
            if n.__class__ is not int:
                n = _to_int(n(env))
            if st.__class__ is not int:
                st = _to_int(st(env))
            if i.__class__ is np.ndarray and i.ndim:
                if self.vec and not is_vec:
                    i = i[:, None]
                if check:
                    if mask is None:
                        bad = i.min() < 0 or i.max() >= n
                    else:
                        bad = bool(np.any(((i < 0) | (i >= n)) & mask))
                    if bad:
                        live = np.broadcast_to(i, np.broadcast_shapes(i.shape, np.shape(mask)))
                        if mask is not None:
                            live = live[np.broadcast_to(mask, live.shape)]
                        first = live[(live < 0) | (live >= n)].flat[0]
                        self._dim_error(first, n, d)
                i = i.astype(np.int64)
                a = a + (i if st == 1 else i * st)
            else:
                if check and not 0 <= i < n:
                    self._dim_error(i, n, d)
                a = a + int(i) * st
        return a

    def _dim_error(self, i: Any, n: int, d: int) -> None:
        raise IndexError(f"buffer {self.name}: index {i} out of range [0, {n}) in dimension {d}")

    def check_scalar(self, env: Env, a: int, m: np.ndarray) -> None:
        if not 0 <= a < m.size:
            raise IndexError(f"buffer {self.name}: address {a} outside its memory of {m.size} "
                             "elements")

    def _active(self, env: Env) -> Any:
        mask = _mask_for(env, self.vec)
        if self.pred is not None:
            p = self.pred(env)
            mask = p if mask is None else np.logical_and(mask, p)
        return mask

    def _prepare(self, env: Env) -> tuple:
        """Memory, checked address (None when no lane is active), active mask broadcast to the
        address shape (None: all active)."""
        m = self.memory(env)
        mask = self._active(env)
        if mask is not None:
            if not np.any(mask):
                return m, None, None
            if np.ndim(mask) == 0:
                mask = None
        a = self.address(env, mask, check=True)
        if a.__class__ is int:
            self.check_scalar(env, a, m)
            return m, a, None
        if mask is not None:
            # the address may not vary along every batched loop the mask does (an index that
            # does not depend on a vectorized variable): broadcast both to their common shape
            shape = np.broadcast_shapes(np.shape(mask), a.shape)
            a = np.broadcast_to(a, shape)
            mask = np.broadcast_to(mask, shape)
            live = a[mask]
        else:
            live = a
        if live.size and (live.min() < 0 or live.max() >= m.size):
            bad = live[(live < 0) | (live >= m.size)][0]
            raise IndexError(f"buffer {self.name}: address {bad} outside its memory of "
                             f"{m.size} elements")
        return m, a, mask

    def _unmasked(self, env: Env) -> tuple[np.ndarray, Any]:
        """Memory and checked address when no mask or predicate applies (the common case)."""
        a = self.address(env, None, True)
        m = self.memory(env)
        if a.__class__ is int:
            if not 0 <= a < m.size:
                self.check_scalar(env, a, m)
        elif a.size and (a.min() < 0 or a.max() >= m.size):
            bad = a[(a < 0) | (a >= m.size)].flat[0]
            raise IndexError(f"buffer {self.name}: address {bad} outside its memory of "
                             f"{m.size} elements")
        return m, a

    def load(self, env: Env) -> Any:
        if self.pred is None and _MASK not in env:
            m, a = self._unmasked(env)
            return m[a]
        m, a, mask = self._prepare(env)
        if a is None:  # no active lane: the value is never used
            shape = np.shape(self.address(env))
            return np.zeros(shape, dtype=self.npd) if shape else self.npd.type(0)
        if mask is None:
            return m[a]
        out = np.zeros(a.shape, dtype=self.npd)
        out[mask] = m[a[mask]]
        return out

    def store(self, env: Env, value: Any) -> None:
        if self.pred is None and _MASK not in env:
            m, a = self._unmasked(env)
            mask = None
        else:
            m, a, mask = self._prepare(env)
        if a is None:
            return
        if a.__class__ is int:
            if np.ndim(value) != 0:
                raise ValueError(f"store into {self.name}: a vector value to a scalar address")
            m[a] = value
            return
        if np.ndim(value):
            value = np.broadcast_to(value, a.shape)
            if mask is None:
                m[a] = value
            else:
                m[a[mask]] = value[mask]
        else:
            m[a if mask is None else a[mask]] = value


# ---------------------------------------------------------------------------------------------
# a reduction loop ``B[idx] = B[idx] op rest``: (op's ufunc, the access to B, the element dtype,
# rest, rest is vector-typed)
_Reduction = tuple[np.ufunc, _Access, np.dtype, ExprFn, bool]


class _FastLoop:
    """Whole-loop numpy evaluation of an innermost loop, when provably equal to the serial loop.

    Batch mode: the loop var becomes ``arange(extent)`` and the body runs once, statement by
    statement, over all iterations. That equals the serial loop when no memory location written
    in the body is touched by two different iterations; this is checked before each run from the
    addresses of every access to a written buffer (their indices must not depend on values
    computed in the body). Reduction mode: ``B[idx] = B[idx] op e`` with ``idx`` invariant and
    ``e`` not reading B runs as ``op.accumulate`` (sequential, same rounding as the loop).
    """

    def __init__(self, var: int, npd: np.dtype, checks: list[tuple[int, _Access]] | None,
                 reduce: _Reduction | None, static: bool) -> None:
        self.var = var  # env key of the loop variable
        self.npd = npd  # its numpy dtype
        # (buffer key, access) for every access to a written buffer; None: not checkable
        self.checks = checks
        self.reduce = reduce
        self.static = static  # disjointness proved once, from the index expressions

    @staticmethod
    def analyse(comp: _Compiler, loop: S.For) -> _FastLoop | None:
        body = loop.body
        ok = True
        stores: list[S.BufferStore] = []
        loads: list[E.BufferLoad] = []
        local: set[int] = set()

        def visit(n: Any) -> None:
            nonlocal ok
            if isinstance(n, (S.For, S.Allocate, S.AssertStmt, S.Prefetch)):
                ok = False
            elif isinstance(n, S.AttrStmt) and n.attr_key in ("thread_extent", "virtual_thread"):
                ok = False
            elif isinstance(n, S.Evaluate) and not isinstance(n.value, (E.IntImm, E.FloatImm)):
                ok = False
            elif isinstance(n, E.Call) and n.op in _SIDE_EFFECT_CALLS:
                ok = False
            elif isinstance(n, S.BufferStore):
                stores.append(n)
            elif isinstance(n, E.BufferLoad):
                loads.append(n)
            elif isinstance(n, (S.LetStmt, E.Let)):
                local.add(id(n.var))

        post_order_visit(body, visit)
        if not ok or not stores:
            return None
        reduce = None
        if len(stores) == 1 and body is stores[0]:
            reduce = _reduction_pattern(comp, stores[0], loop.loop_var)
        written = {id(st.buffer.data) for st in stores}

        def checkable(node: Any) -> bool:
            found_load = []
            post_order_visit(node, lambda n: found_load.append(n) if isinstance(
                n, E.BufferLoad) else None)
            return not found_load and all(id(v) not in local for v in collect_vars(node))

        accesses: list[S.BufferStore | E.BufferLoad] = [*stores, *loads]
        to_check = [acc for acc in accesses if id(acc.buffer.data) in written]
        checks: list[tuple[int, _Access]] | None = None
        if all(checkable(p) for acc in to_check
               for p in (*acc.indices, acc.buffer.elem_offset, *acc.buffer.strides)):
            checks = [(id(acc.buffer.data), _Access(
                comp, acc.buffer, acc.indices, None,
                acc.dtype if isinstance(acc, E.BufferLoad) else acc.value.dtype))
                for acc in to_check]
        if checks is None and reduce is None:
            return None
        static = checks is not None and _statically_disjoint(accesses, written, loop.loop_var)
        return _FastLoop(id(loop.loop_var), _np(loop.loop_var.dtype), checks, reduce, static)

    def disjoint(self, env: Env, n: int) -> bool:
        """True when no written address is touched by two different iterations."""
        if self.checks is None:  # never: only a reduction loop has none, and wrap runs it as one
            return False
        groups: dict[int, list[np.ndarray]] = {}
        for key, acc in self.checks:
            a = np.asarray(acc.address(env), dtype=np.int64)
            if acc.vec:
                a = np.broadcast_to(a, (n, a.shape[-1])) if a.ndim == 1 else a
            else:
                a = np.broadcast_to(a, (n,)) if a.ndim == 0 else a
                a = a.reshape(n, 1)
            groups.setdefault(key, []).append(a)
        for arrs in groups.values():
            a = np.concatenate(arrs, axis=1)
            if a.shape[1] == 1:
                flat = a[:, 0]
                if np.unique(flat).size != n:
                    return False
                continue
            flat = a.ravel()
            rows = np.repeat(np.arange(n), a.shape[1])
            order = np.argsort(flat, kind="stable")
            fs, rs = flat[order], rows[order]
            if np.any((fs[1:] == fs[:-1]) & (rs[1:] != rs[:-1])):
                return False
        return True

    def wrap(self, serial: StmtFn, body: StmtFn, mn: ExprFn, ext: ExprFn) -> StmtFn:
        k, npd, reduce = self.var, self.npd, self.reduce

        def loop(env: Env) -> None:
            if _MASK in env:  # inside a masked region: keep it simple
                serial(env)
                return
            lo, n = _to_int(mn(env)), _to_int(ext(env))
            if n <= 1:
                serial(env)
                return
            if reduce is not None:
                self._run_reduce(env, reduce, lo, n)
                return
            env[k] = np.arange(lo, lo + n, dtype=npd)
            try:
                ok = self.static or self.disjoint(env, n)
            except (_Unbound, ArithmeticError, IndexError, TypeError, ValueError):
                ok = False  # e.g. an index only valid under a guard: run serially
            if ok:
                body(env)
            else:
                serial(env)

        return loop

    def _run_reduce(self, env: Env, reduce: _Reduction, lo: int, n: int) -> None:
        ufunc, acc, elem, rest, rest_vec = reduce
        init = acc.load(env)
        env[self.var] = np.arange(lo, lo + n, dtype=self.npd)
        vals = rest(env)
        shape = (n,) + np.shape(init)
        vals = np.broadcast_to(_lift(vals, rest_vec, acc.vec) if np.ndim(vals) else vals, shape)
        seq = np.concatenate([np.asarray(init)[None], vals], axis=0)
        out = ufunc.accumulate(seq, axis=0, dtype=elem)[-1]
        env[self.var] = np.asarray(lo + n - 1, dtype=self.npd)[()]
        acc.store(env, out if np.ndim(out) else elem.type(out))


def _affine_coeff(e: Any, var: E.Var) -> int | None:
    """The coefficient of ``var`` in ``e`` when ``e`` is affine in it (other variables count as
    constants), else None."""
    if isinstance(e, E.Var):
        return 1 if e is var else 0
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return 0
    if isinstance(e, (E.Add, E.Sub)):
        a, b = _affine_coeff(e.a, var), _affine_coeff(e.b, var)
        if a is None or b is None:
            return None
        return a + b if isinstance(e, E.Add) else a - b
    if isinstance(e, E.Mul):
        a, b = _affine_coeff(e.a, var), _affine_coeff(e.b, var)
        if a is None or b is None:
            return None
        if a and b:
            return None
        if a:
            return a * e.b.value if isinstance(e.b, E.IntImm) else None
        if b:
            return b * e.a.value if isinstance(e.a, E.IntImm) else None
        return 0
    return None if _contains(e, lambda n: n is var) else 0


def _statically_disjoint(accesses: list, written: set[int], var: E.Var) -> bool:
    """Every written buffer is accessed at one scalar index tuple (the same expressions in every
    load and store) that moves with ``var`` in some dimension: iterations touch distinct
    elements (in-bounds indices are checked at every access)."""
    by_buf: dict[int, list] = {}
    for acc in accesses:
        if id(acc.buffer.data) in written:
            by_buf.setdefault(id(acc.buffer.data), []).append(acc)
    for accs in by_buf.values():
        first = accs[0]
        if any(dt.lanes_of(i.dtype) != 1 for i in first.indices):
            return False
        for acc in accs[1:]:
            if acc.buffer is not first.buffer or not structural_equal(
                    list(acc.indices), list(first.indices)):
                return False
        if not any(_affine_coeff(i, var) for i in first.indices):
            return False
    return True


def _contains(node: Any, pred: Callable[[Any], bool]) -> bool:
    found = []
    post_order_visit(node, lambda n: found.append(n) if pred(n) else None)
    return bool(found)


_REDUCE_UFUNC: dict[type, np.ufunc] = {E.Add: np.add, E.Mul: np.multiply, E.Min: np.minimum,
                                       E.Max: np.maximum}


def _reduction_pattern(comp: _Compiler, st: S.BufferStore, var: E.Var) -> _Reduction | None:
    v = st.value
    ufunc = _REDUCE_UFUNC.get(type(v))
    if ufunc is None:
        return None
    assert isinstance(v, E.BinaryOp), "the reducing ops are binary"
    data = st.buffer.data
    for ld, rest in ((v.a, v.b), (v.b, v.a)):
        if not isinstance(ld, E.BufferLoad) or ld.buffer is not st.buffer:
            continue
        if not structural_equal(list(ld.indices), list(st.indices)):
            continue
        if (ld.predicate is None) != (st.predicate is None):
            continue
        if ld.predicate is not None and not structural_equal(ld.predicate, st.predicate):
            continue
        invariant = [*st.indices, st.buffer.elem_offset, *st.buffer.strides]
        if st.predicate is not None:
            invariant.append(st.predicate)
        if any(_contains(x, lambda n: isinstance(n, E.BufferLoad | E.Let) or n is var)
               for x in invariant):
            return None
        if _contains(rest, lambda n: isinstance(n, E.BufferLoad) and n.buffer.data is data):
            return None
        acc = _Access(comp, st.buffer, st.indices, st.predicate, st.value.dtype)
        return (ufunc, acc, _np(st.value.dtype), comp.expr(rest), dt.lanes_of(rest.dtype) > 1)
    return None


# ---------------------------------------------------------------------------------------------
# entry points
_COMPILED: weakref.WeakKeyDictionary[PrimFunc, StmtFn] = weakref.WeakKeyDictionary()


def _compile(func: PrimFunc) -> StmtFn:
    fn = _COMPILED.get(func)
    if fn is None:
        fn = _Compiler().stmt(func.body)
        _COMPILED[func] = fn
    return fn


def _as_array(arg: Any, name: str) -> tuple[np.ndarray, Callable[[np.ndarray], None] | None]:
    """A writable C-contiguous numpy array for ``arg`` and, when it is a copy, a write-back."""
    if isinstance(arg, np.ndarray):
        if arg.flags.c_contiguous and arg.flags.writeable:
            return arg, None
        arr = np.ascontiguousarray(arg).copy()

        def back_np(a: np.ndarray) -> None:
            if arg.flags.writeable:
                arg[...] = a

        return arr, back_np
    if hasattr(arg, "__dlpack_device__") and arg.__dlpack_device__()[0] != 1:  # 1: kDLCPU
        raise ValueError(f"argument {name} is on {getattr(arg, 'device', arg.__dlpack_device__())}"
                         ", but the interpreter runs on cpu(0)")
    if hasattr(arg, "numpy"):
        arr = np.array(arg.numpy(), copy=True, order="C")

        def back(a: np.ndarray) -> None:
            if hasattr(arg, "copyfrom"):
                arg.copyfrom(a)
            else:
                try:
                    arg[...] = a
                except TypeError:
                    np.copyto(np.asarray(arg), a)

        return arr, back
    if hasattr(arg, "__array__") or hasattr(arg, "__dlpack__"):
        try:
            view = np.from_dlpack(arg) if hasattr(arg, "__dlpack__") else np.asarray(arg)
        except (TypeError, RuntimeError, BufferError):
            view = np.asarray(arg)
        if view.flags.c_contiguous and view.flags.writeable:
            return view, None
        arr = np.array(view, copy=True, order="C")

        def back_arr(a: np.ndarray) -> None:
            np.copyto(np.asarray(arg), a)

        return arr, back_arr
    raise TypeError(f"argument {name}: expected an array (numpy, tvm.nd.array, DLPack), got "
                    f"{type(arg).__name__}")


def _shape_text(shape: Sequence[Any]) -> str:
    """``(n, 4)``: a buffer shape as the user wrote it."""
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _unalias(func: PrimFunc, outs: dict[int, E.Var], bufs: list[tuple[Buffer, np.ndarray]],
             mems: list[np.ndarray], env: Env) -> list:
    """A written buffer (``outs``: its position in ``bufs`` -> its parameter) whose array
    shares memory with another argument's is computed in a copy of its own, copied back after
    the run (runtime/function.py does the same for compiled functions); two written buffers
    whose arguments (``mems``: their memory, an NDArray's array) share memory are refused.
    Returns the copy-backs."""
    backs: list = []
    for k, param in outs.items():
        b, arr = bufs[k]
        for j in outs:
            if j != k and np.may_share_memory(mems[k], mems[j]) and np.shares_memory(
                    mems[k], mems[j]):
                first, second = (b, bufs[j][0]) if k < j else (bufs[j][0], b)
                raise ValueError(f"{func.name}: arguments {first.name} and {second.name} share "
                                 f"memory, and {func.name} writes both (the result would "
                                 "depend on the order of its stores); pass separate arrays")
        if any(j != k and np.may_share_memory(arr, other) for j, (_, other) in enumerate(bufs)):
            own = arr.copy()
            env[id(param)] = own.reshape(-1)
            backs.append((lambda a, dst=arr: np.copyto(dst, a), own))
    return backs


def _bind_args(func: PrimFunc, args: Sequence[Any], comp: _Compiler) -> tuple[Env, list]:
    if len(args) != len(func.params):
        names = ", ".join(func.buffer_map[p].name if p in func.buffer_map else p.name
                          for p in func.params)
        raise TypeError(f"{func.name} takes {len(func.params)} arguments ({names}), got {len(args)}")
    env: Env = {}
    writebacks: list = []
    bufs = []
    outs: dict[int, E.Var] = {}  # the written buffers: position in bufs -> parameter
    out_backs: list = []
    mems: list[np.ndarray] = []  # per buffer, the memory of its argument
    logical = func.attrs.get("tir.logical_dtypes", {})  # LegalizeStorageDtypes' retyped params
    written = written_data_vars(func)
    for idx, (p, a) in enumerate(zip(func.params, args)):
        b = func.buffer_map.get(p)
        if b is None:
            env[id(p)] = _scalar_arg(p, a)
            continue
        arr, back = _as_array(a, b.name)
        is_out = id(p) in written or id(b.data) in written
        backs = out_backs if is_out else writebacks
        want_dtype = logical.get(idx, b.dtype)
        if arr.dtype != _np(want_dtype):
            raise TypeError(f"argument {b.name}: expected dtype {want_dtype}, got {arr.dtype}")
        if want_dtype != b.dtype:
            if back is not None:
                backs.append((back, arr))
                back = None
            arr = arr.view(_np(b.dtype))  # the storage bits the body works on
        if arr.ndim != len(b.shape):
            raise ValueError(f"argument {b.name}: expected {len(b.shape)} dimensions "
                             f"{_shape_text(b.shape)}, got shape {arr.shape}")
        env[id(p)] = arr.reshape(-1)
        if back is not None:
            backs.append((back, arr))
        bufs.append((b, arr))
        mems.append(a if isinstance(a, np.ndarray) else getattr(a, "_arr", arr))
        if is_out:
            outs[len(bufs) - 1] = p
    # copied back last: the written arguments (over a copy of the same array only read), and
    # before them, the private copies of written buffers that share memory with another
    writebacks += _unalias(func, outs, bufs, mems, env) + out_backs
    # symbolic dims first, then every dim/stride checked
    for b, arr in bufs:
        for d, s in enumerate(b.shape):
            if isinstance(s, E.Var) and id(s) not in env:
                env[id(s)] = _np(s.dtype).type(arr.shape[d])
        for d, s in enumerate(b.strides):
            if isinstance(s, E.Var) and id(s) not in env:
                env[id(s)] = _np(s.dtype).type(arr.strides[d] // arr.itemsize)
        if isinstance(b.elem_offset, E.Var) and id(b.elem_offset) not in env:
            env[id(b.elem_offset)] = _np(b.elem_offset.dtype).type(0)
    for b, arr in bufs:
        for v in collect_vars([*b.shape, *b.strides]):
            if id(v) not in env:
                raise ValueError(f"{func.name}: shape variable {v.name} of buffer {b.name} appears "
                                 "only inside an expression; pass it as an explicit scalar argument")
        for d, s in enumerate(b.shape):
            got = int(comp.expr(s)(env))
            if got != arr.shape[d]:
                raise ValueError(f"argument {b.name}: expected shape "
                                 f"{_shape_text(b.shape)} (dim {d} = {got}), got "
                                 f"{arr.shape}")
        for d, s in enumerate(b.strides):
            got = int(comp.expr(s)(env))
            if arr.shape[d] > 1 and got != arr.strides[d] // arr.itemsize:
                raise ValueError(f"argument {b.name}: expected stride {got} in dimension {d}, "
                                 f"got {arr.strides[d] // arr.itemsize}")
    return env, writebacks


def _scalar_arg(p: E.Var, a: Any) -> Any:
    if isinstance(a, E.IntImm | E.FloatImm):
        a = a.value
    if isinstance(a, np.ndarray) and a.ndim == 0:
        a = a[()]
    kind = dt.parse(p.dtype).kind
    if kind == "handle":
        raise TypeError(f"argument {p.name}: handle parameters without a buffer are not supported")
    ok = {"bool": (bool, np.bool_), "int": (int, np.integer), "uint": (int, np.integer),
          "float": (int, float, np.integer, np.floating)}[kind]
    if not isinstance(a, ok) or (kind in ("int", "uint") and isinstance(a, bool)):
        raise TypeError(f"argument {p.name}: expected a {p.dtype} scalar, got "
                        f"{type(a).__name__} {a!r}")
    if kind in ("int", "uint") and isinstance(a, int | np.integer):  # as ``ok`` ensured
        info = np.iinfo(_np(p.dtype))
        if not info.min <= int(a) <= info.max:
            raise OverflowError(f"argument {p.name}: {a} does not fit {p.dtype}")
    return _np(p.dtype).type(a)


def _kernel_runner(kernel: PrimFunc) -> Callable[[list], None]:
    body = _compile(kernel)

    def launch(values: list) -> None:
        if len(values) != len(kernel.params):
            raise RuntimeError(f"tir.gpu_launch of {kernel.name}: {len(values)} arguments for "
                               f"{len(kernel.params)} parameters")
        body({id(p): v for p, v in zip(kernel.params, values)})

    return launch


def run(func: PrimFunc, args: Sequence[Any], kernels: Sequence[PrimFunc] = ()) -> None:
    """Execute ``func`` on ``args`` (arrays for buffer parameters, numbers for scalars).
    Arrays are modified in place (objects that are not numpy arrays are written back).
    ``kernels``: the device kernels that ``tir.gpu_launch`` calls in ``func`` may name (a host
    function after SplitHostDevice)."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"run expects a tir.PrimFunc, got {type(func).__name__}")
    comp = _Compiler()
    body = _compile(func)
    env, writebacks = _bind_args(func, list(args), comp)
    if kernels:
        env[_gpu.LAUNCH_KEY] = {k.name: _kernel_runner(k) for k in kernels}
    with np.errstate(all="ignore"):
        try:
            body(env)
        except _Unbound as err:
            raise RuntimeError(f"{func.name}: {err}") from None
    for back, arr in writebacks:
        back(arr)


class InterpFunction:
    """One interpreted PrimFunc with the calling protocol of ``runtime.Function`` (call,
    ``prepare`` + raw call), so that the runtime's ``time_evaluator`` times it."""

    def __init__(self, func: PrimFunc, device: Device, kernels: Sequence[PrimFunc] = ()):
        self.name = func.name
        self.device = device
        self.func = func
        self.kernels = list(kernels)

    def __call__(self, *args: Any) -> None:
        run(self.func, args, self.kernels)

    def prepare(self, args: Sequence[Any]) -> tuple[tuple[Any, ...], list]:
        """Arguments are bound (and written back) by each call: nothing to prepare."""
        return tuple(args), []

    def _cfunc(self, *args: Any) -> int:
        run(self.func, args, self.kernels)
        return 0

    def _raise_error(self, rc: int) -> None:  # run() raises itself; never reached
        raise RuntimeError(f"{self.name} failed ({rc})")

    def __repr__(self) -> str:
        return f"<tvmpy.tir.interpreter.InterpFunction {self.name}>"


class InterpModule(Module):
    """Interpreted functions as a runtime Module (``tvm.build(..., target="interp")``): called,
    looked up and timed (``time_evaluator``) like compiled ones; there is no code to export."""

    def __init__(self, funcs: Sequence[PrimFunc], entry: str | None = None):
        # device kernels (SplitHostDevice's) are launched by host functions, not called
        self.kernels = [f for f in funcs if f.attrs.get("calling_conv") == "device_kernel"]
        self.functions: dict[str, PrimFunc] = {f.name: f for f in funcs
                                               if f.attrs.get("calling_conv") != "device_kernel"}
        self._interp_funcs: dict[str, InterpFunction] = {}
        if not self.functions:
            raise ValueError("InterpModule needs at least one function")
        meta = {"version": 1, "entry": entry or next(iter(self.functions)), "functions": []}
        super().__init__(None, meta, "interp")

    # InterpFunction has runtime.Function's calling protocol, not its class (no ctypes function)
    def _find(self, name: str) -> InterpFunction | None:  # type: ignore[override]
        f = self._interp_funcs.get(name)
        if f is None and name in self.functions:
            f = self._interp_funcs[name] = InterpFunction(self.functions[name], self.device,
                                                          self.kernels)
        return f

    def _all_names(self) -> list[str]:
        return list(self.functions)

    def function_names(self) -> list[str]:
        return list(self.functions)

    def get_source(self, fmt: str = "") -> str:
        return "\n\n".join(str(f) for f in self.functions.values())

    def export_library(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("the interpreter target has no machine code to export; build "
                                  "with target='llvm' or 'c'")

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.export_library()


def build(funcs: Sequence[PrimFunc] | PrimFunc, target: Any = None) -> InterpModule:
    """An :class:`InterpModule` running ``funcs`` (``tvm.build(..., target="interp")``); an
    IRModule of host functions and device kernels (``tvmpy.driver.lower_gpu``) runs the
    kernels with the GPU semantics of :mod:`tvmpy.tir.interpreter_gpu`."""
    from ..ir.module import IRModule

    if isinstance(funcs, IRModule):
        funcs = [f for f in funcs.functions.values() if isinstance(f, PrimFunc)]
    if isinstance(funcs, PrimFunc):
        funcs = [funcs]
    funcs = list(funcs)
    for f in funcs:
        _compile(f)  # report IR the interpreter cannot run at build time
    return InterpModule(funcs)


def evaluate(expr: Any, bindings: dict | None = None) -> Any:
    """The value of ``expr`` with ``bindings`` (Var -> number or numpy array; arrays evaluate
    every element at once, as the lanes of one batch)."""
    env: Env = {id(v): (np.asarray(x, dtype=_np(v.dtype)) if np.ndim(x) else _np(v.dtype).type(x))
                for v, x in (bindings or {}).items()}
    with np.errstate(all="ignore"):
        try:
            return _Compiler().expr(expr)(env)
        except _Unbound as err:
            raise RuntimeError(str(err)) from None
