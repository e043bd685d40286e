"""Statements of IR form 2 as C: one PrimFunc -> one C function with the ABI of
:mod:`tvmpy.codegen.abi`, and a list of functions -> one C source (:func:`emit_source`).

- buffer parameters arrive as ``void* restrict X_handle`` and are cast once to typed, aligned
  pointers; scalar parameters and shape variables follow in ABI order;
- loops: SERIAL ``for``; UNROLLED with ``#pragma GCC unroll``; PARALLEL: the body becomes a
  ``static`` function of the loop variable and the body's free variables (buffers as ``restrict``
  pointers: gcc's own OpenMP outlining would lose ``restrict`` and with it vectorization), called
  from a ``#pragma omp parallel for schedule(guided)`` loop (guided: a thread the OS preempts
  does not hold up the others, as with the LLVM backend's dynamic chunks). A parallel loop nested in another
  runs serially, as OpenMP would;
- Allocate: a 64-byte aligned stack array when the size is constant and small, otherwise
  ``aligned_alloc``/``free``;
- a failed AssertStmt (or allocation) frees the live heap buffers, stores its message in
  ``__tvmpy_last_error`` and returns -1; in a parallel body the outlined function returns -1,
  the loop records it in a flag, and the function returns -1 after the loop;
- vector statements are scalarized into a loop over lanes (gcc -O3 re-vectorizes it), through a
  temporary array when the stored buffer is also read at another index.
"""

from __future__ import annotations

from ..ir import dtype as dt
from ..ir.node import structural_equal
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.function import PrimFunc
from ..tir.functor import post_order_visit, reads_memory, referenced_vars
from . import abi
from .c_expr import ADD, UNARY, CCodegenError, ExprPrinter
from .c_packed import emit_call_packed, is_call_packed
from .c_prelude import HelperTable, c_string, int_literal, sanitize, storage_type, value_type

__all__ = ["FunctionEmitter", "emit_source", "STACK_LIMIT_BYTES"]

# a constant-size local allocation up to this many bytes lives on the stack
STACK_LIMIT_BYTES = 64 * 1024
_HEADERS = ("math.h", "stdbool.h", "stddef.h", "stdint.h", "stdlib.h", "string.h")


