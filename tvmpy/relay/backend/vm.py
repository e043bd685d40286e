"""The VM compiler: a relay module -> VM bytecode + dataflow segments + one library
(``relay.vm.compile``; TVM's ``relay.backend.vm``). The machine and the why of the design are
in runtime/vm.py.

Per relay function of the module (``main`` and every function it reaches):

1. ``let`` bindings are inlined (operators are pure; sharing is kept) and calls of local
   functions (``let f = fn ...; f(x)``, ``(fn ...)(x)``) beta-reduced: what is left is a DAG of
   operator calls, tuples, ``If`` and calls of global functions.
2. **Placement**: every node is evaluated in the innermost scope (function body, or a branch of
   an ``If``) that holds all its uses -- TVM's A-normal form puts a binding at the least common
   ancestor scope the same way -- so a value used by both branches is computed once before the
   ``If``, and a value used by one branch only when that branch runs.
3. **Control nodes** become instructions: ``If``, calls of global functions (``INVOKE``, marked
   tail when the call is the function's result), operators whose output shape only run time
   knows (``KERNEL``: data-dependent shape functions, sizes no input size determines, and
   operators without a compute, which run their numpy implementation; an operator with an
   upper-bound kernel, ``relay.op.upper_bound``, runs that one), and tuples / tuple items
   of such values. A kernel whose output type reads a size no argument has (an attribute
   ``broadcast_to(c, shape=[K, 3])``, K decided by an earlier NonZero) runs after the node
   that decides it and gets that value for its sizes (``sizes of`` in ``exe.bytecode``). Everything else (operator calls, constants, tuples feeding operators) forms
   **dataflow regions**: per scope, the operators between two layers of control nodes (a node's
   layer is the number of control nodes on its longest dependency path) make one region.
4. Each region becomes a relay function (its inputs: the values it reads from elsewhere; its
   outputs: the values read elsewhere), optimized by ``relay.build``'s own pipeline
   (``build_module.optimize``: the PassContext's opt_level, FuseOps, AlterOpLayout, ...), its
   primitive functions lowered by one shared ``TECompiler`` (equal groups of all regions share a
   kernel; dimensions unknown at compile time stay symbolic extents) and turned into a graph
   (``graph_codegen``, with the static memory plan). All functions are compiled into ONE library.

A static model is one region: its segment is the graph ``relay.build`` makes.

For a GPU target (cuda, nvptx, opencl) the regions' kernels are compiled for the device (the
GPU strategies pick their generic, guarded schedules for symbolic extents; their tuned templates
need constant shapes) and the single-operator kernels (KERNEL instructions) for the target's
host (``target.host``, default llvm) into a second library, ``exe.host_lib``: data-dependent
operators run on the host, after their inputs are copied back (runtime/vm.py).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from ...arith.sum_form import cache_scope
from ...autotvm.task.dispatcher import FALLBACK
from ...ir.functor import post_order
from ...runtime import vm as rvm
from ...runtime.device import Device, cpu
from ...target import Target
from ..expr import Call, Constant, Function, GlobalVar, If, Let, RelayExpr, Tuple, TupleGetItem, Var
from ..module import IRModule
from ..op.registry import Op
from ..ty import TensorType, TupleType, Type, type_str
from ..visitor import InlineLets

__all__ = ["compile", "VMCompiler", "VMExecutor", "VMCompileError"]


class VMCompileError(ValueError):
    """The module cannot be compiled for the VM (names the function and node)."""


def _lowering_errors() -> tuple[type[Exception], ...]:
    from .te_compiler import LoweringError

    # what a compute/strategy raises on shapes or attributes it does not implement
    return (LoweringError, NotImplementedError, ZeroDivisionError, ValueError, TypeError)


_LOWERING_ERRORS = _lowering_errors()


def _numpy_fallback(node: str, op_name: str, err: Exception) -> None:
    """An operator whose compute fails to lower for the VM runs its numpy implementation at run
    time: as a failing schedule in ``relay.build`` (relay/backend/te_compiler.py), a
    RuntimeWarning naming the node, the operator and the error, or under strict mode
    (``relay.backend.strict_schedules``, ``TVMPY_STRICT_SCHEDULES=1``) a VMCompileError."""
    from .te_compiler import STRICT_KEY, strict_schedules

    what = (f"{node}: the kernel of operator {op_name} failed to lower "
            f"({type(err).__name__}: {err})")
    if strict_schedules():
        raise VMCompileError(f"{what} [{STRICT_KEY} is on: no numpy fallback]") from err
    warnings.warn(f"{what}; the VM runs its numpy implementation instead (correct but slow, "
                  f"marked [numpy] in exe.bytecode). Set PassContext(config={{{STRICT_KEY!r}: "
                  "True}) to make this an error", RuntimeWarning, stacklevel=2)


# ---- 1. lets and local functions ----------------------------------------------------------------
class _Inline(InlineLets):
    """Inline ``let`` bindings and beta-reduce calls of local (non-primitive) functions
    (functions are entered when called; primitive functions stay as they are)."""

    def visit_call(self, c: Call) -> RelayExpr:
        op = self.visit(c.op)
        if isinstance(op, Function) and not op.attrs.get("Primitive"):
            args = [self.visit(a) for a in c.args]
            if len(args) != len(op.params):
                raise VMCompileError(f"a local function of {len(op.params)} parameters called "
                                     f"with {len(args)} arguments")
            inner = _Inline({**self.subst, **{id(p): a for p, a in zip(op.params, args)}})
            return inner.visit(op.body)
        return super().visit_call(c)


def _inline(func: Function, mod: IRModule) -> Function:
    from ..type_infer import infer_type

    found = []

    def probe(e: Any) -> None:
        if isinstance(e, Let) or (isinstance(e, Call) and isinstance(e.op, (Var, Function))
                                  and not (isinstance(e.op, Function)
                                           and e.op.attrs.get("Primitive"))):
            found.append(e)

    from ..visitor import post_order_visit

    post_order_visit(func.body, probe)
    if not found:
        return func
    body = _Inline().visit(func.body)
    new = Function(func.params, body, func.ret_type, attrs=func.attrs)
    return infer_type(new, mod)  # type: ignore[return-value]


# ---- 2. scopes and placement --------------------------------------------------------------------
class _Scope:
    __slots__ = ("parent", "depth")

    def __init__(self, parent: _Scope | None):
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1


def _lca(a: _Scope, b: _Scope) -> _Scope:
    while a.depth > b.depth:
        a = a.parent  # type: ignore[assignment]
    while b.depth > a.depth:
        b = b.parent  # type: ignore[assignment]
    while a is not b:
        a, b = a.parent, b.parent  # type: ignore[assignment]
    return a


def _under(s: _Scope, anc: _Scope) -> bool:
    while s is not None and s.depth > anc.depth:
        s = s.parent  # type: ignore[assignment]
    return s is anc


def _children(e: Any) -> tuple[Any, ...]:
    t = type(e)
    if t is Call:
        return e.args
    if t is Tuple:
        return e.fields
    if t is TupleGetItem:
        return (e.tuple_value,)
    if t is If:
        return (e.cond, e.true_branch, e.false_branch)
    return ()


def _spec(t: Type) -> Any:
    """The VM's type spec (runtime/vm.py) of a relay type."""
    from ...tir import expr as tir_expr

    if isinstance(t, TupleType):
        return ("tuple", [_spec(f) for f in t.fields])
    if type(t).__name__ == "ListType":  # a run-time list of tensors (ONNX sequences)
        elem = getattr(t, "elem", None)
        return ("list", str(t.dtype), None if elem is None else _spec(elem))
    if not isinstance(t, TensorType):
        raise VMCompileError(f"values of type {type_str(t)} are not supported by the VM")
    dims: list[Any] = []
    for d in t.shape:
        d = getattr(d, "value", d)
        if isinstance(d, int):
            dims.append(int(d))
        elif isinstance(d, tir_expr.Var):
            dims.append(d.name)
        else:
            dims.append(None)
    return ("tensor", str(t.dtype), dims)


