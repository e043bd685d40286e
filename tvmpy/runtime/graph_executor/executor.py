"""``GraphExecutor``: one graph on one device (loading, inputs, run, outputs, timing; see the
package docstring), with the conversion of input values (``host_array``, ``converted``)."""

from __future__ import annotations

import os
import statistics
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..concurrency import ADVICE, ConcurrentUseError, SharedUse
from ..device import Device, cpu, kDLCPU
from ..evaluator import BenchmarkResult, check_counts, time_calls
from ..gpu_module import DEVICE_MODULES
from ..graph_json import (
    GraphJSONError,
    SymbolicShape,
    is_symbolic,
)
from ..module import Module
from ..ndarray import ALIGNMENT, NDArray
from ..param_dict import load_param_dict
from .cuda_graph import (
    CUDAGraphRunner,
    attach_stream,
    make_stream,
    resolve_use_cuda_graph,
)
from .native_run import native_runner
from .parse import (
    _Node,
    check_storage_plan,
    parse_entries,
    parse_inputs,
    parse_node,
    parse_outputs,
)
from .storage import (
    PLAN_CACHE_SIZE,
    StoragePlan,
    _device_entries,
    _Plan,
    _zeroed_arena,
    device_views,
)

# DLPack types of GPUs (kDLCUDA, kDLOpenCL, kDLWebGPU ...): storage in device memory (gpu_module)
GPU_DEVICE_TYPES = tuple(DEVICE_MODULES)


def _native_after() -> int | None:
    """Runs of a plan by the Python loop before its calls run natively (native_run.py):
    ``TVMPY_GRAPH_NATIVE_RUN`` ("0" turns the native runner off; a number > 0 is that count;
    default 2: from a plan's third run on, so that an executor run once or twice, as a test's,
    never builds one; the first in a process JIT-compiles the table walker, ~45 ms CPU)."""
    v = os.environ.get("TVMPY_GRAPH_NATIVE_RUN", "")
    if v.strip() == "":
        return 2
    try:
        n = int(v)
    except ValueError:
        raise ValueError(f"TVMPY_GRAPH_NATIVE_RUN must be an integer (0: off), got {v!r}") from None
    return n if n > 0 else None


def _zero_copy_default() -> bool:
    """``TVMPY_GRAPH_ZERO_COPY``: "1" makes ``run(**inputs)`` / ``infer`` pass a suitable array
    to the kernels as it is (``GraphExecutor._bind``). Off by default: TVM's ``run(**inputs)``
    copies, so a later ``run()`` does not read the caller's array as it is then, and the
    saving measured was 5-25 us a call (bench/RESULTS.md, h-zcopy); ``set_input_zero_copy``
    binds explicitly either way."""
    return os.environ.get("TVMPY_GRAPH_ZERO_COPY", "").strip() == "1"


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


