"""A small textual LLVM IR builder used by the LLVM code generator.

Why text and not ``llvmlite.ir``: we need opaque pointers, ``distinct`` self-referential loop
metadata, per-instruction fast-math flags and the LLVM 22 spelling of the masked memory
intrinsics; writing the text ourselves keeps all of that explicit, and it is faster to build.

Values are ``Value(ty, ref)`` pairs: the LLVM type text and the operand text (``%x``, a constant,
``@global``). Types are derived from tvmpy dtypes by :func:`llvm_type` (bool is ``i1`` in
registers and ``i8`` in memory, float16 is ``half``).
"""

from __future__ import annotations

import math
import struct
from typing import Any, NamedTuple

from ..ir import dtype as dt

__all__ = ["CodegenError", "Value", "llvm_type", "scalar_type", "const_scalar", "const_value", "FunctionBuilder",
           "ModuleBuilder", "intrinsic_suffix"]


class CodegenError(ValueError):
    """The IR cannot be compiled by the LLVM backend (the message says why and what to do)."""


class Value(NamedTuple):
    ty: str
    ref: str

    def __str__(self) -> str:
        return f"{self.ty} {self.ref}"


_SCALAR = {"float": {16: "half", 32: "float", 64: "double"}}


def scalar_type(dtype: str, memory: bool = False) -> str:
    """LLVM type of one lane of ``dtype``."""
    d = dt.parse(dtype)
    if d.kind == "bool":
        return "i8" if memory else "i1"
    if d.kind in ("int", "uint"):
        return f"i{d.bits}"
    if d.kind == "float":
        return _SCALAR["float"][d.bits]
    if d.kind == "handle":
        return "ptr"
    raise TypeError(f"no LLVM type for dtype {dtype}")  # pragma: no cover


def llvm_type(dtype: str, memory: bool = False) -> str:
    """LLVM type of ``dtype`` (``<16 x float>`` for float32x16)."""
    lanes = dt.lanes_of(dtype)
    s = scalar_type(dtype, memory)
    return s if lanes == 1 else f"<{lanes} x {s}>"


def intrinsic_suffix(ty: str) -> str:
    """Overload suffix of an intrinsic for type text ``ty``: ``f32``, ``v16f32``, ``i64``."""
    names = {"half": "f16", "float": "f32", "double": "f64", "ptr": "p0"}
    if ty.startswith("<"):
        lanes, _, elem = ty[1:-1].partition(" x ")
        return f"v{lanes}{names.get(elem, elem)}"
    return names.get(ty, ty)


def _float_text(value: float, ty: str) -> str:
    """Exact LLVM text of a float constant (hex: always parses, NaN/inf included)."""
    import numpy as np

    if ty == "half":
        bits = int(np.array(value, dtype=np.float16).view(np.uint16))
        return f"0xH{bits:04X}"
    if math.isnan(value):
        return "0x7FF8000000000000"
    if ty == "float":
        with np.errstate(over="ignore"):
            value = float(np.float32(value))
    return "0x{:016X}".format(struct.unpack("<Q", struct.pack("<d", value))[0])


def const_scalar(value: float | int | bool, ty: str) -> str:
    """Operand text of a scalar constant of LLVM type ``ty``."""
    if ty == "i1":
        return "true" if value else "false"
    if ty.startswith("i"):
        bits = int(ty[1:])
        v = int(value) & ((1 << bits) - 1)
        if v >= 1 << (bits - 1):
            v -= 1 << bits
        return str(v)
    if ty in ("half", "float", "double"):
        return _float_text(float(value), ty)
    if ty == "ptr":
        return "null"
    raise TypeError(f"no constant of type {ty}")  # pragma: no cover


def const_value(value: Any, dtype: str, memory: bool = False) -> Value:
    """A constant Value of ``dtype``; vectors take one value (splat) or a list of lane values."""
    ty = llvm_type(dtype, memory)
    lanes = dt.lanes_of(dtype)
    st = scalar_type(dtype, memory)
    if lanes == 1:
        return Value(ty, const_scalar(value, st))
    vals = value if isinstance(value, (list, tuple)) else [value] * lanes
    return Value(ty, "<" + ", ".join(f"{st} {const_scalar(v, st)}" for v in vals) + ">")