def _node_str(e: Any) -> str:
    from ..printer import short_str

    try:
        return short_str(e)
    except Exception:  # noqa: BLE001 - only for messages
        return type(e).__name__


def _tensors_only(t: Type) -> bool:
    if isinstance(t, TupleType):
        return all(_tensors_only(f) for f in t.fields)
    return isinstance(t, TensorType)


def _vm_op(c: Call, bindable: set[int] | frozenset[int] = frozenset()) -> str | None:
    """Why the operator call ``c`` must run on its own (a KERNEL instruction), or None when it
    belongs to a dataflow region."""
    from ...tir.functor import collect_vars
    from ..op.shape_func import is_data_dependent
    from .te_compiler import flat_tensor_types, has_compute

    op = c.op
    if op.get_attr("TRuntimeBuiltin") or not all(
            _tensors_only(t) for t in (c.checked_type, *(a.checked_type for a in c.args))):
        return "builtin"  # runs on the VM's values (e.g. lists) with its numpy implementation
    if is_data_dependent(op):
        return "data-dependent"
    if not has_compute(op) and op.get_attr("FTVMQnnCanonicalize") is None:
        return "no compute"
    known: set[int] = set(bindable)  # (sizes of the function's parameters: a region binds them)
    for a in c.args:
        for t in flat_tensor_types(a.checked_type):
            for d in t.shape:
                if not isinstance(d, int):
                    known |= {id(v) for v in collect_vars(d)}
    for t in flat_tensor_types(c.checked_type):
        for d in t.shape:
            if not isinstance(d, int) and any(id(v) not in known for v in collect_vars(d)):
                return "fresh size"  # a size no input size determines: its shape function
    return None


