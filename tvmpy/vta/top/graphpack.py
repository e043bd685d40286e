"""``vta.top.graph_pack``: pack an int8-quantized relay graph into VTA's blocked layouts (TVM's
``vta/top/graphpack.py``).

Between the ``start_name`` operator (by default the first ``nn.max_pool2d``) and the
``stop_name`` one (the ``nn.global_avg_pool2d``), every int8 x int8 -> int32 ``nn.conv2d`` with
constant weights becomes a packed conv2d: data ``NCHW{bfactor}n{cfactor}c`` (N/n, C/c, H, W, n,
c), kernel ``OIHW{cfactor}o{cfactor}i``, channel counts padded to whole blocks with zeros. The
integer element-wise operators after it that VTA's tensor ALU runs (``add``, ``right_shift``,
``clip``, ``nn.relu``, ``maximum``, ``minimum``, ``cast`` between int8 and int32) stay in the
packed layout, their per-channel constants packed too. Any other consumer of a packed value
(float requantization, pooling, the classifier) gets it back in NCHW (transpose + reshape, the
padded channels sliced off); a packed operator whose input is in NCHW packs it (channel pad,
reshape, transpose). Those layout transforms are plain injective operators: the CPU runs them.

``relay.build(..., target=env.target)`` then offloads each fused function holding a packed
conv2d (with its ALU epilogue) to VTA (``relay/backend/vta_build.py``) and builds the rest for
the host CPU. Padded channels need no care: the padded kernel rows and columns are zero, so
whatever a padded channel holds never reaches a real one, and unpacking drops them.
"""

from __future__ import annotations

from typing import Any, TypeGuard

import numpy as np

from ...relay import op as _op
from ...relay.expr import Call, Constant, Function, RelayExpr, const
from ...relay.transform import InferType
from ...relay.ty import TensorType
from ...relay.visitor import dataflow_post_order

__all__ = ["graph_pack", "GraphPackError", "ALU_OPS"]

#: element-wise operators the tensor ALU runs (min, max, add, shift; clip = min + max)
ALU_OPS = ("add", "right_shift", "clip", "nn.relu", "maximum", "minimum", "cast",
           "annotation.stop_fusion")


class GraphPackError(ValueError):
    """The graph cannot be packed as asked (a missing start/stop operator, a batch that is not
    a multiple of the batch block, ...)."""


def _tensor_type(e: RelayExpr) -> TensorType:
    t = e.checked_type
    if not isinstance(t, TensorType):
        raise GraphPackError(f"graph_pack: expected a tensor-typed expression, got type {t}")
    return t


def _shape(e: RelayExpr) -> tuple[int, ...]:
    return tuple(int(getattr(d, "value", d)) for d in _tensor_type(e).shape)


def _dtype(e: RelayExpr) -> str:
    return str(_tensor_type(e).dtype)


class _Packed:
    """A value held in the packed layout: its expression and its NCHW shape (unpadded)."""

    def __init__(self, expr: RelayExpr, nchw: tuple[int, ...]):
        self.expr, self.nchw = expr, nchw


