"""TorchScript input for ``from_pytorch`` (``torch.jit.trace`` / ``torch.jit.script`` output).

A TorchScript graph is lowered to a ``torch.fx.GraphModule`` of the same ATen calls, which then
takes the importer's ordinary paths: ``torch.export`` and the ATen converters for a float model,
the QNN converters of ``quantized`` for a quantized one. There is no second set of converters.

The lowering walks the inlined graph once, running every node on example inputs of the
``shape_list`` shapes (random floats, zero integers) so each value is known concretely:

* ``aten::`` / ``quantized::`` calls that read a tensor of the model become fx ``call_function``
  nodes (the overload of the node's schema; arguments by schema, keyword-only ones as kwargs);
* ``prim::GetAttr`` chains from ``self`` become ``get_attr`` nodes named by their path
  (``"layer1.0.conv1.weight"``: the relay parameter names, as TVM's); packed quantized weights
  are kept as the script objects they are;
* everything else is a Python value: constants, ``prim::ListConstruct`` / ``TupleConstruct`` /
  unpacking, shape arithmetic (``aten::size``, ``prim::NumToTensor``, ``aten::Int``, ...) and
  calls on constants only, folded at import time;
* ``prim::If`` takes its branch and ``prim::Loop`` is unrolled when the condition / trip count is
  known at import time (shapes are static); when it depends on the input data, a clear error
  names the node.

Ops the converters cannot take (after torch's decompositions) are reported together, each with
its TorchScript nodes, in one ``OpNotImplemented``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

from ..common import unsupported_error
from .common import CONVERTERS, IDENTITY_OPS, PyTorchConvertError

__all__ = ["is_torchscript", "script_to_fx", "convert_map_from_tvm"]

_MAX_UNROLLED = 100_000  # nodes evaluated while unrolling loops before giving up

# int codes of c10::ScalarType / MemoryFormat / Layout as TorchScript constants carry them
_SCALAR_TYPES = ["uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
                 "complex32", "complex64", "complex128", "bool", "qint8", "quint8", "qint32",
                 "bfloat16"]
_MEMORY_FORMATS = ["contiguous_format", "preserve_format", "channels_last", "channels_last_3d"]

# ops of tensors whose non-tensor result depends only on static shapes / dtypes
_SHAPE_OPS = {"aten::size", "aten::dim", "aten::numel", "aten::len", "prim::shape",
              "prim::dtype", "prim::device", "prim::layout", "aten::is_floating_point",
              "aten::is_complex", "prim::is_cuda", "prim::is_quantized", "aten::is_contiguous",
              "prim::requires_grad", "prim::data", "aten::__is__", "aten::__isnot__",
              "aten::stride"}


def _floordiv(a: Any, b: Any) -> Any:
    return a // b


# Python implementations of TorchScript's scalar / list ops (generic-typed schemas such as
# ``aten::len.t(t[] a)`` cannot be called through torch.ops)
_SCALAR_OPS: dict[str, Callable[..., Any]] = {
    "aten::add": operator.add, "aten::sub": operator.sub, "aten::mul": operator.mul,
    "aten::div": operator.truediv, "aten::floordiv": _floordiv, "aten::remainder": operator.mod,
    "aten::__mod__": operator.mod, "aten::neg": operator.neg, "aten::pow": operator.pow,
    "aten::eq": operator.eq, "aten::ne": operator.ne, "aten::lt": operator.lt,
    "aten::le": operator.le, "aten::gt": operator.gt, "aten::ge": operator.ge,
    "aten::__not__": operator.not_, "aten::__and__": operator.and_,
    "aten::__or__": operator.or_, "aten::__xor__": operator.xor, "aten::len": len,
    "aten::__getitem__": operator.getitem, "aten::Int": int, "aten::Float": float,
    "aten::Bool": bool, "aten::ScalarImplicit": lambda x: x, "prim::min": min, "prim::max": max,
    "aten::min": min, "aten::max": max, "aten::abs": abs, "prim::abs": abs,
    "aten::__is__": operator.is_, "aten::__isnot__": operator.is_not,
    "aten::__contains__": operator.contains, "aten::floor": math.floor, "aten::ceil": math.ceil,
    "aten::sqrt": math.sqrt, "aten::list": list, "aten::str": str,
    "aten::format": lambda fmt, *a: fmt.replace("{}", "%s") % a if a else fmt,
    "aten::slice": lambda x, start=None, end=None, step=1: x[start:end:step],
    "aten::dict": dict, "aten::keys": lambda d: list(d.keys()),
    "aten::values": lambda d: list(d.values()), "prim::unchecked_cast": lambda x: x,
    "aten::warn": lambda *a: None, "aten::_set_item": operator.setitem,
}  # fmt: skip


# Python-level ops whose result depends only on the structure of their operands (list
# lengths, identity, static shapes), taken in Python even on tensors of the graph
_STRUCTURAL = {"aten::__is__", "aten::__isnot__", "aten::len", "aten::format", "aten::warn",
               "aten::str"}


def is_torchscript(model: Any) -> bool:
    import torch

    return isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction))


class _Poison:
    """The value of a node that could not be run (an unsupported op): whatever reads it is
    skipped, so that every unsupported op is found in one walk."""


_POISON = _Poison()


class _FromData:
    """A Python value (an int, a bool) computed from the input data: the graph is static only
    if nothing uses it; control flow or an op that does raises, naming where it came from."""

    def __init__(self, where: str) -> None:
        self.where = where


class _ModRef:
    """A submodule reached by ``prim::GetAttr``: its path and the script module."""

    def __init__(self, path: str, obj: Any) -> None:
        self.path, self.obj = path, obj


def _flat(v: Any) -> list:
    if isinstance(v, (list, tuple)):
        return [y for x in v for y in _flat(x)]
    if isinstance(v, dict):
        return [y for x in v.values() for y in _flat(x)]
    return [v]


def _where(node: Any) -> str:
    """``%out = kind`` and the node's first source line, for error messages."""
    outs = ", ".join("%" + o.debugName() for o in node.outputs())
    try:
        src = node.sourceRange().strip().splitlines()
    except Exception:  # pragma: no cover - older torch
        src = []
    loc = f" ({src[0].strip()[:100]})" if src else ""
    return f"{outs + ' = ' if outs else ''}{node.kind()}{loc}"