# ---- 3./4. the compiler --------------------------------------------------------------------------
class VMCompiler:
    """``VMCompiler().lower(mod, target, params)`` then ``get_exec()`` (TVM's API);
    :func:`compile` does both."""

    def __init__(self) -> None:
        self.exe: rvm.Executable | None = None

    def lower(self, mod: Any, target: Any = None, params: Mapping[str, Any] | None = None,
              target_host: Any = None) -> None:
        with FALLBACK.build_scope():  # one untuned-workloads line per compilation
            self.exe = _Compilation(mod, target, params, target_host).run()

    def get_exec(self) -> rvm.Executable:
        if self.exe is None:
            raise RuntimeError("VMCompiler.get_exec: call lower() first")
        return self.exe

    def optimize(self, mod: Any, target: Any = None, params: Any = None) -> tuple[IRModule, dict]:
        """The module as the VM compiles it (lets inlined, types inferred) and the params."""
        comp = _Compilation(mod, target, params)
        return comp.mod, dict(params or {})


class _Compilation:
    def __init__(self, mod: Any, target: Any, params: Mapping[str, Any] | None,
                 target_host: Any = None):
        from ..build_module import _build_target, _check_params
        from ..transform import BindParams, InferType

        if isinstance(mod, Function):
            mod = IRModule.from_expr(mod)
        if not isinstance(mod, IRModule):
            raise TypeError(f"relay.vm.compile takes an IRModule (or a relay Function), got "
                            f"{type(mod).__name__}")
        if "main" not in mod:
            raise VMCompileError("relay.vm.compile: the module has no 'main' function")
        self.target: Target = _build_target(target)
        gpu = bool(getattr(self.target, "is_gpu", False))
        if self.target.kind not in ("llvm", "c") and not gpu:
            raise VMCompileError(f"relay.vm.compile: the VM runs on the CPU and on GPUs "
                                 f"(cuda, opencl, ...); target {self.target} is neither")
        if gpu and self.target.kind in ("webgpu", "vulkan"):
            raise VMCompileError(f"relay.vm.compile: target {self.target}: the VM on the GPU "
                                 "runs CUDA (cuda, nvptx) and OpenCL kernels; build this model "
                                 "with relay.build for it")
        # on a GPU the single-operator kernels (data-dependent shapes, fresh sizes) run on the
        # host: their inputs are copied back (a sync) and their shape computed there
        if gpu and target_host is not None:  # (TVM's target_host: where the host code runs)
            self.target = Target(str(self.target), host=target_host)
        self.host_target: Target = (self.target.host or Target("llvm")) if gpu else self.target
        if self.host_target.kind not in ("llvm", "c"):
            raise VMCompileError(f"relay.vm.compile: target_host {self.host_target} is not a "
                                 "CPU target")
        mod = InferType()(mod)
        bound = _check_params(mod["main"], params)
        if bound:
            mod = BindParams(bound)(mod)
        self.mod = mod
        from .te_compiler import TECompiler

        self.compiler = TECompiler(self.target)  # the segments' kernels
        # the KERNEL instructions' (the same compiler on the CPU)
        self.kernel_compiler = (TECompiler(self.host_target) if gpu else self.compiler)
        from .upper_bound import UpperBoundKernels

        self.upper_bound_kernels = UpperBoundKernels(self.kernel_compiler)
        self.functions: list[rvm.VMFunction] = []
        self.func_index: dict[str, int] = {}
        self.segments: list[rvm.SegmentInfo] = []
        self.kernels: list[rvm.KernelInfo] = []

    def run(self) -> rvm.Executable:
        with cache_scope():
            names = ["main"] + sorted(g.name_hint for g, f in self.mod.items()
                                      if isinstance(f, Function) and g.name_hint != "main"
                                      and not f.attrs.get("Primitive"))
            for name in names:
                self.func_index[name] = len(self.func_index)
            for name in names:
                self.functions.append(self._compile_function(name))
            lib = self._build(self.compiler, self.target)
            host_lib = (self._build(self.kernel_compiler, self.host_target)
                        if self.kernel_compiler is not self.compiler else None)
        return rvm.Executable(self.functions, self.segments, self.kernels, lib, host_lib)

    @staticmethod
    def _build(compiler: Any, target: Target) -> Any:
        from ... import driver
        from ...runtime.module import Module

        lowered = [driver.lower_primfunc(lf.prim_func, target=target) for lf in compiler.funcs]
        if lowered:
            return driver.build(lowered, target=target)
        return Module(None, {"version": 1, "entry": "", "functions": []}, "empty")

    def _compile_function(self, name: str) -> rvm.VMFunction:
        """Bytecode for one function. When a region's kernels cannot be lowered (an operator's
        compute refuses these symbolic shapes), the calls that fail on their own run as single
        kernels (their numpy implementation) and the function is compiled again."""
        func = _inline(self.mod[name], self.mod)
        force: set[int] = set()
        while True:
            n_seg, n_ker = len(self.segments), len(self.kernels)
            try:
                return _FunctionCompiler(self, name, func, force).compile()
            except _RegionLoweringFailed as failed:
                del self.segments[n_seg:], self.kernels[n_ker:]
                new = {id(c) for c in failed.calls} - force
                if not new:
                    raise VMCompileError(f"@{name}: {failed.error}") from failed.error
                force |= new

    def lowers_alone(self, call: Call) -> bool:
        """Whether the operator call ``call`` can be lowered as a kernel of its own."""
        from ..type_infer import infer_type

        params: list[Var] = []
        args = []
        for i, a in enumerate(call.args):  # (the sizes as in the region: it binds them)
            expr, ps = _param_expr(f"p{i}", a.checked_type)
            params += ps
            args.append(expr)
        prim = infer_type(Function(params, Call(call.op, args, call.attrs),
                                   attrs={"Primitive": 1}))
        try:
            self.compiler.lower(prim)  # type: ignore[arg-type]
        except _LOWERING_ERRORS:
            return False
        return True

    # ---- regions ------------------------------------------------------------------------------
    def add_segment(self, func: Function, in_specs: list[Any], out_specs: list[Any],
                    where: str) -> int:
        """Optimize a region function as relay.build does, lower its kernels, make its graph."""
        from ..build_module import _copy_outputs, _primitive_calls, optimize
        from .graph_codegen import GraphCodegenError, codegen_graph

        try:
            fused = optimize(IRModule.from_expr(func), None, self.target)
            main = fused["main"]
            if not _primitive_calls(main):
                main = _copy_outputs(main)
            for f in _primitive_calls(main):
                self.compiler.lower(f)

            def symbol(f: Function) -> str:
                return (self.compiler.lookup(f) or self.compiler.lower(f)).name

            graph_json, params, _ = codegen_graph(main, symbol)
        except GraphCodegenError as e:
            raise VMCompileError(f"{where}: {e}") from e
        name = f"region{len(self.segments)}"
        n = len(_primitive_calls(main))
        self.segments.append(rvm.SegmentInfo(graph_json, params, in_specs, out_specs,
                                             f"{where}:{name}", n))
        return len(self.segments) - 1

    def add_kernel(self, call: Call, why: str, where: str,
                   size_types: list[Type] | None = None) -> int:
        """One operator with run-time output shapes: lowered with symbolic output extents (or
        its numpy implementation when it has no compute). ``size_types``: the types of the
        values passed after its arguments only for their sizes (size variables its output
        type reads that no argument has: an attribute ``broadcast_to(x, shape=[B, K])`` with
        K the size of an earlier NonZero's result), so that the output shapes are the type's
        dimensions evaluated, not a shape function over attributes that hold variables."""
        from ..op.shape_func import is_data_dependent
        from ..type_infer import infer_type
        from .te_compiler import has_compute, primitive_shape_args

        op = call.op
        node = f"{where}: node `{_node_str(call)}`"
        symbol = None
        if why == "builtin":
            if op.get_attr("FNumpy") is None:
                raise VMCompileError(f"{node}: run-time builtin {op.name} has no numpy "
                                     "implementation")
            self.kernels.append(rvm.KernelInfo(
                op.name, op, call.attrs, None, [_spec(a.checked_type) for a in call.args],
                _spec(call.checked_type), False, node, out_type=call.checked_type))
            return len(self.kernels) - 1
        args, params = _param_exprs("p", [a.checked_type for a in call.args])
        bounded = False
        if why == "data-dependent" and op.get_attr("FUpperBound") is not None:
            # the kernel writes upper-bound buffers and the actual counts (relay.op.upper_bound):
            # no host pass over the data before it
            prim = infer_type(Function(params, Call(op, args, call.attrs), attrs={"Primitive": 1}))
            try:
                symbol = self.upper_bound_kernels.lower(prim)  # type: ignore[arg-type]
                bounded = True
            except _LOWERING_ERRORS:
                symbol = None  # the exact path below
        if not bounded and has_compute(op):
            prim = Function(params, Call(op, args, call.attrs), attrs={"Primitive": 1})
            prim = infer_type(prim)  # type: ignore[assignment]
            try:
                if primitive_shape_args(prim):
                    raise NotImplementedError(f"{node}: the kernel of {op.name} needs sizes "
                                              "that are no dimension of its inputs or outputs")
                symbol = self.kernel_compiler.lower(prim).name
            except _LOWERING_ERRORS as err:
                # e.g. a broadcast of two unrelated run-time sizes, which the compute cannot
                # prove compatible, or an attribute value the kernel does not implement: the
                # numpy implementation runs it (checked by its shape function first), loudly
                if op.get_attr("FNumpy") is None:
                    raise
                _numpy_fallback(node, op.name, err)
        elif not bounded and op.get_attr("FNumpy") is None:
            raise VMCompileError(f"{node}: operator {op.name} has neither a compute nor a "
                                 "numpy implementation")
        if why == "data-dependent" and op.get_attr("FShapeFunc") is None:
            raise VMCompileError(f"{node}: operator {op.name} is data-dependent but has no "
                                 "shape function")
        info = rvm.KernelInfo(
            op.name, op, call.attrs, symbol, [_spec(a.checked_type) for a in call.args],
            _spec(call.checked_type), is_data_dependent(op), node)
        info.bounded = bounded
        info.size_specs = [_spec(t) for t in size_types or ()]
        # the output sizes as expressions of the inputs' sizes, where the type has them (a
        # shape function may not evaluate attributes that hold size variables)
        info.out_dims = [[d if isinstance(d, int) else str(d) for d in t.shape]
                         for t in _tensor_types(call.checked_type)]
        self.kernels.append(info)
        return len(self.kernels) - 1


