"""PyTorch importer: ``from_pytorch(model, input_infos) -> (IRModule, params)``, as TVM's.

The model goes through ``torch.export``: an ``nn.Module`` (a ``torch.fx.GraphModule`` included)
is exported on example inputs built from ``input_infos``; an ``ExportedProgram`` is taken as it
is; a TorchScript module or function (TVM's input) is first lowered to an fx GraphModule of the
same ATen calls (``torchscript``). The exported ATen graph is converted node by node (by the converters that the
operator-family modules of this package register in ``common.CONVERTERS``). Three steps make
the graph convertible, each only when the previous one leaves an op unsupported: the graph as
exported; functionalized (``run_decompositions({})``: in-place ops become
functional, training-IR composites become their inference forms); and decomposed to core ATen,
keeping every op the converters handle. What is still unsupported then raises ONE
``OpNotImplemented`` listing each op with the node names that use it, before any conversion.

Weights and buffers become relay Vars named after the ``state_dict`` keys (``"conv1.weight"``)
with their values in ``params`` (TVM's from_pytorch); ``freeze_params=True`` embeds them as
Constants instead and returns empty params. Tensor constants created in ``forward`` are always
Constants, and nodes computed only from them are evaluated by torch at import time.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ... import op as _op  # noqa: F401  (registers operators)
from ...expr import Function, RelayExpr, Tuple, const, var
from ...module import IRModule
from ..common import unsupported_error
from .common import CONVERTERS, IDENTITY_OPS, ConvertContext, PyTorchConvertError, np_dtype
from .symbolic import (
    dim,
    dims_equal,
    fix_symbol,
    is_symbolic,
    name_symbol,
    rename_symbol,
    symbol_scope,
)

__all__ = ["from_pytorch", "supported_ops", "PyTorchConvertError"]

_NO_OUTPUT = {"aten._assert_tensor_metadata.default", "aten._assert_scalar.default",
              "aten.sym_constrain_range_for_size.default", "aten._assert_async.msg"}


def supported_ops() -> list[str]:
    """ATen overloads (``"aten.conv2d.default"``, ...) the importer converts."""
    return sorted(set(CONVERTERS) | IDENTITY_OPS | _NO_OUTPUT)


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - torch is an optional dependency
        raise ImportError("from_pytorch needs torch: pip install 'tvmpy[torch]'") from e
    return torch


# ------------------------------------------------------------------------------------------------
# inputs
def _parse_input_infos(input_infos: Any, default_dtype: str) -> list[tuple[str, list[int | str], str]]:
    """[(name, shape)] or [(name, (shape, dtype))] (or a dict name -> shape) as
    [(name, shape, dtype)], every entry checked."""
    if isinstance(input_infos, dict):
        input_infos = list(input_infos.items())
    if not isinstance(input_infos, (list, tuple)):
        raise TypeError(f"from_pytorch: input_infos must be a list of (name, shape) or "
                        f"(name, (shape, dtype)), got {type(input_infos).__name__}")
    out = []
    for k, info in enumerate(input_infos):
        if not (isinstance(info, (list, tuple)) and len(info) == 2 and isinstance(info[0], str)
                and info[0]):
            raise TypeError(f"from_pytorch: input_infos[{k}] must be (name, shape) or "
                            f"(name, (shape, dtype)) with a non-empty name, got {info!r}")
        name, spec = info
        dtype = default_dtype
        if (isinstance(spec, (list, tuple)) and len(spec) == 2
                and isinstance(spec[0], (list, tuple)) and not isinstance(spec[1], (list, tuple))):
            spec, dtype = spec
            dtype = str(dtype).replace("torch.", "")
        try:
            if isinstance(spec, str):
                raise TypeError(spec)
            shape = [_info_dim(d, name, k) for k, d in enumerate(spec)]
        except (TypeError, ValueError):
            raise TypeError(f"from_pytorch: input {name!r}: shape must be a sequence of ints "
                            f"(or symbolic dims: a name, None or relay.Any()), got {spec!r}"
                            ) from None
        if any(isinstance(d, int) and d < 0 for d in shape):
            raise ValueError(f"from_pytorch: input {name!r}: negative dimension in {shape}")
        try:
            np_dtype(dtype)
        except PyTorchConvertError:
            raise ValueError(
                f"from_pytorch: input {name!r}: dtype {dtype!r} is not supported"
            ) from None
        out.append((name, shape, dtype))
    names = [n for n, _, _ in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"from_pytorch: duplicate input names {dup} in input_infos")
    return out


def _info_dim(d: Any, name: str, k: int) -> int | str:
    """One dim of an input_infos shape: an int, or a symbolic dim as its name (a str as
    given, ``f"{name}_dim{k}"`` for None / ``relay.Any()``)."""
    from ...ty import Any as AnyDim

    if isinstance(d, str):
        if not d.isidentifier():
            raise TypeError(f"symbolic dim name {d!r} is not an identifier")
        return d
    if d is None or isinstance(d, AnyDim):
        return f"{name}_dim{k}"
    return int(d)


def _static_infos(infos: list[tuple[str, list[int | str], str]], what: str
                  ) -> list[tuple[str, list[int], str]]:
    """``infos`` with int shapes only: symbolic dims need the torch.export path."""
    for name, shape, _ in infos:
        if not all(isinstance(d, int) for d in shape):
            raise ValueError(f"from_pytorch: input {name!r} has symbolic dims {shape}: {what} "
                             "model converts at static shapes only (export an nn.Module, or "
                             "give an ExportedProgram with dynamic_shapes, for symbolic dims)")
    return [(n, [int(d) for d in s], t) for n, s, t in infos]


def _example(torch, shape: list[int | str], dtype: str) -> Any:
    # a symbolic dim is exported at size 2: torch.export specializes a dim of size 1
    return torch.zeros([d if isinstance(d, int) else 2 for d in shape], dtype=getattr(torch, dtype))


def _dynamic_shapes(torch, infos: list) -> tuple | None:
    """``torch.export.Dim``s for the symbolic dims of input_infos (one per name)."""
    names = {d for _, s, _ in infos for d in s if isinstance(d, str)}
    if not names:
        return None
    dims = {n: torch.export.Dim(n) for n in sorted(names)}
    return tuple({k: dims[d] for k, d in enumerate(s) if isinstance(d, str)} for _, s, _ in infos)


def _check_arity(model: Any, infos: list[tuple[str, list[int | str], str]]) -> None:
    """input_infos must fill forward's positional parameters (an error naming both lists,
    rather than torch.export's 'too many positional arguments')."""
    import inspect

    try:
        sig = inspect.signature(model.forward)
    except (TypeError, ValueError):
        return
    pos = [p for p in sig.parameters.values()
           if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values()):
        return
    required = [p.name for p in pos if p.default is p.empty]
    if not len(required) <= len(infos) <= len(pos):
        raise ValueError(f"from_pytorch: input_infos has {len(infos)} entries "
                         f"{[n for n, _, _ in infos]}, forward takes {len(required)} required "
                         f"tensor inputs {required}" + (
                             f" (of {[p.name for p in pos]})" if len(pos) > len(required) else ""))