class _Lowering:
    """One walk of a TorchScript graph, building the fx graph (see the module docstring)."""

    def __init__(self, torch: Any, quantized: bool, friendly: bool) -> None:
        self.torch = torch
        self.quantized = quantized
        self.friendly = friendly
        self.fx = torch.fx.Graph()
        self.root = torch.nn.Module()
        self.conc: dict[Any, Any] = {}  # TorchScript value -> concrete value
        self.sym: dict[Any, Any] = {}  # TorchScript value -> python value / fx node / list
        self.dyn: set = set()  # fx nodes that depend on the input data
        self.attrs: dict[str, Any] = {}  # path -> get_attr node
        self.consts: dict[tuple, Any] = {}  # (id, version) -> get_attr node of a folded tensor
        self.missing: dict[str, list[str]] = {}
        self.checked: list[tuple[Any, Any, Any]] = []  # (TorchScript node, overload, args)
        self.budget = _MAX_UNROLLED

    # ---- values ------------------------------------------------------------------------------
    def _install(self, path: str, value: Any, kind: str) -> Any:
        if self.friendly:
            path = path.replace(".", "_")
        if path in self.attrs:
            return self.attrs[path]
        torch = self.torch
        *mods, leaf = path.split(".")
        m = self.root
        for p in mods:
            if p not in m._modules:
                m.add_module(p, torch.nn.Module())
            m = m._modules[p]
        if kind == "param":
            m.register_parameter(leaf, torch.nn.Parameter(value.detach(), requires_grad=False))
        elif kind == "buffer":
            m.register_buffer(leaf, value.detach())
        else:
            setattr(m, leaf, value)
        node = self.fx.get_attr(path)
        self.attrs[path] = node
        return node

    def _const_tensor(self, t: Any) -> Any:
        """A tensor computed at import time, as a constant of the fx graph."""
        key = (id(t), t._version)  # a tensor written in place since is another constant
        node = self.consts.get(key)
        if node is None:
            node = self._install(f"_tensor_constant{len(self.consts)}", t.detach().clone(),
                                 "constant")
            self.consts[key] = node
        return node

    def _arg(self, sym: Any, conc: Any) -> Any:
        """An fx argument: folded tensors become constants, lists element-wise."""
        torch = self.torch
        if isinstance(sym, torch.fx.Node):
            return sym
        if isinstance(sym, (list, tuple)):
            return type(sym)(self._arg(s, c) for s, c in zip(sym, conc))
        if isinstance(sym, torch.Tensor):
            return self._const_tensor(sym)
        if isinstance(sym, _ModRef):
            raise PyTorchConvertError(f"module {sym.path!r} used as a value")
        return sym

    def _is_node(self, sym: Any) -> bool:
        return any(isinstance(x, self.torch.fx.Node) for x in _flat(sym))

    def _is_dyn(self, sym: Any) -> bool:
        return any(x in self.dyn for x in _flat(sym) if isinstance(x, self.torch.fx.Node))

    def _poisoned(self, vals: list) -> bool:
        return any(x is _POISON for x in _flat(vals))

    def _set(self, v: Any, conc: Any, sym: Any) -> None:
        self.conc[v], self.sym[v] = conc, sym

    # ---- walk --------------------------------------------------------------------------------
    def block(self, nodes: Any) -> None:
        for node in nodes:
            self.budget -= 1
            if self.budget < 0:
                raise PyTorchConvertError(f"from_pytorch: more than {_MAX_UNROLLED} nodes run "
                                          f"while unrolling loops, at {_where(node)}")
            self.node(node)

    def node(self, node: Any) -> None:
        kind = node.kind()
        ins = list(node.inputs())
        outs = list(node.outputs())
        src = next((x for x in _flat([self.sym[v] for v in ins]) if isinstance(x, _FromData)),
                   None)
        if src is not None:
            self._from_data(node, src, outs)
            return
        special = _PRIM.get(kind)
        if special is not None:
            special(self, node, ins, outs)
            return
        conc = [self.conc[v] for v in ins]
        sym = [self.sym[v] for v in ins]
        if self._poisoned(conc):
            for o in outs:
                self._set(o, _POISON, _POISON)
            return
        if kind in _STRUCTURAL:  # depends on the values' structure only (len of a list, ...)
            self._scalar(node, kind, conc, outs)
            return
        tensors = [x for x in _flat(conc) if isinstance(x, self.torch.Tensor)]
        if not tensors and kind in _SCALAR_OPS and not self._is_node(sym):
            self._scalar(node, kind, conc, outs)
            return
        _generic(self, node)

    def _from_data(self, node: Any, src: _FromData, outs: list) -> None:
        """A node reading a value computed from the input data: Python values computed from it
        are too; control flow on it, or a tensor from it, is an error naming both nodes."""
        kind = node.kind()
        if kind not in ("prim::If", "prim::Loop") and all(
                o.type().kind() != "TensorType" for o in outs):
            for o in outs:
                self._set(o, src, src)
            return
        what = "the condition of" if kind in ("prim::If", "prim::Loop") else "an input of"
        raise PyTorchConvertError(
            f"from_pytorch: {what} {_where(node)} is computed from the input data (by "
            f"{src.where}); only graphs whose control flow and shapes are known at import "
            "time are supported")

    def _scalar(self, node: Any, kind: str, conc: list, outs: list) -> None:
        try:
            val = _SCALAR_OPS[kind](*conc)
        except Exception as e:
            raise PyTorchConvertError(f"from_pytorch: running {_where(node)} on {conc!r} "
                                      f"failed: {type(e).__name__}: {e}") from e
        if len(outs) == 1:
            self._set(outs[0], val, val)
        else:
            for o, x in zip(outs, val):
                self._set(o, x, x)

    def _overload(self, node: Any) -> Any:
        """The torch.ops overload of the node's schema, or None."""
        schema = node.schema()
        if schema == "(no schema)":
            return None
        name = schema.split("(", 1)[0]
        ns, _, rest = name.partition("::")
        base, _, overload = rest.partition(".")
        try:
            return getattr(getattr(getattr(self.torch.ops, ns), base), overload or "default")
        except (AttributeError, RuntimeError):
            return None

    def _bind(self, op: Any, vals: list) -> tuple[list, dict]:
        """TorchScript passes every argument positionally; keyword-only ones become kwargs and
        enum codes (dtypes, memory formats) torch objects."""
        torch = self.torch
        args: list = []
        kwargs: dict = {}
        for a, v in zip(op._schema.arguments, vals):
            t = str(getattr(a, "real_type", a.type))
            if isinstance(v, int) and not isinstance(v, bool):
                if "ScalarType" in t:
                    v = getattr(torch, _SCALAR_TYPES[v])
                elif "MemoryFormat" in t:
                    v = getattr(torch, _MEMORY_FORMATS[v])
                elif "Layout" in t:
                    v = torch.strided
            if "Device" in t and isinstance(v, str):
                v = torch.device(v)
            if a.kwarg_only:
                kwargs[a.name] = v
            else:
                args.append(v)
        return args, kwargs

    def _target(self, node: Any, op: Any) -> Any:
        """The fx target: the overload; in a quantized graph the Python functions and op
        packets the quantized converters are keyed by."""
        if not self.quantized:
            return op
        torch = self.torch
        kind = node.kind()
        ns, name = kind.split("::")
        if ns == "quantized":
            return getattr(torch.ops.quantized, name)
        if kind == "aten::dequantize":
            return torch.dequantize
        if kind in ("aten::quantize_per_tensor", "aten::relu", "aten::relu_", "aten::cat",
                    "aten::flatten", "aten::reshape", "aten::permute", "aten::transpose",
                    "aten::squeeze", "aten::unsqueeze", "aten::max_pool2d"):
            return getattr(torch, name)
        return op

    def _call(self, node: Any, op: Any, conc: list, sym: list, outs: list) -> None:
        torch = self.torch
        cargs, ckwargs = self._bind(op, conc)
        try:
            with torch.no_grad():
                val = op(*cargs, **ckwargs)
        except Exception as e:
            raise PyTorchConvertError(f"from_pytorch: running {_where(node)} failed: "
                                      f"{type(e).__name__}: {str(e).strip()[:300]}") from e
        vals = [val] if len(outs) == 1 else list(val)
        has_tensor_out = any(isinstance(x, torch.Tensor) for x in _flat(vals))
        kind = node.kind()
        if not self._is_node(sym):
            for o, v in zip(outs, vals):  # computed from constants only: folded
                self._set(o, v, v)
            return
        if not has_tensor_out:
            if self._is_dyn(sym) and kind not in _SHAPE_OPS:
                src = _FromData(_where(node))
                for o in outs:
                    self._set(o, src, src)
                return
            for o, v in zip(outs, vals):
                self._set(o, v, v)
            return
        for a, s in zip(op._schema.arguments, sym):
            if a.alias_info is not None and a.alias_info.is_write and isinstance(s, torch.Tensor):
                raise PyTorchConvertError(
                    f"from_pytorch: {_where(node)} writes graph values into a tensor created "
                    f"in the model ({a.name!r}): not supported; build the result with "
                    "torch.cat / torch.stack instead")
        args, kwargs = self._bind(op, [self._arg(s, c) for s, c in zip(sym, conc)])
        name = outs[0].debugName().replace(".", "_") if outs else kind.split("::")[1]
        if self.quantized and kind.startswith("quantized::") and node.scopeName():
            name = node.scopeName().replace("__module.", "").replace(".", "_") or name
        fxn = self.fx.create_node("call_function", self._target(node, op), tuple(args),
                                  kwargs, name=name)
        if self._is_dyn(sym):
            self.dyn.add(fxn)
        key = str(op)
        if not (kind.startswith("quantized::") or key in CONVERTERS or key in IDENTITY_OPS):
            self.checked.append((node, op, (cargs, ckwargs)))
        if len(outs) == 1:
            self._set(outs[0], val, fxn)
            return
        for k, (o, v) in enumerate(zip(outs, vals)):
            item = self.fx.call_function(operator.getitem, (fxn, k))
            if fxn in self.dyn:
                self.dyn.add(item)
            self._set(o, v, item)


