"""GPU kernel source shared by the OpenCL and CUDA code generators, and the launch plan.

Input: the device and host PrimFuncs of ``tir.transform.SplitHostDevice`` (GPU_API form):

- a device PrimFunc (attrs ``calling_conv = "device_kernel"``) becomes one kernel in the
  :class:`Dialect`'s spelling: buffer parameters are global pointers, scalars by value;
  ``thread_extent`` attributes bind their variable to the dialect's block / thread index;
  ``Allocate`` of scope ``shared`` is a work-group array declared at kernel scope, of scope
  ``local`` (or global) a private array (constant sizes only); ``tvm_storage_sync`` is a barrier.
  Expressions are printed by the C backend's :class:`~tvmpy.codegen.c_expr.ExprPrinter` (the
  dialect's prelude maps the C names it prints: fixed-width integer types, float math names);
  vector statements are scalarized as in the C backend.
- a host PrimFunc becomes a *launch plan* (:func:`launch_plan`): JSON steps (``let``, ``assert``,
  ``launch``) with small expression trees over the host function's parameters and shape vars,
  evaluated by ``runtime/gpu_module.py`` per call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir import dtype as dt
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.analysis import written_data_vars
from ..tir.function import PrimFunc
from ..tir.functor import post_order_visit
from . import abi
from .c_emit import FunctionEmitter
from .c_expr import ADD, CCodegenError
from .c_prelude import HelperTable, int_literal, sanitize, storage_type, value_type

__all__ = ["Dialect", "KernelEmitter", "emit_kernels", "launch_plan", "is_kernel", "GPUCodegenError"]


class GPUCodegenError(CCodegenError):
    """The IR cannot be compiled for the GPU target (the message says what and why)."""


_AXES = {"x": 0, "y": 1, "z": 2}


@dataclass
class Dialect:
    """How one GPU language spells the pieces of a kernel (see ``codegen/opencl.py``)."""

    name: str  # "OpenCL", "CUDA"
    kernel_prefix: str  # "__kernel void", 'extern "C" __global__ void'
    global_ptr: str  # qualifier of a buffer parameter's pointer: "__global", ""
    restrict: str  # "restrict", "__restrict__"
    shared_decl: str  # "__local", "__shared__"
    block_index: str  # "get_group_id({d})", "blockIdx.{a}"
    thread_index: str  # "get_local_id({d})", "threadIdx.{a}"
    barrier: dict[str, str]  # storage scope -> statement
    unroll_pragma: str = "#pragma unroll"
    helper_prefix: str = "static inline"  # how a helper function starts (CUDA: add __device__)
    prelude: str = ""
    float16: str = ""  # extra prelude when float16 is used; "" -> float16 is refused
    float64: str = ""  # extra prelude when float64 is used
    max_private_bytes: int = 16 * 1024
    # kernel attribute stating the (constant) block size: {x} {y} {z} {n}; "" for none
    launch_bounds: str = ""
    # native vectors of float32/float64 for unit-stride vector stores ("" -> scalarized lanes):
    # load {n} lanes at {p} + {i}; store {v}; broadcast scalar {v} to vector type {t}
    vector_load: str = ""
    vector_store: str = ""
    vector_broadcast: str = ""
    vector_types: dict[str, str] = field(default_factory=lambda: {"float32": "float",
                                                                   "float64": "double"})
    # lane counts with a native vector type, per element type (None: 2, 4, 8, 16 for both)
    vector_lanes: dict[str, tuple[int, ...]] | None = None
    # native vector accesses need their natural alignment (CUDA: a float4 access at an address
    # that is not a multiple of 16 bytes faults): used only where the index base is provably a
    # multiple of the lanes and the buffer's alignment covers the vector (else scalarized);
    # such vectors have no arithmetic operators (only copies are native)
    vector_aligned: bool = False
    # identifiers of the language (beyond C's) that a parameter or local must not take
    reserved: frozenset[str] = frozenset()

    def vector_type(self, elem: str) -> str:
        return self.vector_types[elem]
    extra: dict[str, Any] = field(default_factory=dict)

    def index_expr(self, tag: str) -> str:
        kind, _, axis = tag.partition(".")
        if axis not in _AXES or kind not in ("blockIdx", "threadIdx"):
            raise GPUCodegenError(f"{self.name}: unknown thread axis {tag!r}; expected blockIdx.x/y/z "
                                  "or threadIdx.x/y/z (vthread must be lowered before codegen)")
        pattern = self.block_index if kind == "blockIdx" else self.thread_index
        return pattern.format(d=_AXES[axis], a=axis)


def is_kernel(func: PrimFunc) -> bool:
    return func.attrs.get("calling_conv") == "device_kernel"


def _sync_scope(e: E.PrimExpr) -> str | None:
    if isinstance(e, E.Call) and e.op in ("tir.tvm_storage_sync", "tvm_storage_sync"):
        arg = e.args[0] if e.args else None
        return arg.value if isinstance(arg, E.StringImm) else "shared"
    return None


def _buffer_dtypes(func: PrimFunc) -> dict[int, str]:
    """Element dtype of each handle parameter not in ``buffer_map``, from the buffers that use it."""
    out: dict[int, str] = {}

    def visit(n: Any) -> None:
        buf = getattr(n, "buffer", None)
        if isinstance(n, (E.BufferLoad, S.BufferStore)) and buf is not None:
            out.setdefault(id(buf.data), dt.element_of(buf.dtype))

    post_order_visit(func.body, visit)
    return out


def _vector_accessed(func: PrimFunc) -> set[int]:
    """The data vars of buffers loaded or stored with more than one lane."""
    out: set[int] = set()

    def visit(n: Any) -> None:
        if isinstance(n, (E.BufferLoad, S.BufferStore)) and len(n.indices) == 1 and \
                dt.lanes_of(n.indices[0].dtype) > 1:
            out.add(id(n.buffer.data))

    post_order_visit(func.body, visit)
    return out


def _unit_ramp(idx: Any, lanes: int) -> bool:
    return (isinstance(idx, E.Ramp) and E.is_const_int(idx.stride, 1)
            and dt.lanes_of(idx.dtype) == lanes and dt.lanes_of(idx.base.dtype) == 1)


def _mem_type(elem: str) -> str:
    """The element type of a buffer in memory (bool as one byte: kernels cannot take bool*)."""
    return "uint8_t" if elem == "bool" else storage_type(elem)


def warp_refusal(func: str, buf: str) -> str:
    """The error for a "warp" buffer that reached code generation: the GPU pipeline's
    LowerWarpMemory turns each into registers and shuffles (or shared memory on OpenCL)."""
    return (f"{func}: storage scope 'warp' of {buf} reached code generation unlowered: lower the "
            "function for this target (tvm.lower(..., target=...) runs LowerWarpMemory), as "
            "per-thread memory it would give wrong results")


class KernelEmitter(FunctionEmitter):
    """Emits one device PrimFunc as a kernel of ``dialect``."""

    def __init__(self, func: PrimFunc, dialect: Dialect, helpers: HelperTable, taken: set[str]):
        super().__init__(func, helpers, {}, taken)
        self.dialect = dialect
        self.space: dict[int, str] = {}  # data var -> address space qualifier ("" = private)
        self.kernel_decls: list[str] = []  # shared arrays, declared at kernel scope
        self.index_decls: list[str] = []  # block / thread indices, at kernel scope
        self.block_extents: dict[str, E.PrimExpr] = {}
        self.analyzer: Any = None  # for the alignment of native vector accesses
        self.aligned_data: set[int] = set()  # allocations declared with the vector alignment
        self.vector_data: set[int] = _vector_accessed(func) if dialect.vector_aligned else set()
        # kernel arguments: aligned by the runtime's allocator (buffer.data_alignment says how far)
        self.param_data: set[int] = {id(v) for v in func.params} | \
            {id(b.data) for b in func.buffer_map.values()}

    @classmethod
    def module_prelude(cls, emitters: list[KernelEmitter]) -> str:
        """Source the dialect adds before the kernels once they are emitted ("" for none)."""
        return ""

    def fail(self, message: str | None) -> None:
        raise GPUCodegenError(f"{self.func.name}: a {self.dialect.name} kernel cannot report "
                              "failures (an assertion or a heap allocation inside the kernel); "
                              "check the condition on the host")

    def pointer(self, data: E.Var, dtype: str) -> str:
        entry = self.ptrs.get(id(data))
        if entry is None:
            raise GPUCodegenError(f"{self.func.name}: buffer data {data.name} is neither a kernel "
                                  "parameter nor allocated (Allocate) around its use")
        name, elem = entry
        want = dt.element_of(dtype)
        if want == elem:
            return name
        space = self.space.get(id(data), "")
        return f"(({space + ' ' if space else ''}{_mem_type(want)}*){name})"

    # ---- the kernel --------------------------------------------------------------------------
    def kernel(self) -> str:
        f, d = self.func, self.dialect
        elems = _buffer_dtypes(f)
        params: list[str] = []
        for v in f.params:
            buf = f.buffer_map.get(v)
            if dt.is_handle(v.dtype):
                elem = dt.element_of(buf.dtype) if buf is not None else elems.get(id(v))
                if elem is None:
                    raise GPUCodegenError(f"{f.name}: handle parameter {v.name} is never read or "
                                          "written; its element type is unknown")
                name = self.new_name(buf.name if buf is not None else v.name)
                keys = [v] + ([buf.data] if buf is not None else [])
                for key in keys:
                    self.names[id(key)] = name
                    self.ptrs[id(key)] = (name, elem)
                    self.space[id(key)] = d.global_ptr
                q = d.global_ptr + " " if d.global_ptr else ""
                params.append(f"{q}{_mem_type(elem)}* {d.restrict} {name}")
            else:
                if v.dtype == "bool":
                    raise GPUCodegenError(f"{f.name}: bool scalar parameter {v.name}: pass an int")
                params.append(f"{storage_type(v.dtype)} {self.bind(v)}")
        self.level = 1
        self.stmt(f.body)
        body = self.lines
        decls = ["  " + x for x in self.kernel_decls + self.index_decls]
        prefix = d.kernel_prefix
        ext = [self.block_extents.get(f"threadIdx.{a}", E.IntImm("int32", 1)) for a in "xyz"]
        if d.launch_bounds and all(E.is_const_int(e) for e in ext):
            x, y, z = (int(e.value) for e in ext)
            prefix += " " + d.launch_bounds.format(x=x, y=y, z=z, n=x * y * z)
        head = f"{prefix} {f.name}({', '.join(params) or 'void'}) {{"
        return "\n".join([head, *decls, *body, "}"])

    # ---- statements --------------------------------------------------------------------------
    def _s_Evaluate(self, s: S.Evaluate) -> None:
        scope = _sync_scope(s.value)
        if scope is not None:
            stmt = self.dialect.barrier.get(scope)
            if stmt is None:
                raise GPUCodegenError(f"{self.func.name}: no {self.dialect.name} barrier for "
                                      f"storage scope {scope!r}")
            self.emit(stmt)
            return
        if isinstance(s.value, E.Call) and s.value.op in ("tir.tvm_warp_shuffle", "tvm_warp_shuffle"):
            raise GPUCodegenError(f"{self.func.name}: warp shuffles are CUDA only")
        super()._s_Evaluate(s)

    def _s_AttrStmt(self, s: S.AttrStmt) -> None:
        if s.attr_key == "thread_extent":
            iv = s.node
            var = getattr(iv, "var", None)
            tag = getattr(iv, "thread_tag", "")
            if var is None or not tag:
                raise GPUCodegenError(f"{self.func.name}: thread_extent on {iv} without a thread tag")
            if tag.startswith("threadIdx."):
                self.block_extents.setdefault(tag, s.value)
            if id(var) not in self.names:  # at kernel scope: every use sees it
                idx = self.dialect.index_expr(tag)
                self.index_decls.append(f"const {value_type(var.dtype)} {self.bind(var)} = "
                                        f"({value_type(var.dtype)}){idx};")
            self.stmt(s.body)
            return
        if s.attr_key == "virtual_thread":
            raise GPUCodegenError(f"{self.func.name}: a virtual_thread attribute reached codegen; "
                                  "tir.transform.InjectVirtualThread must run first (tvm.lower)")
        super()._s_AttrStmt(s)

    def _s_For(self, s: S.For) -> None:
        if s.kind in (S.ForKind.THREAD_BINDING, S.ForKind.PARALLEL, S.ForKind.VECTORIZED):
            raise GPUCodegenError(f"{self.func.name}: loop {s.loop_var.name} is {s.kind.name} "
                                  f"inside a {self.dialect.name} kernel; bind it to a thread axis "
                                  "or make it serial")
        var = self.bind(s.loop_var)
        ctype = value_type(s.loop_var.dtype)
        lo = self.index(s.min)
        if E.is_const_int(s.min) and E.is_const_int(s.extent):
            end = int_literal(s.min.value + s.extent.value, s.extent.dtype)
        elif E.is_const_int(s.min, 0):
            end = self.index(s.extent)
        else:
            end = f"{self.index(s.min, None, 12)} + {self.index(s.extent, None, 13)}"
        if s.kind == S.ForKind.UNROLLED:
            self.emit(self.dialect.unroll_pragma)
        self.open(f"for ({ctype} {var} = {lo}; {var} < {end}; ++{var})")
        self.stmt(s.body)
        self.close()

    def _s_Allocate(self, s: S.Allocate) -> None:
        buf = s.buffer
        if len(buf.shape) != 1:
            raise GPUCodegenError(f"{self.func.name}: allocation {buf.name} has shape {buf.shape}; "
                                  "IR form 2 allocates flat 1-D buffers")
        elem = dt.element_of(buf.dtype)
        size = buf.shape[0]
        scope = buf.scope or "global"
        if not E.is_const_int(size):
            raise GPUCodegenError(f"{self.func.name}: {scope} allocation {buf.name} has a symbolic "
                                  f"size {size}; {self.dialect.name} kernels need constant sizes")
        count = max(size.value * dt.lanes_of(buf.dtype), 1)
        name = self.new_name(buf.data.name or buf.name)
        self.names[id(buf.data)] = name
        self.ptrs[id(buf.data)] = (name, elem)
        decl = f"{_mem_type(elem)} {name}[{count}];"
        if id(buf.data) in self.vector_data and count * dt.bytes_of(elem) % 16 == 0:
            decl = f"__align__(16) {decl}"  # native vector accesses (CUDA: float4)
            self.aligned_data.add(id(buf.data))
        if scope.startswith("shared"):
            self.space[id(buf.data)] = self.dialect.shared_decl
            self.kernel_decls.append(f"{self.dialect.shared_decl} {decl}")
        elif scope == "warp":
            raise GPUCodegenError(warp_refusal(self.func.name, buf.name))
        elif scope in ("local", "global"):
            nbytes = count * dt.bytes_of(elem)
            if nbytes > self.dialect.max_private_bytes:
                raise GPUCodegenError(f"{self.func.name}: {scope} allocation {buf.name} needs "
                                      f"{nbytes} bytes per thread; {self.dialect.name} kernels "
                                      f"allow {self.dialect.max_private_bytes}")
            self.space[id(buf.data)] = ""
            self.emit(decl)
        else:
            raise GPUCodegenError(f"{self.func.name}: storage scope {scope!r} of {buf.name} is "
                                  f"not supported by {self.dialect.name}")
        self.stmt(s.body)

    # ---- native vectors (float32/float64 only: same rounding as lane by lane) -----------------
    def _s_BufferStore(self, s: S.BufferStore) -> None:
        text = self._vector_store(s) if self.dialect.vector_load else None
        if text is None:
            super()._s_BufferStore(s)
        elif text:
            self.emit(text)

    def _native_lanes(self, lanes: int, elem: str) -> bool:
        allowed = (self.dialect.vector_lanes or {}).get(elem, ()) if self.dialect.vector_lanes \
            is not None else (2, 4, 8, 16)
        return lanes in allowed and elem in ("float32", "float64")

    def _aligned(self, buf: Any, base: E.PrimExpr, lanes: int) -> bool:
        """Whether a ``lanes``-wide access of ``buf`` at element ``base`` is provably aligned
        to the vector's size (always true for dialects without the requirement)."""
        if not self.dialect.vector_aligned:
            return True
        nbytes = lanes * dt.bytes_of(dt.element_of(buf.dtype))
        if id(buf.data) in self.param_data:
            if buf.data_alignment < nbytes:
                return False
        elif id(buf.data) not in self.aligned_data:  # a kernel's own array: declared aligned
            return False
        if self.analyzer is None:
            from ..arith import Analyzer

            self.analyzer = Analyzer()
        m = self.analyzer.modular_set(base)
        return m.coeff % lanes == 0 and m.base % lanes == 0

    def _native_load(self, e: E.PrimExpr, lanes: int, elem: str) -> str | None:
        """A unit-stride vector load of ``lanes`` elements as one native load, or None."""
        if not isinstance(e, E.BufferLoad) or dt.lanes_of(e.dtype) != lanes:
            return None
        idx = e.indices[0] if len(e.indices) == 1 else None
        if (e.predicate is not None or dt.lanes_of(e.buffer.dtype) != 1
                or dt.element_of(e.buffer.dtype) != elem or not _unit_ramp(idx, lanes)):
            return None
        assert isinstance(idx, E.Ramp)
        if not self._aligned(e.buffer, idx.base, lanes):
            return None
        ptr = self.pointer(e.buffer.data, e.buffer.dtype)
        return self.dialect.vector_load.format(n=lanes, p=ptr, i=self.index(idx.base, None, ADD + 1),
                                               t=f"{self.dialect.vector_type(elem)}{lanes}")

    def _vector_store(self, s: S.BufferStore) -> str | None:
        """``s`` as one vector load/compute/store statement, or None (scalarized instead)."""
        idx = s.indices[0] if len(s.indices) == 1 else None
        lanes = dt.lanes_of(s.value.dtype)
        elem = dt.element_of(s.buffer.dtype)
        if (not self._native_lanes(lanes, elem) or s.predicate is not None
                or dt.lanes_of(s.buffer.dtype) != 1):
            return None
        if not _unit_ramp(idx, lanes) or (self.dialect.vector_aligned and not self._aligned(
                s.buffer, idx.base, lanes)):
            return self._scatter_native_load(s, lanes, elem)
        value = self._vector_expr(s.value, lanes, elem)
        if value is None:
            return None
        assert isinstance(idx, E.Ramp)
        ptr = self.pointer(s.buffer.data, s.buffer.dtype)
        return self.dialect.vector_store.format(n=lanes, v=value, p=ptr, i=self.index(idx.base, None, ADD + 1),
                                                t=f"{self.dialect.vector_type(elem)}{lanes}")

    def _scatter_native_load(self, s: S.BufferStore, lanes: int, elem: str) -> str | None:
        """A native vector load stored lane by lane (a transposing copy: ``B[k * n + i] =
        A[i * m + k]`` vectorized over ``k``): one wide load, then scalar stores. Only where
        the vector load is native and lane order cannot matter (distinct Ramp lanes, another
        buffer)."""
        if not self.dialect.vector_aligned or not isinstance(s.value, E.BufferLoad):
            return None
        idx = s.indices[0] if len(s.indices) == 1 else None
        if (not isinstance(idx, E.Ramp) or not isinstance(idx.stride, E.IntImm)
                or idx.stride.value == 0 or s.value.buffer.data is s.buffer.data):
            return None
        load = self._native_load(s.value, lanes, elem)
        if load is None:
            return None
        tmp = self.new_name(f"{s.buffer.name}_vec")
        self.emit(f"const {self.dialect.vector_type(elem)}{lanes} {tmp} = {load};")
        for k in range(lanes):
            self._store_lane(s, str(k), f"(({_mem_type(elem)}*)&{tmp})[{k}]")
        return ""

    def _vector_expr(self, e: E.PrimExpr, lanes: int, elem: str) -> str | None:
        if dt.lanes_of(e.dtype) != lanes or dt.element_of(e.dtype) != elem:
            return None
        if isinstance(e, E.Broadcast):
            if not self.dialect.vector_broadcast:
                return None
            t = f"{self.dialect.vector_type(elem)}{lanes}"
            return self.dialect.vector_broadcast.format(t=t, v=self.expr(e.value))
        if isinstance(e, E.BufferLoad):
            return self._native_load(e, lanes, elem)
        if self.dialect.vector_aligned:  # no vector operators
            return None
        if type(e) in (E.Add, E.Sub, E.Mul, E.Div):
            a = self._vector_expr(e.a, lanes, elem)
            b = self._vector_expr(e.b, lanes, elem)
            if a is None or b is None:
                return None
            op = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/"}[type(e)]
            return f"({a} {op} {b})"
        return None

    def _lanes(self, lanes: int, body: Any, unroll: bool) -> None:
        if unroll:
            for k in range(lanes):
                body(str(k))
            return
        self.open(f"for (int lane = 0; lane < {lanes}; ++lane)")
        body("lane")
        self.close()