def _export(model: Any, infos: list[tuple[str, list[int | str], str]]) -> Any:
    torch = _torch()
    if model.training:
        raise ValueError("from_pytorch: the model is in training mode (dropout, batch-norm "
                         "statistics): call model.eval() first")
    _check_arity(model, infos)
    args = tuple(_example(torch, s, d) for _, s, d in infos)
    dynamic = _dynamic_shapes(torch, infos)
    from .rnn import symbolic_rnn_export  # nn.LSTM/GRU keep a symbolic sequence length

    try:
        if dynamic is None:
            return torch.export.export(model, args)
        with symbolic_rnn_export():
            return torch.export.export(model, args, dynamic_shapes=dynamic)
    except Exception as e:
        raise ValueError(f"from_pytorch: torch.export.export failed on inputs "
                         f"{[(n, s, d) for n, s, d in infos]}: {type(e).__name__}: {e}") from e


def _program(model: Any, input_infos: Any, default_dtype: str):
    torch = _torch()
    from torch.export import ExportedProgram

    if isinstance(model, ExportedProgram):
        infos = None if input_infos is None else _parse_input_infos(input_infos, default_dtype)
        return model, infos
    if isinstance(model, torch.nn.Module):
        if input_infos is None:
            raise ValueError("from_pytorch: input_infos [(name, shape), ...] are required to "
                             "export an nn.Module")
        infos = _parse_input_infos(input_infos, default_dtype)
        return _export(model, infos), infos
    raise TypeError(f"from_pytorch: model must be a torch.nn.Module, torch.fx.GraphModule, "
                    f"torch.export.ExportedProgram or TorchScript module / function "
                    f"(torch.jit.trace / torch.jit.script), got {type(model).__name__}")


