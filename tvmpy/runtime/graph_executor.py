"""The graph executor: runs a graph-JSON graph (TVM's format) over a compiled library.

Loading (``GraphExecutor(graph_json, lib, dev)``) does all the work once:

- the graph is parsed and checked (every problem raises ``GraphJSONError`` naming it);
- storage: one zero-filled, 64-byte-aligned arena holds every storage of the memory plan
  (``attrs.storage_id``, planned at compile time by relay/backend/graph_plan_memory.py; a graph
  without one gets a storage per entry); every entry is a fixed numpy view into it, wrapped once
  as an NDArray. On a GPU device (``tvm.opencl(0)``, ``tvm.cuda(0)``; a library built by
  ``relay.build(target="opencl"/"cuda")``) each storage is one device buffer instead and the
  entries are device arrays on it: kernels touch device memory only, ``set_input`` (and the
  parameters, once) copy in, ``get_output`` returns a device array (``.numpy()`` copies back);
- each ``tvm_op`` node is bound to its library function, whose checked call path
  (runtime/function.py ``prepare``) runs once on the entry views: a shape/dtype mismatch between
  graph and library is reported here, naming the node. What remains per node is the raw ctypes
  function and the tuple of its C arguments (pointers, then shape vars).

``run()`` is then a loop of ctypes calls with no per-call checks (inputs are checked by
``set_input``, which copies into the input's own storage). Running before every input was set
raises: the storage is zero-filled, but a silent result computed from zeros is never wanted.

**Symbolic shapes** (a graph built with ``relay.Any()`` dimensions, e.g. an ONNX model's dynamic
batch): the graph JSON writes those dimensions as expressions of shape variables (``"N_1"``,
``"N_1 * 48"``) and the kernels were compiled with symbolic extents, one function per operator
for every size. ``set_input`` checks the rank and the static dimensions (naming the input and
the dimension) and keeps the value; ``run()`` binds the variables from the inputs' shapes (an
input that disagrees with another on a shared variable raises, naming both, before any kernel
runs), evaluates every entry's shape, and switches to the *plan* for those shapes: storages
sized for them (the compile-time storage ids stay valid: they depend only on liveness) and the
calls prepared on them, so the kernels' own argument checks run once per shape. Before a new
plan is made, the sizes each operator needs equal (node attribute ``size_checks``, written by
relay/size_checks.py: the widths of a ``concatenate``, the sides of a broadcast of two ``?``...)
are compared, naming the node, the operator and both dimensions. Plans are kept
per shape (``PLAN_CACHE_SIZE``, least recently used dropped): a repeated size costs nothing;
storages whose entries are all static (the weights) are allocated once and shared by all plans.

Why this and not TVM's Relay VM: a VM (bytecode, an allocator, shape functions lowered to
kernels, invoke instructions per operator) is what control flow and data-dependent shapes need;
a model whose only dynamic sizes are input dimensions (batch, sequence length) -- the common
case, and the one ONNX exports with ``dim_param`` -- has every tensor's shape as an expression of
those, so the graph executor's static schedule of calls, its memory plan and its per-call cost
(one ctypes call) survive unchanged, with the shape expressions standing in for TVM's shape
functions (``relay/op/shape_func.py`` holds the per-operator ones, evaluated in Python by the
interpreter and the checks). Data-dependent sizes (NonZero, a reshape to a run-time tensor) are
refused at build time, naming the node: ``relay.vm.compile`` (runtime/vm.py) runs them, and
control flow, with graph executors of this class for the dataflow regions in between.

**Threads** (runtime/concurrency.py): every public call holds the executor's lock;
``infer(**inputs)`` sets, runs and returns copies of the outputs in one call, safe from any
number of threads; the stateful ``set_input``/``run``/``get_output`` sequence is per thread,
and an interleaving that replaced a thread's inputs or outputs raises ``ConcurrentUseError`` in
that thread. ``get_output`` returns a view while one thread uses the executor, a copy after.

``GraphExecutorFactory`` is the runtime module ``relay.build`` returns (as its subclass
``relay.backend.executor_factory.GraphExecutorFactoryModule``) and ``load_module`` returns for
an exported one: ``f["default"](dev)`` creates an executor with the parameters set;
``export_library`` writes one shared library with the code, the graph JSON (in the module
metadata) and the parameters (``save_param_dict`` bytes in a read-only data symbol).
"""

from __future__ import annotations

import ctypes
import os
import statistics
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from ..ir import dtype as dt
from . import ndarray as nd
from .concurrency import ADVICE, ConcurrentUseError, SharedUse
from .device import Device, cpu, kDLCPU
from .evaluator import BenchmarkResult, check_counts, time_calls
from .graph_json import (
    GraphJSONError,
    SymbolicShape,
    entry_nbytes,
    graph_entry_attrs,
    is_symbolic,
    parse_graph,
    size_violation,
)
from .module import Module, _module_from_meta
from .ndarray import ALIGNMENT, NDArray, aligned_empty
from .param_dict import load_param_dict, save_param_dict

__all__ = ["GraphExecutor", "GraphExecutorFactory", "GraphJSONError", "ProfileReport",
           "ConcurrentUseError", "PARAMS_SYMBOL", "FACTORY_TYPE_KEY"]

PARAMS_SYMBOL = "__tvmpy_graph_params"
FACTORY_TYPE_KEY = "GraphExecutorFactory"


GPU_DEVICE_TYPES = (2, 4)  # DLPack kDLCUDA, kDLOpenCL: storage in device memory (gpu_module)


def _device_entries(dev: Device, ssize: list[int], sids: list[int],
                    host: list[NDArray]) -> list[NDArray]:
    """One device buffer per storage of the memory plan; each entry a device array on its
    storage's buffer (entries that share a storage share the buffer). Kernels then read and
    write device memory only; set_input / get_output(...).numpy() copy."""
    from .gpu_module import DeviceNDArray, device_api

    api = device_api(dev)
    mems = [api.alloc(max(ALIGNMENT, size), dev.device_id) for size in ssize]
    out: list[NDArray] = []
    for eid, h in enumerate(host):
        a = DeviceNDArray.__new__(DeviceNDArray)
        NDArray.__init__(a, np.lib.stride_tricks.as_strided(
            np.zeros(1, h._arr.dtype), h._arr.shape, (0,) * h._arr.ndim, writeable=False), dev)
        a._ptr, a._compact_aligned, a._api = 0, False, api
        a._nbytes, a._mem = h._arr.nbytes, mems[sids[eid]]
        out.append(a)
    return out


def _view_of(a: NDArray) -> NDArray:
    """A new NDArray object on the same memory as ``a`` (an entry of the executor): what
    ``get_output`` hands out, so that the executor can tell whether it is still referenced."""
    v = a.__class__.__new__(a.__class__)
    v._arr, v._device, v._ptr, v._compact_aligned = a._arr, a._device, a._ptr, a._compact_aligned
    if a._on_device:
        v._api, v._nbytes, v._mem = a._api, a._nbytes, a._mem  # type: ignore[attr-defined]
    return v