class FunctionEmitter(ExprPrinter):
    """Emits one PrimFunc. Helpers and extern prototypes are shared by the whole source."""

    def __init__(self, func: PrimFunc, helpers: HelperTable, externs: dict[str, str],
                 taken: set[str]):
        self.func = func
        self.helpers = helpers
        self.externs = externs
        self.lines: list[str] = []
        self.level = 0
        self.names: dict[int, str] = {}
        self.globals = taken  # names at file scope, shared by every function of the source
        self.taken = set(taken)
        self.arrays: set[int] = set()  # vector variables, stored as C arrays
        self.ptrs: dict[int, tuple[str, str | None]] = {}  # data var -> (C pointer, element dtype)
        self.frames: list[str] = []  # live heap buffers (freed on failure)
        self.in_parallel = False  # emitting the body of a parallel loop
        self.can_fail = False  # the code emitted so far has a failure exit
        self.outlined: list[str] = []  # static functions of parallel loop bodies
        self.aligned: set[int] = set()  # data vars known to be 64-byte aligned
        self.data_vars: set[int] = set()
        self._data_memo: dict[int, tuple[E.PrimExpr, bool]] = {}

    # ---- names -------------------------------------------------------------------------------
    def new_name(self, base: str) -> str:
        s = sanitize(base)
        name, k = s, 1
        while name in self.taken:
            name = f"{s}_{k}"
            k += 1
        self.taken.add(name)
        return name

    def bind(self, v: E.Var, base: str | None = None) -> str:
        name = self.new_name(base or v.name)
        self.names[id(v)] = name
        return name

    def fresh_name(self, v: E.Var) -> str:
        name = self.names.get(id(v))
        return name if name is not None else self.bind(v)

    def var_ref(self, v: E.Var) -> tuple[str, bool]:
        name = self.names.get(id(v))
        if name is None:
            raise CCodegenError(f"{self.func.name}: variable {v.name} ({v.dtype}) is used but never "
                                "defined (not a parameter, shape variable, loop variable or let)")
        return name, id(v) in self.arrays

    def pointer(self, data: E.Var, dtype: str) -> str:
        entry = self.ptrs.get(id(data))
        if entry is None:
            raise CCodegenError(f"{self.func.name}: buffer data {data.name} is neither a parameter "
                                "nor allocated (Allocate) around its use")
        name, elem = entry
        want = dt.element_of(dtype)
        return name if want == elem else f"(({storage_type(want)}*){name})"

    # ---- output ------------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        self.lines.append("  " * self.level + line)

    def open(self, header: str) -> None:
        self.emit(header + " {")
        self.level += 1

    def close(self, tail: str = "") -> None:
        self.level -= 1
        self.emit("}" + tail)

    # ---- the function ------------------------------------------------------------------------
    def function(self) -> str:
        f = self.func
        sig = abi.signature(f)
        params: list[str] = []
        prologue: list[str] = []
        for v in sig.vars:
            buf = f.buffer_map.get(v)
            if buf is not None:
                elem = dt.element_of(buf.dtype)
                if dt.lanes_of(buf.dtype) > 1:
                    raise CCodegenError(f"{f.name}: parameter buffer {buf.name} has vector dtype "
                                        f"{buf.dtype}; use a scalar element dtype")
                ctype = storage_type(elem)
                ptr = self.new_name(buf.name)
                handle = self.new_name(ptr + "_handle")
                params.append(f"void* restrict {handle}")
                for key in (v, buf.data):
                    self.names[id(key)] = ptr
                    self.ptrs[id(key)] = (ptr, elem)
                if buf.data_alignment >= dt.bytes_of(elem) and buf.data_alignment > 1:
                    init = f"__builtin_assume_aligned({handle}, {buf.data_alignment})"
                    if buf.data_alignment >= 64:
                        self.aligned.update((id(v), id(buf.data)))
                else:
                    init = handle
                prologue.append(f"{ctype}* restrict {ptr} = ({ctype}*){init};")
            elif dt.is_handle(v.dtype):
                name = self.bind(v)
                params.append(f"void* {name}")
                self.ptrs[id(v)] = (name, None)
            elif dt.element_of(v.dtype) == "float16":
                name = self.bind(v)
                half = self.new_name(name + "_half")
                params.append(f"_Float16 {half}")
                prologue.append(f"const float {name} = {half};")
            else:
                params.append(f"{storage_type(v.dtype)} {self.bind(v)}")
        self.level = 1
        for line in prologue:
            self.emit(line)
        self.stmt(f.body)
        self.emit("return 0;")
        head = f"int32_t {f.name}({', '.join(params) or 'void'}) {{"
        return "\n\n".join([*self.outlined, "\n".join([head, *self.lines, "}"])])

    # ---- statements --------------------------------------------------------------------------
    def stmt(self, s: S.Stmt) -> None:
        fn = type(self).dispatch_prefix(type(s), "_s_")
        if fn is None:
            raise CCodegenError(f"{self.func.name}: the C backend cannot emit {type(s).__name__}")
        fn(self, s)

    def _s_SeqStmt(self, s: S.SeqStmt) -> None:
        for x in s.seq:
            self.stmt(x)

    def _s_Evaluate(self, s: S.Evaluate) -> None:
        if isinstance(s.value, (E.IntImm, E.FloatImm, E.StringImm)):
            return
        if is_call_packed(s.value):
            emit_call_packed(self, s.value, None)
            return
        if dt.lanes_of(s.value.dtype) > 1:
            raise CCodegenError(f"{self.func.name}: vector expression statement {s.value}")
        self.emit(self.expr(s.value) + ";")

    def _s_LetStmt(self, s: S.LetStmt) -> None:
        v = s.var
        lanes = dt.lanes_of(v.dtype)
        if lanes > 1:
            name = self.bind(v)
            self.emit(f"{value_type(v.dtype)} {name}[{lanes}];")
            self.arrays.add(id(v))
            self._lanes(lanes, lambda lane: self.emit(f"{name}[{lane}] = {self.expr(s.value, lane)};"),
                        unroll=_needs_unrolled_lanes(s.value))
        elif dt.is_handle(v.dtype):
            value = self.expr(s.value)
            name = self.bind(v)
            self.ptrs[id(v)] = (name, None)
            self.emit(f"void* {name} = {value};")
        elif is_call_packed(s.value):
            name = self.bind(v)
            self.emit(f"{storage_type(v.dtype)} {name};")
            emit_call_packed(self, s.value, name)
            self.data_vars.add(id(v))
        else:
            value = self.expr(s.value)
            self.emit(f"const {value_type(v.dtype)} {self.bind(v)} = {value};")
        if self.is_data(s.value):
            self.data_vars.add(id(v))
        self.stmt(s.body)

    def _s_AttrStmt(self, s: S.AttrStmt) -> None:
        if s.attr_key in ("thread_extent", "virtual_thread"):
            node = s.node
            tag = getattr(node, "thread_tag", "") or getattr(getattr(node, "var", None), "name", "")
            raise CCodegenError(
                f"{self.func.name}: the C target runs on the CPU and cannot compile the "
                f"{s.attr_key!r} attribute of {tag or node} (a loop bound to a GPU thread axis with "
                "bind()); remove the bind, or build for a GPU target")
        if s.attr_key.startswith("pragma_"):
            text = f"{s.attr_key} = {s.value}".replace("*/", "* /")
            self.emit(f"/* {text} */")
        self.stmt(s.body)

    def _s_AssertStmt(self, s: S.AssertStmt) -> None:
        msg = s.message.value if isinstance(s.message, E.StringImm) else str(s.message)
        self.open(f"if (!{self.operand(s.condition, UNARY)})")
        self.fail(c_string(msg))
        self.close()
        self.stmt(s.body)

    def _s_IfThenElse(self, s: S.IfThenElse) -> None:
        self.open(f"if ({self.expr(s.condition)})")
        self.stmt(s.then_case)
        other = s.else_case
        while isinstance(other, S.IfThenElse):
            self.level -= 1
            self.emit(f"}} else if ({self.expr(other.condition)}) {{")
            self.level += 1
            self.stmt(other.then_case)
            other = other.else_case
        if other is not None and not S.is_no_op(other):
            self.level -= 1
            self.emit("} else {")
            self.level += 1
            self.stmt(other)
        self.close()

    def _s_Prefetch(self, s: S.Prefetch) -> None:
        pass  # a hint

    # ---- failure -----------------------------------------------------------------------------
    def fail(self, message: str | None) -> None:
        """Return -1 after freeing the live heap buffers (``message``: the error to store)."""
        self.can_fail = True
        for name in reversed(self.frames):
            self.emit(f"free({name});")
        if message is not None and self.in_parallel:  # other threads may store theirs
            self.emit(f"__atomic_store_n(&{abi.ERROR_SYMBOL}, {message}, __ATOMIC_RELAXED);")
        elif message is not None:
            self.emit(f"{abi.ERROR_SYMBOL} = {message};")
        self.emit("return -1;")

    # ---- loops -------------------------------------------------------------------------------
    def _bound(self, e: E.PrimExpr, base: str) -> E.PrimExpr | str:
        """Loop bounds are evaluated once: hoist those that read memory or call functions."""
        if reads_memory(e):
            name = self.new_name(base)
            self.emit(f"const {value_type(e.dtype)} {name} = {self.index(e)};")
            return name
        return e

    def _s_For(self, s: S.For) -> None:
        if s.kind == S.ForKind.THREAD_BINDING:
            raise CCodegenError(f"{self.func.name}: loop {s.loop_var.name} is bound to a thread "
                                "axis; the C target runs on the CPU")
        lo = self._bound(s.min, s.loop_var.name + "_min")
        ext = self._bound(s.extent, s.loop_var.name + "_extent")
        var = self.bind(s.loop_var)
        lo_text = lo if isinstance(lo, str) else self.index(lo)
        if isinstance(lo, E.PrimExpr) and isinstance(ext, E.PrimExpr) and \
                E.is_const_int(lo) and E.is_const_int(ext):
            end = int_literal(lo.value + ext.value, s.extent.dtype)
        elif isinstance(lo, E.PrimExpr) and E.is_const_int(lo, 0):
            end = ext if isinstance(ext, str) else self.index(ext)
        else:
            lo_op = lo if isinstance(lo, str) else self.index(lo, None, ADD)
            ext_op = ext if isinstance(ext, str) else self.index(ext, None, ADD + 1)
            end = f"{lo_op} + {ext_op}"
        header = f"for ({value_type(s.loop_var.dtype)} {var} = {lo_text}; {var} < {end}; ++{var})"
        if s.kind == S.ForKind.PARALLEL and not self.in_parallel:
            self._parallel_for(s.loop_var, header, s.body)
            return
        if s.kind == S.ForKind.PARALLEL:
            self.emit("/* parallel loop inside a parallel loop: runs serially */")
        elif s.kind == S.ForKind.UNROLLED and E.is_const_int(s.extent):
            n = s.extent.value
            if 1 < n <= 65534:
                self.emit(f"#pragma GCC unroll {n}")
        self.open(header)
        self.stmt(s.body)
        self.close()

    def _parallel_for(self, loop_var: E.Var, header: str, body: S.Stmt) -> None:
        """Outline ``body`` into a static function and call it from an OpenMP loop."""
        outer = [v for v in referenced_vars(body) if v is not loop_var and
                 (id(v) in self.names or id(v) in self.ptrs)]
        params = [f"{value_type(loop_var.dtype)} {self.names[id(loop_var)]}"]
        prologue = []
        passed = {self.names[id(loop_var)]}
        for v in outer:
            name = self.names.get(id(v)) or self.ptrs[id(v)][0]
            if name in passed:  # a parameter's handle and its buffer's data var
                continue
            passed.add(name)
            if id(v) in self.ptrs:
                elem = self.ptrs[id(v)][1]
                if elem is None:
                    params.append(f"void* {name}")
                    continue
                ctype = storage_type(elem)
                params.append(f"{ctype}* restrict {name}")
                if id(v) in self.aligned:
                    prologue.append(f"{name} = ({ctype}*)__builtin_assume_aligned({name}, 64);")
            elif id(v) in self.arrays:
                params.append(f"{value_type(v.dtype)}* {name}")
            elif dt.is_handle(v.dtype):
                params.append(f"void* {name}")
            else:
                params.append(f"{value_type(v.dtype)} {name}")
        self.taken |= self.globals
        fname = self.new_name(f"{self.func.name}_parallel_body")
        self.globals.add(fname)
        saved = (self.lines, self.level, self.frames, self.can_fail)
        self.lines, self.level, self.frames, self.can_fail = [], 1, [], False
        self.in_parallel = True
        for line in prologue:
            self.emit(line)
        self.stmt(body)
        can_fail = self.can_fail
        if can_fail:
            self.emit("return 0;")
        lines = self.lines
        self.lines, self.level, self.frames, self.can_fail = saved
        self.in_parallel = False
        ret = "int32_t" if can_fail else "void"
        head = f"/* the body of a parallel loop of {self.func.name} */\n" \
               f"static {ret} {fname}({', '.join(params)}) {{"
        self.outlined.append("\n".join([head, *lines, "}"]))
        args = ", ".join(p.rsplit(" ", 1)[1] for p in params)
        flag = self.new_name("parallel_failed") if can_fail else ""
        if can_fail:
            self.emit(f"int32_t {flag} = 0;")
        self.emit("#pragma omp parallel for schedule(guided)")
        self.open(header)
        if can_fail:
            self.open(f"if ({fname}({args}) != 0)")
            self.emit(f"__atomic_store_n(&{flag}, 1, __ATOMIC_RELAXED);")
            self.close()
        else:
            self.emit(f"{fname}({args});")
        self.close()
        if can_fail:
            self.open(f"if ({flag})")
            self.fail(None)  # the failing iteration stored the message
            self.close()

    # ---- memory ------------------------------------------------------------------------------
    def _s_Allocate(self, s: S.Allocate) -> None:
        buf = s.buffer
        if len(buf.shape) != 1:
            raise CCodegenError(f"{self.func.name}: allocation {buf.name} has shape {buf.shape}; "
                                "IR form 2 (after tvm.lower) allocates flat 1-D buffers")
        elem = dt.element_of(buf.dtype)
        ctype = storage_type(elem)
        lanes = dt.lanes_of(buf.dtype)
        size = buf.shape[0]
        name = self.new_name(buf.data.name or buf.name)
        self.names[id(buf.data)] = name
        self.ptrs[id(buf.data)] = (name, elem)
        self.aligned.add(id(buf.data))
        if E.is_const_int(size):
            count = size.value * lanes
            nbytes = count * dt.bytes_of(elem)
            limit = STACK_LIMIT_BYTES
            if count < 0:
                raise CCodegenError(f"{self.func.name}: allocation {buf.name} has negative size")
            if nbytes <= limit:
                self.emit(f"{ctype} {name}[{max(count, 1)}] __attribute__((aligned(64)));")
                self.stmt(s.body)
                return
        count_text = self.index(size, None, UNARY)
        nbytes_text = f"(size_t){count_text} * sizeof({ctype})"
        if lanes > 1:
            nbytes_text += f" * {lanes}"
        alloc = self.helpers.use("tvmpy_alloc")
        self.emit(f"{ctype}* restrict {name} = ({ctype}*){alloc}({nbytes_text});")
        self.open(f"if ({name} == NULL)")
        self.fail(c_string(f"{self.func.name}: cannot allocate buffer {buf.name} "
                           f"({size} x {buf.dtype}): out of memory or negative size"))
        self.close()
        self.frames.append(name)
        self.stmt(s.body)
        self.frames.pop()
        self.emit(f"free({name});")

    def _s_BufferStore(self, s: S.BufferStore) -> None:
        if len(s.indices) != 1:
            raise CCodegenError(f"{self.func.name}: store to {s.buffer.name} has {len(s.indices)} "
                                "indices; IR form 2 (after tvm.lower) has flat 1-D buffers")
        buf, index = s.buffer, s.indices[0]
        if is_call_packed(s.value) and s.predicate is None:  # out[i] = call_packed(...)
            tmp = E.Var("packed_value", s.value.dtype)
            self.stmt(S.LetStmt(tmp, s.value, S.BufferStore(buf, tmp, s.indices)))
            return
        lanes = max(dt.lanes_of(s.value.dtype), dt.lanes_of(index.dtype))
        if lanes == 1 and dt.lanes_of(buf.dtype) == 1:
            self._store_lane(s, None, self.expr(s.value))
            return
        unroll = _needs_unrolled_lanes(s) or dt.lanes_of(buf.dtype) > 1
        if not _overlaps(s):
            self._lanes(lanes, lambda lane: self._store_lane(s, lane, self.expr(s.value, lane)),
                        unroll)
            return
        # the value reads the stored buffer elsewhere: compute every lane before storing any
        tmp = self.new_name(f"{buf.name}_value")
        self.emit(f"{value_type(s.value.dtype)} {tmp}[{lanes}];")
        self._lanes(lanes, lambda lane: self.emit(f"{tmp}[{lane}] = {self.expr(s.value, lane)};"),
                    unroll)
        self._lanes(lanes, lambda lane: self._store_lane(s, lane, f"{tmp}[{lane}]"), unroll)

    def _store_lane(self, s: S.BufferStore, lane: str | None, value: str) -> None:
        ptr = self.pointer(s.buffer.data, s.buffer.dtype)
        target = f"{ptr}[{self.element_index(s.buffer, s.indices[0], lane)}]"
        if s.predicate is not None:
            self.open(f"if ({self.expr(s.predicate, lane)})")
            self.emit(f"{target} = {value};")
            self.close()
        else:
            self.emit(f"{target} = {value};")

    def _lanes(self, lanes: int, body, unroll: bool) -> None:
        """Run ``body(lane)`` for every lane: a loop over ``lane``, or unrolled constants."""
        if unroll:
            for k in range(lanes):
                body(str(k))
            return
        self.emit("#pragma GCC ivdep")  # lanes are independent: vectorize without alias checks
        self.open(f"for (int32_t lane = 0; lane < {lanes}; ++lane)")
        body("lane")
        self.close()