def _tensor_types(t: Type) -> list[TensorType]:
    if isinstance(t, TupleType):
        return [x for f in t.fields for x in _tensor_types(f)]
    return [t] if isinstance(t, TensorType) else []


def _whole_dim_vars(types: list[Type]) -> set[int]:
    from ...tir import expr as tir_expr

    return {id(d) for t in types for tt in _tensor_types(t) for d in tt.shape
            if isinstance(d, tir_expr.Var)}


def _relax(t: Type, bound: set[int]) -> Type:
    """``t`` with every dimension that reads a size variable outside ``bound`` (no whole
    dimension of any input: ``? + 3`` where that ``?`` is no input's size) replaced by a fresh
    ``Any``: the value's actual size binds it at run time instead."""
    from ...tir.functor import collect_vars
    from ..ty import Any as AnyDim

    if isinstance(t, TupleType):
        return TupleType([_relax(f, bound) for f in t.fields])
    if not isinstance(t, TensorType):
        return t
    dims = [d if isinstance(d, int) or all(id(v) in bound for v in collect_vars(d))
            else AnyDim() for d in t.shape]
    return t if all(a is b for a, b in zip(dims, t.shape)) else TensorType(dims, t.dtype)


def _param_exprs(prefix: str, types: list[Type]) -> tuple[list[RelayExpr], list[Var]]:
    """Parameters standing for values of ``types`` (tuples flattened), their sizes relaxed
    (see ``_relax``) so that every size variable is some parameter's whole dimension."""
    bound = _whole_dim_vars(types)
    exprs, params = [], []
    for i, t in enumerate(types):
        e, ps = _param_expr(f"{prefix}{i}", _relax(t, bound))
        exprs.append(e)
        params += ps
    return exprs, params