def host_array(value: Any, dtype: Any, where: str) -> np.ndarray:
    """A value given for an input as a host numpy array, without a copy where it is one: an
    NDArray (a device array is copied back), a numpy array, a DLPack producer (torch, ...), or
    anything ``np.asarray`` converts to ``dtype`` (else TypeError starting with ``where``). The
    caller checks dtype and shape."""
    if isinstance(value, NDArray):
        return value.numpy() if getattr(value, "_on_device", False) else value._arr
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "__dlpack__") and not isinstance(value, (list, tuple)):
        return np.from_dlpack(value)
    try:
        return np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{where}: cannot convert {type(value).__name__} to {dtype}: "
                        f"{e}") from None


def converted(src: np.ndarray, dtype: np.dtype, where: str) -> np.ndarray:
    """``src`` converted to ``dtype`` as TVM's ``set_input`` converts a numpy array
    (``NDArray.copyfrom``: float64 data for a float32 input, int64 for int32): any conversion
    within a kind or to a wider kind (bool -> int -> float); integer data whose values do not
    fit, floats for an integer input unless every value is a whole number in range, and complex,
    string or object data are refused naming the input (a silent wrap or truncation would be a
    wrong answer)."""
    want = np.dtype(dtype)
    if np.can_cast(src.dtype, want, casting="same_kind") and not (
            src.dtype.kind in "iu" and want.kind in "iu"):
        return src.astype(want)
    refuse = ValueError(f"{where}: expected dtype {want}, got {src.dtype}, whose values do not "
                        f"all convert exactly (convert with .astype('{want}') if that is meant)")
    if src.dtype.kind not in "biuf" or want.kind not in "biuf":
        raise ValueError(f"{where}: expected dtype {want}, got {src.dtype}, which does not "
                         "convert to it")
    if want.kind in "iu":
        info = np.iinfo(want)
        if src.size:
            if src.dtype.kind == "f" and not np.all(np.isfinite(src) & (src == np.round(src))):
                raise refuse
            lo, hi = src.min(), src.max()
            if lo < info.min or hi > info.max:
                raise refuse
    elif want.kind == "b" and src.size and not np.all((src == 0) | (src == 1)):
        raise refuse
    return src.astype(want)