def _needs_unrolled_lanes(node: object) -> bool:
    """Shuffles and vector-element buffers pick lanes by constant position."""
    found = False

    def f(n: object) -> None:
        nonlocal found
        if isinstance(n, E.Shuffle) or (isinstance(n, E.BufferLoad) and
                                        dt.lanes_of(n.buffer.dtype) > 1):
            found = True

    post_order_visit(node, f)
    return found


def _overlaps(s: S.BufferStore) -> bool:
    """Whether lane order matters: the stored value reads the stored buffer at another index,
    or at an index whose lanes may repeat (anything but a Ramp of nonzero constant stride)."""
    found = False
    index = s.indices[0]
    distinct = dt.lanes_of(index.dtype) == 1 or (
        isinstance(index, E.Ramp) and E.const_value(index.stride) not in (None, 0))

    def f(n: object) -> None:
        nonlocal found
        if isinstance(n, E.BufferLoad) and n.buffer.data is s.buffer.data:
            if not distinct or not structural_equal(n.indices[0], index):
                found = True

    post_order_visit(s.value, f)
    if s.predicate is not None:
        post_order_visit(s.predicate, f)
    return found


def _extern_names(funcs: list[PrimFunc]) -> set[str]:
    out: set[str] = set()

    def f(n: object) -> None:
        if isinstance(n, E.Call) and n.op in ("call_extern", "call_pure_extern") and n.args and \
                isinstance(n.args[0], E.StringImm):
            out.add(n.args[0].value)

    for func in funcs:
        post_order_visit(func.body, f)
    return out