# ---- prim ops ----------------------------------------------------------------------------------
def _constant(lw: _Lowering, node: Any, ins: list, outs: list) -> None:
    out = outs[0]
    try:
        v = out.toIValue()
    except Exception:
        v = _POISON  # a Function constant and such: an error only where it is used
    if isinstance(v, lw.torch.Tensor):
        v = v.detach().clone()
    lw._set(out, v, v)


def _get_attr(lw: _Lowering, node: Any, ins: list, outs: list) -> None:
    torch = lw.torch
    parent = lw.sym[ins[0]]
    name = node.s("name")
    if not isinstance(parent, _ModRef):
        raise PyTorchConvertError(f"from_pytorch: {_where(node)} reads an attribute of a "
                                  "value that is not a module")
    obj = getattr(parent.obj, name)
    path = f"{parent.path}.{name}" if parent.path else name
    if isinstance(obj, torch.jit.ScriptModule) or isinstance(obj, torch.nn.Module):
        v = _ModRef(path, obj)
        lw._set(outs[0], v, v)
    elif isinstance(obj, torch.Tensor):
        params = dict(parent.obj.named_parameters(recurse=False))
        kind = "param" if name in params else "buffer"
        lw._set(outs[0], obj, lw._install(path, obj, kind))
    elif isinstance(obj, torch.ScriptObject):
        lw._set(outs[0], obj, lw._install(path, obj, "object"))
    else:
        lw._set(outs[0], obj, obj)