def _uses_dtype(func: PrimFunc, dtype: str) -> bool:
    found = False

    def visit(n: Any) -> None:
        nonlocal found
        d = getattr(n, "dtype", None)
        if isinstance(d, str) and dt.element_of(d) == dtype:
            found = True

    post_order_visit(func.body, visit)
    return found or any(dt.element_of(b.dtype) == dtype for b in func.buffer_map.values()) \
        or any(p.dtype == dtype for p in func.params)


def emit_kernels(funcs: list[PrimFunc], dialect: Dialect, banner: str = "",
                 emitter: type[KernelEmitter] | None = None) -> str:
    """One source of ``dialect`` defining every kernel of ``funcs``."""
    helpers = HelperTable()
    names: set[str] = set()
    half = double = False
    for f in funcs:
        if not f.name.isidentifier() or f.name != sanitize(f.name):
            raise GPUCodegenError(f"kernel name {f.name!r} is not a usable identifier")
        if f.name in names:
            raise GPUCodegenError(f"two kernels are named {f.name!r}")
        names.add(f.name)
        half = half or _uses_dtype(f, "float16")
        double = double or _uses_dtype(f, "float64")
    if half and not dialect.float16:
        raise GPUCodegenError(f"{dialect.name} back end: float16 is not supported; compute in float32")
    cls = emitter or KernelEmitter  # a dialect's subclass (CUDA: launch bounds, warp shuffles)
    emitters = [cls(f, dialect, helpers, set(names) | dialect.reserved) for f in funcs]
    bodies = [em.kernel() for em in emitters]
    parts = [f"/* {banner} */" if banner else "", dialect.prelude.strip()]
    if double and dialect.float64:
        parts.append(dialect.float64.strip())
    if half:
        parts.append(dialect.float16.strip())
    extra = cls.module_prelude(emitters)  # a dialect's definitions the kernels need (CUDA: wmma)
    if extra:
        parts.append(extra)
    if helpers.used:
        parts.append(helpers.source().replace("static inline", dialect.helper_prefix))
    parts.extend(bodies)
    return "\n\n".join(p for p in parts if p) + "\n"