# ------------------------------------------------------------------------------------------------
# support check and graph preparation
def _key(node: Any) -> str:
    return str(node.target)


def _flat_nodes(v: Any) -> list:
    import torch.fx

    if isinstance(v, torch.fx.Node):
        return [v]
    if isinstance(v, (list, tuple)):
        return [n for x in v for n in _flat_nodes(x)]
    if isinstance(v, dict):
        return [n for x in v.values() for n in _flat_nodes(x)]
    return []


def _const_nodes(ep: Any) -> set:
    """Nodes whose value is known at import time: lifted tensor constants, and deterministic
    ATen calls (or getitem) whose every tensor input is known (``torch.arange(4)``, ...)."""
    torch = _torch()
    from torch.export.graph_signature import InputKind

    const_names = {s.arg.name for s in ep.graph_signature.input_specs
                   if s.kind == InputKind.CONSTANT_TENSOR}
    known: set = set()
    for n in ep.graph.nodes:
        if n.op == "placeholder" and n.name in const_names:
            known.add(n)
        elif n.op == "call_function" and (
                n.target is operator.getitem or (
                    isinstance(n.target, torch._ops.OpOverload)
                    and torch.Tag.nondeterministic_seeded not in n.target.tags)):
            ins = _flat_nodes((n.args, n.kwargs))
            if all(i in known for i in ins) and _key(n) not in _NO_OUTPUT:
                known.add(n)
    return known


def _is_sym_node(n: Any) -> bool:
    """A node computing a size (``aten.sym_size.int``, ``operator.mul`` on SymInts ...) or a
    guard's condition (a SymBool, consumed by ``aten._assert_scalar``)."""
    torch = _torch()
    v = n.meta.get("val")
    return (isinstance(v, (torch.SymInt, torch.SymBool, torch.SymFloat))
            or (_key(n) == "aten.sym_size.int" and isinstance(v, int)))


def _sym_value(n: Any) -> Any:
    """A size node's value: an int or a tir expression over the program's symbols (``True``
    for a guard's condition: torch checked it on export; relay does not re-check it)."""
    torch = _torch()
    v = n.meta["val"]
    if isinstance(v, torch.SymBool):
        return True
    if isinstance(v, torch.SymFloat):
        raise PyTorchConvertError(f"node {n.name!r} ({n.target}) computes a symbolic float "
                                  f"{v}: not supported")
    return dim(v)


def _unsupported(ep: Any, table: dict) -> dict[str, list[str]]:
    known = _const_nodes(ep)
    missing: dict[str, list[str]] = {}
    for n in ep.graph.nodes:
        if n.op == "call_function":
            k = _key(n)
            if (n.target is operator.getitem or k in table or k in IDENTITY_OPS
                    or k in _NO_OUTPUT or n in known or _is_sym_node(n)):
                continue
            missing.setdefault(k, []).append(n.name)
        elif n.op not in ("placeholder", "output", "get_attr"):  # get_attr: cond's branches
            missing.setdefault(f"{n.op} {n.target}", []).append(n.name)
    return missing


def _core_table(torch, table: dict) -> Any:
    """Core-ATen decompositions, less the ops the converters take whole."""
    decomp = torch.export.default_decompositions()
    for op in list(decomp.keys()):
        if str(op) in table or str(op) in IDENTITY_OPS:
            del decomp[op]
    return decomp


