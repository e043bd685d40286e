"""An ``onnx.backend.base.Backend`` for tvmpy: ``prepare(model) -> rep``, ``rep.run(inputs)``.

This is the interface onnx's own backend tests drive (``bench/onnx_conformance.py``,
``tests/relay/test_onnx_conformance_subset.py``):

    rep = TvmpyBackend.prepare(model, "CPU")
    outputs = rep.run([x, shape])            # a tuple of numpy arrays, in graph-output order

``run`` imports the model with ``relay.frontend.from_onnx`` and compiles it once for the given
input shapes and dtypes. Every graph input is fed at run time, including *shape-like* ones
(Reshape's shape, Expand's shape, Tile's repeats, Slice's starts, TopK's k, reduction axes, ...):
the importer emits ``relay.op.dyn`` operators for those, and the model is compiled once, not once
per input value. A model the graph executor cannot run (data-dependent shapes, If/Loop, sequences)
runs on the VM even when ``graph`` is asked for: ``rep.executor_used`` says which ran.

``bind_inputs=True`` restores the specializing mode: when the importer raises
``OnnxConstantInputError`` naming a tensor, the graph inputs that tensor depends on are bound as
constants (moved to initializers) and the model is imported again, so the graph compiles with
static shapes once per distinct value of those inputs.

The executor is selectable with ``TVMPY_ONNX_BACKEND_EXECUTOR``:
``graph`` (``relay.build`` + ``graph_executor``, the default when ``relay.build`` exists),
``vm`` (``relay.vm.compile`` + the virtual machine: control flow and data-dependent shapes) or
``debug`` (relay's numpy interpreter, the reference). Importing this module needs onnx.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from onnx.backend.base import Backend, BackendRep  # onnx: needed by this module only

from .. import relay
from ..relay.expr import Call, Tuple, TupleGetItem
from ..relay.frontend.onnx import OnnxConstantInputError, from_onnx
from ..relay.frontend.onnx.importer import tensors_read
from ..relay.ty import TupleType
from ..runtime import cpu
from ..transform import PassContext
from . import graph_executor

__all__ = ["TvmpyBackend", "TvmpyBackendRep", "default_executor", "prepare", "run_model"]

ENV_EXECUTOR = "TVMPY_ONNX_BACKEND_EXECUTOR"
_EXECUTORS = ("graph", "debug", "vm")


def default_executor() -> str:
    """``$TVMPY_ONNX_BACKEND_EXECUTOR`` if set, else ``graph``."""
    kind = os.environ.get(ENV_EXECUTOR, "").strip().lower()
    if kind:
        if kind not in _EXECUTORS:
            raise ValueError(f"{ENV_EXECUTOR}={kind!r}: expected one of {list(_EXECUTORS)}")
        return kind
    return "graph"


def _needed_inputs(graph: Any, tensor: str, inputs: set[str]) -> set[str]:
    """Graph inputs in the ancestor cone of ``tensor``."""
    producer = {o: node for node in graph.node for o in node.output if o}
    found: set[str] = set()
    todo, seen = [tensor], set()
    while todo:
        t = todo.pop()
        if t in seen:
            continue
        seen.add(t)
        if t in inputs:
            found.add(t)
        elif t in producer:
            todo.extend(tensors_read(producer[t]))
    return found


def _bind_inputs(model: Any, values: Mapping[str, np.ndarray]) -> Any:
    """A copy of ``model`` where the named graph inputs are initializers with these values."""
    from onnx import numpy_helper

    m = type(model)()
    m.CopyFrom(model)
    keep = [vi for vi in m.graph.input if vi.name not in values]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    for name, v in values.items():
        m.graph.initializer.append(numpy_helper.from_array(np.asarray(v), name))
    return m


def _value(o: Any) -> Any:
    """An executor's output as onnx's runner expects it: a sequence (tuple, run-time list) as a
    list of arrays."""
    if isinstance(o, (tuple, list)):
        return [_value(x) for x in o]
    return np.asarray(o.numpy() if hasattr(o, "numpy") else o)


def _compile(mod: Any, params: dict, executor: str, opt_level: int | None = None,
             n_outputs: int | None = None) -> Callable[[dict], list[Any]]:
    """A function from {input name: array} to the list of outputs (``opt_level``: relay.build's
    PassContext level; None keeps the caller's context, default 2). ``n_outputs``: the graph's
    output count (one output may itself be a sequence)."""
    if executor == "debug":
        f = relay.create_executor("debug", mod).evaluate()

        def run_debug(feeds: dict) -> list[Any]:
            out = f(**feeds, **params)
            if n_outputs == 1 or not isinstance(out, (tuple, list)):
                return [_value(out)]
            return [_value(o) for o in out]

        return run_debug

    if executor == "vm":
        from ..runtime.vm import VirtualMachine

        if opt_level is None:
            exe = relay.vm.compile(mod, target="llvm", params=params)
        else:
            with PassContext(opt_level=opt_level):
                exe = relay.vm.compile(mod, target="llvm", params=params)
        vm = VirtualMachine(exe, cpu(0))

        def run_vm(feeds: dict) -> list[Any]:
            out = vm.invoke("main", **feeds)
            if n_outputs == 1 or not isinstance(out, tuple):  # (as the debug executor's)
                return [_value(out)]
            return [_value(o) for o in out]

        run_vm.executor = "vm"  # type: ignore[attr-defined]
        # operators the VM runs with their numpy implementation (no kernel): builtins on lists,
        # host operators, and computes that refused their shapes
        run_vm.host_ops = sorted({k.name for k in exe.kernels  # type: ignore[attr-defined]
                                  if k.symbol is None})
        return run_vm

    if not _computes(mod["main"].body):  # only inputs/constants: nothing to compile
        return _compile(mod, params, "debug", n_outputs=n_outputs)
    if needs_vm(mod):
        return _compile(mod, params, "vm", opt_level, n_outputs)
    if opt_level is None:
        lib = relay.build(mod, target="llvm", params=params)
    else:
        with PassContext(opt_level=opt_level):
            lib = relay.build(mod, target="llvm", params=params)
    gm = graph_executor.GraphModule(lib["default"](cpu(0)))

    ret = mod["main"].checked_type.ret_type
    fields = [ret] if n_outputs == 1 or not isinstance(ret, TupleType) else list(ret.fields)

    def run_graph(feeds: dict) -> list[Any]:
        flat = iter(gm.infer(**feeds))  # one atomic call: rep.run from several threads is safe
        return [_regroup(t, flat) for t in fields]

    run_graph.executor = "graph"  # type: ignore[attr-defined]
    run_graph.host_ops = []  # type: ignore[attr-defined]
    return run_graph


def needs_vm(mod: Any) -> bool:
    """Whether the graph executor cannot run ``mod`` (``relay.build_module.vm_reason``: control
    flow, operators without a compute, outputs sized by input values, non-tensor inputs)."""
    from ..relay.build_module import needs_vm as _needs_vm

    return _needs_vm(mod)


def _data_dependent(mod: Any) -> bool:
    """Whether the module calls an operator whose output shape depends on input values."""
    from ..relay.build_module import data_dependent_ops

    return bool(data_dependent_ops(mod))


def _regroup(t: Any, flat: Any) -> Any:
    """The graph executor's flat outputs as the graph's: a tuple-typed output (a static ONNX
    sequence) as a list of its arrays."""
    if isinstance(t, TupleType):
        return [_regroup(f, flat) for f in t.fields]
    return next(flat)


def _with_optionals(run: Callable[[dict], list[Any]], empty: set[int], absent: set[str],
                    runtime: frozenset[int] = frozenset()) -> Callable[[dict], list[Any]]:
    """``run`` without the absent optional inputs, giving None for the empty optional outputs
    (``runtime``: the outputs returned as the pair (present, value): None or the value)."""

    def out(k: int, o: Any) -> Any:
        if k in empty:
            return None
        if k in runtime:
            return o[1] if bool(np.asarray(o[0])) else None
        return o

    def run_optional(feeds: dict) -> list[Any]:
        outs = run({k: v for k, v in feeds.items() if k not in absent})
        return [out(k, o) for k, o in enumerate(outs)]

    return run_optional


def _feed(v: Any) -> Any:
    """A graph input's value: an array, a sequence (list of arrays) or None (an absent
    optional)."""
    if v is None:
        return None
    if isinstance(v, (list, tuple)) and not isinstance(v, np.ndarray):
        return [np.asarray(x) for x in v]
    return np.asarray(v)


def _shape(v: Any) -> Any:
    """What ``from_onnx(shape=...)`` takes for a fed value (a list of shapes for a sequence)."""
    if v is None:
        return None
    if isinstance(v, list):
        return [x.shape for x in v]
    return v.shape


def _computes(body: Any) -> bool:
    """Whether an expression calls any operator (relay.build needs at least one)."""
    if isinstance(body, Call):
        return True
    if isinstance(body, Tuple):
        return any(_computes(f) for f in body.fields)
    if isinstance(body, TupleGetItem):
        return _computes(body.tuple_value)
    return False


def _check_feed(vi: Any, value: np.ndarray) -> None:
    """A value for graph input ``vi`` must have its declared element type and fixed dims
    (a sequence: each of its tensors; an optional: its value, when present)."""

    tp = vi.type
    if tp.HasField("optional_type"):
        if value is None:
            return
        tp = tp.optional_type.elem_type
    if tp.HasField("sequence_type"):
        if not isinstance(value, list):
            raise ValueError(f"input {vi.name!r}: expected a sequence (a list of arrays), got "
                             f"{type(value).__name__}")
        et = tp.sequence_type.elem_type
        for x in value:
            _check_tensor(vi.name, et.tensor_type, x)
        return
    if value is None or isinstance(value, list):
        raise ValueError(f"input {vi.name!r}: expected a tensor, got "
                         f"{'None' if value is None else 'a list'}")
    _check_tensor(vi.name, tp.tensor_type, value)


def _check_tensor(name: str, t: Any, value: np.ndarray) -> None:
    from onnx import helper

    if t.elem_type:
        want = np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type))
        if value.dtype != want:
            raise ValueError(f"input {name!r}: expected dtype {want}, got {value.dtype}")
    if t.HasField("shape"):
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        ok = len(dims) == value.ndim and all(d is None or d == s
                                              for d, s in zip(dims, value.shape))
        if not ok:
            shown = ["?" if d is None else d for d in dims]
            raise ValueError(f"input {name!r}: expected shape {shown}, got {list(value.shape)}")


class TvmpyBackendRep(BackendRep):
    """A prepared ONNX model; ``run(inputs)`` returns a tuple of numpy arrays."""

    def __init__(self, model: Any, executor: str, opt_level: int | None = None,
                 bind_inputs: bool = False):
        self.model = model
        self.bind_inputs = bind_inputs
        self.executor = executor
        self.opt_level = opt_level
        inits = {t.name for t in model.graph.initializer}
        self.input_names = [vi.name for vi in model.graph.input if vi.name not in inits]
        self.bound: set[str] = set()   # graph inputs imported as constants (shape-like)
        self.executor_used = executor  # the executor that ran (graph hands the VM what it can't)
        self.host_ops: list[str] = []  # operators the VM ran with numpy (no kernel)
        self._cache: dict[tuple, Callable[[dict], list[np.ndarray]]] = {}

    def _feeds(self, inputs: Any) -> dict[str, Any]:
        if isinstance(inputs, Mapping):
            unknown = sorted(set(inputs) - set(self.input_names))
            if unknown:
                raise ValueError(f"unknown inputs {unknown} (model inputs: {self.input_names})")
            feeds = {k: _feed(v) for k, v in inputs.items()}
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            inputs = list(inputs)
            if len(inputs) > len(self.input_names):
                raise ValueError(f"{len(inputs)} inputs given, the model has "
                                 f"{len(self.input_names)}: {self.input_names}")
            feeds = {k: _feed(v) for k, v in zip(self.input_names, inputs)}
        missing = [k for k in self.input_names if k not in feeds]
        if missing:
            raise ValueError(f"missing inputs {missing} (model inputs: {self.input_names})")
        for vi in self.model.graph.input:
            if vi.name in feeds:
                _check_feed(vi, feeds[vi.name])
        return feeds

    def _key(self, feeds: dict[str, Any]) -> tuple:
        def sig(k: str, v: Any) -> Any:
            if v is None:
                return (k, None)  # an absent optional
            if isinstance(v, list):  # a sequence: its length and its tensors' shapes
                return (k, tuple((x.shape, str(x.dtype)) for x in v))
            return (k, v.shape, str(v.dtype), v.tobytes() if k in self.bound else None)

        return tuple(sig(k, v) for k, v in sorted(feeds.items()))

    def _build(self, feeds: dict[str, np.ndarray]) -> Callable[[dict], list[np.ndarray]]:

        names = set(self.input_names)
        while True:
            model = _bind_inputs(self.model, {k: feeds[k] for k in self.bound})
            free = {k: v for k, v in feeds.items() if k not in self.bound}
            info: dict[str, Any] = {}
            try:
                mod, params = from_onnx(model, {k: _shape(v) for k, v in free.items()},
                                        dtype={k: str(v.dtype) for k, v in free.items()
                                               if isinstance(v, np.ndarray)},
                                        output_info=info, dynamic_inputs=not self.bind_inputs)
            except OnnxConstantInputError as e:
                if not self.bind_inputs:
                    raise
                new = set().union(*(_needed_inputs(self.model.graph, t, names)
                                    for t in e.tensors)) - self.bound
                if not new:
                    raise
                self.bound |= new
                continue
            if (self.executor == "graph" and self.bind_inputs and _data_dependent(mod)
                    and {k for k, v in free.items() if isinstance(v, np.ndarray)} - self.bound):
                # run-time shape values (relay.op.dyn): the graph executor needs static shapes,
                # so every graph input is bound (one build per input values, as before them)
                self.bound |= {k for k, v in free.items() if isinstance(v, np.ndarray)}
                continue
            run = _compile(mod, params, self.executor, self.opt_level,
                           len(self.model.graph.output))
            self.executor_used = getattr(run, "executor", self.executor)
            self.host_ops = list(getattr(run, "host_ops", []))
            empty = {k for k, o in enumerate(self.model.graph.output)
                     if o.name in info.get("empty_optional", ())}
            runtime = frozenset(k for k, o in enumerate(self.model.graph.output)
                                if o.name in info.get("runtime_optional", ()))
            absent = {k for k, v in free.items() if v is None}
            if not empty and not absent and not runtime:
                return run

            return _with_optionals(run, empty, absent, runtime)

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        feeds = self._feeds(inputs)
        key = self._key(feeds)
        fn = self._cache.get(key)
        if fn is None:
            fn = self._build(feeds)
            key = self._key(feeds)  # self.bound may have grown while importing
            self._cache[key] = fn
        return tuple(fn({k: v for k, v in feeds.items() if k not in self.bound}))


class TvmpyBackend(Backend):
    """tvmpy as an ONNX backend (``onnx.backend.base.Backend`` interface, CPU only)."""

    @classmethod
    def is_compatible(cls, model: Any, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", executor: str | None = None,
                opt_level: int | None = None, bind_inputs: bool = False,
                **kwargs: Any) -> TvmpyBackendRep:
        """``executor``: graph / vm / debug (default: see default_executor); ``opt_level``: the
        relay.build (relay.vm.compile) level (default: the current PassContext's);
        ``bind_inputs``: False (default) feeds every graph input at run time (shape-like inputs
        become ``relay.op.dyn`` operators: one build per input shapes); True binds shape-like
        inputs as constants and builds once per their values (static shapes)."""
        if not cls.supports_device(device):
            raise ValueError(f"device {device!r}: the tvmpy ONNX backend runs on 'CPU' only")
        kind = executor or default_executor()
        if kind not in _EXECUTORS:
            raise ValueError(f"executor {kind!r}: expected one of {list(_EXECUTORS)}")
        return TvmpyBackendRep(model, kind, opt_level, bind_inputs)

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: Any, inputs: Sequence[np.ndarray], device: str = "CPU",
                 outputs_info: Any = None, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Run one node: a one-node model is built around it (inputs' dtypes/shapes given)."""
        from onnx import helper

        ins = [np.asarray(x) for x in inputs]
        vis = [helper.make_tensor_value_info(nm, helper.np_dtype_to_tensor_dtype(x.dtype),
                                             x.shape) for nm, x in zip(node.input, ins)]
        outs = [helper.make_empty_tensor_value_info(o) for o in node.output]
        opset = kwargs.pop("opset_version", None)
        graph = helper.make_graph([node], "run_node", vis, outs)
        imports = [helper.make_opsetid("", opset)] if opset else None
        model = helper.make_model(graph, opset_imports=imports) if imports else \
            helper.make_model(graph)
        return cls.run_model(model, ins, device, **kwargs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper().startswith("CPU")


prepare = TvmpyBackend.prepare
run_model = TvmpyBackend.run_model
