"""A compiled function's Python entry: argument checking and the ctypes call (see runtime/abi.py).

A :class:`Function` is built once per function from its signature JSON (``abi.Signature.to_json``):
ctypes argument types, and per parameter the expected dtype, rank and dims (constants, shape-var
names, or composite expressions such as ``n * 2`` compiled here to Python closures).

Calling ``f(*args)``:
- buffer arguments: ``NDArray`` or ``numpy.ndarray``. Wrong object kind -> TypeError; wrong
  dtype, rank, shape or device -> ValueError naming the argument, the expected and the received
  value. Symbolic dims are bound by the first argument (in parameter order) that carries them
  and checked against every later one; composite dims are evaluated after binding.
- the pointer passed is always 64-byte aligned and has the layout the kernel expects (compact
  row-major, or the buffer's declared strides). An argument that is not (a strided view, a slice,
  a numpy array from ``malloc``) is copied into aligned scratch memory for the call and, when it is
  writable, copied back afterwards: numpy arrays work as arguments, NDArrays avoid the copies.
- aliasing: a buffer the kernel writes (``written`` in the signature: an output) that shares
  memory with another argument (``f(x, x)``, overlapping views of one array) is computed in a
  scratch of its own and copied back after the call, as numpy does for an ``out=`` that overlaps
  an input: the kernel reads every input as it was before the call (a transpose into its own
  input gives the transpose). Two written buffers that share memory are refused (ValueError
  naming both: the result would depend on the order of the stores). Arguments only read may
  share memory freely (``add(x, x, out)``).
- scalar arguments: Python/numpy numbers, range-checked for integer dtypes.
- then the shape-var values are appended and the C function is called; a nonzero return raises
  RuntimeError with the message the kernel stored in ``__tvmpy_last_error``.
"""

from __future__ import annotations

import ast
import ctypes
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ..ir import dtype as dt
from .device import Device, cpu
from .ndarray import ALIGNMENT, NDArray, aligned_empty
from .packed_func import take_error

__all__ = ["Function", "compile_dim_expr"]


_CTYPES = {
    "bool": ctypes.c_bool, "int8": ctypes.c_int8, "int16": ctypes.c_int16,
    "int32": ctypes.c_int32, "int64": ctypes.c_int64, "uint8": ctypes.c_uint8,
    "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float, "float64": ctypes.c_double, "handle": ctypes.c_void_p,
}
_INT_RANGE = {f"{k}{b}": ((-(1 << (b - 1)), (1 << (b - 1)) - 1) if k == "int" else (0, (1 << b) - 1))
              for k in ("int", "uint") for b in (8, 16, 32, 64)}


# ---- composite shape expressions ---------------------------------------------------------------
def _truncdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _truncmod(a: int, b: int) -> int:
    return a - b * _truncdiv(a, b)


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_CALLS: dict[str, Callable[..., int]] = {
    "min": min, "max": max, "floordiv": operator.floordiv, "floormod": operator.mod,
    "truncdiv": _truncdiv, "truncmod": _truncmod,
    **{name: int for name in _INT_RANGE}, "abs": abs,
}