def prepare_program(ep: Any, table: dict) -> tuple[Any, dict[str, list[str]]]:
    """The program made convertible (as exported, functionalized, or decomposed to core ATen:
    the first that leaves no op unsupported) and the ops still unsupported then."""
    torch = _torch()
    if not _unsupported(ep, table):
        return ep, {}
    try:
        ep = ep.run_decompositions({})
        if _unsupported(ep, table):
            ep = ep.run_decompositions(_core_table(torch, table))
    except Exception as e:
        raise ValueError(f"from_pytorch: torch could not functionalize/decompose the exported "
                         f"program: {type(e).__name__}: {e}") from e
    return ep, _unsupported(ep, table)


def _prepare(ep: Any, table: dict) -> Any:
    ep, missing = prepare_program(ep, table)
    if missing:
        raise unsupported_error("from_pytorch", missing)
    return ep


def _converter_table(custom: Mapping[Any, Callable] | None) -> dict:
    table = dict(CONVERTERS)
    for op, fn in (custom or {}).items():
        name = op if isinstance(op, str) else str(op)
        if not name.startswith("aten.") or name.count(".") != 2 or not callable(fn):
            raise TypeError(f"from_pytorch: custom_convert_map keys are ATen overloads such as "
                            f"'aten.i0.default' and values callables fn(node, args), got "
                            f"{op!r}: {fn!r}")
        table[name] = (lambda f: lambda ctx, node, args: f(node, args))(fn)
    return table


# ------------------------------------------------------------------------------------------------
# conversion
def _bind(ctx: ConvertContext, node: Any) -> dict[str, Any]:
    """The node's arguments by schema name, defaults filled in, fx nodes resolved."""
    out = {}
    for k, arg in enumerate(node.target._schema.arguments):
        if k < len(node.args):
            v = node.args[k]
        elif arg.name in node.kwargs:
            v = node.kwargs[arg.name]
        elif arg.has_default_value():
            v = arg.default_value
        else:
            v = None
        out[arg.name] = ctx.resolve(v)
    return out