def emit_source(funcs: list[PrimFunc], banner: str = "") -> str:
    """One C source defining every function of ``funcs``."""
    helpers = HelperTable()
    externs: dict[str, str] = {}
    names: set[str] = set()
    for f in funcs:
        if not isinstance(f, PrimFunc):
            raise TypeError(f"C backend: expected PrimFuncs, got {type(f).__name__}")
        if not f.name.isidentifier() or f.name != sanitize(f.name):
            raise CCodegenError(f"function name {f.name!r} is not usable as a C symbol; give "
                                "tvm.build a name= that is a C identifier (not a C keyword)")
        if f.name in names:
            raise CCodegenError(f"two functions are named {f.name!r} in one module")
        names.add(f.name)
    taken = names | _extern_names(funcs)  # locals must not hide a function they call
    bodies = [FunctionEmitter(f, helpers, externs, taken).function() for f in funcs]
    parts = [f"/* {banner} */" if banner else "", "#define _GNU_SOURCE"]
    parts += [f"#include <{h}>" for h in _HEADERS]
    error = (f"/* set to the failed assertion's message when a function returns -1; defined\n"
             f"   (weak) by the runtime's linker, see tvmpy/runtime/module.py */\n"
             f"extern const char* {abi.ERROR_SYMBOL};")
    sections = ["\n".join(p for p in parts if p), error]
    if externs:
        sections.append("/* external functions */\n" + "\n".join(externs.values()))
    if helpers.used:
        sections.append(helpers.source())
    sections.extend(bodies)
    return "\n\n".join(sections) + "\n"