class _Packer:
    def __init__(self, bfactor: int, cfactor: int, weight_bits: int):
        self.b, self.c, self.weight_bits = bfactor, cfactor, weight_bits
        self.packs: dict[int, RelayExpr] = {}
        self.unpacks: dict[int, RelayExpr] = {}

    def padded(self, c: int) -> int:
        return -(-c // self.c) * self.c

    # ---- layout transforms (relay operators, run on the CPU) --------------------------------
    def pack(self, x: RelayExpr, nchw: tuple[int, ...]) -> RelayExpr:
        hit = self.packs.get(id(x))
        if hit is not None:
            return hit
        n, c, h, w = nchw
        if n % self.b:
            raise GraphPackError(f"graph_pack: batch {n} is not a multiple of bfactor {self.b}")
        cp = self.padded(c)
        y = x
        if cp != c:
            y = _op.nn.pad(y, [(0, 0), (0, cp - c), (0, 0), (0, 0)])
        y = _op.reshape(y, (n // self.b, self.b, cp // self.c, self.c, h, w))
        y = _op.transpose(y, (0, 2, 4, 5, 1, 3))
        self.packs[id(x)] = y
        return y

    def unpack(self, p: _Packed) -> RelayExpr:
        hit = self.unpacks.get(id(p.expr))
        if hit is not None:
            return hit
        n, c, h, w = p.nchw
        cp = self.padded(c)
        y = _op.transpose(p.expr, (0, 4, 1, 5, 2, 3))
        y = _op.reshape(y, (n, cp, h, w))
        if cp != c:
            y = _op.strided_slice(y, [0, 0, 0, 0], [n, c, h, w])
        self.unpacks[id(p.expr)] = y
        return y

    def pack_const(self, arr: np.ndarray, c: int) -> RelayExpr:
        """A per-channel constant ((C,1,1), (1,C,1,1)) or a scalar, in the packed layout."""
        if arr.ndim == 0 or arr.size == 1 and arr.ndim <= 4 and all(d == 1 for d in arr.shape):
            return const(np.asarray(arr.reshape(()), dtype=arr.dtype))
        flat = arr.reshape(-1)
        cp = self.padded(c)
        out = np.zeros(cp, dtype=arr.dtype)
        out[:c] = flat
        return const(out.reshape(1, cp // self.c, 1, 1, 1, self.c))

    def pack_kernel(self, w: np.ndarray) -> np.ndarray:
        o, i, kh, kw = w.shape
        op_, ip = self.padded(o), self.padded(i)
        full = np.zeros((op_, ip, kh, kw), dtype=w.dtype)
        full[:o, :i] = w
        return np.ascontiguousarray(
            full.reshape(op_ // self.c, self.c, ip // self.c, self.c, kh, kw)
            .transpose(0, 2, 4, 5, 1, 3))

    # ---- what can be packed ------------------------------------------------------------------
    def conv_packable(self, call: Call) -> bool:
        a = call.attrs
        w = call.args[1]
        return (isinstance(w, Constant) and len(_shape(call.args[0])) == 4
                and _dtype(call.args[0]) == "int8" and _dtype(w) == "int8"
                and a.data_layout == "NCHW" and (a.kernel_layout or "OIHW") == "OIHW"
                and int(a.groups) == 1 and tuple(a.dilation) == (1, 1)
                and _dtype(call) == "int32")

    def const_packable(self, e: RelayExpr, c: int) -> TypeGuard[Constant]:
        if not isinstance(e, Constant) or _dtype(e) not in ("int32", "int8"):
            return False
        shp = _shape(e)
        if all(d == 1 for d in shp):
            return True
        return shp in ((c, 1, 1), (1, c, 1, 1))


def _is_call(e: Any, name: str) -> bool:
    return isinstance(e, Call) and getattr(e.op, "name", None) == name


def _find(order: list, name: str, idx: int | None, what: str) -> int | None:
    hits = [k for k, e in enumerate(order) if _is_call(e, name)]
    if not hits:
        return None
    if idx is None:
        return hits[0]
    if not 0 <= idx < len(hits):
        raise GraphPackError(f"graph_pack: {what}_name_idx={idx}, but the graph has "
                             f"{len(hits)} {name} calls")
    return hits[idx]


def graph_pack(expr: Any, bfactor: int, cfactor: int, weight_bits: int,
               start_name: str = "nn.max_pool2d", stop_name: str = "nn.global_avg_pool2d",
               start_name_idx: int | None = None, stop_name_idx: int | None = None,
               count_meta: bool = False, device_annot: bool = False,
               annot_start_name: str = "", annot_end_name: str = "") -> Any:
    """Pack the region of ``expr`` (a relay Function, or an IRModule's main) after
    ``start_name`` and before ``stop_name`` into VTA's blocked layouts (see the module
    docstring); returns the same kind it was given. ``weight_bits`` must be 8 (int8 weights).
    Without ``start_name`` in the graph the region starts at the inputs; without
    ``stop_name`` it runs to the output."""
    from ...ir.module import IRModule

    if weight_bits != 8:
        raise GraphPackError(f"graph_pack: weight_bits={weight_bits}; VTA's packed conv2d "
                             "takes int8 weights (8)")
    if bfactor < 1 or cfactor < 1:
        raise GraphPackError(f"graph_pack: bfactor and cfactor must be positive, got "
                             f"{bfactor}, {cfactor}")
    mod = expr if isinstance(expr, IRModule) else IRModule.from_expr(expr)
    func = InferType()(mod)["main"]
    order = dataflow_post_order(func.body)
    lo = _find(order, start_name, start_name_idx, "start")
    hi = _find(order, stop_name, stop_name_idx, "stop")
    lo = -1 if lo is None else lo
    hi = len(order) if hi is None else hi
    if hi <= lo:
        raise GraphPackError(f"graph_pack: {stop_name} comes before {start_name}")
    # A packed conv whose fused function would end in a value wider than int8 cannot run on
    # VTA (its stores narrow to int8): relay.quantize keeps residual branches and the float
    # requantization inputs in int32. Such convs stay in NCHW (tvmpy's llvm int8 kernels);
    # which ones is FuseOps's choice (a residual add joins one of its two convs), so pack,
    # fuse as relay.build will, and repeat without the convs that came out wide.
    keep: set[int] = set()
    for _ in range(len(order) + 1):
        out, convs = _pack_region(func, order, lo, hi, bfactor, cfactor, weight_bits, keep)
        wide = _wide_convs(out, convs)
        if not wide:
            break
        keep |= wide
    if isinstance(expr, IRModule):
        res = expr.copy()
        res["main"] = out
        return res
    return out


def _weight_key(c: Constant) -> tuple:
    arr = c.data.numpy()
    return (arr.shape, hash(arr.tobytes()))


def _wide_convs(func: Function, convs: dict[tuple, int]) -> set[int]:
    """The original convs (ids) whose packed form lands in a fused function with a result that
    is not int8, when ``func`` is fused as relay.build fuses it."""
    from ...ir.module import IRModule
    from ...relay.backend.vta_build import is_vta_function
    from ...relay.build_module import optimize

    fused = optimize(IRModule.from_expr(func), None, "llvm")["main"]
    wide: set[int] = set()
    for e in dataflow_post_order(fused.body):
        if not (isinstance(e, Call) and isinstance(e.op, Function) and is_vta_function(e.op)):
            continue
        if str(getattr(e.checked_type, "dtype", "")) == "int8":
            continue
        for a in e.args:
            if isinstance(a, Constant) and len(_shape(a)) == 6 and _dtype(a) == "int8":
                k = convs.get(_weight_key(a))
                if k is not None:
                    wide.add(k)
    return wide


def _pack_region(func: Function, order: list, lo: int, hi: int, bfactor: int, cfactor: int,
                 weight_bits: int, keep: set[int]) -> tuple[Function, dict[tuple, int]]:
    """One packing of the region (``keep``: ids of convs left in NCHW); the packed function
    and, for each packed kernel constant, the id of its original conv."""
    from ...ir.module import IRModule

    pk = _Packer(bfactor, cfactor, weight_bits)
    new: dict[int, Any] = {}  # id(old) -> new expr or _Packed
    convs: dict[tuple, int] = {}

    def plain(e: RelayExpr) -> RelayExpr:
        v = new.get(id(e), e)
        return pk.unpack(v) if isinstance(v, _Packed) else v

    for k, e in enumerate(order):
        if not isinstance(e, Call) or not hasattr(e.op, "name"):
            if isinstance(e, Call) or hasattr(e, "fields") or hasattr(e, "tuple_value"):
                new[id(e)] = _rebuild(e, plain)
            continue
        if lo < k < hi and id(e) not in keep:
            got = _pack_call(e, pk, new)
            if got is not None:
                new[id(e)] = got
                if _is_call(e, "nn.conv2d"):
                    packed_w = got.expr.args[1] if isinstance(got.expr, Call) else None
                    assert isinstance(packed_w, Constant)  # _pack_call packs the weight
                    convs[_weight_key(packed_w)] = id(e)
                continue
        new[id(e)] = _rebuild(e, plain)
    body = plain(func.body)
    out = Function(list(func.params), body, attrs=func.attrs)
    return InferType()(IRModule.from_expr(out))["main"], convs


def _rebuild(e: Any, plain: Any) -> Any:
    from ...relay.expr import Tuple, TupleGetItem

    if isinstance(e, Call):
        args = [plain(a) for a in e.args]
        return e if all(a is b for a, b in zip(args, e.args)) else Call(e.op, args, e.attrs)
    if isinstance(e, Tuple):
        return Tuple([plain(f) for f in e.fields])
    if isinstance(e, TupleGetItem):
        return TupleGetItem(plain(e.tuple_value), e.index)
    return e


def _pack_call(e: Call, pk: _Packer, new: dict[int, Any]) -> _Packed | None:
    """The packed form of ``e``, or None when it stays in NCHW."""
    name = e.op.name
    if name == "nn.conv2d":
        weight = e.args[1]
        if not pk.conv_packable(e) or not isinstance(weight, Constant):
            return None
        data = e.args[0]
        dv = new.get(id(data), data)
        dexpr = dv.expr if isinstance(dv, _Packed) else pk.pack(dv, _shape(data))
        w = weight.data.numpy()
        attrs = e.attrs
        out_nchw = _shape(e)
        conv = _op.nn.conv2d(
            dexpr, const(pk.pack_kernel(w)), strides=tuple(attrs.strides),
            padding=tuple(attrs.padding),
            dilation=(1, 1), groups=1, channels=pk.padded(out_nchw[1]),
            kernel_size=(w.shape[2], w.shape[3]),
            data_layout=f"NCHW{pk.b}n{pk.c}c", kernel_layout=f"OIHW{pk.c}o{pk.c}i",
            out_dtype="int32")
        return _Packed(conv, out_nchw)
    if name not in ALU_OPS or _dtype(e) not in ("int32", "int8"):
        return None
    nchw = _shape(e)
    if len(nchw) != 4:
        return None
    vals = [new.get(id(a), a) for a in e.args]
    if not any(isinstance(v, _Packed) for v in vals):
        return None
    if name == "cast" and _dtype(e.args[0]) not in ("int32", "int8"):
        return None
    if name == "clip" and not (float(e.attrs.a_min).is_integer()
                               and float(e.attrs.a_max).is_integer()):
        return None
    args = []
    for a, v in zip(e.args, vals):
        if isinstance(v, _Packed):
            if v.nchw != nchw:  # broadcast between packed values: not an ALU op
                return None
            args.append(v.expr)
        elif pk.const_packable(a, nchw[1]):
            args.append(pk.pack_const(a.data.numpy(), nchw[1]))
        elif len(_shape(a)) == 4 and _shape(a) == nchw and _dtype(a) in ("int32", "int8"):
            args.append(pk.pack(v, nchw))  # e.g. a residual computed on the CPU
        else:
            return None
    return _Packed(Call(e.op, args, e.attrs), nchw)
