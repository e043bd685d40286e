"""The calling convention shared by every CPU code generator and the runtime.

A lowered PrimFunc ``f`` compiles to the C function

    int32_t f(<params...>, <shape vars...>)

- each buffer parameter (a handle Var in ``buffer_map``) is a ``void*`` to element 0, 64-byte
  aligned when it comes from tvmpy's NDArray; each scalar parameter is passed as its dtype
  (int32 -> int32_t, int64 -> int64_t, float32 -> float, float64 -> double);
- then the *shape vars*: the free Vars in the buffers' shapes (and strides) that are not
  parameters themselves, in first-seen order (shapes first); the runtime reads each one off the
  shape of the argument that carries it (``arg_index``, ``dim``), or off its stride in elements
  (``source: "stride"``), after checking every argument's shape;
- the return value is 0 on success; on a failed AssertStmt the function stores a pointer to the
  message (a NUL-terminated constant) in the module's global ``const char* __tvmpy_last_error``
  and returns -1.

A module (shared library) also exports ``const char __tvmpy_metadata[]``: the JSON of
:func:`module_metadata`, so that ``load_module`` needs no compiler and no Python IR.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..ir import dtype as dt
from ..tir import expr as E
from ..tir.function import PrimFunc
from ..tir.functor import collect_vars

__all__ = ["ParamSpec", "ShapeVarSpec", "Signature", "signature", "module_metadata",
           "ERROR_SYMBOL", "METADATA_SYMBOL"]

ERROR_SYMBOL = "__tvmpy_last_error"
METADATA_SYMBOL = "__tvmpy_metadata"


@dataclass
class ParamSpec:
    name: str
    kind: str  # "buffer" or "scalar"
    dtype: str  # element dtype for buffers
    shape: list[Any] = field(default_factory=list)  # ints, or var names (str) for symbolic dims
    strides: list[Any] | None = None  # None: compact row-major
    written: bool = False  # the kernel may store into this buffer (an output)

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "dtype": self.dtype, "shape": self.shape,
                "strides": self.strides, "written": self.written}


@dataclass
class ShapeVarSpec:
    name: str
    dtype: str
    arg_index: int
    dim: int
    source: str = "shape"  # "shape": the argument's extent in ``dim``; "stride": its stride there

    def to_json(self) -> dict:
        out = {"name": self.name, "dtype": self.dtype, "arg_index": self.arg_index, "dim": self.dim}
        if self.source != "shape":
            out["source"] = self.source
        return out


@dataclass
class Signature:
    name: str
    params: list[ParamSpec]
    shape_vars: list[ShapeVarSpec]
    # the Var objects, for code generators: params then shape vars, in ABI order
    vars: list[E.Var] = field(default_factory=list, repr=False)

    def to_json(self) -> dict:
        return {"name": self.name, "params": [p.to_json() for p in self.params],
                "shape_vars": [s.to_json() for s in self.shape_vars]}


def _dim_json(e: E.PrimExpr, names: dict[int, str]) -> Any:
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Var):
        return names.get(id(e), e.name)
    return str(e)  # composite symbolic extent: checked by the runtime after binding vars


def _written_data_vars(func: PrimFunc) -> set[int]:
    """ids of the data Vars the body may write: stores, write-mode access pointers, and any
    data Var handed to an external call as is (conservatively an output)."""
    from ..tir import stmt as S
    from ..tir.functor import post_order_visit

    out: set[int] = set()

    def visit(n: Any) -> None:
        if isinstance(n, S.BufferStore):
            out.add(id(n.buffer.data))
        elif isinstance(n, E.Call):
            if n.op == "tvm_access_ptr":
                mask = n.args[4]
                if not isinstance(mask, E.IntImm) or mask.value & 2:
                    out.add(id(n.args[1]))
            elif n.op in ("call_extern", "call_pure_extern", "address_of"):
                for a in n.args:
                    if isinstance(a, E.Var) and a.dtype == "handle":
                        out.add(id(a))
                    elif isinstance(a, E.BufferLoad) and n.op == "address_of":
                        out.add(id(a.buffer.data))

    post_order_visit(func.body, visit)
    return out


def signature(func: PrimFunc) -> Signature:
    """The ABI of ``func``: its parameters and the shape vars appended after them."""
    params: list[ParamSpec] = []
    written = _written_data_vars(func)
    param_ids = {id(p) for p in func.params}
    shape_vars: list[ShapeVarSpec] = []
    sv_vars: list[E.Var] = []
    seen: set[int] = set()
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
        params.append(ParamSpec(b.name, "buffer", dt.element_of(b.dtype),
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
    sigs = [signature(f).to_json() for f in funcs]
    meta = {"version": 1, "entry": entry or (funcs[0].name if funcs else ""), "functions": sigs}
    if extra:
        meta.update(extra)
    return json.dumps(meta, sort_keys=True)