def _construct(lw: _Lowering, node: Any, ins: list, outs: list) -> None:
    make = tuple if node.kind() == "prim::TupleConstruct" else list
    lw._set(outs[0], make(lw.conc[v] for v in ins), make(lw.sym[v] for v in ins))


def _dict_construct(lw: _Lowering, node: Any, ins: list, outs: list) -> None:
    keys = [lw.conc[v] for v in ins[0::2]]
    lw._set(outs[0], dict(zip(keys, (lw.conc[v] for v in ins[1::2]))),
            dict(zip(keys, (lw.sym[v] for v in ins[1::2]))))


def _items(lw: _Lowering, src: Any, n: int) -> list:
    """The symbolic items of a list/tuple value: its elements, or getitem nodes of an fx node
    that returns a list (``aten::split``)."""
    sym = lw.sym[src]
    if isinstance(sym, (list, tuple)):
        return list(sym)
    if isinstance(sym, lw.torch.fx.Node):
        items = [lw.fx.call_function(operator.getitem, (sym, k)) for k in range(n)]
        if sym in lw.dyn:
            lw.dyn.update(items)
        return items
    return list(sym)


def _unpack(lw: _Lowering, node: Any, ins: list, outs: list) -> None:
    conc = lw.conc[ins[0]]
    if conc is _POISON:
        for o in outs:
            lw._set(o, _POISON, _POISON)
        return
    for o, c, s in zip(outs, conc, _items(lw, ins[0], len(outs))):
        lw._set(o, c, s)