def _to_const(torch, v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return const(v.detach().cpu().numpy().copy())
    if isinstance(v, (list, tuple)):
        return [_to_const(torch, x) for x in v]
    return v


def _tensor_np(t: Any, what: str) -> np.ndarray:
    np_dtype(t.dtype)  # refuse unsupported dtypes by name
    return t.detach().cpu().numpy().copy()


def _convert_node(ctx: ConvertContext, node: Any, known: set, table: dict) -> None:
    torch = _torch()
    k = _key(node)
    if node.target is operator.getitem:
        src, idx = node.args
        if src in ctx.values:
            ctx.values[node] = ctx.values[src][idx]
        seq = ctx.expr(src)
        if (idx >= len(seq) or seq[idx] is None) and not node.users:
            return  # an unused second output (max_pool2d_with_indices's indices)
        if idx >= len(seq) or seq[idx] is None:
            raise PyTorchConvertError(
                f"node {node.name!r}: output {idx} of {src.target} node {src.name!r} is not "
                "supported (only its first output is converted)")
        ctx.env[node] = seq[idx]
        return
    if node in known:
        val = node.target(*ctx.resolve_value(node.args), **ctx.resolve_value(node.kwargs))
        ctx.values[node] = val
        ctx.env[node] = _to_const(torch, val)
        return
    if k in _NO_OUTPUT:
        return  # run-time checks of torch's guards: none here
    if _is_sym_node(node):
        ctx.env[node] = _sym_value(node)
        return
    a = _bind(ctx, node)
    if k in IDENTITY_OPS:
        train = a.get("train")
        if train:
            raise PyTorchConvertError(f"{k} node {node.name!r}: train=True is not supported "
                                      "(inference only: call model.eval())")
        src = a.get("self", a.get("input"))
        ctx.env[node] = [src, None] if k == "aten.native_dropout.default" else src
        return
    try:
        ctx.env[node] = table[k](ctx, node, a)
    except TypeError as e:
        if "symbolic expression" not in str(e):
            raise
        shapes = [tuple(v.shape) for v in _flat_vals(node) if hasattr(v, "shape")]
        raise PyTorchConvertError(
            f"{k} node {node.name!r}: its converter takes static sizes only, and the node has "
            f"symbolic ones ({shapes}; {e})") from None


def _flat_vals(node: Any) -> list:
    """The fake values of a node's tensor inputs and outputs."""
    ins = [n.meta.get("val") for n in _flat_nodes((node.args, node.kwargs))]
    out = node.meta.get("val")
    return ins + (list(out) if isinstance(out, (list, tuple)) else [out])


def from_pytorch(model: Any, input_infos: Sequence[Any] | None = None,
                 default_dtype: str | Mapping[Any, Callable] = "float32",
                 freeze_params: bool = False,
                 custom_convert_map: Mapping[Any, Callable[[Any, dict], Any]] | None = None,
                 use_parser_friendly_name: bool = False, keep_quantized_weight: bool = False
                 ) -> tuple[IRModule, dict[str, np.ndarray]]:
    """Convert a PyTorch model to a relay IRModule and its parameters (TVM's from_pytorch).

    ``model``: an ``nn.Module`` in eval mode (a ``torch.fx.GraphModule`` included), exported
    with ``torch.export.export`` on inputs of the given shapes, an ``ExportedProgram``, or a
    TorchScript module / function (``torch.jit.trace`` / ``torch.jit.script``: TVM's input),
    whose graph is lowered to the same ATen calls (``torchscript``); its parameters are named
    by attribute path (``"layer1.0.conv1.weight"``; ``use_parser_friendly_name=True``:
    ``"layer1_0_conv1_weight"``, as TVM). TVM's ``custom_convert_map`` form
    ``{"aten::name": fn(inputs, input_types)}`` is accepted for TorchScript input, and, as in
    TVM, the map may be the third positional argument. ``keep_quantized_weight`` is accepted
    for TVM compatibility: quantized weights are always kept as int8 (QNN) here.
    ``input_infos``: ``[(name, shape)]`` or ``[(name, (shape, dtype))]`` in ``forward``'s
    argument order; the names become the relay inputs' names. Optional for an
    ExportedProgram (then its placeholder names and shapes are used, and when given they are
    checked against the program's). ``default_dtype``: the dtype of inputs given without one.
    ``custom_convert_map``: ``{overload: fn(node, args) -> relay expr (or list)}`` adds or
    replaces converters; the overload as ``torch.ops.aten.i0.default`` or its name
    ``"aten.i0.default"``; ``args`` are the node's arguments by schema name, tensors as relay
    expressions. Outputs are the program's flattened outputs: one, or a relay Tuple.

    A torch.ao quantized model (static post-training quantization: a ``convert_fx``
    GraphModule or an eager-mode ``torch.ao.quantization.convert``ed module, which
    ``torch.export`` cannot take) is converted from its FX graph into the QNN dialect instead
    (``quantized.from_pytorch_quantized``): int8 weights and int32 biases are parameters (or
    Constants with ``freeze_params=True``), quantized outputs are uint8/int8 tensors.
    """
    _torch()  # a clear ImportError first

    from .quantized import from_pytorch_quantized, is_quantized_model
    from .torchscript import convert_map_from_tvm, is_torchscript, script_to_fx

    del keep_quantized_weight  # quantized weights stay int8 (QNN) in any case
    if isinstance(default_dtype, Mapping):  # TVM's order: (model, input_infos, custom_map)
        if custom_convert_map is not None:
            raise TypeError("from_pytorch: custom_convert_map given twice")
        custom_convert_map = default_dtype
        default_dtype = "float32"
    if is_torchscript(model):
        if input_infos is None:
            raise ValueError("from_pytorch: input_infos (TVM's shape_list) [(name, shape), "
                             "...] are required for a TorchScript module")
        infos = _static_infos(_parse_input_infos(input_infos, default_dtype), "a TorchScript")
        custom_convert_map = convert_map_from_tvm(custom_convert_map)
        model = script_to_fx(model, infos, _converter_table(custom_convert_map),
                             friendly_names=use_parser_friendly_name)
    elif use_parser_friendly_name:
        raise ValueError("from_pytorch: use_parser_friendly_name applies to TorchScript input "
                         "(an nn.Module's parameters keep their state_dict names)")
    if is_quantized_model(model):
        if input_infos is None:
            raise ValueError("from_pytorch: input_infos [(name, shape), ...] are required for a "
                             "quantized model")
        return from_pytorch_quantized(model, _static_infos(
                                      _parse_input_infos(input_infos, default_dtype),
                                      "a quantized"),
                                      freeze_params=freeze_params,
                                      custom_convert_map=custom_convert_map)
    ep, infos = _program(model, input_infos, default_dtype)
    table = _converter_table(custom_convert_map)
    ep = _prepare(ep, table)
    with symbol_scope():
        return _convert_exported(ep, infos, table, freeze_params)


def _input_shape(name: str, shape: list[int] | None, dtype: str | None, v: Any) -> list[Any]:
    """A user input's relay shape: the program's (its symbolic dims as relay size vars);
    ``input_infos``, when given, must agree on the static dims and fixes the symbolic ones."""
    have = list(v.shape)
    if shape is None:
        for k, d in enumerate(have):
            name_symbol(d, f"{name}_dim{k}")
        return [dim(d) for d in have]
    ok = len(shape) == len(have) and dtype == np_dtype(v.dtype)
    for d, s in zip(have, shape) if ok else ():
        if isinstance(s, str):  # symbolic as exported: named as input_infos names it
            ok = ok and is_symbolic(d)
            rename_symbol(d, s)
        elif is_symbolic(d):
            fix_symbol(d, s)
    if not ok or not all(isinstance(s, str) or dims_equal(d, s) for d, s in zip(have, shape)):
        raise ValueError(f"from_pytorch: input {name!r}: input_infos gives {dtype}{shape}, "
                         f"the program was exported with {np_dtype(v.dtype)}"
                         f"{[str(d) for d in have]}")
    return [dim(d) for d in have]


def _convert_exported(ep: Any, infos: list | None, table: dict, freeze_params: bool
                      ) -> tuple[IRModule, dict[str, np.ndarray]]:
    torch = _torch()
    from torch.export.graph_signature import InputKind, OutputKind

    sig = ep.graph_signature
    nodes = {n.name: n for n in ep.graph.nodes}

    user_specs = [s for s in sig.input_specs if s.kind == InputKind.USER_INPUT]
    if infos is None:
        infos = []
        for s in user_specs:
            v = nodes[s.arg.name].meta.get("val")
            if not isinstance(v, torch.Tensor):
                raise ValueError(f"from_pytorch: program input {s.arg.name!r} is not a tensor")
            infos.append((s.arg.name, None, None))
    if len(infos) != len(user_specs):
        raise ValueError(f"from_pytorch: input_infos has {len(infos)} entries "
                         f"{[n for n, _, _ in infos]}, the model takes {len(user_specs)} tensor "
                         f"inputs {[s.arg.name for s in user_specs]}")

    ctx = ConvertContext()
    inputs: list = []
    param_vars: list = []
    params: dict[str, np.ndarray] = {}
    user_names = {n for n, _, _ in infos}
    for spec, (name, shape, dtype) in zip(user_specs, infos):
        n = nodes[spec.arg.name]
        v = n.meta.get("val")
        if not isinstance(v, torch.Tensor):
            raise ValueError(f"from_pytorch: program input {n.name!r} is not a tensor")
        ctx.env[n] = var(name, shape=_input_shape(name, shape, dtype, v),
                         dtype=np_dtype(v.dtype))
        inputs.append(ctx.env[n])

    for spec in sig.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            continue
        n = nodes[spec.arg.name]
        if spec.kind not in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            raise ValueError(f"from_pytorch: program input {n.name!r} of kind {spec.kind.name} "
                             "is not supported")
        if not n.users:
            continue
        t = ep.state_dict.get(spec.target)
        if t is None:
            t = ep.constants[spec.target]
        if spec.kind == InputKind.CONSTANT_TENSOR:
            ctx.values[n] = t
            ctx.env[n] = const(_tensor_np(t, spec.target))
            continue
        arr = _tensor_np(t, spec.target)
        if freeze_params:
            ctx.env[n] = const(arr)
            continue
        if spec.target in user_names:
            raise ValueError(f"from_pytorch: input name {spec.target!r} is also a parameter "
                             "name: rename the input")
        ctx.env[n] = var(spec.target, shape=arr.shape, dtype=str(arr.dtype))
        param_vars.append(ctx.env[n])
        params[spec.target] = arr

    known = _const_nodes(ep)
    for node in ep.graph.nodes:
        if node.op == "call_function":
            _convert_node(ctx, node, known, table)

    out_node = next(n for n in ep.graph.nodes if n.op == "output")
    outs = []
    for spec, n in zip(sig.output_specs, out_node.args[0]):
        if spec.kind == OutputKind.USER_INPUT_MUTATION:
            continue  # an in-place op on an input (nn.ReLU(inplace=True) first): not an output
        if spec.kind != OutputKind.USER_OUTPUT:
            raise ValueError(f"from_pytorch: the program mutates {spec.target!r} "
                             f"({spec.kind.name}): only inference programs are supported")
        if not isinstance(n, torch.fx.Node) or not isinstance(n.meta.get("val"), torch.Tensor):
            raise ValueError(f"from_pytorch: output {len(outs)} ({n!r}) is not a tensor")
        e = ctx.expr(n)
        if not isinstance(e, RelayExpr):
            raise PyTorchConvertError(f"from_pytorch: output {n.name!r} is not a single tensor")
        outs.append((n, e))
    body = outs[0][1] if len(outs) == 1 else Tuple([e for _, e in outs])
    mod = IRModule.from_expr(Function(inputs + param_vars, body))
    from ...transform import InferType
    from ...transform.float16_accumulation import widen_imported

    mod = InferType()(mod)
    mod = widen_imported(mod)  # float16 accumulates in float32, as torch's CPU kernels
    _check_outputs(mod, [n for n, _ in outs])
    return mod, params


def convert_program(ep: Any, inputs: Sequence[RelayExpr], table: dict) -> list[RelayExpr]:
    """The outputs of a prepared ExportedProgram (``prepare_program``) as relay expressions, its
    user inputs bound to ``inputs`` and its weights, buffers and constants embedded as
    Constants (the quantized importer converts its float nodes with this)."""
    from torch.export.graph_signature import InputKind, OutputKind

    ctx = ConvertContext()
    nodes = {n.name: n for n in ep.graph.nodes}
    user = iter(inputs)
    for spec in ep.graph_signature.input_specs:
        n = nodes[spec.arg.name]
        if spec.kind == InputKind.USER_INPUT:
            ctx.env[n] = next(user)
            continue
        t = ep.state_dict.get(spec.target)
        if t is None:
            t = ep.constants[spec.target]
        if spec.kind == InputKind.CONSTANT_TENSOR:
            ctx.values[n] = t
        ctx.env[n] = const(_tensor_np(t, spec.target))
    known = _const_nodes(ep)
    for node in ep.graph.nodes:
        if node.op == "call_function":
            _convert_node(ctx, node, known, table)
    out_node = next(n for n in ep.graph.nodes if n.op == "output")
    return [ctx.expr(n) for spec, n in zip(ep.graph_signature.output_specs, out_node.args[0])
            if spec.kind == OutputKind.USER_OUTPUT]


def _check_outputs(mod: IRModule, out_nodes: list) -> None:
    """The converted outputs' types must be torch's: a mismatch is a converter bug, caught here
    rather than as a wrong answer."""
    from ...ty import TupleType

    ret = mod["main"].body.checked_type
    types = list(ret.fields) if isinstance(ret, TupleType) else [ret]
    for n, t in zip(out_nodes, types):
        v = n.meta["val"]
        want = ([dim(d) for d in v.shape], np_dtype(v.dtype))
        got = (list(t.shape), str(t.dtype))
        if (got[1] != want[1] or len(got[0]) != len(want[0])
                or not all(dims_equal(a, b) for a, b in zip(got[0], want[0]))):
            raise PyTorchConvertError(f"from_pytorch: output {n.name!r} converted to "
                                      f"{got[1]}{got[0]}, torch gives {want[1]}{want[0]}")
