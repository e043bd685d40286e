"""The ABI (runtime/abi.py) of a lowered PrimFunc: :func:`signature` finds its parameters and
the shape vars appended after them; :func:`module_metadata` is the JSON a module embeds."""

from __future__ import annotations

from typing import Any

from ..ir import dtype as dt
from ..runtime.abi import (
    ERROR_SYMBOL,
    METADATA_SYMBOL,
    ParamSpec,
    ShapeVarSpec,
    Signature,
    metadata_json,
)
from ..tir import expr as E
from ..tir.analysis import written_data_vars
from ..tir.function import PrimFunc
from ..tir.functor import collect_vars

__all__ = ["ParamSpec", "ShapeVarSpec", "Signature", "signature", "module_metadata",
           "ERROR_SYMBOL", "METADATA_SYMBOL"]


def _dim_json(e: E.PrimExpr, names: dict[int, str]) -> Any:
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Var):
        return names.get(id(e), e.name)
    return str(e)  # composite symbolic extent: checked by the runtime after binding vars


def signature(func: PrimFunc) -> Signature:
    """The ABI of ``func``: its parameters and the shape vars appended after them."""
    params: list[ParamSpec] = []
    written = written_data_vars(func)
    param_ids = {id(p) for p in func.params}
    shape_vars: list[ShapeVarSpec] = []
    sv_vars: list[E.Var] = []
    seen: set[int] = set()
    # parameters whose buffers LegalizeStorageDtypes retyped to their storage bits
    logical = func.attrs.get("tir.logical_dtypes", {})
    for idx, p in enumerate(func.params):
        b = func.buffer_map.get(p)
        if b is None:
            params.append(ParamSpec(p.name, "scalar", p.dtype))
            continue
        for d, s in enumerate(b.shape):
            if isinstance(s, E.Var) and id(s) not in param_ids and id(s) not in seen:
                seen.add(id(s))
                shape_vars.append(ShapeVarSpec(s.name, s.dtype, idx, d))
                sv_vars.append(s)
        strides = None
        if b.strides:
            strides = [_dim_json(s, {}) for s in b.strides]
        params.append(ParamSpec(b.name, "buffer", dt.element_of(logical.get(idx, b.dtype)),
                                [_dim_json(s, {}) for s in b.shape], strides,
                                written=id(p) in written or id(b.data) in written))
    # a Var stride not bound otherwise is read off the argument's own stride (in elements)
    for idx, p in enumerate(func.params):
        b = func.buffer_map.get(p)
        for d, s in enumerate(b.strides if b is not None else ()):
            if isinstance(s, E.Var) and id(s) not in param_ids and id(s) not in seen:
                seen.add(id(s))
                shape_vars.append(ShapeVarSpec(s.name, s.dtype, idx, d, "stride"))
                sv_vars.append(s)
    # vars used only inside composite shape expressions can't be read off a dim
    for p in func.params:
        b = func.buffer_map.get(p)
        if b is None:
            continue
        for s in list(b.shape) + list(b.strides):
            for v in collect_vars(s):
                if id(v) not in seen and id(v) not in param_ids:
                    raise ValueError(f"{func.name}: shape variable {v.name} of buffer {b.name} appears only "
                                     "inside an expression; pass it as an explicit scalar argument")
    return Signature(func.name, params, shape_vars, list(func.params) + sv_vars)


def module_metadata(funcs: list[PrimFunc], entry: str | None = None, extra: dict | None = None) -> str:
    """JSON describing every function of a module (embedded as ``__tvmpy_metadata``)."""
    return metadata_json([signature(f) for f in funcs], entry, extra)