def _tuple_index(lw: _Lowering, node: Any, ins: list, outs: list) -> None:
    k = lw.conc[ins[1]]
    conc = lw.conc[ins[0]]
    lw._set(outs[0], conc[k], _items(lw, ins[0], len(conc))[k])


def _list_getitem(lw: _Lowering, node: Any, ins: list, outs: list) -> None:
    """``aten::__getitem__`` of a list / dict holding tensors picks the item itself."""
    container, k = lw.conc[ins[0]], lw.conc[ins[1]]
    if isinstance(container, (list, tuple, dict)) and not isinstance(k, lw.torch.Tensor):
        if isinstance(container, dict):
            lw._set(outs[0], container[k], lw.sym[ins[0]][k])
        else:
            lw._set(outs[0], container[k], _items(lw, ins[0], len(container))[k])
        return
    _generic(lw, node)


def _generic(lw: _Lowering, node: Any) -> None:
    """A call of the node's torch.ops overload (an unsupported op when it has none)."""
    outs = list(node.outputs())
    op = lw._overload(node)
    ins = list(node.inputs())
    if op is None:
        lw.missing.setdefault(node.kind(), []).append(_where(node))
        for o in outs:
            lw._set(o, _POISON, _POISON)
        return
    lw._call(node, op, [lw.conc[v] for v in ins], [lw.sym[v] for v in ins], outs)


def _append(lw: _Lowering, node: Any, ins: list, outs: list) -> None:
    lst, x = ins
    lw.conc[lst].append(lw.conc[x])
    if lw.sym[lst] is not lw.conc[lst]:
        lw.sym[lst].append(lw.sym[x])
    lw._set(outs[0], lw.conc[lst], lw.sym[lst])


