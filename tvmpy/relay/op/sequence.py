"""Operators on run-time lists of tensors (``ListType``): ONNX sequences whose length is known
only at run time.

A sequence whose length the ONNX importer knows is a relay tuple (static, compiled like any
tuple); a list serves where the length is a run-time value: a sequence grown in a Loop, read at
a run-time position, or fed as a graph input of unknown length. Lists hold arrays of one dtype
whose shapes may differ; they are values of the executors (the interpreter's ``ListValue``; the
VM keeps them as objects), so these operators have no kernels: each is a run-time builtin
(``TRuntimeBuiltin``, OPAQUE: never fused). The ops that give a tensor read its shape from the
value they produce (``TValueShaped``).

    list.empty(dtype)                 -> List[dtype]
    list.from_tuple(t, dtype)         -> List[...]   (the tuple's fields in order)
    list.insert(l, x, pos, append)    -> l with x inserted before pos (at the end when append)
    list.at(l, pos)                   -> the element at pos (negative: from the back)
    list.erase(l, pos, last)          -> l without the element at pos (the last when last)
    list.length(l)                    -> int64 scalar
    list.concat(l, axis, new_axis)    -> the elements concatenated (stacked when new_axis)
    list.split(x, split, axis, keepdims, ones) -> x split along axis (ONNX SplitToSequence:
                                         split a chunk size or the sizes; ones: size-1 parts)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr import RelayExpr, RelayTypeError
from ..ty import Any as AnyDim
from ..ty import ListType, TensorType, TupleType, Type, type_str
from .registry import OpPattern, make_call, register_op, register_op_attr

__all__ = ["empty", "from_tuple", "insert", "at", "erase", "length", "concat", "split",
           "LIST_OPS"]


def _list_arg(t: Type, op: str) -> ListType:
    if not isinstance(t, ListType):
        raise RelayTypeError(f"{op}: the first argument must be a list, got {type_str(t)}")
    return t


def _index_arg(t: Type, op: str) -> None:
    if not (isinstance(t, TensorType) and t.dtype.startswith(("int", "uint"))
            and len(t.shape) <= 1 and all(d == 1 for d in t.shape if isinstance(d, int))):
        raise RelayTypeError(f"{op}: the position must be an integer scalar, got {type_str(t)}")


def _join(a: TensorType | None, b: TensorType, op: str) -> TensorType:
    from ..type_infer import unify

    if a is None:
        return b
    u = unify(a, b)
    if u is None:
        raise RelayTypeError(f"{op}: element {type_str(b)} does not fit a list of "
                             f"{type_str(a)} (same dtype and rank needed)")
    assert isinstance(u, TensorType)
    return u


def _empty_rel(args: list[Type], attrs: Any) -> Type:
    return ListType(None, attrs.dtype)


def _from_tuple_rel(args: list[Type], attrs: Any) -> Type:
    t = args[0]
    if not isinstance(t, TupleType):
        raise RelayTypeError(f"list.from_tuple: expected a tuple, got {type_str(t)}")
    elem: TensorType | None = None
    for f in t.fields:
        if not isinstance(f, TensorType) or f.dtype != attrs.dtype:
            raise RelayTypeError(f"list.from_tuple: fields must be {attrs.dtype} tensors, got "
                                 f"{type_str(f)}")
        elem = _join(elem, f, "list.from_tuple")
    return ListType(elem, attrs.dtype)


def _insert_rel(args: list[Type], attrs: Any) -> Type:
    lt = _list_arg(args[0], "list.insert")
    x = args[1]
    if not isinstance(x, TensorType) or x.dtype != lt.dtype:
        raise RelayTypeError(f"list.insert: the element must be a {lt.dtype} tensor, got "
                             f"{type_str(x)}")
    _index_arg(args[2], "list.insert")
    return ListType(_join(lt.elem, x, "list.insert"))


def _at_rel(args: list[Type], attrs: Any) -> Type:
    lt = _list_arg(args[0], "list.at")
    _index_arg(args[1], "list.at")
    if lt.elem is None:
        raise RelayTypeError("list.at: reads an element of a list that is always empty")
    return lt.elem


def _erase_rel(args: list[Type], attrs: Any) -> Type:
    lt = _list_arg(args[0], "list.erase")
    _index_arg(args[1], "list.erase")
    return lt


def _length_rel(args: list[Type], attrs: Any) -> Type:
    _list_arg(args[0], "list.length")
    return TensorType((), "int64")


def _concat_rel(args: list[Type], attrs: Any) -> Type:
    lt = _list_arg(args[0], "list.concat")
    if lt.elem is None:
        raise RelayTypeError("list.concat: the element shape is unknown (an always-empty list)")
    shape = list(lt.elem.shape)
    r = len(shape) + (1 if attrs.new_axis else 0)
    if not -r <= attrs.axis < r:
        raise RelayTypeError(f"list.concat: axis {attrs.axis} out of range for rank {r}")
    ax = attrs.axis % r
    if attrs.new_axis:
        shape.insert(ax, AnyDim("seq_len"))
    else:
        shape[ax] = AnyDim("concat")
    return TensorType(shape, lt.dtype)


def _split_rel(args: list[Type], attrs: Any) -> Type:
    x = args[0]
    if not isinstance(x, TensorType):
        raise RelayTypeError(f"list.split: the input must be a tensor, got {type_str(x)}")
    r = len(x.shape)
    if not -r <= attrs.axis < r:
        raise RelayTypeError(f"list.split: axis {attrs.axis} out of range for rank {r}")
    shape = list(x.shape)
    ax = attrs.axis % r
    if attrs.ones and not attrs.keepdims:
        del shape[ax]
    else:
        shape[ax] = 1 if attrs.ones else AnyDim("part")
    return ListType(TensorType(shape, x.dtype))


def _np_split(attrs: Any, ins: list, t: Any) -> Any:
    from ..interpreter import ListValue

    x = np.asarray(ins[0])
    ax = attrs.axis % x.ndim
    n = x.shape[ax]
    if attrs.ones:
        parts = np.split(x, n, axis=ax) if n else []
        return ListValue(p if attrs.keepdims else np.squeeze(p, ax) for p in parts)
    split = np.asarray(ins[1]).astype(np.int64)
    if split.ndim == 0:
        c = int(split)
        if c <= 0:
            raise ValueError(f"SplitToSequence: split {c} must be positive")
        sizes = [c] * (n // c) + ([n % c] if n % c else [])
    else:
        sizes = [int(v) for v in split]
        if sum(sizes) != n or min(sizes, default=0) < 0:
            raise ValueError(f"SplitToSequence: split {sizes} does not add up to the axis "
                             f"size {n}")
    return ListValue(np.split(x, np.cumsum(sizes)[:-1], axis=ax))


def _pos(v: Any, n: int, what: str, inclusive: bool = False) -> int:
    p = int(np.asarray(v).reshape(-1)[0])
    hi = n if inclusive else n - 1
    q = p + n if p < 0 else p
    if not 0 <= q <= hi:
        raise IndexError(f"{what}: position {p} out of range for a sequence of {n} "
                         f"(valid: {-n} .. {hi})")
    return q


def _np_empty(attrs: Any, ins: list, t: Any) -> Any:
    from ..interpreter import ListValue

    return ListValue()


def _np_from_tuple(attrs: Any, ins: list, t: Any) -> Any:
    from ..interpreter import ListValue

    return ListValue(np.asarray(x) for x in ins[0])


def _np_insert(attrs: Any, ins: list, t: Any) -> Any:
    from ..interpreter import ListValue

    lst = ListValue(ins[0])
    q = len(lst) if attrs.append else _pos(ins[2], len(lst), "SequenceInsert", inclusive=True)
    lst.insert(q, np.asarray(ins[1]))
    return lst


def _np_at(attrs: Any, ins: list, t: Any) -> Any:
    return ins[0][_pos(ins[1], len(ins[0]), "SequenceAt")]


def _np_erase(attrs: Any, ins: list, t: Any) -> Any:
    from ..interpreter import ListValue

    lst = ListValue(ins[0])
    if not lst:
        raise IndexError("SequenceErase: the sequence is empty")
    del lst[len(lst) - 1 if attrs.last else _pos(ins[1], len(lst), "SequenceErase")]
    return lst


def _np_length(attrs: Any, ins: list, t: Any) -> Any:
    return np.asarray(len(ins[0]), dtype=np.int64)


def _np_concat(attrs: Any, ins: list, t: Any) -> Any:
    if not ins[0]:
        raise ValueError("ConcatFromSequence: the sequence is empty")
    if attrs.new_axis:
        return np.stack(ins[0], axis=attrs.axis)
    return np.concatenate(ins[0], axis=attrs.axis)


LIST_OPS = {
    "list.empty": (_empty_rel, 0, {"dtype": "float32"}, _np_empty),
    "list.from_tuple": (_from_tuple_rel, 1, {"dtype": "float32"}, _np_from_tuple),
    "list.insert": (_insert_rel, 3, {"append": False}, _np_insert),
    "list.at": (_at_rel, 2, {}, _np_at),
    "list.erase": (_erase_rel, 2, {"last": False}, _np_erase),
    "list.length": (_length_rel, 1, {}, _np_length),
    "list.concat": (_concat_rel, 1, {"axis": 0, "new_axis": False}, _np_concat),
    "list.split": (_split_rel, 2, {"axis": 0, "keepdims": True, "ones": False}, _np_split),
}

for _name, (_rel, _n, _attrs, _impl) in LIST_OPS.items():
    register_op(_name, _rel, OpPattern.OPAQUE, _n, attrs=_attrs,
                description="run-time list builtin (ONNX sequences)")
    register_op_attr(_name, "FNumpy", _impl)
    register_op_attr(_name, "TRuntimeBuiltin", True)
    if _name in ("list.at", "list.concat"):
        register_op_attr(_name, "TValueShaped", True)


def empty(dtype: str) -> RelayExpr:
    return make_call("list.empty", [], {"dtype": str(dtype)})


def from_tuple(t: RelayExpr, dtype: str) -> RelayExpr:
    return make_call("list.from_tuple", [t], {"dtype": str(dtype)})


def insert(lst: RelayExpr, x: RelayExpr, pos: RelayExpr | None = None) -> RelayExpr:
    from ..expr import const

    p = pos if pos is not None else const(np.int64(0))
    return make_call("list.insert", [lst, x, p], {"append": pos is None})


def at(lst: RelayExpr, pos: RelayExpr) -> RelayExpr:
    return make_call("list.at", [lst, pos])


def erase(lst: RelayExpr, pos: RelayExpr | None = None) -> RelayExpr:
    from ..expr import const

    p = pos if pos is not None else const(np.int64(-1))
    return make_call("list.erase", [lst, p], {"last": pos is None})


def length(lst: RelayExpr) -> RelayExpr:
    return make_call("list.length", [lst])


def concat(lst: RelayExpr, axis: int, new_axis: bool = False) -> RelayExpr:
    return make_call("list.concat", [lst], {"axis": int(axis), "new_axis": bool(new_axis)})


def split(x: RelayExpr, sizes: RelayExpr | None, axis: int, keepdims: bool = True
          ) -> RelayExpr:
    """ONNX SplitToSequence at run time: ``sizes`` a chunk size or the part sizes; None: parts
    of size 1 (squeezed unless keepdims)."""
    from ..expr import const

    s = sizes if sizes is not None else const(np.int64(1))
    return make_call("list.split", [x, s], {"axis": int(axis), "keepdims": bool(keepdims),
                                            "ones": sizes is None})