def _param_expr(name: str, t: Type) -> tuple[RelayExpr, list[Var]]:
    """A parameter standing for a value of type ``t``: a Var, or a Tuple of Vars (flattened)."""
    if isinstance(t, TupleType):
        fields, params = [], []
        for k, f in enumerate(t.fields):
            e, ps = _param_expr(f"{name}_{k}", f)
            fields.append(e)
            params += ps
        return Tuple(fields), params
    v = Var(name, t)
    return v, [v]


class _RegionLoweringFailed(Exception):
    """A region's kernels could not be lowered; ``calls``: its operator calls that cannot be
    lowered on their own either."""

    def __init__(self, calls: list[Call], error: Exception):
        super().__init__(str(error))
        self.calls, self.error = calls, error


class _FunctionCompiler:
    """Bytecode for one relay function (see the module docstring)."""

    def __init__(self, comp: _Compilation, name: str, func: Function, force: set[int]):
        self.comp = comp
        self.name = name
        self.func = func
        self.force = force  # operator calls that run as single kernels
        self.param_vars = _whole_dim_vars([p.checked_type for p in func.params])
        self.avail: list[Any] = []  # the values computed so far on the path being emitted
        self.code: list[tuple] = []
        self.regs: dict[int, int] = {}
        self.nregs = 0
        for p in self.func.params:
            self.reg(p)

    def reg(self, e: Any) -> int:
        r = self.regs.get(id(e))
        if r is None:
            r = self.regs[id(e)] = self.nregs
            self.nregs += 1
        return r

    def where(self) -> str:
        return f"@{self.name}"

    def compile(self) -> rvm.VMFunction:
        body = self.func.body
        self._introducers(body)
        order = post_order(body, self._ordered_children)
        self.order_index = {id(e): k for k, e in enumerate(order)}
        top = _Scope(None)
        self.scope: dict[int, _Scope] = {id(body): top}
        self.branches: dict[int, tuple[_Scope, _Scope]] = {}
        self.consumers: dict[int, list[Any]] = {}
        for e in reversed(order):  # consumers before producers
            s = self.scope.get(id(e), top)
            if isinstance(e, If):
                t, f = _Scope(s), _Scope(s)
                self.branches[id(e)] = (t, f)
                uses = ((e.cond, s), (e.true_branch, t), (e.false_branch, f))
            else:
                uses = tuple((c, s) for c in _children(e))
            for c, cs in uses:
                self.consumers.setdefault(id(c), []).append(e)
                cur = self.scope.get(id(c))
                self.scope[id(c)] = cs if cur is None else _lca(cur, cs)
        self.kind: dict[int, str] = {}
        for e in order:
            self.kind[id(e)] = self._classify(e)
        for e in reversed(order):  # a tuple feeding an operator goes into its region
            if isinstance(e, Tuple) and any(
                    self.kind.get(id(c)) == "region" and not isinstance(c, TupleGetItem)
                    for c in self.consumers.get(id(e), ())):
                self.kind[id(e)] = "region"
        for e in order:  # an item of a region value is in the region
            if isinstance(e, TupleGetItem):
                self.kind[id(e)] = ("region" if self.kind.get(id(e.tuple_value)) == "region"
                                    else "field")
        self.by_scope: dict[int, list[Any]] = {}
        for e in order:
            if id(e) in self.kind and self.kind[id(e)] != "leaf":
                self.by_scope.setdefault(id(self.scope[id(e)]), []).append(e)
        result = self.emit_scope(top, body, tail=True)
        self.code.append((rvm.RET, result))
        specs = [_spec(p.checked_type) for p in self.func.params]
        return rvm.VMFunction(self.name, [p.name_hint for p in self.func.params], specs,
                              self.nregs, self.code, _spec(body.checked_type))

    def _classify(self, e: Any) -> str:
        if isinstance(e, Var):
            if id(e) not in self.regs:
                raise VMCompileError(f"{self.where()}: free variable %{e.name_hint}")
            return "leaf"
        if isinstance(e, Constant):
            return "region"
        if isinstance(e, Call):
            op = e.op
            if isinstance(op, Op):
                return ("region" if _vm_op(e, self.param_vars) is None
                        and id(e) not in self.force else "kernel")
            if isinstance(op, Function) and op.attrs.get("Primitive"):
                return "region"
            if isinstance(op, GlobalVar):
                if op.name_hint not in self.comp.func_index:
                    raise VMCompileError(f"{self.where()}: call of @{op.name_hint}, which is "
                                         "not a relay function of the module")
                return "invoke"
            raise VMCompileError(f"{self.where()}: calling a {type(op).__name__} value "
                                 f"(`{_node_str(e)}`): closures as values are not supported")
        if isinstance(e, If):
            return "if"
        if isinstance(e, Tuple):
            return "tuple"
        if isinstance(e, TupleGetItem):
            return "field"
        if isinstance(e, GlobalVar):
            raise VMCompileError(f"{self.where()}: @{e.name_hint} used as a value (closures "
                                 "are not supported by the VM)")
        if isinstance(e, Function):
            raise VMCompileError(f"{self.where()}: a function used as a value (closures are not "
                                 "supported by the VM; call it, or make it a global function)")
        raise VMCompileError(f"{self.where()}: unsupported node {type(e).__name__}")

    # ---- per scope ----------------------------------------------------------------------------
    def _if_deps(self, e: If, s: _Scope) -> list[Any]:
        """The nodes of scope ``s`` that the branches of ``e`` read."""
        t, f = self.branches[id(e)]
        deps, seen = [e.cond], set()
        stack = [e.true_branch, e.false_branch]
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            ns = self.scope.get(id(n))
            if ns is None:
                continue
            if _under(ns, t) or _under(ns, f):
                stack.extend(_children(n))
            elif ns is s:
                deps.append(n)
        return deps

    def emit_scope(self, s: _Scope, result: Any, tail: bool) -> int:
        nodes = self.by_scope.get(id(s), [])
        level: dict[int, int] = {}
        deps_of: dict[int, list[Any]] = {}
        for e in nodes:
            deps = self._if_deps(e, s) if isinstance(e, If) else list(_children(e))
            if self.kind[id(e)] == "kernel":
                deps += self._size_sources(e)
            deps = [d for d in deps if id(d) in level]
            deps_of[id(e)] = deps
            # a region of layer k runs after the control nodes of layer k; a control node
            # after the regions it reads (so one layer up) and the control nodes it reads
            if self.kind[id(e)] == "region":
                level[id(e)] = max((level[id(d)] for d in deps), default=0)
            else:
                level[id(e)] = max((level[id(d)] + (self.kind[id(d)] == "region")
                                    for d in deps), default=0)
        max_level = max(level.values(), default=0)
        for k in range(max_level + 1):
            for e in nodes:
                if level[id(e)] == k and self.kind[id(e)] != "region":
                    self.emit_control(e, s, tail and e is result)
            region = [e for e in nodes if level[id(e)] == k and self.kind[id(e)] == "region"]
            if region:
                self.emit_region(region, result)
        return self.reg(result)

    def _missing_sizes(self, e: Any) -> set[int]:
        """The size variables ``e``'s type reads that neither its inputs nor the function's
        parameters have as a whole dimension."""
        from ...tir.functor import collect_vars

        if not isinstance(e, Call):
            return set()
        have = _whole_dim_vars([a.checked_type for a in e.args]) | self.param_vars
        return {id(v) for t in _tensor_types(e.checked_type) for d in t.shape
                if not isinstance(d, int) for v in collect_vars(d)} - have

    def _introducers(self, body: Any) -> None:
        """Per size variable, the node that decides it at run time (an operator whose shape
        function reads data, a call of a function, an If: their types have it as a whole
        dimension that their inputs do not)."""
        from ..op.shape_func import is_data_dependent

        self.introducer: dict[int, Any] = {}
        for e in post_order(body, _children):
            if isinstance(e, If):
                ins = [e.cond]
            elif isinstance(e, Call) and (not isinstance(e.op, Op) or is_data_dependent(e.op)
                                          or e.op.get_attr("TRuntimeBuiltin")):
                ins = list(e.args)
            else:
                continue
            have = _whole_dim_vars([a.checked_type for a in ins])
            for v in _whole_dim_vars([e.checked_type]) - have:
                self.introducer.setdefault(v, e)

    def _size_sources(self, e: Any) -> list[Any]:
        """The nodes that decide the sizes the operator call ``e`` reads but no input of it
        has (an attribute ``broadcast_to(c, shape=[K, 3])``, K a NonZero's count): ``e`` runs
        after them and gets them for their sizes (``_binders``)."""
        from ..op.shape_func import is_data_dependent

        if not isinstance(e.op, Op) or is_data_dependent(e.op):
            return []  # (its shape function or its callee gives its sizes)
        found = (self.introducer.get(v) for v in self._missing_sizes(e))
        return [n for n in found if n is not None and n is not e]

    def _ordered_children(self, e: Any) -> tuple[Any, ...]:
        """The inputs of ``e`` and the nodes that make its sizes (the emission order)."""
        kids = _children(e)
        extra = self._size_sources(e) if isinstance(e, Call) else []
        return (*kids, *extra) if extra else kids

    def emit_region(self, region: list[Any], result: Any) -> None:
        ids = {id(e) for e in region}
        leaves: list[Any] = []
        seen: set[int] = set()
        for e in region:
            for c in _children(e):
                if id(c) not in ids and id(c) not in seen:
                    seen.add(id(c))
                    leaves.append(c)
        leaves += self._binders(region, leaves)
        outputs = [e for e in region if e is result or any(
            id(c) not in ids for c in self.consumers.get(id(e), ()))]
        exprs, params = _param_exprs("i", [leaf.checked_type for leaf in leaves])
        new: dict[int, RelayExpr] = {id(leaf): e for leaf, e in zip(leaves, exprs)}
        for e in region:
            if isinstance(e, Constant):
                new[id(e)] = e
            elif isinstance(e, Call):
                new[id(e)] = Call(e.op, [new[id(a)] for a in e.args], e.attrs)
            elif isinstance(e, Tuple):
                new[id(e)] = Tuple([new[id(f)] for f in e.fields])
            else:
                new[id(e)] = TupleGetItem(new[id(e.tuple_value)], e.index)
        body = Tuple([new[id(o)] for o in outputs])
        func = Function(params, body)
        try:
            seg = self.comp.add_segment(func, [_spec(x.checked_type) for x in leaves],
                                        [_spec(o.checked_type) for o in outputs], self.where())
        except _LOWERING_ERRORS as e:
            calls = [c for c in region if isinstance(c, Call) and isinstance(c.op, Op)
                     and not self.comp.lowers_alone(c)]
            raise _RegionLoweringFailed(calls, e) from e
        self.code.append((rvm.SEGMENT, seg, tuple(self.reg(x) for x in leaves),
                          tuple(self.reg(o) for o in outputs)))
        self.avail.extend(outputs)

    def _binders(self, region: list[Any], leaves: list[Any]) -> list[Any]:
        """Values to pass to a region (or a kernel) only for their sizes (the function's
        parameters and the values computed so far on this path): those that bind a size
        variable the region's types read (``? + 3``, or a reshape whose attributes hold it)
        but no input of the region has as a whole dimension."""
        from ...tir import expr as tir_expr
        from ...tir.functor import collect_vars

        bound = _whole_dim_vars([x.checked_type for x in leaves])
        missing: dict[int, Any] = {}
        for e in region:
            for t in _tensor_types(e.checked_type):
                for d in t.shape:
                    if not isinstance(d, int):
                        for v in collect_vars(d):
                            if id(v) not in bound:
                                missing[id(v)] = v
        extra = []
        for p in [*self.func.params, *self.avail]:
            if not missing or any(p is x for x in leaves):
                continue
            have = {id(d) for t in _tensor_types(p.checked_type) for d in t.shape
                    if isinstance(d, tir_expr.Var)}
            if have & set(missing):
                extra.append(p)
                for k in have & set(missing):
                    del missing[k]
        return extra

    def emit_control(self, e: Any, s: _Scope, tail: bool) -> None:
        self._emit_control(e, s, tail)
        self.avail.append(e)

    def _emit_control(self, e: Any, s: _Scope, tail: bool) -> None:
        k = self.kind[id(e)]
        if k == "invoke":
            f = self.comp.func_index[e.op.name_hint]
            self.code.append((rvm.INVOKE, f, tuple(self.reg(a) for a in e.args), self.reg(e),
                              tail))
        elif k == "kernel":
            sizes = self._binders([e], list(e.args))
            idx = self.comp.add_kernel(e, _vm_op(e, self.param_vars) or "", self.where(),
                                       [x.checked_type for x in sizes])
            self.code.append((rvm.KERNEL, idx, tuple(self.reg(a) for a in [*e.args, *sizes]),
                              self.reg(e)))
        elif k == "tuple":
            self.code.append((rvm.TUPLE, self.reg(e), tuple(self.reg(f) for f in e.fields)))
        elif k == "field":
            self.code.append((rvm.FIELD, self.reg(e), self.reg(e.tuple_value), e.index))
        elif k == "if":
            t, f = self.branches[id(e)]
            dst = self.reg(e)
            at_if = len(self.code)
            self.code.append((rvm.IF, self.reg(e.cond), -1))
            mark = len(self.avail)  # (what a branch computes is not there after the If)
            r = self.emit_scope(t, e.true_branch, tail)
            del self.avail[mark:]
            self.code.append((rvm.MOVE, dst, r))
            at_goto = len(self.code)
            self.code.append((rvm.GOTO, -1))
            self.code[at_if] = (rvm.IF, self.reg(e.cond), len(self.code))
            r = self.emit_scope(f, e.false_branch, tail)
            del self.avail[mark:]
            self.code.append((rvm.MOVE, dst, r))
            self.code[at_goto] = (rvm.GOTO, len(self.code))
        else:
            raise AssertionError(k)