def _num_to_tensor(lw: _Lowering, node: Any, ins: list, outs: list) -> None:
    v = lw.conc[ins[0]]
    t = lw.torch.scalar_tensor(v) if not isinstance(v, lw.torch.Tensor) else v
    if isinstance(v, bool):
        t = t.bool()
    elif isinstance(v, int):
        t = t.long()
    lw._set(outs[0], t, t)


def _identity(lw: _Lowering, node: Any, ins: list, outs: list) -> None:
    lw._set(outs[0], lw.conc[ins[0]], lw.sym[ins[0]])


def _list_copy(lw: _Lowering, node: Any, ins: list, outs: list) -> None:
    conc = lw.conc[ins[0]]
    if isinstance(conc, (list, tuple)):
        lw._set(outs[0], list(conc), list(_items(lw, ins[0], len(conc))))
    else:
        _generic(lw, node)


def _none(lw: _Lowering, node: Any, ins: list, outs: list) -> None:
    lw._set(outs[0], None, None)


def _condition(lw: _Lowering, node: Any, v: Any) -> bool:
    c = lw.conc[v]
    if c is _POISON:
        raise _Skip
    if lw._is_node(lw.sym[v]):
        raise PyTorchConvertError(f"from_pytorch: {_where(node)}: the condition depends on the "
                                  "input data (only control flow known at import time, such "
                                  "as on shapes, is supported)")
    return bool(c)


class _Skip(Exception):
    """Control flow on a value an unsupported op produced."""


def _block_outputs(lw: _Lowering, block: Any) -> list[tuple[Any, Any]]:
    return [(lw.conc[v], lw.sym[v]) for v in block.returnNode().inputs()]


def _if(lw: _Lowering, node: Any, ins: list, outs: list) -> None:
    try:
        cond = _condition(lw, node, ins[0])
    except _Skip:
        for o in outs:
            lw._set(o, _POISON, _POISON)
        return
    blocks = list(node.blocks())
    block = blocks[0] if cond else blocks[1]
    lw.block(block.nodes())
    for o, (c, s) in zip(outs, _block_outputs(lw, block)):
        lw._set(o, c, s)


def _loop(lw: _Lowering, node: Any, ins: list, outs: list) -> None:
    """``prim::Loop(max_trip_count, cond, *carried)``, unrolled."""
    block = next(iter(node.blocks()))
    params = list(block.inputs())  # (i, *carried)
    trip = lw.conc[ins[0]]
    carried = [(lw.conc[v], lw.sym[v]) for v in ins[2:]]
    try:
        if lw._is_node(lw.sym[ins[0]]) or trip is _POISON:
            _condition(lw, node, ins[0])
        cond = _condition(lw, node, ins[1])
    except _Skip:
        for o in outs:
            lw._set(o, _POISON, _POISON)
        return
    i = 0
    while cond and i < trip:
        lw._set(params[0], i, i)
        for p, (c, s) in zip(params[1:], carried):
            lw._set(p, c, s)
        lw.block(block.nodes())
        res = _block_outputs(lw, block)
        cond_v = block.returnNode().inputs().__iter__().__next__()
        try:
            cond = _condition(lw, node, cond_v)
        except _Skip:
            for o in outs:
                lw._set(o, _POISON, _POISON)
            return
        carried = res[1:]
        i += 1
    for o, (c, s) in zip(outs, carried):
        lw._set(o, c, s)


def _raise(lw: _Lowering, node: Any, ins: list, outs: list) -> None:
    msg = lw.conc[ins[0]] if ins else ""
    raise PyTorchConvertError(f"from_pytorch: the model raises at {_where(node)} on the given "
                              f"input shapes: {msg}")


def _unsupported(lw: _Lowering, node: Any, ins: list, outs: list) -> None:
    lw.missing.setdefault(node.kind(), []).append(_where(node))
    for o in outs:
        lw._set(o, _POISON, _POISON)