class FunctionBuilder:
    """Blocks of instructions of one function; fresh SSA names; allocas hoisted to entry."""

    def __init__(self, name: str, ret: str, params: list[tuple[str, str, str]], attrs: str,
                 linkage: str = ""):
        """``params``: (type, param-attributes, name) triples."""
        self.name = name
        self.ret = ret
        self.params = params
        self.attrs = attrs
        self.linkage = linkage
        self._counter = 0
        self.allocas: list[str] = []
        self.blocks: list[tuple[str, list[str]]] = []
        self.cur: str = ""
        self.lines: list[str] = []
        self.terminated = False
        self.new_block("entry")

    # ---- names and blocks --------------------------------------------------------------------
    def fresh(self, hint: str = "t") -> str:
        self._counter += 1
        hint = "".join(c if (c.isascii() and c.isalnum()) or c in "._" else "_" for c in hint) or "t"
        if hint[0].isdigit():
            hint = "v" + hint
        return f"%{hint}.{self._counter}"

    def label(self, hint: str) -> str:
        return self.fresh(hint)[1:]

    def new_block(self, label: str) -> None:
        self.lines = []
        self.blocks.append((label, self.lines))
        self.cur = label
        self.terminated = False

    def emit(self, text: str) -> None:
        if self.terminated:  # code after a return/branch: put it in an unreachable block
            self.new_block(self.label("dead"))
        self.lines.append("  " + text)

    def value(self, ty: str, text: str, hint: str = "t") -> Value:
        """Emit ``%name = <text>`` and return it as a Value of type ``ty``."""
        name = self.fresh(hint)
        self.emit(f"{name} = {text}")
        return Value(ty, name)

    def terminate(self, text: str) -> None:
        self.emit(text)
        self.terminated = True

    def br(self, label: str, meta: str = "") -> None:
        self.terminate(f"br label %{label}{meta}")

    def cond_br(self, cond: Value, t: str, f: str, meta: str = "") -> None:
        self.terminate(f"br i1 {cond.ref}, label %{t}, label %{f}{meta}")

    def alloca(self, ty: str, align: int, hint: str = "stack") -> Value:
        name = self.fresh(hint)
        self.allocas.append(f"  {name} = alloca {ty}, align {align}")
        return Value("ptr", name)

    # ---- output ------------------------------------------------------------------------------
    def text(self) -> str:
        params = ", ".join(" ".join(x for x in p if x) for p in self.params)
        head = f"define {self.linkage + ' ' if self.linkage else ''}{self.ret} @{self.name}({params}) {self.attrs} {{"
        out = [head]
        for i, (label, lines) in enumerate(self.blocks):
            out.append(f"{label}:")
            if i == 0:
                out.extend(self.allocas)
            out.extend(lines)
            if not lines or not _is_terminator(lines[-1]):
                out.append("  unreachable")
        out.append("}")
        return "\n".join(out)


def _is_terminator(line: str) -> bool:
    s = line.strip()
    return s.startswith(("ret ", "br ", "unreachable", "ret void", "switch "))


class ModuleBuilder:
    """Functions, declarations, globals, string constants and metadata of one LLVM module."""

    def __init__(self, name: str, triple: str, datalayout: str):
        self.name = name
        self.triple = triple
        self.datalayout = datalayout
        self.globals: list[str] = []
        self.decls: dict[str, str] = {}  # symbol -> declaration text
        self.decl_sigs: dict[str, tuple[str, tuple[str, ...]]] = {}
        self.functions: list[FunctionBuilder] = []
        self._strings: dict[str, str] = {}
        self.metadata: list[str] = []
        self.attribute_groups: list[str] = []

    def declare(self, name: str, ret: str, args: list[str], attrs: str = "") -> str:
        """Declare external function ``name`` once; a second, different signature raises."""
        sig = (ret, tuple(args))
        if any(f.name == name for f in self.functions):
            raise TypeError(f"external function {name!r} has the name of a function of this "
                            "module; rename the function")
        old = self.decl_sigs.get(name)
        if old is not None:
            if old != sig:
                raise TypeError(f"external function {name!r} is called with two signatures: "
                                f"{old[0]}({', '.join(old[1])}) and {ret}({', '.join(args)})")
            return name
        self.decl_sigs[name] = sig
        self.decls[name] = f"declare {ret} @{name}({', '.join(args)}){' ' + attrs if attrs else ''}"
        return name

    def string(self, s: str) -> Value:
        """A private NUL-terminated string constant; returns a ptr Value to it."""
        ref = self._strings.get(s)
        if ref is None:
            data = s.encode("utf-8") + b"\0"
            esc = "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:02X}" for b in data)
            ref = f"@.str.{len(self._strings)}"
            self._strings[s] = ref
            self.globals.append(f"{ref} = private unnamed_addr constant [{len(data)} x i8] "
                                f"c\"{esc}\", align 1")
        return Value("ptr", ref)

    def add_metadata(self, body: str, distinct: bool = False, self_ref: bool = False) -> str:
        """Add ``!N = [distinct ]!{...}``; ``self_ref`` prepends ``!N`` itself (loop ids)."""
        idx = len(self.metadata)
        ref = f"!{idx}"
        if self_ref:
            body = f"{ref}, {body}" if body else ref
        self.metadata.append(f"{ref} = {'distinct ' if distinct else ''}!{{{body}}}")
        return ref

    def add_attribute_group(self, text: str) -> str:
        ref = f"#{len(self.attribute_groups)}"
        self.attribute_groups.append(f"attributes {ref} = {{ {text} }}")
        return ref

    def text(self) -> str:
        out = [f"; ModuleID = '{self.name}'", f'source_filename = "{self.name}"']
        if self.datalayout:
            out.append(f'target datalayout = "{self.datalayout}"')
        if self.triple:
            out.append(f'target triple = "{self.triple}"')
        out.append("")
        out.extend(self.globals)
        out.append("")
        for f in self.functions:
            out.append(f.text())
            out.append("")
        out.extend(self.decls.values())
        out.append("")
        out.extend(self.attribute_groups)
        out.extend(self.metadata)
        return "\n".join(out) + "\n"