class GraphExecutor:
    """An executor of one graph on one device (see the module docstring)."""

    def __init__(self, graph_json: str | dict, lib: Module, dev: Device | None = None,
                 use_cuda_graph: bool | None = None):
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
                             f"tvm.cuda(0), tvm.webgpu(0)), not {dev}")
        self.device = dev
        self.lib = lib
        self._use = SharedUse("graph executor")  # the lock; threads' use (runtime/concurrency.py)
        graph, shapes, self._np_dtypes, sids = parse_entries(graph_json)
        self.graph = graph
        self._sids = sids
        self._storage = StoragePlan(sids, self._np_dtypes, graph["attrs"]["dltype"][1], dev)
        self._symbolic = any(is_symbolic(sh) for sh in shapes)
        use_graphs = resolve_use_cuda_graph(use_cuda_graph, dev)
        self._init_storage(shapes)
        self._init_nodes()
        # CUDA: the executor's own stream for every launch and copy; graphs (cuda_graph.py)
        self._stream = make_stream(dev)
        self._cuda_graphs = (CUDAGraphRunner(self._stream, self._node_error, self._raise_failed)
                             if use_graphs else None)
        # CPU: after this many runs of a plan by the Python loop its calls run natively, one
        # foreign call per run (native_run.py; None: never)
        self.native_after: int | None = (_native_after() if dev.device_type == kDLCPU
                                         and not hasattr(lib, "alloc_arena") else None)
        self._bind_functions()
        # run(**inputs) / infer(): True (opt-in) reads a suitable caller array in place
        # (``_bind``); False: always copied (set_input copies either way, as TVM's)
        self.zero_copy_inputs: bool = bool(self._zc_eids) and _zero_copy_default()

    # ---- loading: storage, nodes, functions -----------------------------------------------------
    def _init_storage(self, shapes: list[Any]) -> None:
        """The entries' memory (storage.py): one arena for every storage, on a GPU one device
        buffer per storage; with symbolic shapes the static storages once and placeholders for
        the others (sized and allocated per input shapes, ``_plan_for``)."""
        dev, lib, sids = self.device, self.lib, self._sids
        n_entries = self.graph["node_row_ptr"][-1]
        if self._symbolic:
            if hasattr(lib, "alloc_arena"):
                raise ValueError("a graph with symbolic shapes cannot run in a WebAssembly "
                                 "library (its arena is planned at compile time)")
            self._sym = [SymbolicShape(sh) for sh in shapes]
            # storages whose entries are all static: allocated once (inputs, weights, ...);
            # the others are sized and allocated per input shapes (``_plan_for``)
            dyn = {sids[e] for e, sh in enumerate(shapes) if is_symbolic(sh)}
            self._static_eids = [e for e in range(n_entries) if sids[e] not in dyn]
            static_shapes = {e: shapes[e] for e in self._static_eids}
            self._static_arena: Any
            if dev.device_type != kDLCPU:  # a GPU: device buffers (the dynamic ones per plan)
                self._static_arena, self._static_views, self.storage_bytes = device_views(
                    self._storage, static_shapes)
            else:
                self._static_arena, self._static_views, self.storage_bytes = \
                    self._storage.allocate(static_shapes, lambda n: _zeroed_arena(n))
            self._plans: OrderedDict[tuple[int, ...], _Plan] = OrderedDict()
            self._shape_vars = sorted({v for sh in self._sym for v in sh.vars})
            self._entries = [NDArray(np.zeros(0, self._np_dtypes[e]), dev)
                             for e in range(n_entries)]  # placeholders until the first run
            for eid, view in self._static_views.items():
                self._entries[eid] = view
        else:
            # a WebAssembly library keeps the arena in its linear memory (runtime/wasm.py)
            alloc_arena = getattr(lib, "alloc_arena", _zeroed_arena)
            self._arena, views, self.storage_bytes = self._storage.allocate(
                dict(enumerate(shapes)), alloc_arena)
            self._entries = [views[e] for e in range(n_entries)]
            self._arena_span = (self._arena.ctypes.data, self._arena.nbytes) if isinstance(
                self._arena, np.ndarray) else (0, 0)  # (address, bytes): see _bindable
            if dev.device_type != kDLCPU:  # a GPU: the storages live in device memory
                ssize = self._storage.sizes({e: shapes[e] for e in range(n_entries)})
                self._entries = _device_entries(dev, ssize, sids, self._entries)

    def _init_nodes(self) -> None:
        """The nodes, the inputs and outputs, and the storage plan checked against them
        (parse.py)."""
        graph, row = self.graph, self.graph["node_row_ptr"]
        self._nodes: list[_Node] = [parse_node(nid, nj, row)
                                    for nid, nj in enumerate(graph["nodes"])]
        self._input_nids = parse_inputs(graph, self._nodes)
        self._input_names = [self._nodes[n].name for n in self._input_nids]
        self._input_index = {name: i for i, name in enumerate(self._input_names)}
        self._input_eids = [row[n] for n in self._input_nids]
        self._output_eids = parse_outputs(graph, row)
        self._output_eid_set = set(self._output_eids)
        self._unset = set(self._input_names)
        self._param_names: set[str] = set()
        check_storage_plan(self._nodes, self._sids, self._input_nids, self._output_eids)
        # the inputs that can be bound to a caller's array without a copy: a static graph on the
        # CPU (not WebAssembly), the input's storage its own (no other entry, so no kernel ever
        # writes it), not a graph output, not empty
        n_in_sid: dict[int, int] = {}
        for sid in self._sids:
            n_in_sid[sid] = n_in_sid.get(sid, 0) + 1
        ok = (not self._symbolic and self.device.device_type == kDLCPU
              and not hasattr(self.lib, "alloc_arena"))
        self._zc_eids = frozenset(
            e for e in self._input_eids if ok and n_in_sid[self._sids[e]] == 1
            and e not in self._output_eid_set and self._entries[e]._arr.nbytes > 0)
        self._bound: dict[int, tuple[np.ndarray, int]] = {}  # entry -> (caller's array, address)

    def _bind_functions(self) -> None:
        """Each op node bound to its library function, its raw call prepared once (a static
        graph; a symbolic one per input shapes)."""
        sids = self._sids
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
        if self._zc_eids:  # an input some kernel may write (its signature says so) is copied
            zc = set(self._zc_eids)
            for node in self._nodes:
                func = self._funcs.get(node.nid)
                bufs = getattr(func, "_bufs", None)
                written = None if bufs is None else {p.index for p in bufs if p.written}
                for j, eid in enumerate(node.inputs):
                    if eid in zc and func is not None and (written is None or j in written):
                        zc.discard(eid)
            self._zc_eids = frozenset(zc)
        # symbolic shapes: the inputs set for the next run (on a GPU also device arrays)
        self._pending: dict[int, Any] = {}
        self._active: _Plan | None = None
        if not self._symbolic:
            self._activate(self._prepare_calls(self._entries))

    # ---- calls for concrete shapes --------------------------------------------------------------
    def _prepare_calls(self, entries: list[NDArray], env: Mapping[str, int] | None = None
                       ) -> _Plan:
        """Each op node's raw call on ``entries`` (and the values in ``env`` of its
        ``shape_args``), checked once (a mismatch between the graph and the library is reported
        here, naming the node)."""
        plan = _Plan(entries)
        prev: list[Any] = []
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
                attach_stream(func, raw, self._stream)
            except (ValueError, TypeError) as e:
                what = ("the input shapes give entries that" if self._symbolic else
                        "the graph's entries")
                raise GraphJSONError(f"graph node {node.nid} ({node.name!r}): {what} do not "
                                     f"match function {node.func_name}: {e}") from None
            if any(dst is not None for dst, _ in writeback):  # cannot happen: views are aligned
                raise RuntimeError(f"node {node.name}: an entry needs a copy to be passed")
            plan.keepalive.append(writeback)  # scratch of empty entries
            k = len(plan.calls)
            for j, eid in enumerate(node.inputs):  # where a bound input's pointer goes
                if eid in self._zc_eids:
                    plan.sites.setdefault(eid, []).append((k, j))
            plan.offsets.append(plan.offsets[-1] + 2 + len(prev) if plan.offsets else 0)
            prev = raw
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
        arena: Any
        if self.device.device_type != kDLCPU:
            # a GPU: device buffers sized for these shapes, kept with the plan (LRU-cached: a
            # repeated shape allocates nothing)
            arena, views, nbytes = device_views(self._storage, shapes)
        else:
            arena, views, nbytes = self._storage.allocate(shapes, lambda n: _zeroed_arena(n))
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
            dst = plan.entries[self._input_eids[i]]
            if getattr(dst, "_on_device", False):
                dst.copyfrom(arr)  # (host to device, or device to device)
            else:
                np.copyto(dst._arr, arr)

    # ---- loading: functions ---------------------------------------------------------------------
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
        self._set_inputs(key, value, params, False)

    def _set_inputs(self, key: Any, value: Any, params: Mapping[str, Any], bind: bool) -> None:
        """``set_input``; ``bind``: a numpy value whose array (the value itself, or the
        executor's own conversion of it to the input's dtype) ``_bindable`` accepts is not
        copied but bound (``_bind``), as by ``set_input_zero_copy``."""
        with self._use.lock:
            self._enter()
            todo = []
            if key is not None:
                i = self._input_idx(key)
                todo.append((i, value, self._checked(
                    i, value, f"set_input({self._input_names[i]!r})", convert=True)))
            for k, v in params.items():
                i = self._input_idx(k)
                todo.append((i, v, self._checked(i, v, f"set_input({self._input_names[i]!r})",
                                                 convert=True)))
            for i, v, src in todo:
                if bind and isinstance(v, np.ndarray) and isinstance(
                        addr := self._bindable(i, src), int):
                    self._bind(i, src, addr)
                else:
                    self._copy_in(i, src)
                self._use.set(i)
                if self._input_eids[i] in self._output_eid_set:  # a graph output is this input
                    self._use.outputs_changed()

    def set_input_zero_copy(self, key: Any, value: Any) -> None:
        """Input ``key`` reads ``value``'s memory, no copy (TVM's ``set_input_zero_copy``): every
        run until the input is set again reads the array as it is then (the executor keeps a
        reference; kernels never write it). ``value``: an NDArray or numpy array of the input's
        shape and dtype, C-contiguous, writable, 64-byte aligned (the kernels' assumption,
        ``tvm.nd.empty`` / ``tvm.nd.array`` allocate so) and outside the executor's storage;
        else ValueError saying why. Not for symbolic shapes, GPUs or WebAssembly."""
        with self._use.lock:
            self._enter()
            i = self._input_idx(key)
            where = f"set_input_zero_copy({self._input_names[i]!r})"
            if isinstance(value, NDArray) and getattr(value, "_on_device", False):
                raise ValueError(f"{where}: a device array cannot be bound on {self.device}")
            src = self._checked(i, value, where)
            addr = self._bindable(i, src)
            if isinstance(addr, str):
                raise ValueError(f"{where}: {addr}; use set_input (a copy)")
            self._bind(i, src, addr)
            self._use.set(i)

    def _bindable(self, i: int, src: np.ndarray) -> int | str:
        """``src``'s address when the kernels can read it (input ``i``'s shape and dtype,
        checked) in place, else why not."""
        e = self._input_eids[i]
        if e not in self._zc_eids:
            return ("this input is always copied (symbolic shapes, a GPU or WebAssembly, or "
                    "its storage shared with another entry or an output)")
        if not src.flags.c_contiguous:
            return "the array is not C-contiguous"
        if not src.flags.writeable:  # (as Function.prepare: read-only memory is never passed)
            return "the array is read-only"
        addr = src.ctypes.data
        if addr % ALIGNMENT:
            return f"the array's address is not a multiple of {ALIGNMENT} bytes"
        lo, n = self._arena_span
        if addr < lo + n and lo < addr + src.nbytes:
            return "the array is in the executor's own storage"
        return int(addr)

    def _bind(self, i: int, src: np.ndarray, addr: int) -> None:
        self._bound[self._input_eids[i]] = (src, addr)
        self._unset.discard(self._input_names[i])

    def _patch_bound(self, plan: _Plan) -> None:
        """Point ``plan``'s calls (and its native table) at each bound input's array, and back
        at their own storage for the inputs no longer bound."""
        table = plan.native._table if plan.native else None
        for e, sites in plan.sites.items():
            b = self._bound.get(e)
            addr = b[1] if b is not None else plan.entries[e]._ptr
            if plan.patched.get(e, plan.entries[e]._ptr) == addr:
                continue
            calls = plan.calls
            for k, j in sites:
                cfunc, args = calls[k]
                calls[k] = (cfunc, args[:j] + (addr,) + args[j + 1:])
                if table is not None:
                    table[plan.offsets[k] + 2 + j] = addr - (1 << 64) if addr >= 1 << 63 else addr
            if b is None:
                del plan.patched[e]
            else:
                plan.patched[e] = addr

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
        if self._bound:
            self._bound.pop(self._input_eids[i], None)
        if self._symbolic and is_symbolic(self._sym[self._input_eids[i]].dims):
            # its storage depends on the shapes of this run: kept until run() picks the plan
            self._pending[i] = np.array(src, copy=True, order="C")
            self._unset.discard(self._input_names[i])
            return
        entry: Any = self._entries[self._input_eids[i]]
        if self._stream is not None:  # queued on the executor's stream (the runs' order)
            if entry._nbytes:
                entry._api.from_host(entry._mem, src, self.device.device_id, self._stream)
        elif getattr(entry, "_on_device", False):
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
            bound = self._bound.get(self._input_eids[i])
            if bound is not None:
                arr = NDArray(bound[0], self.device)
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
                return self._use.track(arr.alias())
            if isinstance(out, NDArray):
                return out.copyfrom(arr)
            if isinstance(out, np.ndarray):
                if out.shape != arr.shape:
                    raise ValueError(f"get_output: out has shape {out.shape}, output {index} "
                                     f"has {arr.shape}")
                dev_arr: Any = arr
                if self._stream is not None and out.flags.c_contiguous and \
                        out.flags.writeable and out.dtype == arr.dtype:  # on the stream
                    if dev_arr._nbytes:
                        dev_arr._api.to_host(dev_arr._mem, out, self.device.device_id,
                                             self._stream)
                else:
                    np.copyto(out, arr.numpy() if getattr(arr, "_on_device", False)
                              else arr._arr)
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
        """Execute every node once, in graph order (after setting ``inputs``, atomically).
        With ``zero_copy_inputs`` (opt-in; ``TVMPY_GRAPH_ZERO_COPY=1`` turns it on) a numpy
        input that ``set_input_zero_copy`` accepts (64-byte aligned, C-contiguous, writable, of
        the input's dtype) is read in place instead of copied, and stays bound as by
        ``set_input_zero_copy`` until set again; any other value is copied as by set_input."""
        with self._use.lock:
            if inputs:
                self._set_inputs(None, None, inputs, self.zero_copy_inputs)
            else:
                self._enter()
            self._use.before_run(self._input_name)
            if self._unset:
                self._check_ready()
            if self._symbolic:
                self._prepare_run()
            self._use.after_run()
            if self._cuda_graphs is not None and self._active is not None:
                self._cuda_graphs.run(self._active, self._run_calls)
                return
            self._run_calls()

    def _run_calls(self) -> None:
        """Every call once, in order (a driver error is raised naming its node): by the plan's
        native runner once it has one (native_run.py), else by the Python loop."""
        plan = self._active
        if plan is not None:
            if self._bound or plan.patched:
                self._patch_bound(plan)
            native = plan.native
            if native:
                k = native()
                if k:
                    self._raise_failed(*self._calls[k - 1])
                return
            if native is None and self.native_after is not None:
                if plan.runs >= self.native_after:  # False: these calls cannot run natively
                    plan.native = native_runner(plan.calls) or False
                    if plan.native:
                        return self._run_calls()
                else:
                    plan.runs += 1
        try:
            for cfunc, args in self._calls:
                if cfunc(*args):
                    break
            else:
                return
        except RuntimeError as e:
            raise self._node_error((cfunc, args), e) from None
        self._raise_failed(cfunc, args)

    def _node_error(self, call: tuple, err: Exception) -> Exception:
        """``err`` (raised by the call ``call``) with the graph node's name in front."""
        k = next(i for i, c in enumerate(self._calls) if c[0] is call[0] and c[1] is call[1])
        node = self._call_nodes[k]
        msg = f"graph node {node.nid} ({node.name!r}): {err}"
        try:
            return type(err)(msg)
        except TypeError:
            return RuntimeError(msg)

    def set_use_cuda_graph(self, flag: bool) -> None:
        """Turn CUDA graphs on (the next run of each plan captures) or off (graphs freed,
        plain launches); ValueError on a device other than CUDA."""
        with self._use.lock:
            resolve_use_cuda_graph(bool(flag), self.device)
            if flag and self._cuda_graphs is None:
                self._cuda_graphs = CUDAGraphRunner(self._stream, self._node_error,
                                                    self._raise_failed)
            elif not flag:
                self._cuda_graphs = None
                plans = list(self._plans.values()) if self._symbolic else []
                for plan in plans + ([self._active] if self._active is not None else []):
                    plan.cuda_graph = None

    def cuda_graph_info(self) -> dict:
        """Whether runs replay CUDA graphs and what the last run did (cuda_graph.py
        ``CUDAGraphRunner.info``); ``{"enabled": False}`` when off."""
        with self._use.lock:
            if self._cuda_graphs is None:
                return {"enabled": False, "stream": self._stream is not None}
            return dict(self._cuda_graphs.info(), stream=self._stream is not None)

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
        _, fresh, _ = self._storage.allocate({e: views[e].shape for e in eids}, _zeroed_arena)
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
        per_run = [sum(ts[r] for ts in times) for r in range(len(t_total))] if times else [0.0]
        return ProfileReport(rows, statistics.median(t_total), statistics.median(per_run))

    # ---- TVM-style function access --------------------------------------------------------------
    _EXPORTED = ("set_input", "set_input_zero_copy", "run", "get_output", "get_input", "get_num_outputs",
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

    def __init__(self, rows: list[dict], total: float, nodes_per_run: float | None = None):
        self.rows = rows
        self.total = total
        # the median over runs of the nodes' summed times: more than the sum of the per-node
        # medians (each leaves out its node's occasional slow call, a run pays them; 2-4% of
        # small-kernel CNNs, bench/RESULTS.md session 7)
        self.nodes_per_run = nodes_per_run

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
        if self.nodes_per_run is not None:
            lines.append(f"{'Total (nodes, per run)':<{width}}  {'':>5}  "
                         f"{self.nodes_per_run * 1e6:>10.2f}")
        lines.append(f"{'Total (run)':<{width}}  {'':>5}  {self.total * 1e6:>10.2f}")
        return "\n".join(lines)

    __repr__ = __str__