class InputNameError(KeyError):
    """No graph input has this name (a KeyError whose message reads as a sentence)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _first(names: list[str], n: int = 8) -> str:
    return ", ".join(map(repr, names[:n])) + (f", ... ({len(names) - n} more)"
                                               if len(names) > n else "")


def _zeroed_arena(nbytes: int) -> np.ndarray:
    try:
        return aligned_empty((nbytes,), np.uint8, zero=True)
    except (MemoryError, ValueError):  # ValueError: more than numpy can index
        raise MemoryError(f"graph executor: cannot allocate the {nbytes / 2**30:.1f} GiB "
                          f"({nbytes} bytes) the graph's tensors need") from None


PLAN_CACHE_SIZE = 8  # symbolic shapes: the storage plans kept (one per input shapes, LRU)


class _Plan:
    """The entries (views into storage) and prepared calls for one set of concrete shapes."""

    __slots__ = ("entries", "calls", "call_nodes", "call_funcs", "keepalive", "arena", "nbytes",
                 "env")

    def __init__(self, entries: list[NDArray]):
        self.entries = entries
        self.env: dict[str, int] | None = None  # symbolic shapes: the values it was made for
        self.calls: list[tuple[Callable[..., int], tuple]] = []
        self.call_nodes: list[_Node] = []
        self.call_funcs: list[Any] = []
        self.keepalive: list[Any] = []
        self.arena: np.ndarray | None = None
        self.nbytes = 0


class _Node:
    __slots__ = ("nid", "name", "op", "func_name", "inputs", "outputs", "shape_args",
                 "size_checks")

    def __init__(self, nid: int, name: str, op: str, func_name: str, inputs: list[int],
                 outputs: list[int], shape_args: list[str] | None = None,
                 size_checks: list[_SizeCheck] | None = None):
        self.nid, self.name, self.op, self.func_name = nid, name, op, func_name
        self.inputs, self.outputs = inputs, outputs
        self.shape_args = shape_args or []  # size variables passed by value after the buffers
        self.size_checks = size_checks or []  # run-time sizes its operators need equal


class _SizeCheck:
    """One ``size_checks`` row of a node: two sizes an operator needs equal at run time
    (relay/size_checks.py), evaluated once per input shapes, before any kernel runs."""

    __slots__ = ("op", "lhs", "rhs", "lhs_what", "rhs_what", "bcast")

    def __init__(self, row: Any, where: str):
        from .function import compile_dim_expr

        if not (isinstance(row, list) and len(row) == 6):
            raise GraphJSONError(f"graph JSON: {where}: a size_checks row must be [operator, "
                                 f"lhs, rhs, lhs_what, rhs_what, bcast], got {row!r}")
        self.op, lhs, rhs, self.lhs_what, self.rhs_what, bcast = row
        self.bcast = bool(bcast)
        try:
            self.lhs, self.rhs = (compile_dim_expr(str(d))[0] for d in (lhs, rhs))
        except ValueError as e:
            raise GraphJSONError(f"graph JSON: {where}: size_checks: {e}") from None

    def check(self, node: _Node, env: dict[str, int]) -> None:
        try:
            a, b = self.lhs(env), self.rhs(env)
        except KeyError as e:
            raise ValueError(f"run(): graph node {node.nid} ({node.name!r}), {self.op}: shape "
                             f"variable {e.args[0]} is bound by no graph input") from None
        why = size_violation(self.lhs_what, self.rhs_what, a, b, self.bcast)
        if why:
            raise ValueError(f"run(): graph node {node.nid} ({node.name!r}), operator "
                             f"{self.op}: {why}; no kernel was run")


class GraphExecutor:
    """An executor of one graph on one device (see the module docstring)."""

    def __init__(self, graph_json: str | dict, lib: Module, dev: Device | None = None):
        dev = cpu(0) if dev is None else dev
        if isinstance(dev, (list, tuple)):
            if len(dev) != 1:
                raise ValueError("GraphExecutor runs on one device; got a list of "
                                 f"{len(dev)}")
            dev = dev[0]
        if not isinstance(dev, Device):
            raise TypeError(f"dev must be a tvm Device (e.g. tvm.cpu(0)), got {type(dev).__name__}")
        if dev.device_type != kDLCPU and dev.device_type not in GPU_DEVICE_TYPES:
            raise ValueError(f"the graph executor runs on CPU devices and GPUs (tvm.opencl(0), "
                             f"tvm.cuda(0)), not {dev}")
        self.device = dev
        self.lib = lib
        self._use = SharedUse("graph executor")  # the lock; threads' use (runtime/concurrency.py)
        graph = parse_graph(graph_json)
        try:
            shapes, dtypes = graph_entry_attrs(graph)
        except (ValueError, TypeError) as e:
            raise GraphJSONError(str(e)) from None
        self.graph = graph
        nodes_json, row = graph["nodes"], graph["node_row_ptr"]
        n_entries = row[-1]
        # the memory plan is made at compile time; without one, each entry gets its own storage
        sids = graph["attrs"].get("storage_id", ["list_int", list(range(n_entries))])
        if not (isinstance(sids, list) and len(sids) == 2 and sids[0] == "list_int"
                and isinstance(sids[1], list) and len(sids[1]) == n_entries
                and all(isinstance(s, int) and s >= 0 for s in sids[1])):
            raise GraphJSONError(f"graph JSON: attrs['storage_id'] must be [\"list_int\", "
                                 f"[{n_entries} non-negative ints]]")
        sids = sids[1]
        self._np_dtypes = []
        for eid, d in enumerate(dtypes):
            try:
                self._np_dtypes.append(dt.to_numpy(d))
            except Exception:
                raise GraphJSONError(f"graph JSON: entry {eid} has unknown dtype {d!r}") from None
        self._sids = sids
        self._symbolic = any(is_symbolic(sh) for sh in shapes)
        if self._symbolic:
            if dev.device_type != kDLCPU:
                raise ValueError(f"a graph with symbolic shapes runs on the CPU only (for now), "
                                 f"not {dev}")
            if hasattr(lib, "alloc_arena"):
                raise ValueError("a graph with symbolic shapes cannot run in a WebAssembly "
                                 "library (its arena is planned at compile time)")
            self._sym = [SymbolicShape(sh) for sh in shapes]
            # storages whose entries are all static: allocated once (inputs, weights, ...);
            # the others are sized and allocated per input shapes (``_plan_for``)
            dyn = {sids[e] for e, sh in enumerate(shapes) if is_symbolic(sh)}
            self._static_eids = [e for e in range(n_entries) if sids[e] not in dyn]
            static_shapes = {e: shapes[e] for e in self._static_eids}
            self._static_arena, self._static_views, self.storage_bytes = self._allocate(
                static_shapes, lambda n: _zeroed_arena(n))
            self._plans: OrderedDict[tuple[int, ...], _Plan] = OrderedDict()
            self._shape_vars = sorted({v for sh in self._sym for v in sh.vars})
            self._entries = [NDArray(np.zeros(0, self._np_dtypes[e]), dev)
                             for e in range(n_entries)]  # placeholders until the first run
            for eid, view in self._static_views.items():
                self._entries[eid] = view
        else:
            # a WebAssembly library keeps the arena in its linear memory (runtime/wasm.py)
            alloc_arena = getattr(lib, "alloc_arena", _zeroed_arena)
            self._arena, views, self.storage_bytes = self._allocate(
                dict(enumerate(shapes)), alloc_arena)
            self._entries = [views[e] for e in range(n_entries)]
            if dev.device_type != kDLCPU:  # a GPU: the storages live in device memory
                ssize = self._storage_sizes({e: shapes[e] for e in range(n_entries)})
                self._entries = _device_entries(dev, ssize, sids, self._entries)

        # ---- nodes ------------------------------------------------------------------------------
        self._nodes: list[_Node] = []
        for nid, nj in enumerate(nodes_json):
            self._nodes.append(self._parse_node(nid, nj, row))
        arg_nodes = graph.get("arg_nodes")
        if arg_nodes is None:
            arg_nodes = [n.nid for n in self._nodes if n.op == "null"]
        for nid in arg_nodes:
            if not (isinstance(nid, int) and 0 <= nid < len(self._nodes)
                    and self._nodes[nid].op == "null"):
                raise GraphJSONError(f"graph JSON: arg_nodes entry {nid!r} is not a \"null\" "
                                     "(input) node")
        self._input_nids = list(arg_nodes)
        self._input_names = [self._nodes[n].name for n in self._input_nids]
        self._input_index = {name: i for i, name in enumerate(self._input_names)}
        if len(self._input_index) != len(self._input_names):
            dup = sorted({n for n in self._input_names if self._input_names.count(n) > 1})
            raise GraphJSONError(f"graph JSON: duplicate input names {dup}")
        self._input_eids = [row[n] for n in self._input_nids]
        if "heads" not in graph:
            raise GraphJSONError("graph JSON: missing 'heads' (the outputs)")
        self._output_eids = [self._entry(h, "heads", row) for h in graph["heads"]]
        self._output_eid_set = set(self._output_eids)
        self._unset = set(self._input_names)
        self._param_names: set[str] = set()
        self._check_storage_plan(sids)

        # ---- bind each op node to its function; prepare its raw call once ----------------------
        self._funcs: dict[int, Any] = {}
        for node in self._nodes:
            if node.op == "null":
                continue
            if node.func_name == "__nop":  # TVM: an output that aliases its input's storage
                i, o = (node.inputs[0], node.outputs[0]) if node.inputs else (-1, -1)
                if (len(node.inputs) != 1 or len(node.outputs) != 1 or sids[i] != sids[o]
                        or not self._symbolic and self._entries[i]._arr.nbytes
                        != self._entries[o]._arr.nbytes):
                    raise GraphJSONError(f"graph JSON: node {node.nid} ({node.name!r}) is a "
                                         "__nop, which needs one input and one output of the "
                                         "same size in the same storage")
                continue
            self._funcs[node.nid] = self._lookup(node)
        self._pending: dict[int, np.ndarray] = {}  # symbolic shapes: the inputs set for the next run
        self._active: _Plan | None = None
        if not self._symbolic:
            self._activate(self._prepare_calls(self._entries))

    # ---- storage and calls for concrete shapes --------------------------------------------------
    def _storage_sizes(self, shapes: Mapping[int, tuple[int, ...]]) -> list[int]:
        """Bytes of each storage: the largest entry (of ``shapes``) it holds."""
        ssize = [0] * (max(self._sids) + 1 if self._sids else 0)
        for e, sh in shapes.items():
            d = self.graph["attrs"]["dltype"][1][e]
            nb = entry_nbytes(sh, "bool" if d == "bool" else str(self._np_dtypes[e]))
            ssize[self._sids[e]] = max(ssize[self._sids[e]], nb)
        return ssize

    def _allocate(self, shapes: Mapping[int, tuple[int, ...]],
                  alloc: Callable[[int], np.ndarray]
                  ) -> tuple[np.ndarray, dict[int, NDArray], int]:
        """One arena for the storages of the entries in ``shapes`` (each storage 64-byte aligned,
        at least 64 bytes) and each entry a view into it: (arena, views, bytes)."""
        ssize = self._storage_sizes(shapes)
        used = sorted({self._sids[e] for e in shapes})
        offsets, total = {}, 0
        for sid in used:
            offsets[sid] = total
            total += max(ALIGNMENT, -(-ssize[sid] // ALIGNMENT) * ALIGNMENT)
        arena = alloc(total)
        views = {e: NDArray(np.ndarray(sh, self._np_dtypes[e], buffer=arena,
                                       offset=offsets[self._sids[e]]), self.device)
                 for e, sh in shapes.items()}
        return arena, views, total

    def _prepare_calls(self, entries: list[NDArray], env: Mapping[str, int] | None = None
                       ) -> _Plan:
        """Each op node's raw call on ``entries`` (and the values in ``env`` of its
        ``shape_args``), checked once (a mismatch between the graph and the library is reported
        here, naming the node)."""
        plan = _Plan(entries)
        for node in self._nodes:
            func = self._funcs.get(node.nid)
            if func is None:
                continue
            args: list[Any] = [entries[e] for e in node.inputs + node.outputs]
            if node.shape_args:
                if env is None or any(v not in env for v in node.shape_args):
                    raise GraphJSONError(f"graph node {node.nid} ({node.name!r}) takes shape "
                                         f"variables {node.shape_args} that no graph input "
                                         "shape binds")
                args += [env[v] for v in node.shape_args]
            try:
                raw, writeback = func.prepare(args)
            except (ValueError, TypeError) as e:
                what = ("the input shapes give entries that" if self._symbolic else
                        "the graph's entries")
                raise GraphJSONError(f"graph node {node.nid} ({node.name!r}): {what} do not "
                                     f"match function {node.func_name}: {e}") from None
            if any(dst is not None for dst, _ in writeback):  # cannot happen: views are aligned
                raise RuntimeError(f"node {node.name}: an entry needs a copy to be passed")
            plan.keepalive.append(writeback)  # scratch of empty entries
            plan.calls.append((func._cfunc, tuple(raw)))
            plan.call_nodes.append(node)
            plan.call_funcs.append(func)
        return plan

    def _activate(self, plan: _Plan) -> None:
        self._active = plan
        self._entries = plan.entries
        self._calls = plan.calls
        self._call_nodes = plan.call_nodes
        self._call_funcs = plan.call_funcs
        self._keepalive = plan.keepalive

    # ---- symbolic shapes: bind, plan per shape, cache ---------------------------------------------
    def _bind_shape_vars(self) -> dict[str, int]:
        """The shape variables' values from the inputs set for this run; an input whose shape
        disagrees with another's on a shared variable, or with a composite dimension, raises
        ValueError naming both inputs and dimensions (before any kernel runs)."""
        env: dict[str, int] = {}
        src: dict[str, tuple[str, int]] = {}
        for i, arr in self._pending.items():
            sym, name = self._sym[self._input_eids[i]], self._input_names[i]
            for var, dims in sym.dims_of_var.items():
                for d in dims:
                    got = arr.shape[d]
                    if var not in env:
                        env[var], src[var] = got, (name, d)
                    elif env[var] != got:
                        n0, d0 = src[var]
                        raise ValueError(
                            f"run(): input {name!r} dimension {d} is {got}, but input {n0!r} "
                            f"dimension {d0} is {env[var]}: the model says both are the same "
                            f"size ({var})")
        for i, arr in self._pending.items():
            sym, name = self._sym[self._input_eids[i]], self._input_names[i]
            try:
                want = sym.eval(env)
            except ValueError as e:
                raise ValueError(f"run(): input {name!r}: {e}") from None
            for d, (w, g) in enumerate(zip(want, arr.shape)):
                if w != g:
                    raise ValueError(f"run(): input {name!r} dimension {d} is {g}, but the "
                                     f"model's shape {sym} gives {w} for {env}")
        return env

    def _plan_for(self, env: dict[str, int]) -> _Plan:
        key = tuple(env.get(v, -1) for v in self._shape_vars)
        plan = self._plans.get(key)
        if plan is not None:
            self._plans.move_to_end(key)
            return plan
        missing = [v for v in self._shape_vars if v not in env]
        if missing:
            raise ValueError(f"run(): shape variable(s) {', '.join(missing)} of the graph are not "
                             "dimensions of any input, so no input shape determines them")
        for node in self._nodes:  # the operators' run-time size equalities (once per shapes)
            for chk in node.size_checks:
                chk.check(node, env)
        shapes = {}
        for e, sym in enumerate(self._sym):
            if e not in self._static_views:
                try:
                    shapes[e] = sym.eval(env)
                except ValueError as err:
                    raise ValueError(f"run(): entry {e}: {err}") from None
        for node in self._nodes:  # a view's size must equal its input's at these shapes
            if node.func_name == "__nop":
                i, o = node.inputs[0], node.outputs[0]
                si, so = shapes.get(i), shapes.get(o)
                if si is not None and so is not None and int(np.prod(si)) != int(np.prod(so)):
                    raise ValueError(f"run(): node {node.nid} ({node.name!r}) reshapes "
                                     f"{tuple(si)} to {tuple(so)}: the sizes differ")
        arena, views, nbytes = self._allocate(shapes, lambda n: _zeroed_arena(n))
        entries = [views[e] if e in views else self._static_views[e]
                   for e in range(len(self._sym))]
        plan = self._prepare_calls(entries, env)
        plan.arena, plan.nbytes, plan.env = arena, nbytes, env
        self._plans[key] = plan
        while len(self._plans) > PLAN_CACHE_SIZE:
            self._plans.popitem(last=False)
        return plan

    def _prepare_run(self) -> None:
        """Symbolic shapes: bind the shape variables, switch to (or make) the plan for them and
        copy the inputs set for this run into it."""
        env = self._bind_shape_vars()
        plan = self._plan_for(env)
        self._activate(plan)
        for i, arr in self._pending.items():
            np.copyto(plan.entries[self._input_eids[i]]._arr, arr)

    # ---- loading ------------------------------------------------------------------------------
    def _entry(self, ref: Any, where: str, row: list[int]) -> int:
        if not (isinstance(ref, (list, tuple)) and len(ref) >= 2
                and all(isinstance(x, int) for x in ref)):
            raise GraphJSONError(f"graph JSON: {where}: an entry reference must be [node_id, "
                                 f"output_index, version], got {ref!r}")
        nid, idx = ref[0], ref[1]
        if not 0 <= nid < len(row) - 1 or not 0 <= idx < row[nid + 1] - row[nid]:
            raise GraphJSONError(f"graph JSON: {where} refers to output {idx} of node {nid}, "
                                 "which does not exist")
        return row[nid] + idx

    def _check_storage_plan(self, sids: list[int]) -> None:
        """Refuse a storage plan in which two entries that are live at the same time share a
        storage (inputs and outputs are live throughout): it would compute wrong results."""
        n_nodes = len(self._nodes)
        last_use = [-1] * len(sids)
        for node in self._nodes:
            for e in node.outputs:
                last_use[e] = node.nid
        for node in self._nodes:
            for e in node.inputs:
                last_use[e] = max(last_use[e], node.nid)
        for e in self._output_eids + [self._nodes[n].outputs[0] for n in self._input_nids]:
            last_use[e] = n_nodes
        # per storage, the entry last written into it; its last use covers the views of it
        # (``__nop`` outputs in the same storage, any number, chained or not)
        owner: dict[int, int] = {}
        for node in self._nodes:
            for e in node.outputs:
                prev = owner.get(sids[e])
                if node.func_name == "__nop" and sids[node.inputs[0]] == sids[e]:
                    if prev is not None:
                        last_use[prev] = max(last_use[prev], last_use[e])
                    continue
                if prev is not None and last_use[prev] >= node.nid:
                    what = "a graph input or output" if last_use[prev] == n_nodes else "live"
                    raise GraphJSONError(
                        f"graph JSON: storage {sids[e]} holds entry {prev} ({what}) when node "
                        f"{node.nid} ({node.name!r}) writes entry {e} to it: storage_id is not "
                        "a valid memory plan")
                owner[sids[e]] = e

    def _parse_node(self, nid: int, nj: Any, row: list[int]) -> _Node:
        if not isinstance(nj, dict) or "op" not in nj or "name" not in nj:
            raise GraphJSONError(f"graph JSON: node {nid} must be an object with \"op\" and "
                                 f"\"name\", got {str(nj)[:80]}")
        op, name = nj["op"], str(nj["name"])
        where = f"node {nid} ({name!r})"
        inputs = [self._entry(x, f"{where} input", row) for x in nj.get("inputs", [])]
        for e in inputs:
            if e >= row[nid]:
                raise GraphJSONError(f"graph JSON: {where} reads entry {e}, which is computed "
                                     "after it (nodes must be in topological order)")
        outputs = list(range(row[nid], row[nid + 1]))
        if op == "null":
            if inputs:
                raise GraphJSONError(f"graph JSON: {where} is an input (\"null\") but has inputs")
            if len(outputs) != 1:
                raise GraphJSONError(f"graph JSON: input {where} must have one entry, "
                                     f"node_row_ptr gives {len(outputs)}")
            return _Node(nid, name, op, "", [], outputs)
        if op != "tvm_op":
            raise GraphJSONError(f"graph JSON: {where} has op {op!r}; expected \"null\" or "
                                 "\"tvm_op\"")
        attrs = nj.get("attrs") or nj.get("param") or {}
        func_name = attrs.get("func_name")
        if not isinstance(func_name, str) or not func_name:
            raise GraphJSONError(f"graph JSON: {where} has no attrs.func_name")
        for key, have in (("num_inputs", len(inputs)), ("num_outputs", len(outputs))):
            if key in attrs:
                try:
                    want = int(attrs[key])
                except (TypeError, ValueError):
                    raise GraphJSONError(f"graph JSON: {where}: attrs.{key} is {attrs[key]!r}, "
                                         "not an integer") from None
                if want != have:
                    raise GraphJSONError(f"graph JSON: {where}: attrs.{key} is {want} but the "
                                         f"node has {have}")
        if not outputs:
            raise GraphJSONError(f"graph JSON: {where} has no outputs")
        shape_args = attrs.get("shape_args", [])
        if not (isinstance(shape_args, list) and all(isinstance(v, str) and v.isidentifier()
                                                      for v in shape_args)):
            raise GraphJSONError(f"graph JSON: {where}: attrs.shape_args must be a list of shape "
                                 f"variable names, got {shape_args!r}")
        checks = attrs.get("size_checks", [])
        if not isinstance(checks, list):
            raise GraphJSONError(f"graph JSON: {where}: attrs.size_checks must be a list, got "
                                 f"{checks!r}")
        return _Node(nid, name, op, func_name, inputs, outputs, shape_args,
                     [_SizeCheck(row, where) for row in checks])

    def _lookup(self, node: _Node) -> Any:
        try:
            return self.lib.get_function(node.func_name)
        except AttributeError:
            names = self.lib._all_names() if hasattr(self.lib, "_all_names") else []
            shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
            raise GraphJSONError(f"graph node {node.nid} ({node.name!r}) calls function "
                                 f"{node.func_name!r}, which the library does not define "
                                 f"(it has: {shown or 'none'})") from None

    # ---- inputs -------------------------------------------------------------------------------
    def _input_idx(self, key: Any) -> int:
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            n = len(self._input_names)
            if not 0 <= key < n:
                raise IndexError(f"input index {key} out of range: the graph has {n} inputs")
            return int(key)
        if isinstance(key, str):
            i = self._input_index.get(key)
            if i is None:
                user = [n for n in self._input_names if n not in self._param_names]
                raise InputNameError(f"the graph has no input named {key!r}; inputs: "
                               f"{', '.join(user) or 'none'}"
                               + (f" (and {len(self._param_names)} parameters)"
                                  if self._param_names else ""))
            return i
        raise TypeError(f"input key must be a name (str) or an index (int), got "
                        f"{type(key).__name__}")

    def get_input_index(self, name: str) -> int:
        """Index of input ``name``, or -1 (as TVM)."""
        return self._input_index.get(name, -1)

    def set_input(self, key: Any = None, value: Any = None, **params: Any) -> None:
        """Copy ``value`` into input ``key`` (name or index), checking its shape and dtype; and
        each ``name=value`` of ``params``. Every value is checked before any is copied: on an
        error no input has changed."""
        with self._use.lock:
            self._enter()
            todo = []
            if key is not None:
                i = self._input_idx(key)
                todo.append((i, self._checked(i, value, f"set_input({self._input_names[i]!r})",
                                              convert=True)))
            for k, v in params.items():
                i = self._input_idx(k)
                todo.append((i, self._checked(i, v, f"set_input({self._input_names[i]!r})",
                                              convert=True)))
            for i, src in todo:
                self._copy_in(i, src)
                self._use.set(i)
                if self._input_eids[i] in self._output_eid_set:  # a graph output is this input
                    self._use.outputs_changed()

    def _checked(self, i: int, value: Any, where: str, convert: bool = False) -> np.ndarray:
        """``value`` as an array of input ``i``'s shape and dtype, else ValueError/TypeError
        starting with ``where``. ``convert``: a numpy array of another dtype is converted as
        TVM's ``set_input`` does (see :func:`converted`)."""
        want = self._entries[self._input_eids[i]]._arr
        sym = self._sym[self._input_eids[i]] if self._symbolic else None
        if value is None:
            raise ValueError(f"{where}: no value given")
        src = host_array(value, want.dtype, where)
        if src.dtype != want.dtype and convert and not isinstance(value, NDArray):
            src = converted(src, want.dtype, where)
        if src.dtype != want.dtype:
            raise ValueError(f"{where}: expected dtype {want.dtype}, got {src.dtype} "
                             f"(convert with .astype('{want.dtype}'))")
        if sym is not None and is_symbolic(sym.dims):
            self._check_symbolic(sym, src.shape, where)
        elif src.shape != want.shape:
            raise ValueError(f"{where}: expected shape {want.shape}, got {src.shape}")
        return src

    @staticmethod
    def _check_symbolic(sym: SymbolicShape, shape: tuple[int, ...], where: str) -> None:
        """Rank and static dimensions of a value for an input with symbolic dimensions (the
        shape variables are checked across inputs by ``run``)."""
        shown = "(" + ", ".join("?" if isinstance(d, str) else str(d) for d in sym.dims) + ")"
        if len(shape) != len(sym.dims):
            raise ValueError(f"{where}: expected {len(sym.dims)} dimensions {shown}, got shape "
                             f"{shape}")
        for d, (w, g) in enumerate(zip(sym.dims, shape)):
            if not isinstance(w, str) and w != g:
                raise ValueError(f"{where}: dimension {d} must be {w} (the model's shape is "
                                 f"{shown}), got shape {shape}")
        for var, dims in sym.dims_of_var.items():
            sizes = {shape[d] for d in dims}
            if len(sizes) > 1:
                raise ValueError(f"{where}: dimensions {dims} must be equal (all {var}), got "
                                 f"shape {shape}")

    def _copy_in(self, i: int, src: np.ndarray) -> None:
        if self._symbolic and is_symbolic(self._sym[self._input_eids[i]].dims):
            # its storage depends on the shapes of this run: kept until run() picks the plan
            self._pending[i] = np.array(src, copy=True, order="C")
            self._unset.discard(self._input_names[i])
            return
        entry = self._entries[self._input_eids[i]]
        if getattr(entry, "_on_device", False):
            entry.copyfrom(src)
        else:
            np.copyto(entry._arr, src)
        self._unset.discard(self._input_names[i])

    def load_params(self, params: bytes | Mapping[str, Any]) -> None:
        """Set parameters from ``save_param_dict`` bytes or a dict. Names the graph does not
        use are ignored (as TVM), but a non-empty set of parameters none of which is an input
        is refused (the parameters of another model). A parameter of the wrong shape or dtype
        raises naming it, before anything is copied. Loaded inputs no longer count as user
        inputs."""
        if isinstance(params, (bytes, bytearray, memoryview)):
            params = load_param_dict(params, copy=False)
        with self._use.lock:  # (not a use by this thread: create() loads them, then hands over)
            todo = []
            for name, value in params.items():
                i = self._input_index.get(name)
                if i is not None:
                    todo.append((i, self._checked(i, value, f"load_params: parameter {name!r}")))
            if params and not todo:
                raise ValueError(f"load_params: none of the {len(params)} parameters "
                                 f"({_first(list(params))}) is an input of this graph (inputs: "
                                 f"{_first(self._input_names)}); are they another model's?")
            for i, src in todo:
                self._copy_in(i, src)
                self._use.set(i, mine=False)
                self._param_names.add(self._input_names[i])

    def get_input(self, key: Any, out: NDArray | None = None) -> NDArray:
        """The input's storage (a view: later set_input calls change it), or a copy into
        ``out``. Once several threads use the executor: a read-only copy."""
        with self._use.lock:
            self._enter()
            i = self._input_idx(key)
            arr = self._entries[self._input_eids[i]]
            if i in self._pending:
                arr = NDArray(self._pending[i], self.device)
            if out is not None:
                out.copyfrom(arr)
                return out
            if self._use.shared:
                copy = arr.copyto(self.device)
                if not copy._on_device:
                    copy._arr.flags.writeable = False
                    copy._compact_aligned = False
                return copy
            return arr

    def get_num_inputs(self) -> int:
        """Number of graph inputs, parameters included (as TVM)."""
        return len(self._input_names)

    def get_input_names(self, include_params: bool = False) -> list[str]:
        return [n for n in self._input_names if include_params or n not in self._param_names]

    def get_input_info(self) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
        """(shape dict, dtype dict) of the inputs the user sets (parameters left out)."""
        shapes, dtypes = {}, {}
        with self._use.lock:
            for name in self.get_input_names():
                eid = self._input_eids[self._input_index[name]]
                a = self._entries[eid]
                shapes[name], dtypes[name] = a.shape, a.dtype
                if self._symbolic:  # symbolic dimensions as in the graph ("batch_1")
                    shapes[name] = self._sym[eid].dims
        return shapes, dtypes

    # ---- outputs ------------------------------------------------------------------------------
    def get_num_outputs(self) -> int:
        return len(self._output_eids)

    def get_output(self, index: int, out: Any = None) -> NDArray:
        """Output ``index``: a view of its storage (the next run overwrites it), or a copy into
        ``out`` (NDArray or numpy array of the same shape). Once several threads use the
        executor: a copy (see runtime/concurrency.py); a thread whose run's outputs another
        thread's run replaced gets ConcurrentUseError."""
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"get_output: index must be an int, got {type(index).__name__}")
        n = len(self._output_eids)
        if not 0 <= index < n:
            raise IndexError(f"get_output: index {index} out of range: the graph has {n} "
                             f"output{'s' if n != 1 else ''}")
        with self._use.lock:
            self._enter()
            if self._active is None:
                raise RuntimeError("get_output: the output shapes depend on the input shapes; "
                                   "call run() first")
            self._use.check_outputs()
            arr = self._entries[self._output_eids[index]]
            if out is None:
                if self._use.shared:
                    return arr.copyto(self.device)
                return self._use.track(_view_of(arr))
            if isinstance(out, NDArray):
                return out.copyfrom(arr)
            if isinstance(out, np.ndarray):
                if out.shape != arr.shape:
                    raise ValueError(f"get_output: out has shape {out.shape}, output {index} "
                                     f"has {arr.shape}")
                np.copyto(out, arr.numpy() if getattr(arr, "_on_device", False) else arr._arr)
                return out  # type: ignore[return-value]  # a numpy ``out`` comes back as given
        raise TypeError(f"get_output: out must be an NDArray or numpy array, got "
                        f"{type(out).__name__}")

    def infer(self, inputs: Mapping[str, Any] | None = None, **kwargs: Any) -> list[np.ndarray]:
        """Set the inputs given (by name; the others keep their values), run, and return a
        copy of every output, as numpy arrays: one atomic call, safe from any number of threads
        at once (onnxruntime's ``InferenceSession.run``; runtime/concurrency.py)."""
        feeds = dict(inputs or {}, **kwargs)
        with self._use.lock:
            self.run(**feeds)
            return [a.numpy() for a in (self._entries[e] for e in self._output_eids)]

    # ---- running ------------------------------------------------------------------------------
    def _check_ready(self) -> None:
        if self._unset:
            missing = [n for n in self._input_names if n in self._unset]
            raise RuntimeError(f"run(): input{'s' if len(missing) > 1 else ''} "
                               f"{', '.join(repr(n) for n in missing)} not set; call "
                               "set_input first")

    def run(self, **inputs: Any) -> None:
        """Execute every node once, in graph order (after setting ``inputs``, atomically)."""
        with self._use.lock:
            if inputs:
                self.set_input(**inputs)
            else:
                self._enter()
            self._use.before_run(self._input_name)
            if self._unset:
                self._check_ready()
            if self._symbolic:
                self._prepare_run()
            self._use.after_run()
            for cfunc, args in self._calls:
                if cfunc(*args):
                    break
            else:
                return
            self._raise_failed(cfunc, args)

    def _input_name(self, i: int) -> str:
        return repr(self._input_names[i])

    # ---- several threads ----------------------------------------------------------------------
    def _enter(self) -> None:
        """Every public call, with the lock held: note the calling thread; on the first call of
        a second thread, views of the outputs handed out before and still referenced are left
        their storage (``_detach_views``)."""
        use = self._use
        use.enter()
        if use.shared and use.views_alive():
            self._detach_views()
            use.drop_views()

    def _detach_views(self) -> None:
        """Move the outputs' storages to fresh memory (the values copied, the calls prepared
        again), so that no later run writes where the views ``get_output`` returned while one
        thread used the executor point: they keep that thread's values. Inputs and weights
        stay where they are (a view of an input, ``get_input``, still writes through)."""
        if self.device.device_type != kDLCPU or hasattr(self.lib, "alloc_arena"):
            raise ConcurrentUseError(
                f"graph executor on {self.device}: arrays that get_output returned while one "
                "thread used it are still referenced, and runs from another thread would "
                "overwrite them (on this device the outputs cannot move); drop them (keep "
                f".numpy() copies, or use get_output(i, out=...)), or {ADVICE}")
        keep = {self._sids[e] for e in self._input_eids}
        moved = {self._sids[e] for e in self._output_eids} - keep
        old = self._active
        if self._symbolic:
            self._move_storages(moved, self._static_views)
            self._plans.clear()  # their entries are views of the old static storage
            for eid, view in self._static_views.items():
                self._entries[eid] = view
            if old is not None and old.env is not None:
                plan = self._plan_for(old.env)
                for e in self._output_eids:
                    np.copyto(plan.entries[e]._arr, old.entries[e]._arr)
                self._activate(plan)
            return
        views = dict(enumerate(self._entries))
        self._move_storages(moved, views)
        self._activate(self._prepare_calls([views[e] for e in range(len(views))]))

    def _move_storages(self, sids: set[int], views: dict[int, NDArray]) -> None:
        """Replace in ``views`` (entry -> view) the entries of storages ``sids`` by views of a
        fresh arena holding the same values."""
        eids = [e for e in views if self._sids[e] in sids]
        if not eids:
            return
        _, fresh, _ = self._allocate({e: views[e].shape for e in eids}, _zeroed_arena)
        for e in eids:
            np.copyto(fresh[e]._arr, views[e]._arr)
            views[e] = fresh[e]

    def _raise_failed(self, cfunc: Any, args: tuple) -> None:
        k = next(i for i, c in enumerate(self._calls) if c[0] is cfunc and c[1] is args)
        node, func = self._call_nodes[k], self._call_funcs[k]
        try:
            func._raise_error(-1)
        except RuntimeError as e:
            raise RuntimeError(f"graph node {node.nid} ({node.name!r}): {e}") from None

    def benchmark(self, device: Device | None = None, func_name: str = "run", repeat: int = 5,
                  number: int = 5, min_repeat_ms: float | None = None,
                  limit_zero_time_iterations: int = 100, end_to_end: bool = False,
                  cooldown_interval_ms: float = 0, repeats_to_cooldown: int = 1,
                  **kwargs: Any) -> BenchmarkResult:
        """Seconds per ``run()`` over ``repeat`` repeats of ``number`` runs (``number`` grows
        until a repeat lasts ``min_repeat_ms``). ``kwargs`` are inputs set first; with
        ``end_to_end`` each run also sets them and copies the outputs out. TVM's signature;
        ``limit_zero_time_iterations`` is moot with a nanosecond clock."""
        del limit_zero_time_iterations
        if device is not None and device != self.device:
            raise ValueError(f"benchmark: the executor runs on {self.device}, not {device}")
        if func_name != "run":
            raise ValueError(f"benchmark: can only time 'run', got {func_name!r}")
        check_counts("benchmark", number, repeat, min_repeat_ms or 0, cooldown_interval_ms)
        with self._use.lock:  # other threads wait: their runs would be timed too
            if kwargs:
                self.set_input(**kwargs)
            if end_to_end:
                def step() -> None:
                    self.set_input(**kwargs)
                    self.run()
                    for i in range(len(self._output_eids)):
                        self.get_output(i).numpy()
            else:
                step = self.run
            step()  # warm-up (and the checks)
            return time_calls(step, self.device, number, repeat, min_repeat_ms or 0,
                              cooldown_interval_ms, repeats_to_cooldown)

    def time_evaluator(self, func_name: str, dev: Device, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, cooldown_interval_ms: float = 0,
                       f_preproc: str = "", *, repeats_to_cooldown: int = 1
                       ) -> Callable[..., BenchmarkResult]:
        """TVM's ``Module.time_evaluator`` of the executor's functions:
        ``gm.module.time_evaluator("run", dev, number=10, repeat=3)()`` times ``run()``
        (seconds per call, one checked warm-up call first); the callable's arguments are the
        function's (``time_evaluator("set_input", dev)("x", x)``)."""
        fn = self[func_name]
        if not isinstance(dev, Device):
            raise TypeError(f"time_evaluator: dev must be a tvm Device, got {type(dev).__name__}")
        if dev != self.device:
            raise ValueError(f"time_evaluator: the executor runs on {self.device}, not {dev}")
        check_counts("time_evaluator", number, repeat, min_repeat_ms, cooldown_interval_ms,
                     f_preproc)

        def evaluate(*args: Any) -> BenchmarkResult:
            fn(*args)  # warm-up, and the argument checks
            return time_calls(lambda: fn(*args), dev, number, repeat, min_repeat_ms,
                              cooldown_interval_ms, repeats_to_cooldown, f_preproc)

        return evaluate

    def profile(self, number: int = 10, **kwargs: Any) -> ProfileReport:
        """Time every node separately over ``number`` runs (after one warm-up run). On a GPU
        the device is synchronized around each node, so a node's time is its kernels' run time
        plus its launch cost; ``total`` is a run's time without those synchronizations."""
        with self._use.lock:
            return self._profile(number, kwargs)

    def _profile(self, number: int, kwargs: dict[str, Any]) -> ProfileReport:
        if kwargs:
            self.set_input(**kwargs)
        self.run()
        clock = time.perf_counter
        sync = self.device.sync if self.device.device_type != kDLCPU else (lambda: None)
        times: list[list[float]] = [[] for _ in self._calls]
        t_total = []
        for _ in range(max(1, int(number))):
            for k, (cfunc, args) in enumerate(self._calls):
                sync()
                t0 = clock()
                rc = cfunc(*args)
                sync()
                times[k].append(clock() - t0)
                if rc:
                    self._raise_failed(cfunc, args)
        for _ in range(max(1, int(number))):
            sync()
            t_start = clock()
            self.run()
            sync()
            t_total.append(clock() - t_start)
        rows = []
        for node, ts in zip(self._call_nodes, times):
            out = self._entries[node.outputs[0]]
            rows.append({"nid": node.nid, "node": node.name, "func_name": node.func_name,
                         "time": statistics.median(ts), "shape": out.shape,
                         "dtype": out.dtype})
        return ProfileReport(rows, statistics.median(t_total))

    # ---- TVM-style function access --------------------------------------------------------------
    _EXPORTED = ("set_input", "run", "get_output", "get_input", "get_num_outputs",
                 "get_num_inputs", "load_params", "get_input_index", "get_input_info",
                 "benchmark", "profile")

    def __getitem__(self, name: str) -> Callable[..., Any]:
        if name not in self._EXPORTED:
            raise AttributeError(f"graph executor has no function {name!r}; functions: "
                                 f"{', '.join(self._EXPORTED)}")
        return getattr(self, name)

    get_function = __getitem__

    @property
    def num_nodes(self) -> int:
        return len(self._nodes)

    def __repr__(self) -> str:
        return (f"GraphExecutor({len(self._nodes)} nodes, {len(self._calls)} calls, "
                f"inputs={self.get_input_names()}, outputs={len(self._output_eids)}, "
                f"storage={self.storage_bytes} bytes, {self.device})")