# ---- public API -----------------------------------------------------------------------------------
def compile(mod: Any, target: Any = None, target_host: Any = None,
            params: Mapping[str, Any] | None = None) -> rvm.Executable:  # noqa: A001
    """``relay.vm.compile(mod, target="llvm", params=None)`` -> :class:`Executable` (TVM's
    signature). The opt_level comes from the PassContext, as for ``relay.build``."""
    comp = VMCompiler()
    comp.lower(mod, target, params, target_host)
    return comp.get_exec()


class VMExecutor:
    """``relay.create_executor("vm", mod, device, target)``: ``evaluate()`` compiles the module
    once and returns a callable of main's inputs (NDArray or tuple results)."""

    def __init__(self, mod: IRModule, device: Device | None = None, target: Any = "llvm",
                 params: Mapping[str, Any] | None = None):
        if mod is None:
            raise ValueError("VMExecutor needs a module")
        self.mod = mod
        self.device = device if device is not None else cpu(0)
        self.target = target
        self.params = params
        self._vm: rvm.VirtualMachine | None = None

    def _make_executor(self, expr: Any = None) -> Any:
        if expr is not None and expr is not self.mod["main"]:
            mod = self.mod.copy()
            mod["main"] = expr
        else:
            mod = self.mod
        exe = compile(mod, self.target, params=self.params)
        vm = rvm.VirtualMachine(exe, self.device)

        def run(*args: Any, **kwargs: Any) -> Any:
            return vm.invoke("main", *args, **kwargs)

        return run

    def evaluate(self, expr: Any = None) -> Any:
        return self._make_executor(expr)