_PRIM: dict[str, Callable[[_Lowering, Any, list, list], None]] = {
    "prim::Constant": _constant, "prim::GetAttr": _get_attr,
    "prim::ListConstruct": _construct, "prim::TupleConstruct": _construct,
    "prim::DictConstruct": _dict_construct,
    "prim::ListUnpack": _unpack, "prim::TupleUnpack": _unpack, "prim::TupleIndex": _tuple_index,
    "aten::__getitem__": _list_getitem, "aten::append": _append,
    "prim::NumToTensor": _num_to_tensor, "prim::unchecked_cast": _identity,
    "aten::list": _list_copy,
    "prim::Uninitialized": _none, "prim::If": _if, "prim::Loop": _loop,
    "prim::RaiseException": _raise, "prim::CallMethod": _unsupported,
    "prim::CallFunction": _unsupported, "prim::PythonOp": _unsupported,
}  # fmt: skip


# ---- entry -------------------------------------------------------------------------------------
def _inlined_graph(torch: Any, model: Any) -> tuple[Any, bool]:
    """The graph with every method call inlined, and whether its first input is ``self``."""
    if isinstance(model, torch.jit.ScriptFunction):
        g = model.graph.copy()
        torch._C._jit_pass_inline(g)
        return g, False
    if not hasattr(model, "forward"):
        raise TypeError("from_pytorch: the TorchScript module has no forward method")
    return model.inlined_graph, True


_NO_DEFAULT = object()


def _defaults(model: Any, n: int) -> list:
    """Default values of the graph's ``n`` inputs (``_NO_DEFAULT`` where there is none)."""
    try:
        fn = model if not hasattr(model, "forward") else model.forward
        args = list(fn.schema.arguments)
    except Exception:
        return [_NO_DEFAULT] * n
    if args and args[0].name == "self":
        args = args[1:]
    if len(args) != n:
        return [_NO_DEFAULT] * n
    return [a.default_value if a.has_default_value() else _NO_DEFAULT for a in args]


def _has_quantized_ops(graph: Any) -> bool:
    def walk(nodes: Any) -> bool:
        for n in nodes:
            k = n.kind()
            if k.startswith("quantized::") or k in ("aten::quantize_per_tensor",
                                                    "aten::quantize_per_channel"):
                return True
            if any(walk(b.nodes()) for b in n.blocks()):
                return True
        return False

    return walk(graph.nodes())


def _examples(torch: Any, infos: list[tuple[str, list[int], str]]) -> list:
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(s, generator=gen).to(getattr(torch, d)) if d.startswith("float")
            else torch.zeros(s, dtype=getattr(torch, d)) for _, s, d in infos]


def _fill(v: Any, it: Any) -> Any:
    """``v`` with each tensor replaced by the next of ``it``."""
    import torch

    if isinstance(v, torch.Tensor):
        return next(it)
    if isinstance(v, (list, tuple)):
        return type(v)(_fill(x, it) for x in v)
    return v


def _converts(op: Any, cargs: list, ckwargs: dict, table: dict) -> bool:
    """Whether ``op`` on these arguments, exported alone, becomes ops of ``table`` through
    torch's decompositions."""
    import torch

    from .importer import prepare_program

    tensors = [x for x in _flat((cargs, list(ckwargs.values()))) if isinstance(x, torch.Tensor)]

    class _One(torch.nn.Module):
        def forward(self, *ts: Any) -> Any:
            it = iter(ts)
            a = _fill(cargs, it)
            return op(*a, **{n: _fill(v, it) for n, v in ckwargs.items()})

    try:
        ep = torch.export.export(_One(), tuple(tensors))
        return not prepare_program(ep, table)[1]
    except Exception:
        return False


def _check_ops(lw: _Lowering, table: dict) -> None:
    """Each ATen op without a converter of its own must become supported ops through torch's
    decompositions (checked on the op alone, as the quantized importer does)."""
    seen: dict[str, bool] = {}
    for node, op, (cargs, ckwargs) in lw.checked:
        key = str(op)
        if key in table:
            continue
        if key not in seen:
            seen[key] = _converts(op, cargs, ckwargs, table)
        if not seen[key]:
            lw.missing.setdefault(node.kind() + f" ({key})", []).append(_where(node))