class ProfileReport:
    """Per-node times of :meth:`GraphExecutor.profile` (seconds; ``str()`` is a table, slowest
    first)."""

    def __init__(self, rows: list[dict], total: float):
        self.rows = rows
        self.total = total

    def sorted_rows(self) -> list[dict]:
        return sorted(self.rows, key=lambda r: -r["time"])

    def __str__(self) -> str:
        sum_nodes = sum(r["time"] for r in self.rows) or 1.0
        width = max([len(r["node"]) for r in self.rows] + [4])
        lines = [f"{'Node':<{width}}  {'#':>5}  {'Time(us)':>10}  {'%':>6}  Shape"]
        for r in self.sorted_rows():
            lines.append(f"{r['node']:<{width}}  {r['nid']:>5}  {r['time'] * 1e6:>10.2f}  "
                         f"{100 * r['time'] / sum_nodes:>5.1f}%  {r['shape']} {r['dtype']}")
        lines.append(f"{'Total (nodes)':<{width}}  {'':>5}  {sum_nodes * 1e6:>10.2f}")
        lines.append(f"{'Total (run)':<{width}}  {'':>5}  {self.total * 1e6:>10.2f}")
        return "\n".join(lines)

    __repr__ = __str__


# ---- the factory module ------------------------------------------------------------------------
class GraphExecutorFactory(Module):
    """A graph, its compiled library and its parameters: ``f[mod_name](dev)`` creates a
    :class:`GraphExecutor` with the parameters set (see the module docstring)."""

    def __init__(self, graph_json: str, lib: Module, params: Mapping[str, Any] | None = None,
                 mod_name: str = "default"):
        if not isinstance(graph_json, str):
            raise TypeError(f"graph_json must be a str, got {type(graph_json).__name__}")
        if not isinstance(lib, Module):
            raise TypeError(f"lib must be a runtime Module, got {type(lib).__name__}")
        if not isinstance(mod_name, str) or not mod_name:
            raise ValueError(f"mod_name must be a non-empty str, got {mod_name!r}")
        parse_graph(graph_json)  # fail early on malformed JSON
        meta = {"version": 1, "entry": "", "functions": [],
                "graph_executor": {"mod_name": mod_name, "graph_json": graph_json}}
        super().__init__(None, meta, FACTORY_TYPE_KEY)
        self.imported_modules.append(lib)
        self.graph_json = graph_json
        self.libmod_name = mod_name
        self.params: dict[str, NDArray] = {}
        for name, value in (params or {}).items():
            if not isinstance(name, str):
                raise TypeError(f"params: names must be str, got {name!r}")
            self.params[name] = value if isinstance(value, NDArray) else nd.array(value)

    @classmethod
    def _from_loaded(cls, lib: ctypes.CDLL, meta: dict, path: str) -> GraphExecutorFactory:
        info = meta.get("graph_executor") or {}
        subs = [_module_from_meta(lib, sub, path) for sub in meta.get("imports", [])]
        if len(subs) != 1 or "graph_json" not in info:
            raise ValueError(f"{path}: malformed graph executor factory metadata")
        params: dict[str, Any] = {}
        nbytes = int(info.get("params_nbytes", 0))
        if nbytes:
            try:
                addr = ctypes.addressof(ctypes.c_char.in_dll(lib, info["params_symbol"]))
            except ValueError:
                raise ValueError(f"{path}: the parameters symbol {info['params_symbol']} is "
                                 "missing") from None
            blob = (ctypes.c_ubyte * nbytes).from_address(addr)
            blob._lib = lib  # type: ignore[attr-defined]  # the views keep the library loaded
            # read-only views of the library's data: no copy until an executor is created
            params = {k: NDArray(v) for k, v in
                      load_param_dict(memoryview(blob), copy=False).items()}
        self = cls(info["graph_json"], subs[0], params, info.get("mod_name", "default"))
        self._lib = lib
        self._lib_path = path
        self._meta = {k: v for k, v in meta.items() if k != "imports"}
        return self

    # ---- TVM's factory API --------------------------------------------------------------------
    def get_graph_json(self) -> str:
        return self.graph_json

    def get_executor_config(self) -> str:
        return self.graph_json

    def get_lib(self) -> Module:
        return self.imported_modules[0]

    @property
    def lib(self) -> Module:
        return self.imported_modules[0]

    def get_params(self) -> dict[str, NDArray]:
        return dict(self.params)

    def __iter__(self) -> Iterator[Any]:
        """TVM's legacy ``graph, lib, params = relay.build(...)``: the graph JSON, the compiled
        library and the parameters (deprecated there as here: use ``lib["default"](dev)``)."""
        warnings.warn("unpacking relay.build's result into (graph, lib, params) is TVM's legacy "
                      "API; use graph_executor.GraphModule(factory['default'](dev))",
                      DeprecationWarning, stacklevel=2)
        return iter((self.graph_json, self.get_lib(), self.get_params()))

    def create(self, dev: Device | None = None) -> GraphExecutor:
        ex = GraphExecutor(self.graph_json, self.get_lib(), dev)
        ex.load_params(self.params)
        return ex

    def get_function(self, name: str, query_imports: bool = True) -> Any:
        if name == self.libmod_name:
            return self.create
        return super().get_function(name, query_imports)

    def __contains__(self, name: str) -> bool:
        return name == self.libmod_name or super().__contains__(name)

    def export_library(self, file_name: str, fcompile: Any = None, addons: Any = None,
                       workspace_dir: str | None = None, **kwargs: Any) -> None:
        """One shared library: the code, the graph JSON and the parameters (``fcompile``, ``cc``,
        ``options``: as :meth:`Module.export_library`, e.g. a cross compiler)."""
        file_name = os.fspath(file_name)
        if getattr(self.get_lib(), "is_wasm", False) and self._lib_path is None:
            from .wasm import export_factory

            return export_factory(self, file_name)
        return super().export_library(file_name, fcompile, **kwargs)

    def _export_blobs(self, meta: dict) -> dict[str, bytes]:
        blob = save_param_dict(self.params)
        meta["graph_executor"] = dict(meta["graph_executor"], params_symbol=PARAMS_SYMBOL,
                                      params_nbytes=len(blob))
        return {PARAMS_SYMBOL: blob}

    def __repr__(self) -> str:
        return (f"GraphExecutorFactory(mod_name={self.libmod_name!r}, params={len(self.params)}, "
                f"lib={self.get_lib()!r})")