# ---- the launch plan ---------------------------------------------------------------------------
_BIN = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "floordiv", E.FloorMod: "floormod",
        E.Div: "truncdiv", E.Mod: "truncmod", E.Min: "min", E.Max: "max", E.EQ: "==", E.NE: "!=",
        E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=", E.And: "and", E.Or: "or"}


class _PlanBuilder:
    def __init__(self, func: PrimFunc, kernels: dict[str, PrimFunc]):
        self.func = func
        self.kernels = kernels
        self.sig = abi.signature(func)
        self.names: dict[int, Any] = {}  # var id -> name (scalars) or {"buf": param name}
        # buffer parameters are keyed by name in the plan: two tensors of one name (te's
        # default "placeholder", AutoTVM task arguments) get distinct keys
        self.param_names: list[str] = []
        used: set[str] = set()
        for p, spec in zip(func.params, self.sig.params):
            name, k = spec.name, 1
            while name in used:
                name, k = f"{spec.name}_{k}", k + 1
            used.add(name)
            self.param_names.append(name)
            buf = func.buffer_map.get(p)
            if buf is not None:
                self.names[id(p)] = self.names[id(buf.data)] = {"buf": name}
            else:
                self.names[id(p)] = spec.name
        for v, spec in zip(self.sig.vars[len(func.params):], self.sig.shape_vars):
            self.names[id(v)] = spec.name
        self.taken = {n for n in self.names.values() if isinstance(n, str)}
        self.steps: list[dict] = []
        self.written: set[str] = set()  # buffer parameters some kernel writes

    def error(self, what: str) -> GPUCodegenError:
        return GPUCodegenError(f"{self.func.name}: host code of a GPU function must be a plain "
                               f"launch list (let, assert, tir.gpu_launch); found {what}")

    def expr(self, e: Any) -> Any:
        if isinstance(e, E.IntImm):
            return int(e.value)
        if isinstance(e, E.FloatImm):
            return {"float": float(e.value)}
        if isinstance(e, E.Var):
            name = self.names.get(id(e))
            if name is None:
                raise self.error(f"the variable {e.name}, which no parameter or let defines")
            return name
        if type(e) in _BIN:
            return [_BIN[type(e)], self.expr(e.a), self.expr(e.b)]
        if isinstance(e, E.Not):
            return ["not", self.expr(e.a)]
        if isinstance(e, E.Select):
            return ["select", self.expr(e.condition), self.expr(e.true_value),
                    self.expr(e.false_value)]
        if isinstance(e, E.Cast):
            return ["cast", dt.element_of(e.dtype), self.expr(e.value)]
        if isinstance(e, E.Call) and e.op in ("likely", "if_then_else") and e.args:
            if e.op == "likely":
                return self.expr(e.args[0])
            return ["select", *(self.expr(a) for a in e.args)]
        raise self.error(f"the expression {e} ({type(e).__name__})")

    def _fresh(self, base: str) -> str:
        name, k = sanitize(base), 1
        while name in self.taken:
            name, k = f"{sanitize(base)}_{k}", k + 1
        self.taken.add(name)
        return name

    def stmt(self, s: S.Stmt) -> None:
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, S.LetStmt):
            value = self.expr(s.value)
            name, k = sanitize(s.var.name), 1
            while name in self.taken:
                name, k = f"{sanitize(s.var.name)}_{k}", k + 1
            self.taken.add(name)
            self.names[id(s.var)] = value if isinstance(value, dict) else name
            if not isinstance(value, dict):
                self.steps.append({"let": name, "value": value})
            self.stmt(s.body)
        elif isinstance(s, S.AssertStmt):
            msg = s.message.value if isinstance(s.message, E.StringImm) else str(s.message)
            self.steps.append({"assert": self.expr(s.condition), "message": msg})
            self.stmt(s.body)
        elif isinstance(s, S.AttrStmt):
            self.stmt(s.body)
        elif isinstance(s, S.For):  # launches repeated per value of the loop (a scan's steps)
            name = self._fresh(s.loop_var.name)
            self.names[id(s.loop_var)] = name
            outer, self.steps = self.steps, []
            self.stmt(s.body)
            body, self.steps = self.steps, outer
            self.steps.append({"loop": name, "min": self.expr(s.min), "extent": self.expr(s.extent),
                               "body": body})
        elif isinstance(s, S.Allocate) and (s.buffer.scope or "global") == "global":
            buf = s.buffer  # an intermediate between kernels: device memory for the call
            name, k = sanitize(buf.name), 1
            while name in self.taken:
                name, k = f"{sanitize(buf.name)}_{k}", k + 1
            self.taken.add(name)
            size: Any = 1
            for d in buf.shape:
                size = ["*", size, self.expr(d)]
            self.steps.append({"alloc": name, "dtype": dt.element_of(buf.dtype),
                               "lanes": dt.lanes_of(buf.dtype), "size": size})
            self.names[id(buf.data)] = {"buf": name}
            self.stmt(s.body)
        elif isinstance(s, S.Evaluate):
            v = s.value
            if isinstance(v, (E.IntImm, E.StringImm)):
                return
            if not (isinstance(v, E.Call) and v.op in ("tir.gpu_launch", "gpu_launch")):
                raise self.error(f"the statement {v}")
            self.launch(v)
        else:
            raise self.error(f"a {type(s).__name__} statement")

    def launch(self, call: E.Call) -> None:
        args = list(call.args)
        if len(args) < 8 or not isinstance(args[0], E.StringImm):
            raise self.error(f"a malformed tir.gpu_launch {call}")
        name = args[0].value
        kernel = self.kernels.get(name)
        if kernel is None:
            raise GPUCodegenError(f"{self.func.name}: launches kernel {name!r}, which is not in "
                                  f"the module (kernels: {', '.join(self.kernels) or 'none'})")
        kargs = args[8:]
        if len(kargs) != len(kernel.params):
            raise GPUCodegenError(f"{self.func.name}: kernel {name} takes {len(kernel.params)} "
                                  f"arguments, the launch passes {len(kargs)}")
        out_args = []
        writes = written_data_vars(kernel)
        for a, p in zip(kargs, kernel.params):
            if dt.is_handle(p.dtype):
                ref = self.names.get(id(a)) if isinstance(a, E.Var) else None
                if not isinstance(ref, dict):
                    raise self.error(f"the kernel argument {a} for buffer parameter {p.name} "
                                     "(a buffer parameter's data is expected)")
                out_args.append(ref)
                kbuf = kernel.buffer_map.get(p)
                if id(p) in writes or (kbuf is not None and id(kbuf.data) in writes):
                    self.written.add(ref["buf"])
            else:
                out_args.append({"scalar": self.expr(a), "dtype": p.dtype})
        self.steps.append({"launch": name, "grid": [self.expr(x) for x in args[1:4]],
                           "block": [self.expr(x) for x in args[4:7]],
                           "shared": self.expr(args[7]), "args": out_args})


def launch_plan(host_funcs: list[PrimFunc], kernels: list[PrimFunc]) -> dict:
    """The JSON plan of the host functions (runtime/gpu_module.py evaluates it per call)."""
    by_name = {k.name: k for k in kernels}
    functions = []
    for f in host_funcs:
        b = _PlanBuilder(f, by_name)
        b.stmt(f.body)
        sig = b.sig.to_json()
        for p, name in zip(sig["params"], b.param_names):
            if p["kind"] == "buffer":
                p["name"] = name
            p["written"] = p["written"] or p["name"] in b.written
        functions.append({"name": f.name, "signature": sig, "steps": b.steps})
    return {"functions": functions,
            "kernels": {k.name: [p.dtype if not dt.is_handle(p.dtype) else "handle"
                                 for p in k.params] for k in kernels}}