def script_to_fx(model: Any, infos: list[tuple[str, list[int], str]],
                 table: Mapping[str, Any] | None = None, friendly_names: bool = False) -> Any:
    """The TorchScript ``model`` as an fx GraphModule, inputs named as in ``infos``, attributes
    by path (``"_"`` for ``"."`` with ``friendly_names``). ATen ops that ``table`` (the
    converters) cannot take raise one ``OpNotImplemented``; a quantized graph's are left to the
    quantized importer's own check."""
    import torch

    if getattr(model, "training", False):
        raise ValueError("from_pytorch: the TorchScript module is in training mode (dropout, "
                         "batch-norm statistics): call model.eval() before tracing / scripting")
    graph, has_self = _inlined_graph(torch, model)
    inputs = list(graph.inputs())
    if has_self:
        inputs = inputs[1:]
    defaults = _defaults(model, len(inputs))
    required = sum(1 for d in defaults if d is _NO_DEFAULT)
    if not required <= len(infos) <= len(inputs):
        raise ValueError(
            f"from_pytorch: shape_list has {len(infos)} entries {[n for n, _, _ in infos]}, "
            f"the TorchScript graph takes {len(inputs)} inputs "
            f"{[v.debugName() for v in inputs]}"
            + (f" ({required} required)" if required < len(inputs) else ""))
    for v in inputs[:len(infos)]:
        t = v.type()
        if t.kind() != "TensorType" and not (t.kind() == "OptionalType"
                                             and t.getElementType().kind() == "TensorType"):
            raise ValueError(f"from_pytorch: graph input %{v.debugName()} is a {t}: "
                             "only tensor inputs are supported (wrap the model so that "
                             "forward takes tensors)")
    quantized = _has_quantized_ops(graph)
    lw = _Lowering(torch, quantized, friendly_names)
    if has_self:
        root = _ModRef("", model)
        lw._set(next(iter(graph.inputs())), root, root)
    for v, (name, _, _), ex in zip(inputs, infos, _examples(torch, infos)):
        ph = lw.fx.placeholder(name)
        lw.dyn.add(ph)
        lw._set(v, ex, ph)
    for v, d in zip(inputs[len(infos):], defaults[len(infos):]):
        lw._set(v, d, d)  # an argument left out: its default
    lw.block(graph.nodes())
    if not quantized:
        _check_ops(lw, dict(table or CONVERTERS))
    if lw.missing:
        raise unsupported_error("from_pytorch", lw.missing)
    rets = [(lw.conc[v], lw.sym[v]) for v in graph.outputs()]
    for k, (c, _) in enumerate(rets):
        leaves = _flat(c)
        if not leaves or not all(isinstance(x, torch.Tensor) for x in leaves):
            raise ValueError(f"from_pytorch: output {k} of the TorchScript graph is "
                             f"{type(c).__name__} {c!r:.60}, not a tensor (or tensors)")
    out = [lw._arg(s, c) for c, s in rets]
    lw.fx.output(out[0] if len(out) == 1 else tuple(out))
    return torch.fx.GraphModule(lw.root, lw.fx).eval()


def convert_map_from_tvm(custom: Mapping[Any, Callable] | None) -> dict:
    """TVM's ``custom_convert_map`` entries (``{"aten::name": fn(inputs, input_types)}``: the
    node's arguments in schema order, tensors as relay expressions, and their dtypes) as the
    importer's (``{"aten.name.overload": fn(node, args)}``, one per overload of the op);
    entries already in the importer's form pass through."""
    import torch

    out: dict = {}
    for key, fn in (custom or {}).items():
        if not (isinstance(key, str) and "::" in key):
            out[key] = fn
            continue
        if not callable(fn):
            raise TypeError(f"from_pytorch: custom_convert_map[{key!r}] is not callable")
        ns, name = key.split("::", 1)
        try:
            packet = getattr(getattr(torch.ops, ns), name)
            overloads = packet.overloads()
        except (AttributeError, RuntimeError):
            raise ValueError(f"from_pytorch: custom_convert_map key {key!r} names no torch "
                             "operator") from None
        for ov in overloads:
            out[f"{ns}.{name}.{ov}"] = _tvm_style(fn)
    return out


def _tvm_style(fn: Callable) -> Callable[[Any, dict], Any]:
    from .common import in_dtype

    def convert(node: Any, args: dict) -> Any:
        types = []
        for name, v in args.items():
            try:
                types.append(in_dtype(node, name))
            except Exception:
                types.append(type(v).__name__)
        return fn(list(args.values()), types)

    return convert
