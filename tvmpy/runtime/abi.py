"""The calling convention shared by every CPU code generator and the runtime (the ABI).

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
:func:`metadata_json`, so that ``load_module`` needs no compiler and no Python IR.

This module holds the convention's data (``Signature`` and its JSON, the symbol names); the
signature *of a PrimFunc* is computed by the code generators' side, ``codegen/abi.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ParamSpec", "ShapeVarSpec", "Signature", "metadata_json", "ERROR_SYMBOL",
           "METADATA_SYMBOL", "LOOKUP_SYMBOL"]

ERROR_SYMBOL = "__tvmpy_last_error"
# ``void* (*)(const char* name)``: the PackedFunc registry's lookup (runtime/packed_func.py), a
# weak NULL pointer in every library, set when the runtime loads it (``tir.call_packed``)
LOOKUP_SYMBOL = "__tvmpy_packed_lookup"
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
    vars: list[Any] = field(default_factory=list, repr=False)

    def to_json(self) -> dict:
        return {"name": self.name, "params": [p.to_json() for p in self.params],
                "shape_vars": [s.to_json() for s in self.shape_vars]}


def metadata_json(sigs: Sequence[Signature | dict], entry: str | None = None,
                  extra: dict | None = None) -> str:
    """JSON describing every function of a module (embedded as ``__tvmpy_metadata``)."""
    funcs = [s.to_json() if isinstance(s, Signature) else dict(s) for s in sigs]
    meta = {"version": 1, "entry": entry or (funcs[0]["name"] if funcs else ""),
            "functions": funcs}
    if extra:
        meta.update(extra)
    return json.dumps(meta, sort_keys=True)
