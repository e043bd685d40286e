"""The operator registry: one ``Op`` per operator name, with what every layer needs to know of it.

Each operator declares, at registration:

* ``type_rel(arg_types, attrs) -> Type``: the output type from the argument types (shape and dtype
  inference); it raises ``RelayTypeError`` with a message that states the mismatching shapes
  (type inference adds which node it was);
* ``pattern``: its fusion pattern kind (``OpPattern``, the numbers are TVM's);
* ``num_inputs`` (-1: variadic, e.g. a tuple argument) and an attribute schema (name -> default),
  used to fill defaults, reject unknown attributes, and print only non-default ones.

Later layers attach more per-operator attributes with ``register_op_attr`` (as TVM's
``FTVMCompute``/``FTVMStrategy``): the compute, and the strategy (implementations with priorities
per target), e.g. ``register_op_attr("nn.conv2d", "FTVMStrategy", fn)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...ir import op as _ir_op
from ...ir.node import Node

__all__ = [
    "OpPattern",
    "Op",
    "register_op",
    "register_op_attr",
    "register_compute",
    "register_strategy",
    "register_alter_op_layout",
    "register_pattern",
    "register_float16_accumulation",
    "FLOAT16_ACCUMULATION",
    "register_mixed_precision_conversion",
    "MIXED_PRECISION_CONVERSION",
    "get",
    "list_op_names",
]


class OpPattern:
    """Fusion pattern kinds (values as in TVM's ``relay.op.OpPattern``)."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMWISE_FUSABLE = 4
    TUPLE = 7
    OPAQUE = 8

    @staticmethod
    def name_of(kind: int) -> str:
        for k, v in vars(OpPattern).items():
            if v == kind and k.isupper():
                return k
        return str(kind)


_REQUIRED = object()  # attribute schema default meaning "must be given"


class Op(Node):
    """An operator, e.g. ``relay.op.get("nn.conv2d")``. One object per name (compared by identity).

    The registered facts live outside the node (``Op.entry``), so that later layers can attach
    computes and strategies without rebuilding any graph.
    """

    __slots__ = ("name",)

    def __init__(self, name: str):
        self._init(name=name)

    @property
    def entry(self) -> _OpEntry:
        return _REGISTRY[self.name]

    @property
    def type_rel(self) -> Callable[..., Any]:
        return self.entry.type_rel

    @property
    def pattern(self) -> int:
        return self.entry.pattern

    @property
    def num_inputs(self) -> int:
        return self.entry.num_inputs

    @property
    def attrs_schema(self) -> dict[str, Any]:
        return self.entry.attrs_schema

    @property
    def description(self) -> str:
        return self.entry.description

    def get_attr(self, key: str, default: Any = None) -> Any:
        """A per-operator attribute attached with ``register_op_attr`` (or ``default``).

        ``"TOpPattern"`` (TVM's key) is the registered pattern.
        """
        if key == "TOpPattern":
            return self.entry.pattern
        return self.entry.attrs.get(key, default)

    def __str__(self) -> str:
        return self.name

    def __reduce__(self):
        return (get, (self.name,))


class _OpEntry:
    __slots__ = ("op", "type_rel", "pattern", "num_inputs", "attrs_schema", "description", "attrs")

    def __init__(self, op, type_rel, pattern, num_inputs, attrs_schema, description):
        self.op = op
        self.type_rel = type_rel
        self.pattern = pattern
        self.num_inputs = num_inputs
        self.attrs_schema = attrs_schema
        self.description = description
        self.attrs: dict[str, Any] = {}


_REGISTRY: dict[str, _OpEntry] = {}


def register_op(
    name: str,
    type_rel: Callable[..., Any],
    pattern: int,
    num_inputs: int,
    attrs: Mapping[str, Any] | None = None,
    description: str = "",
) -> Op:
    """Register operator ``name``; returns its Op. Registering a name twice is an error."""
    if name in _REGISTRY:
        raise ValueError(f"operator {name!r} is already registered")
    if not callable(type_rel):
        raise TypeError(f"type_rel of {name!r} must be callable")
    op = Op(name)
    _REGISTRY[name] = _OpEntry(op, type_rel, int(pattern), int(num_inputs), dict(attrs or {}), description)
    return op


def register_op_attr(name: str, key: str, value: Any = None, level: int = 10) -> Any:
    """Attach ``key`` (e.g. "FTVMCompute", "FTVMStrategy") to operator ``name``.

    Usable as a decorator when ``value`` is omitted. A higher ``level`` overrides a lower one.
    """

    def _set(v: Any) -> Any:
        entry = _entry(name)
        old = entry.attrs.get("__level__" + key)
        if old is not None and old > level:
            return v
        entry.attrs[key] = v
        entry.attrs["__level__" + key] = level
        return v

    if value is None:
        return _set
    return _set(value)


def register_compute(name: str, fcompute: Any = None, level: int = 10) -> Any:
    """TVM's ``relay.op.register_compute``: ``fcompute(attrs, inputs, out_type) -> [te.Tensor]``."""
    return register_op_attr(name, "FTVMCompute", fcompute, level)


def register_strategy(name: str, fstrategy: Any = None, level: int = 10) -> Any:
    """TVM's ``relay.op.register_strategy``: ``fstrategy(attrs, inputs, out_type, target)`` returns
    the implementations (compute + schedule) with priorities for that target."""
    return register_op_attr(name, "FTVMStrategy", fstrategy, level)


def register_alter_op_layout(name: str, falter: Any = None, level: int = 10) -> Any:
    """TVM's ``relay.op.register_alter_op_layout``: ``FTVMAlterOpLayout`` of ``name``, the
    target's rewrite of one call for the AlterOpLayout pass (its signature: see
    ``relay.transform.alter_op_layout``)."""
    return register_op_attr(name, "FTVMAlterOpLayout", falter, level)


#: the per-operator attribute saying how the operator computes on float16 operands (read by
#: ``relay/transform/float16_accumulation.py``, as TVM's ``FTVMMixedPrecisionConversionType``):
#: "accumulate" (it sums many terms: computed in float32 and rounded to float16 once) or
#: "epilogue" (``nn.bias_add``: added in float32 before that one rounding when its data is such
#: an accumulating result, as onnxruntime's Conv and torch's conv2d add their bias)
FLOAT16_ACCUMULATION = "TFloat16Accumulation"
_FLOAT16_KINDS = ("accumulate", "epilogue")


def register_float16_accumulation(name: str, kind: str = "accumulate") -> None:
    """Mark operator ``name`` as computed in float32 on float16 operands (``kind`` "accumulate")
    or as the bias epilogue of such a computation ("epilogue")."""
    if kind not in _FLOAT16_KINDS:
        raise ValueError(f"register_float16_accumulation({name!r}): kind must be one of "
                         f"{_FLOAT16_KINDS}, got {kind!r}")
    register_op_attr(name, FLOAT16_ACCUMULATION, kind)


#: the per-operator attribute read by ``relay.transform.ToMixedPrecision`` (TVM's key):
#: ``f(call, mixed_precision_type) -> [category, accumulation_dtype, output_dtype]``, category
#: one of ``relay.transform.mixed_precision.MIXED_PRECISION_ALWAYS / FOLLOW / NEVER``
MIXED_PRECISION_CONVERSION = "FTVMMixedPrecisionConversionType"


def register_mixed_precision_conversion(name: str, func: Any = None, level: int = 10) -> Any:
    """TVM's ``relay.op.register_mixed_precision_conversion``: how ``ToMixedPrecision`` treats
    calls of ``name``. ``func(call, mixed_precision_type)`` returns ``[category,
    accumulation_dtype, output_dtype]`` (see ``relay/transform/mixed_precision.py``); a higher
    ``level`` overrides a lower one (the defaults are registered at level 10). Usable as a
    decorator when ``func`` is omitted."""
    return register_op_attr(name, MIXED_PRECISION_CONVERSION, func, level)


def register_pattern(name: str, pattern: int) -> None:
    """Change an operator's fusion pattern kind (TVM's ``relay.op.register_pattern``)."""
    _entry(name).pattern = int(pattern)


def _entry(name: str) -> _OpEntry:
    try:
        return _REGISTRY[name]
    except KeyError:
        close = [n for n in _REGISTRY if name.split(".")[-1] in n]
        hint = f" (did you mean {', '.join(sorted(close)[:5])}?)" if close else ""
        raise ValueError(f"operator {name!r} is not registered{hint}") from None


def get(name: str) -> Op:
    """``relay.op.get("nn.relu")``: the registered Op of that name."""
    return _entry(name).op


def list_op_names() -> list[str]:
    return sorted(_REGISTRY)


def make_call(name: str, args: list[Any], attrs: Mapping[str, Any] | None = None) -> Any:
    """Build ``Call(get(name), args, attrs)`` with the schema's defaults filled in.

    Unknown attribute names and missing required ones raise at construction.
    """
    from ..expr import Call

    entry = _entry(name)
    given = dict(attrs or {})
    unknown = sorted(set(given) - set(entry.attrs_schema))
    if unknown:
        raise TypeError(f"{name}: unknown attributes {unknown} (known: {sorted(entry.attrs_schema)})")
    full: dict[str, Any] = {}
    for k, default in entry.attrs_schema.items():
        v = given.get(k, default)
        if v is _REQUIRED:
            raise TypeError(f"{name}: attribute {k!r} is required")
        full[k] = v
    if entry.num_inputs >= 0 and len(args) != entry.num_inputs:
        raise TypeError(f"{name} takes {entry.num_inputs} inputs, got {len(args)}")
    return Call(entry.op, args, full)


REQUIRED = _REQUIRED


def _resolve(name: str) -> Op | None:
    entry = _REGISTRY.get(name)
    return None if entry is None else entry.op


# ``tvm.ir.Op.get("nn.conv2d")`` / ``tvm.ir.register_op_attr("nn.conv2d", ...)`` reach this registry
_ir_op.register_op_resolver(_resolve, register_op_attr)