def compile_dim_expr(text: str) -> tuple[Callable[[dict[str, int]], int], set[str]]:
    """Compile a printed integer shape expression (``"n * 2"``, ``"floordiv(n + 3, 4)"``) to a
    function of the bound shape vars; also return the names it reads."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise ValueError(f"cannot evaluate shape expression {text!r}: {e}") from None
    names: set[str] = set()

    def build(node: ast.AST) -> Callable[[dict[str, int]], int]:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            v = node.value
            return lambda env: v
        if isinstance(node, ast.Name):
            n = node.id
            names.add(n)
            return lambda env: env[n]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            a = build(node.operand)
            return lambda env: -a(env)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            fn, a, b = _BINOPS[type(node.op)], build(node.left), build(node.right)
            return lambda env: fn(a(env), b(env))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in _CALLS and not node.keywords):
            fn, args = _CALLS[node.func.id], [build(a) for a in node.args]
            return lambda env: fn(*(a(env) for a in args))
        raise ValueError(f"cannot evaluate shape expression {text!r}: unsupported "
                         f"{ast.dump(node)[:60]}")

    return build(tree.body), names


# ---- the per-parameter plan --------------------------------------------------------------------
class _Dim:
    __slots__ = ("const", "var", "expr", "text")

    def __init__(self, spec: Any):
        self.const: int | None = None
        self.var: str | None = None
        self.expr: Callable[[dict[str, int]], int] | None = None
        self.text = str(spec)
        if isinstance(spec, int):
            self.const = spec
        elif isinstance(spec, str) and spec.isidentifier():
            self.var = spec
        else:
            self.expr = compile_dim_expr(str(spec))[0]


class _Param:
    __slots__ = ("index", "name", "kind", "dtype", "np_dtype", "dims", "strides", "ctype", "range",
                 "const_shape", "has_expr", "written")

    def __init__(self, index: int, spec: dict):
        self.index = index
        self.name = spec["name"]
        self.kind = spec["kind"]
        self.dtype = spec["dtype"]
        self.np_dtype = None
        self.dims: list[_Dim] = []
        self.const_shape: tuple[int, ...] | None = None
        self.has_expr = False
        self.strides: list[_Dim] | None = None
        self.range = _INT_RANGE.get(self.dtype)
        # older modules carry no "written" flag: assume the kernel may write every buffer
        self.written = bool(spec.get("written", True))
        if self.kind == "buffer":
            self.np_dtype = dt.to_numpy(self.dtype)
            self.dims = [_Dim(s) for s in spec["shape"]]
            consts = [d.const for d in self.dims]
            self.const_shape = (tuple(c for c in consts if c is not None)
                                if None not in consts else None)
            self.has_expr = any(d.expr is not None for d in self.dims)
            if spec.get("strides") is not None:
                self.strides = [_Dim(s) for s in spec["strides"]]
            self.ctype: Any = ctypes.c_void_p
        elif self.kind == "scalar":
            if self.dtype not in _CTYPES:
                raise ValueError(f"parameter {self.name}: scalar dtype {self.dtype} cannot be passed "
                                 f"by the runtime; supported: {', '.join(_CTYPES)}")
            self.ctype = _CTYPES[self.dtype]
        else:
            raise ValueError(f"parameter {self.name}: unknown kind {self.kind!r}")


class Function:
    """A callable compiled function of a :class:`~tvmpy.runtime.module.Module`.

    ``cfunc`` is the ctypes function pointer; ``signature`` the function's entry of the module
    metadata. Use :meth:`prepare` + :meth:`call_raw` to call repeatedly without re-checking."""

    def __init__(self, cfunc: Any, signature: dict, module: Any = None, device: Device | None = None):
        self.name: str = signature["name"]
        self.signature = signature
        self.module = module
        self.device = device or cpu(0)
        self.params = [_Param(i, p) for i, p in enumerate(signature["params"])]
        self.shape_vars = [(sv["name"], sv["dtype"], _INT_RANGE.get(sv["dtype"]))
                           for sv in signature["shape_vars"]]
        for name, dtype, _ in self.shape_vars:
            if dtype not in _CTYPES:
                raise ValueError(f"{self.name}: shape var {name} has dtype {dtype}, not passable")
        cfunc.argtypes = [p.ctype for p in self.params] + [_CTYPES[d] for _, d, _ in self.shape_vars]
        cfunc.restype = ctypes.c_int32
        self._cfunc = cfunc
        self._bufs = [p for p in self.params if p.kind == "buffer"]
        buf_pos = {p.index: k for k, p in enumerate(self._bufs)}
        # stride vars (binds with symbolic strides): read off the argument's own strides
        self._stride_vars = [(sv["name"], buf_pos[sv["arg_index"]], sv["dim"])
                             for sv in signature["shape_vars"] if sv.get("source") == "stride"]
        self._scalars = [p for p in self.params if p.kind == "scalar"]
        # positions (in _bufs) of the buffers the kernel may write: the aliasing check's pairs
        self._written = [k for k, p in enumerate(self._bufs) if p.written]
        self._param_names = ", ".join(p.name for p in self.params)
        self._nparams = len(self.params)

    # ---- public -------------------------------------------------------------------------------
    @property
    def entry_name(self) -> str:
        return self.name

    def __call__(self, *args: Any) -> None:
        raw, writeback = self.prepare(args)
        rc = self._cfunc(*raw)
        if writeback:
            for dst, src in writeback:
                if dst is not None:
                    np.copyto(dst, src)
        if rc != 0:
            self._raise_error(rc)

    def __repr__(self) -> str:
        return f"<tvmpy.runtime.Function {self.name}({self._param_names})>"

    def call_raw(self, raw: list[Any]) -> int:
        """Call with arguments returned by :meth:`prepare`; return the C return code."""
        return self._cfunc(*raw)

    # ---- checking -----------------------------------------------------------------------------
    def prepare(self, args: tuple | list) -> tuple[list[Any], list[tuple[Any, np.ndarray]]]:
        """Check ``args``; return the C argument list and [(original or None, scratch copy)]:
        keep the list alive during the call, then copy each scratch back to its original."""
        if len(args) != self._nparams:
            raise TypeError(f"{self.name}() takes {self._nparams} argument(s) "
                            f"({self._param_names}), got {len(args)}")
        env: dict[str, int] = {}
        bound_by: dict[str, Any] = {}
        raw: list[Any] = list(args)
        for p in self._scalars:
            raw[p.index] = v = self._scalar(p, args[p.index])
            if p.range is not None:
                env[p.name] = int(v)
                bound_by[p.name] = p.name
        arrays: list[np.ndarray] = []
        ptrs: list[int | None] = []
        dev_type, dev_id = self.device.device_type, self.device.device_id
        for p in self._bufs:
            a = args[p.index]
            if isinstance(a, NDArray):
                adev = a._device
                if adev.device_type != dev_type or adev.device_id != dev_id:
                    raise ValueError(f"{self.name}: argument {p.name} is on {adev}, but "
                                     f"{self.name} runs on {self.device}")
                arr = a._arr
                ptrs.append(a._ptr if a._compact_aligned else None)
            elif isinstance(a, np.ndarray):
                arr = a
                ptrs.append(None)
            else:
                raise TypeError(f"{self.name}: argument {p.name} must be a tvm.nd.NDArray or "
                                f"numpy.ndarray of {p.dtype} {self._shape_text(p)}, "
                                f"got {type(a).__name__}")
            if arr.dtype != p.np_dtype:
                raise ValueError(f"{self.name}: argument {p.name} must have dtype {p.dtype}, "
                                 f"got {arr.dtype}")
            arrays.append(arr)
            shape = arr.shape
            if shape == p.const_shape:
                continue
            if len(shape) != len(p.dims):
                raise ValueError(f"{self.name}: argument {p.name} must have {len(p.dims)} "
                                 f"dimension(s) {self._shape_text(p)}, got shape {shape}")
            for d, (dim, got) in enumerate(zip(p.dims, shape)):
                if dim.var is not None:
                    have = env.get(dim.var)
                    if have is None:
                        env[dim.var] = got
                        bound_by[dim.var] = (p.name, d)
                    elif have != got:
                        src = bound_by[dim.var]
                        src = (f"argument {src[0]} dim {src[1]}" if isinstance(src, tuple)
                               else f"scalar argument {src}")
                        raise ValueError(f"{self.name}: argument {p.name} dim {d} is {got}, but "
                                         f"{dim.var}={have} from {src}")
                elif dim.const is not None and got != dim.const:
                    raise ValueError(f"{self.name}: argument {p.name} must have shape "
                                     f"{self._shape_text(p)}, got {shape} (dim {d})")
        for name, k, d in self._stride_vars:
            if name not in env:
                arr = arrays[k]
                st = arr.strides[d]
                # an unusable stride (negative, not a whole number of elements) gets the compact
                # one: _pointer then passes a copy laid out that way
                env[name] = (st // arr.itemsize if st >= 0 and st % arr.itemsize == 0
                             else int(np.prod(arr.shape[d + 1:], dtype=np.int64)))
        writeback: list[tuple[Any, np.ndarray]] = []
        seen: dict = {}
        private = self._aliased(arrays, ptrs) if self._written and len(arrays) > 1 else ()
        late: list[tuple[Any, np.ndarray]] = []  # their scratches: copied back last
        for k, (p, arr, ptr) in enumerate(zip(self._bufs, arrays, ptrs)):
            if p.has_expr:
                for d, (dim, got) in enumerate(zip(p.dims, arr.shape)):
                    if dim.expr is not None:
                        want = self._eval(dim, env)
                        if want != got:
                            raise ValueError(f"{self.name}: argument {p.name} dim {d} must be "
                                             f"{dim.text} = {want}, got {got} "
                                             f"(shape {arr.shape})")
            if k in private:  # written, sharing memory with another argument: its own scratch
                raw[p.index] = self._pointer(p, arr, env, late, None)
            elif ptr is not None and p.strides is None:
                raw[p.index] = ptr
            else:
                raw[p.index] = self._pointer(p, arr, env, writeback, seen)
        writeback += late
        for name, dtype, rng in self.shape_vars:
            v = env[name]
            if rng is not None and not rng[0] <= v <= rng[1]:
                raise ValueError(f"{self.name}: shape var {name}={v} does not fit {dtype}")
            raw.append(v)
        return raw, writeback

    def _aliased(self, arrays: list[np.ndarray], ptrs: list[int | None]) -> set[int]:
        """Positions of the written buffers that share memory with another argument (each gets
        a private scratch); ValueError when two written buffers share memory. (``ptrs``: the
        addresses of compact NDArrays, whose byte ranges are compared without numpy.)"""
        out: set[int] = set()
        written = self._written
        for k in written:
            a, pa = arrays[k], ptrs[k]
            for j, b in enumerate(arrays):
                if j == k:
                    continue
                pb = ptrs[j]
                if pa is not None and pb is not None:
                    if pa >= pb + b.nbytes or pb >= pa + a.nbytes:
                        continue
                elif not np.may_share_memory(a, b):  # (bounds: cheap, conservative)
                    continue
                if j in written:
                    if np.shares_memory(a, b):  # exact: interleaved views are disjoint
                        first, second = self._bufs[min(j, k)], self._bufs[max(j, k)]
                        raise ValueError(
                            f"{self.name}: arguments {first.name} and {second.name} share "
                            f"memory, and "
                            f"{self.name} writes both (the result would depend on the order "
                            "of its stores); pass separate arrays")
                    continue
                out.add(k)
        return out

    def _shape_text(self, p: _Param) -> str:
        return "(" + ", ".join(d.text for d in p.dims) + ("," if len(p.dims) == 1 else "") + ")"

    def _eval(self, dim: _Dim, env: dict[str, int]) -> int:
        assert dim.expr is not None
        try:
            return int(dim.expr(env))
        except KeyError as e:
            raise ValueError(f"{self.name}: shape expression {dim.text} uses {e.args[0]}, which "
                             "no argument binds") from None
        except ZeroDivisionError:
            raise ValueError(f"{self.name}: shape expression {dim.text} divides by zero for "
                             f"{env}") from None

    def _scalar(self, p: _Param, v: Any) -> Any:
        if isinstance(v, np.ndarray) and v.ndim == 0:
            v = v[()]
        if p.dtype == "bool":
            if not isinstance(v, (bool, np.bool_, int, np.integer)):
                raise TypeError(f"{self.name}: argument {p.name} must be a bool, "
                                f"got {type(v).__name__}")
            return bool(v)
        if p.range is not None:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"{self.name}: argument {p.name} must be an integer ({p.dtype}), "
                                f"got {type(v).__name__} {v!r}")
            v = int(v)
            if not p.range[0] <= v <= p.range[1]:
                raise ValueError(f"{self.name}: argument {p.name}={v} does not fit {p.dtype}")
            return v
        if p.dtype == "handle":
            if v is None or isinstance(v, (int, np.integer)):
                return v
            if isinstance(v, ctypes.c_void_p):
                return v.value
            raise TypeError(f"{self.name}: argument {p.name} must be a pointer (int or c_void_p), "
                            f"got {type(v).__name__}")
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"{self.name}: argument {p.name} must be a number ({p.dtype}), "
                            f"got {type(v).__name__} {v!r}")
        return float(v)

    def _pointer(self, p: _Param, arr: np.ndarray, env: dict[str, int],
                 writeback: list[tuple[Any, np.ndarray]], seen: dict | None) -> int:
        """The pointer to pass for ``arr``: its own memory when aligned, laid out as declared and
        writable (read-only memory is never handed to a kernel), else an aligned scratch copy.
        One array passed for several parameters gets one scratch (``seen``), except that
        ``seen=None`` (a written buffer aliasing another argument) always makes a scratch of
        its own."""
        ptr = arr.ctypes.data
        writable = arr.flags.writeable
        if p.written and not writable and arr.size:
            raise ValueError(f"{self.name}: argument {p.name} is written by the kernel but the "
                             "array passed is read-only; pass a writable array")
        if p.strides is None:
            want = None
            if (writable and arr.flags.c_contiguous and ptr % ALIGNMENT == 0 and arr.size
                    and seen is not None):
                return ptr
        else:
            want = tuple(self._eval(s, env) if s.expr is not None else
                         (s.const if s.const is not None else env[str(s.var)]) for s in p.strides)
            item = arr.itemsize
            if (writable and arr.size and ptr % ALIGNMENT == 0 and seen is not None and
                    all(n <= 1 or st * item == bs for n, st, bs in zip(arr.shape, want, arr.strides))):
                return ptr
        if arr.size == 0:
            return self._keep(aligned_empty((ALIGNMENT,), np.uint8), writeback)
        key = (ptr, arr.shape, arr.strides, arr.dtype.str, want)
        if seen is not None and key in seen:
            return seen[key]
        if want is None:
            scratch = aligned_empty(arr.shape, arr.dtype)
        else:
            if any(st < 0 for st in want):
                raise ValueError(f"{self.name}: argument {p.name}: negative declared strides {want}")
            span = 1 + sum((n - 1) * st for n, st in zip(arr.shape, want))
            base = aligned_empty((span * item,), np.uint8)
            scratch = np.lib.stride_tricks.as_strided(
                base.view(arr.dtype), shape=arr.shape, strides=[st * item for st in want])
        np.copyto(scratch, arr)
        writeback.append((arr if writable else None, scratch))
        sptr = scratch.ctypes.data
        if seen is not None:
            seen[key] = sptr
        return sptr

    @staticmethod
    def _keep(scratch: np.ndarray, writeback: list) -> int:
        writeback.append((None, scratch))  # alive until the call returns; nothing to copy back
        return scratch.ctypes.data

    def _raise_error(self, rc: int) -> None:
        msg = None
        if self.module is not None:
            msg = self.module._last_error()
        # what a packed function called by the kernel reported (tir.call_packed)
        detail = take_error() if msg and msg.startswith("call_packed") else None
        if detail is not None:
            msg = f"{msg}: {detail[0]}"
        raise RuntimeError(f"{self.name} failed (returned {rc})" + (f": {msg}" if msg else "")
                           ) from (detail[1] if detail else None)
