"""WGSL: one device PrimFunc (``gpu_source.is_kernel``) -> one WebGPU compute shader.

The input is the GPU lowering shared with OpenCL/CUDA (thread binding, shared memory, barriers,
cross-thread reductions); only the spelling differs, and WGSL's rules are checked here:

- buffer parameters are ``var<storage, read|read_write> array<T>`` at ``@group(0) @binding(i)``
  (in parameter order); scalar parameters are 4-byte fields of one uniform struct at the next
  binding; shared allocations are module-scope ``var<workgroup>`` arrays, local ones function
  ``var`` arrays; ``tvm_storage_sync`` is ``workgroupBarrier()``; thread indices come from the
  ``workgroup_id`` / ``local_invocation_id`` builtins.
- WGSL has no 64-bit integers, no float64, no 8/16-bit storage and float16 only with the
  ``shader-f16`` feature. int64 (indices, ONNX's int64 tensors) is computed in i32: an int64
  buffer is ``array<i32>`` with two words per element (loads read the low word, stores write
  it sign-extended, so the bytes are little-endian int64), and the runtime refuses an int64
  input or scalar outside the int32 range (ValueError) rather than truncate it; an int64
  constant beyond 32 bits, float64 and uint64 get a :class:`GPUCodegenError` naming the value.
  bool and 8/16-bit integer buffers are packed into ``u32`` words (the host's bytes): loads
  extract (and sign-extend) the field; a written one is ``array<atomic<u32>>`` and a store is
  ``atomicAnd`` + ``atomicOr`` on the element's bits (threads share words). Such values are
  computed in i32/u32, wrapped into their width at casts and stores.
- a barrier must be in uniform control flow: one under a condition or loop bound that depends on
  the thread index or on memory contents is refused here (browsers reject the shader otherwise).
- vector expressions (Ramp/Broadcast) are scalarized lane by lane; expressions are printed fully
  parenthesized (WGSL forbids mixing some operators without parentheses).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, cast

from ..ir import dtype as dt
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.analysis import written_data_vars
from ..tir.function import PrimFunc
from ..tir.functor import post_order_visit
from .c_prelude import sanitize
from .gpu_source import GPUCodegenError, _buffer_dtypes, _sync_scope, warp_refusal

__all__ = ["WGSLKernel", "emit_wgsl", "wgsl_type"]

_TYPES = {"float32": "f32", "float16": "f16", "int32": "i32", "uint32": "u32", "bool": "bool"}
_STORAGE_OK = ("float32", "float16", "int32", "uint32", "int64")
# 8/16-bit integers and bool: packed in u32 words (little-endian, as the host bytes)
_PACKED = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2}
INT32_MAX = 2**31 - 1
_MATH = {"exp": "exp", "exp2": "exp2", "log": "log", "log2": "log2", "sqrt": "sqrt",
         "tanh": "tanh", "fabs": "abs", "floor": "floor", "ceil": "ceil", "round": "round",
         "nearbyint": "round", "trunc": "trunc", "sin": "sin", "cos": "cos", "tan": "tan",
         "sinh": "sinh", "cosh": "cosh", "asin": "asin", "acos": "acos", "atan": "atan",
         "pow": "pow", "atan2": "atan2", "rsqrt": "inverseSqrt", "fma": "fma"}
_BITWISE = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "shift_left": "<<",
            "shift_right": ">>"}
_ARITH = {E.Add: "+", E.Sub: "-", E.Mul: "*"}
_CMP = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}
# helpers a kernel may call (WGSL has no floor division, erf, log1p, ...)
_HELPERS = {
    "floordiv_i32": "fn floordiv_i32(a: i32, b: i32) -> i32 {\n  let q = a / b;\n"
                    "  if ((a % b != 0) && ((a < 0) != (b < 0))) { return q - 1; }\n  return q;\n}",
    "floormod_i32": "fn floormod_i32(a: i32, b: i32) -> i32 {\n  let r = a % b;\n"
                    "  if ((r != 0) && ((r < 0) != (b < 0))) { return r + b; }\n  return r;\n}",
    # Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7)
    "erf_f32": "fn erf_f32(x: f32) -> f32 {\n  let s = sign(x);\n  let a = abs(x);\n"
               "  let t = 1.0f / (1.0f + 0.3275911f * a);\n"
               "  let y = 1.0f - (((((1.061405429f * t - 1.453152027f) * t) + 1.421413741f) * t"
               " - 0.284496736f) * t + 0.254829592f) * t * exp(-a * a);\n  return s * y;\n}",
    # inf/nan constants: a bitcast of a literal is a const-expression, which Chromium's WGSL
    # compiler (Tint) rejects when it is not finite ("value -inf cannot be represented as
    # 'f32'"); through a function parameter it is evaluated at run time
    "f32_bits": "fn f32_bits(b: u32) -> f32 { return bitcast<f32>(b); }",
}


def wgsl_type(dtype: str, what: str) -> str:
    """The WGSL scalar type of ``dtype`` (GPUCodegenError naming ``what`` when WGSL has none)."""
    elem = dt.element_of(dtype)
    t = _TYPES.get(elem)
    if t is None:
        why = ("WGSL has no 64-bit integers (index arithmetic must be int32)" if elem in
               ("int64", "uint64") else "WGSL has no float64" if elem == "float64" else
               f"WGSL has no {elem} type")
        raise GPUCodegenError(f"{what} is {dtype}: {why}; compute in float32/int32 for webgpu")
    return t


@dataclass
class WGSLKernel:
    """One compute shader and what the runtime binds to it (docs/WEB_ARTEFACT.md, KERNEL)."""

    name: str
    wgsl: str
    workgroup_size: list[int]
    args: list[dict]
    uniform: dict | None
    features: list[str] = field(default_factory=list)

    @property
    def num_storage_buffers(self) -> int:
        return sum(1 for a in self.args if a["kind"] == "buffer")

    def to_json(self) -> dict:
        return {"wgsl": self.wgsl, "entry_point": "main", "workgroup_size": self.workgroup_size,
                "args": self.args, "uniform": self.uniform, "features": self.features}


def _lit_int(v: int, dtype: str) -> str:
    if dtype == "bool":
        return "true" if v else "false"
    if dtype in ("uint32", "uint16", "uint8"):
        return f"{v}u"
    if v == -(2**31):
        return "i32(-2147483647 - 1)"
    return f"{v}i" if v >= 0 else f"({v}i)"


def _lit_float(v: float, dtype: str) -> str:
    suffix = "h" if dtype == "float16" else "f"
    if math.isnan(v):  # f32_bits: see _HELPERS (the caller adds it)
        return f"{'f16' if suffix == 'h' else 'f32'}(f32_bits(0x7fc00000u))"
    if math.isinf(v):
        bits = "0x7f800000u" if v > 0 else "0xff800000u"
        return f"{'f16' if suffix == 'h' else 'f32'}(f32_bits({bits}))"
    text = repr(float(v))
    if "e" not in text and "." not in text:
        text += ".0"
    return f"{text}{suffix}" if v >= 0 else f"({text}{suffix})"


class WGSLEmitter:
    """Prints one device PrimFunc as a WGSL compute shader."""

    def __init__(self, func: PrimFunc):
        self.func = func
        self.names: dict[int, str] = {}
        self.taken: set[str] = set()
        self.lines: list[str] = []
        self.level = 1
        self.module_decls: list[str] = []
        self.index_decls: list[str] = []
        self.helpers: set[str] = set()
        self.extents: dict[str, int] = {}
        self.thread_vars: set[int] = set()  # vars bound to threadIdx (non-uniform)
        self.nonuniform_depth = 0  # enclosing conditions/loops that depend on the thread
        self.f16 = False
        self.let_count = 0
        self.wide: set[int] = set()  # data vars of int64 buffers: two i32 words per element
        # data vars of 8/16-bit and bool buffers -> (element, whether the words are atomic)
        self.packed: dict[int, tuple[str, bool]] = {}

    # ---- names and lines ------------------------------------------------------------------
    def fail(self, what: str) -> GPUCodegenError:
        return GPUCodegenError(f"{self.func.name} (webgpu): {what}")

    def new_name(self, base: str) -> str:
        stem = "v_" + (sanitize(base or "t").strip("_") or "t")
        name, k = stem, 1
        while name in self.taken:
            name, k = f"{stem}_{k}", k + 1
        self.taken.add(name)
        return name

    def bind(self, v: E.Var) -> str:
        name = self.names[id(v)] = self.new_name(v.name)
        return name

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.level + line)

    def type_of(self, dtype: str, what: str) -> str:
        elem = dt.element_of(dtype)
        if elem in ("int64", "int8", "int16"):
            return "i32"  # computed in 32 bits (see the module docstring)
        if elem in ("uint8", "uint16"):
            return "u32"
        t = wgsl_type(dtype, what)
        self.f16 = self.f16 or t == "f16"
        return t

    # ---- the kernel -----------------------------------------------------------------------
    def kernel(self) -> WGSLKernel:
        f = self.func
        elems = _buffer_dtypes(f)
        writes = written_data_vars(f)
        args: list[dict] = []
        header: list[str] = []
        scalars: list[tuple[str, str, str]] = []  # (field, wgsl type, local name)
        binding = 0
        for v in f.params:
            buf = f.buffer_map.get(v)
            if dt.is_handle(v.dtype):
                elem = dt.element_of(buf.dtype) if buf is not None else elems.get(id(v))
                if elem is None:
                    raise self.fail(f"handle parameter {v.name} is never read or written")
                if elem not in _STORAGE_OK and elem not in _PACKED:
                    raise self.fail(f"buffer {v.name} is {elem}: WebGPU storage buffers hold "
                                    "32-bit values (float32, int32, uint32), float16, int64 "
                                    "(as two words) or 8/16-bit integers and bool (packed) "
                                    "only; cast to int32/float32 for webgpu")
                t = self.type_of(elem, f"buffer {v.name}")
                if buf is not None:
                    self._check_size(buf)
                name = self.new_name(buf.name if buf is not None else v.name)
                written = id(v) in writes or (buf is not None and id(buf.data) in writes)
                for key in [v] + ([buf.data] if buf is not None else []):
                    self.names[id(key)] = name
                    if elem == "int64":
                        self.wide.add(id(key))
                    elif elem in _PACKED:
                        self.packed[id(key)] = (elem, written)
                if elem in _PACKED:  # written: threads share words, so atomic bit updates
                    t = "atomic<u32>" if written else "u32"
                access = "read_write" if written else "read"
                header.append(f"@group(0) @binding({binding}) var<storage, {access}> {name}: "
                              f"array<{t}>;")
                args.append({"kind": "buffer", "binding": binding, "dtype": elem,
                             "access": access})
                binding += 1
            else:
                t = self.type_of(v.dtype, f"scalar parameter {v.name}")
                if t == "bool":
                    raise self.fail(f"bool scalar parameter {v.name}: pass an int")
                if t == "f16":
                    raise self.fail(f"float16 scalar parameter {v.name}: pass float32")
                name = self.bind(v)
                args.append({"kind": "scalar", "dtype": v.dtype, "offset": 4 * len(scalars)})
                scalars.append((f"p{len(scalars)}", t, name))
        uniform = None
        if scalars:
            fields = " ".join(f"{fld}: {t}," for fld, t, _ in scalars)
            header.append(f"struct Args {{ {fields} }}")
            header.append(f"@group(0) @binding({binding}) var<uniform> args: Args;")
            uniform = {"binding": binding, "size": max(16, -(-4 * len(scalars) // 16) * 16)}
        self.stmt(f.body)
        wg = [self.extents.get(f"threadIdx.{a}", 1) for a in "xyz"]
        head = [f"@compute @workgroup_size({wg[0]}, {wg[1]}, {wg[2]})",
                "fn main(@builtin(workgroup_id) wg_id: vec3<u32>, "
                "@builtin(local_invocation_id) l_id: vec3<u32>) {"]
        body = ["  " + x for x in [f"let {n} = args.{fld};" for fld, _, n in scalars]
                + self.index_decls] + self.lines
        parts = [f"// {f.name}: WGSL generated by tvmpy"]
        if self.f16:
            parts.append("enable f16;")
        parts += header + self.module_decls + [_HELPERS[h] for h in sorted(self.helpers)]
        parts += ["\n".join(head + body + ["}"])]
        return WGSLKernel(f.name, "\n".join(parts) + "\n", wg, args, uniform,
                          ["shader-f16"] if self.f16 else [])

    def _check_size(self, buf: Any) -> None:
        n = 1
        for d in buf.shape:
            if not E.is_const_int(d):
                return  # symbolic: checked per call by the runtime
            n *= int(d.value)
        if n > INT32_MAX:
            raise self.fail(f"buffer {buf.name} has {n} elements, beyond 32-bit indexing "
                            f"(WGSL indices are i32/u32: at most {INT32_MAX}); split the tensor")

    # ---- statements -----------------------------------------------------------------------
    def stmt(self, s: Any) -> None:
        m = getattr(self, "_s_" + type(s).__name__, None)
        if m is None:
            raise self.fail(f"unsupported statement {type(s).__name__}")
        m(s)

    def _s_SeqStmt(self, s: S.SeqStmt) -> None:
        for x in s.seq:
            self.stmt(x)

    def _s_Evaluate(self, s: S.Evaluate) -> None:
        scope = _sync_scope(s.value)
        if scope is not None:
            if self.nonuniform_depth:
                raise self.fail("a barrier (tvm_storage_sync) under a condition or loop that "
                                "depends on the thread index or memory contents: WGSL requires "
                                "barriers in uniform control flow")
            self.emit("storageBarrier();" if scope == "global" else "workgroupBarrier();")
            return
        if isinstance(s.value, (E.IntImm, E.StringImm)):
            return
        raise self.fail(f"unsupported statement {s.value}")

    def _s_LetStmt(self, s: S.LetStmt) -> None:
        t = self.type_of(s.var.dtype, f"variable {s.var.name}")
        value = self.expr(s.value)
        if self._nonuniform(s.value):
            self.thread_vars.add(id(s.var))
        self.emit(f"let {self.bind(s.var)}: {t} = {value};")
        self.stmt(s.body)

    def _s_AttrStmt(self, s: S.AttrStmt) -> None:
        if s.attr_key == "thread_extent":
            iv = s.node
            var, tag = getattr(iv, "var", None), getattr(iv, "thread_tag", "")
            kind, _, axis = tag.partition(".")
            if var is None or kind not in ("blockIdx", "threadIdx") or axis not in "xyz":
                raise self.fail(f"thread axis {tag!r}; expected blockIdx/threadIdx.x/y/z")
            if kind == "threadIdx":
                if not E.is_const_int(s.value):
                    raise self.fail(f"{tag} has the symbolic extent {s.value}: WGSL needs a "
                                    "constant @workgroup_size")
                self.extents.setdefault(tag, int(cast(E.IntImm, s.value).value))
                self.thread_vars.add(id(var))
            if id(var) not in self.names:
                t = self.type_of(var.dtype, tag)
                src = "wg_id" if kind == "blockIdx" else "l_id"
                self.index_decls.append(f"let {self.bind(var)} = {t}({src}.{axis});")
            self.stmt(s.body)
            return
        if s.attr_key == "virtual_thread":
            raise self.fail("a virtual_thread attribute reached codegen (tvm.lower first)")
        self.stmt(s.body)

    def _s_AssertStmt(self, s: S.AssertStmt) -> None:
        raise self.fail("a WGSL kernel cannot report failures (an assertion inside the "
                        "kernel); check the condition on the host")

    def _s_IfThenElse(self, s: S.IfThenElse) -> None:
        nu = self._nonuniform(s.condition)
        self.nonuniform_depth += nu
        self.emit(f"if ({self.expr(s.condition)}) {{")
        self._block(s.then_case)
        if s.else_case is not None:
            self.emit("} else {")
            self._block(s.else_case)
        self.emit("}")
        self.nonuniform_depth -= nu

    def _block(self, s: Any) -> None:
        self.level += 1
        self.stmt(s)
        self.level -= 1

    def _s_For(self, s: S.For) -> None:
        if s.kind in (S.ForKind.THREAD_BINDING, S.ForKind.PARALLEL):
            raise self.fail(f"loop {s.loop_var.name} is {s.kind.name} inside a kernel; bind "
                            "it to a thread axis or make it serial")
        t = self.type_of(s.loop_var.dtype, f"loop variable {s.loop_var.name}")
        lo, ext = self.expr(s.min), self.expr(s.extent)
        nu = self._nonuniform(s.min) or self._nonuniform(s.extent)
        v = self.bind(s.loop_var)
        if nu:
            self.thread_vars.add(id(s.loop_var))
        end = ext if E.is_const_int(s.min, 0) else f"({lo} + {ext})"
        self.nonuniform_depth += nu
        self.emit(f"for (var {v}: {t} = {lo}; {v} < {end}; {v}++) {{")
        self._block(s.body)
        self.emit("}")
        self.nonuniform_depth -= nu

    def _s_While(self, s: Any) -> None:
        nu = self._nonuniform(s.condition)
        self.nonuniform_depth += nu
        self.emit("loop {")
        self.level += 1
        self.emit(f"if (!({self.expr(s.condition)})) {{ break; }}")
        self.stmt(s.body)
        self.level -= 1
        self.emit("}")
        self.nonuniform_depth -= nu

    def _s_Allocate(self, s: S.Allocate) -> None:
        buf = s.buffer
        scope = buf.scope or "global"
        if len(buf.shape) != 1 or not E.is_const_int(buf.shape[0]):
            raise self.fail(f"{scope} allocation {buf.name} of shape {buf.shape}: WGSL arrays "
                            "need one constant size")
        count = max(int(cast(E.IntImm, buf.shape[0]).value) * dt.lanes_of(buf.dtype), 1)
        t = self.type_of(buf.dtype, f"{scope} allocation {buf.name}")
        name = self.new_name(buf.data.name or buf.name)
        self.names[id(buf.data)] = name
        if scope.startswith("shared"):
            self.module_decls.append(f"var<workgroup> {name}: array<{t}, {count}>;")
        elif scope == "warp":
            raise self.fail(warp_refusal(self.func.name, buf.name))
        elif scope in ("local", "global"):
            self.emit(f"var {name}: array<{t}, {count}>;")
        else:
            raise self.fail(f"storage scope {scope!r} of {buf.name} is not supported")
        self.stmt(s.body)

    def _s_BufferStore(self, s: S.BufferStore) -> None:
        if s.predicate is not None:
            raise self.fail(f"predicated store to {s.buffer.name}")
        lanes = dt.lanes_of(s.value.dtype)
        target = self._array(s.buffer)
        idx = s.indices[0] if len(s.indices) == 1 else None
        if idx is None:
            raise self.fail(f"store to {s.buffer.name} with {len(s.indices)} indices (flatten)")
        if lanes == 1:
            self._store(s.buffer, target, self.expr(idx), self.expr(s.value))
            return
        # all lanes computed before any store (a store may overlap a lane's load)
        vals = []
        for k in range(lanes):
            tmp = f"lane_{self.let_count}"
            self.let_count += 1
            self.emit(f"let {tmp} = {self.expr(s.value, k)};")
            vals.append(tmp)
        for k in range(lanes):
            self._store(s.buffer, target, self.expr(idx, k), vals[k])

    def _store(self, buf: Any, target: str, index: str, value: str) -> None:
        packed = self.packed.get(id(buf.data))
        if packed is not None:
            # clear this element's bits, then set them: two atomic updates of disjoint bits,
            # correct whatever the other threads do to the same word's other elements
            elem, _ = packed
            per, mask = 4 // _PACKED[elem], "0xffu" if _PACKED[elem] == 1 else "0xffffu"
            k = self.let_count
            self.let_count += 1
            bits = {"bool": f"select(0u, 1u, {value})"}.get(elem, f"(bitcast<u32>({value}) & {mask})"
                                                          if elem.startswith("int") else
                                                          f"({value} & {mask})")
            self.emit(f"let pk_i{k} = u32({index});")
            self.emit(f"let pk_s{k} = (pk_i{k} % {per}u) * {32 // per}u;")
            self.emit(f"atomicAnd(&{target}[pk_i{k} / {per}u], ~({mask} << pk_s{k}));")
            self.emit(f"atomicOr(&{target}[pk_i{k} / {per}u], {bits} << pk_s{k});")
            return
        if id(buf.data) not in self.wide:
            self.emit(f"{target}[{index}] = {value};")
            return
        # an int64 element: the low word, then its sign extension
        tmp = f"wide_{self.let_count}"
        self.let_count += 1
        self.emit(f"let {tmp}: i32 = {value};")
        self.emit(f"{target}[2i * {index}] = {tmp};")
        self.emit(f"{target}[2i * {index} + 1i] = select(0i, -1i, {tmp} < 0i);")

    def _array(self, buf: Any) -> str:
        name = self.names.get(id(buf.data))
        if name is None:
            raise self.fail(f"buffer {buf.name} is neither a parameter nor allocated")
        return name

    # ---- uniformity -----------------------------------------------------------------------
    def _nonuniform(self, e: Any) -> bool:
        found = False

        def visit(n: Any) -> None:
            nonlocal found
            if isinstance(n, E.Var) and id(n) in self.thread_vars:
                found = True
            elif isinstance(n, E.BufferLoad):
                found = True

        post_order_visit(e, visit)
        return found

    # ---- expressions ----------------------------------------------------------------------
    def expr(self, e: Any, lane: int | None = None) -> str:
        m = getattr(self, "_e_" + type(e).__name__, None)
        if m is None:
            for base in type(e).__mro__[1:]:
                m = getattr(self, "_e_" + base.__name__, None)
                if m is not None:
                    break
        if m is None:
            raise self.fail(f"unsupported expression {type(e).__name__}: {e}")
        if dt.lanes_of(e.dtype) == 1 and not isinstance(e, (E.Ramp, E.Broadcast)):
            lane_arg = lane
        else:
            lane_arg = lane
        return m(e, lane_arg)

    def _e_Var(self, e: E.Var, lane: int | None) -> str:
        name = self.names.get(id(e))
        if name is None:
            raise self.fail(f"variable {e.name} is used but never defined")
        return name

    def _e_IntImm(self, e: E.IntImm, lane: int | None) -> str:
        self.type_of(e.dtype, f"the constant {e.value}")
        if dt.element_of(e.dtype) == "int64" and not -(2**31) <= int(e.value) <= INT32_MAX:
            raise self.fail(f"the int64 constant {e.value} does not fit 32 bits: WGSL has no "
                            "64-bit integers (int64 is computed in i32 on webgpu)")
        return _lit_int(int(e.value), dt.element_of(e.dtype))

    def _e_FloatImm(self, e: E.FloatImm, lane: int | None) -> str:
        self.type_of(e.dtype, f"the constant {e.value}")
        if not math.isfinite(float(e.value)):
            self.helpers.add("f32_bits")
        return _lit_float(float(e.value), dt.element_of(e.dtype))

    def _e_Cast(self, e: E.Cast, lane: int | None) -> str:
        t = self.type_of(e.dtype, f"the cast {e}")
        src = dt.element_of(e.value.dtype)
        self.type_of(src, f"the cast source {e.value}")
        text = f"{t}({self.expr(e.value, lane)})"
        elem = dt.element_of(e.dtype)
        if elem in ("int8", "int16"):  # wrap into the narrow type, as the store would
            sh = 32 - dt.bits_of(elem)
            return f"(({text} << {sh}u) >> {sh}u)"
        if elem in ("uint8", "uint16"):
            return f"({text} & {'0xffu' if elem == 'uint8' else '0xffffu'})"
        return text

    def _e_Add(self, e: Any, lane: int | None) -> str:
        return self._bin(_ARITH[type(e)], e, lane)

    _e_Sub = _e_Mul = _e_Add

    def _bin(self, op: str, e: Any, lane: int | None) -> str:
        self.type_of(e.dtype, f"the expression {e}")
        return f"({self.expr(e.a, lane)} {op} {self.expr(e.b, lane)})"

    def _e_Div(self, e: E.Div, lane: int | None) -> str:
        return self._bin("/", e, lane)  # WGSL's integer / truncates, as TIR's Div

    def _e_Mod(self, e: E.Mod, lane: int | None) -> str:
        return self._bin("%", e, lane)

    def _e_FloorDiv(self, e: E.FloorDiv, lane: int | None) -> str:
        return self._floor(e, lane, "div")

    def _e_FloorMod(self, e: E.FloorMod, lane: int | None) -> str:
        return self._floor(e, lane, "mod")

    def _floor(self, e: Any, lane: int | None, which: str) -> str:
        t = self.type_of(e.dtype, f"the expression {e}")
        a, b = self.expr(e.a, lane), self.expr(e.b, lane)
        if t in ("f32", "f16"):
            q = f"floor({a} / {b})"
            return q if which == "div" else f"({a} - {q} * {b})"
        if t == "u32":
            return f"({a} {'/' if which == 'div' else '%'} {b})"
        # non-negative operands (the usual index arithmetic) need no helper
        if _non_negative(e.a) and _non_negative(e.b):
            return f"({a} {'/' if which == 'div' else '%'} {b})"
        fn = f"floor{which}_i32"
        self.helpers.add(fn)
        return f"{fn}({a}, {b})"

    def _e_Min(self, e: Any, lane: int | None) -> str:
        self.type_of(e.dtype, f"the expression {e}")
        fn = "min" if isinstance(e, E.Min) else "max"
        return f"{fn}({self.expr(e.a, lane)}, {self.expr(e.b, lane)})"

    _e_Max = _e_Min

    def _e_CmpOp(self, e: Any, lane: int | None) -> str:
        self.type_of(e.a.dtype, f"the comparison {e}")
        return f"({self.expr(e.a, lane)} {_CMP[type(e)]} {self.expr(e.b, lane)})"

    def _e_And(self, e: E.And, lane: int | None) -> str:
        return f"({self.expr(e.a, lane)} && {self.expr(e.b, lane)})"

    def _e_Or(self, e: E.Or, lane: int | None) -> str:
        return f"({self.expr(e.a, lane)} || {self.expr(e.b, lane)})"

    def _e_Not(self, e: E.Not, lane: int | None) -> str:
        return f"(!{self.expr(e.a, lane)})"

    def _e_Select(self, e: E.Select, lane: int | None) -> str:
        return (f"select({self.expr(e.false_value, lane)}, {self.expr(e.true_value, lane)}, "
                f"{self.expr(e.condition, lane)})")

    def _e_Ramp(self, e: E.Ramp, lane: int | None) -> str:
        if lane is None:
            raise self.fail(f"vector expression {e} outside a vector store")
        return f"({self.expr(e.base)} + {self.expr(e.stride)} * {_lit_int(lane, 'int32')})" \
            if lane else self.expr(e.base)

    def _e_Broadcast(self, e: E.Broadcast, lane: int | None) -> str:
        return self.expr(e.value)

    def _e_Let(self, e: E.Let, lane: int | None) -> str:
        t = self.type_of(e.var.dtype, f"variable {e.var.name}")
        value = self.expr(e.value, lane)
        name = self.bind(e.var)
        self.emit(f"let {name}: {t} = {value};")
        return self.expr(e.body, lane)

    def _e_BufferLoad(self, e: E.BufferLoad, lane: int | None) -> str:
        if e.predicate is not None or len(e.indices) != 1:
            raise self.fail(f"load {e} (predicated or not flattened)")
        if dt.element_of(e.buffer.dtype) != dt.element_of(e.dtype):
            raise self.fail(f"load of {e.dtype} from {e.buffer.name} of {e.buffer.dtype}")
        self.type_of(e.dtype, f"the load {e}")
        index = self.expr(e.indices[0], lane)
        packed = self.packed.get(id(e.buffer.data))
        if packed is not None:
            elem, atomic = packed
            nbits = 8 * _PACKED[elem]
            per = 32 // nbits
            i = f"u32({index})"
            word = f"{self._array(e.buffer)}[{i} / {per}u]"
            word = f"atomicLoad(&{word})" if atomic else word
            shift = f"(({i} % {per}u) * {nbits}u)"
            if elem.startswith("int"):  # sign-extend the field
                return f"(bitcast<i32>({word} << ({32 - nbits}u - {shift})) >> {32 - nbits}u)"
            field = f"(({word} >> {shift}) & {'0xffu' if nbits == 8 else '0xffffu'})"
            return f"({field} != 0u)" if elem == "bool" else field
        if id(e.buffer.data) in self.wide:
            return f"{self._array(e.buffer)}[2i * {index}]"
        return f"{self._array(e.buffer)}[{index}]"

    def _e_Call(self, e: E.Call, lane: int | None) -> str:
        op = e.op[4:] if e.op.startswith("tir.") else e.op
        args = list(e.args)
        if op == "likely":
            return self.expr(args[0], lane)
        if op == "if_then_else":
            return self.expr(E.Select(args[0], args[1], args[2]), lane)
        t = self.type_of(e.dtype, f"the call {e}")
        if op in _MATH:
            if t not in ("f32", "f16"):
                raise self.fail(f"{op} of {e.dtype}")
            return f"{_MATH[op]}({', '.join(self.expr(a, lane) for a in args)})"
        x = self.expr(args[0], lane) if args else ""
        if op == "sigmoid":
            return f"(1.0 / (1.0 + exp(-{x})))"
        if op == "log10":
            return f"(log({x}) * 0.4342944819032518)"
        if op == "log1p":
            return f"log(1.0 + {x})"
        if op == "exp10":
            return f"exp({x} * 2.302585092994046)"
        if op == "erf" and t == "f32":
            self.helpers.add("erf_f32")
            return f"erf_f32({x})"
        if op == "fmod":
            return f"({x} % {self.expr(args[1], lane)})"
        if op in ("isnan",):
            return f"({x} != {x})"
        if op in ("isinf", "isfinite"):
            ft = self.type_of(args[0].dtype, "isinf")
            self.helpers.add("f32_bits")
            inf = f"{ft}(f32_bits(0x7f800000u))"
            return f"(abs({x}) == {inf})" if op == "isinf" else f"(abs({x}) < {inf})"
        if op == "abs":
            return f"abs({x})" if t != "u32" else x
        if op in _BITWISE:
            b = self.expr(args[1], lane)
            if op in ("shift_left", "shift_right"):
                b = f"u32({b})"
            return f"({x} {_BITWISE[op]} {b})"
        if op == "bitwise_not":
            return f"(~{x})"
        if op == "popcount":
            return f"{t}(countOneBits({x}))"
        if op == "reinterpret":
            return f"bitcast<{t}>({x})"
        raise self.fail(f"unsupported intrinsic {op!r} in {e} (no WGSL equivalent here)")


def _non_negative(e: Any) -> bool:
    """Cheap syntactic proof that an int expression is >= 0 (constants, thread indices,
    sums/products/divisions of such)."""
    if isinstance(e, E.IntImm):
        return int(e.value) >= 0
    if isinstance(e, (E.Add, E.Mul, E.FloorDiv, E.FloorMod, E.Div, E.Mod, E.Min, E.Max)):
        return _non_negative(e.a) and _non_negative(e.b)
    return False


def emit_wgsl(funcs: list[PrimFunc]) -> dict[str, WGSLKernel]:
    """One WGSL compute shader per device PrimFunc, by kernel name."""
    out: dict[str, WGSLKernel] = {}
    for f in funcs:
        if f.name in out:
            raise GPUCodegenError(f"two kernels are named {f.name!r}")
        out[f.name] = WGSLEmitter(f).kernel()
    return out
