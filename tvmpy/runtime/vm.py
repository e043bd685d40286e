"""The Relay virtual machine: runs an :class:`Executable` of ``relay.vm.compile`` (TVM's
``tvm.runtime.vm``).

Why a VM next to the graph executor: the graph executor runs one static schedule of kernel
calls over one memory plan, which is all a model needs when every size is a constant or an
expression of the input sizes (runtime/graph_executor/). Control flow (``If`` on a run-time
condition, loops as recursive functions whose carried values change shape per iteration) and
sizes decided by data (NonZero, a reshape to a run-time shape tensor) have no such schedule:
what runs next, and how big it is, is known only while running. The VM runs *bytecode* for
that part, and hands every dataflow region between two control decisions to a graph executor:

- **bytecode** (one list of instructions per relay function, registers per call frame):
  ``SEGMENT`` runs a dataflow region, ``INVOKE`` calls another function of the module (a frame
  pushed on an explicit stack; a call in tail position replaces the frame, so a loop written
  as tail recursion runs in constant stack), ``KERNEL`` runs one operator whose output shape
  only its shape function knows (``register_shape_func(..., data_dependent=True)``: the
  function gets the op's input arrays, the outputs are allocated, the kernel -- compiled with
  symbolic extents -- is called on them; an operator with an upper-bound kernel,
  ``relay.op.upper_bound``, gets buffers sized from its input shapes instead, and its results
  are prefixes of them sized by the counts the kernel writes), ``IF``/``GOTO``, ``MOVE``,
  ``TUPLE``, ``FIELD``, ``RET``. ``exe.bytecode`` prints it.
- **segments**: each dataflow region (the operators between control decisions, after the same
  graph passes as ``relay.build``: FuseOps, AlterOpLayout, FoldConstant, ...) is a graph of
  fused kernels run by a :class:`~tvmpy.runtime.graph_executor.GraphExecutor` made once per VM.
  So a static model (one region) runs exactly the graph executor's prepared ctypes calls over its
  liveness-planned arena; a region whose sizes are expressions of its inputs' sizes gets a plan
  per input shape, cached (storage reused across runs of the same shape). The inputs are copied
  into the segment's storage and the outputs copied out into fresh 64-byte-aligned arrays: a
  segment may run again (a loop body) while an earlier result is still live.

This is TVM's design (bytecode over kernels, shape functions, per-run allocation of the dynamic
parts) with TVM's per-operator ``AllocTensor``/``InvokePacked`` instructions of a static region
replaced by one graph-executor call: static regions keep the compile-time memory plan and the
graph executor's dispatch cost, which is what keeps a static model as fast in the VM as in the
graph executor. The graph executor stays the executor of static and input-dim-symbolic graphs;
the VM runs what it refuses (``relay.build_module.vm_reason`` says which and why). Both export
as one shared library: ``exe.export_library(path)`` keeps the bytecode in the library
(runtime/vm_library.py), ``VirtualMachine(tvm.runtime.load_module(path), dev)`` runs it.

**Memory**, decided for simplicity and speed: inside a segment, the graph executor's arena
(storage shared by liveness, planned at compile time; per input shape, LRU-cached, so a repeated
size allocates nothing); between instructions, values are fresh aligned arrays owned by Python
(freed by reference counting when no register holds them: a tail call drops its frame's
registers); a ``KERNEL``'s outputs are allocated at the sizes its shape function gives.
Registers are not freed early within a frame (the large intermediates of a model live inside
segments), which keeps the per-instruction cost at one Python branch.

**Fallbacks**, marked ``[numpy]`` in ``exe.bytecode`` and listed by ``exe.stats``: an operator
whose compute refuses the symbolic shapes it meets (two unrelated run-time sizes it cannot prove
equal, an attribute value without a kernel) runs alone with its numpy implementation
(``FNumpy``), after its shape function; run-time builtins (``TRuntimeBuiltin``, e.g. the
``list.*`` operators of ONNX sequences, whose values are Python lists of NDArrays here) always do.
Every such result is checked against its relay type (dtype, static dimensions).

Values in registers are NDArrays (tensors), Python tuples (relay tuples) and Python lists
(run-time lists).

**GPUs** (``relay.vm.compile(mod, target="cuda" / "opencl")``, ``VirtualMachine(exe,
tvm.cuda(0))``): the segments' kernels are compiled for the device (symbolic extents stay
symbolic: the launch sizes are evaluated from the argument shapes per call), and each segment's
graph executor keeps its storage in device memory, one set of device buffers per input shape
(LRU-cached with the plan, so a repeated shape allocates nothing). A segment's inputs are copied
in (host to device, or device to device) and its outputs out into device arrays from a pool
(``_DevicePool``: memory of collected arrays is reused for the next array of that size). The
single-operator kernels (``KERNEL``: data-dependent output shapes, sizes no input determines,
numpy implementations) run on the host, from a second library compiled for the target's host
(``exe.host_lib``): their device inputs are copied back first (a sync), their shape functions
run there, and their results travel to the device with the next segment that reads them. An
``If`` reads its condition back from the device (a sync). Results come back on the device.
``save``/``export_library`` of a GPU executable (two libraries) is not supported yet.

**Threads**: ``invoke`` with inputs may be called from any number of threads at once (registers
are per call, each segment's executor runs under its lock, results are fresh arrays); the
stateful ``set_input`` / ``run`` / ``get_outputs`` raise ``ConcurrentUseError`` in a thread
whose inputs or outputs another thread replaced (runtime/concurrency.py).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .concurrency import SharedUse
from .device import Device, cpu, kDLCPU
from .evaluator import BenchmarkResult, check_counts, time_calls
from .graph_executor import GraphExecutor
from .graph_executor.executor import host_array
from .module import Module
from .ndarray import ALIGNMENT, NDArray, aligned_empty, fresh_ndarray, prefix_view

__all__ = ["Executable", "VirtualMachine", "VMFunction", "SegmentInfo", "KernelInfo",
           "VMError", "OPCODES"]

# opcodes (the first field of an instruction tuple)
SEGMENT, INVOKE, KERNEL, IF, GOTO, MOVE, TUPLE, FIELD, RET = range(9)
OPCODES = ("segment", "invoke", "kernel", "if", "goto", "move", "tuple", "field", "ret")
_CPU = cpu(0)
MAX_FRAMES = 100_000  # non-tail call depth before the VM gives up (runaway recursion)


class VMError(RuntimeError):
    """A run-time failure of the VM (names the function, instruction or node)."""


# ---- executable ---------------------------------------------------------------------------------
class VMFunction:
    """One compiled relay function: its parameters (name, type spec), registers and code.

    A type spec is ``("tensor", dtype, dims)`` (dims: ints, or names of size variables, or None
    for an unchecked expression) or ``("tuple", [specs])``."""

    __slots__ = ("name", "params", "specs", "num_regs", "code", "ret_spec")

    def __init__(self, name: str, params: list[str], specs: list[Any], num_regs: int,
                 code: list[tuple], ret_spec: Any = None):
        self.name, self.params, self.specs = name, params, specs
        self.num_regs, self.code, self.ret_spec = num_regs, code, ret_spec


class SegmentInfo:
    """A dataflow region: its graph JSON and parameters (run by a GraphExecutor), the relay
    type structure of each input (flattened to graph inputs) and output, and a readable name."""

    __slots__ = ("graph_json", "params", "in_specs", "out_specs", "name", "num_kernels")

    def __init__(self, graph_json: str, params: dict[str, np.ndarray], in_specs: list[Any],
                 out_specs: list[Any], name: str, num_kernels: int):
        self.graph_json, self.params = graph_json, params
        self.in_specs, self.out_specs = in_specs, out_specs
        self.name, self.num_kernels = name, num_kernels


class KernelInfo:
    """One operator run on its own: output shapes from its shape function at run time
    (``data_dependent``: from the input arrays), then the compiled ``symbol`` on freshly
    allocated outputs, or (an operator without a compute) its numpy implementation."""

    __slots__ = ("name", "op", "attrs", "symbol", "in_specs", "out_spec", "data_dependent",
                 "node", "out_type", "out_dims", "bounded", "size_specs")

    def __init__(self, name: str, op: Any, attrs: Any, symbol: str | None, in_specs: list[Any],
                 out_spec: Any, data_dependent: bool, node: str, out_type: Any = None):
        self.name, self.op, self.attrs, self.symbol = name, op, attrs, symbol
        self.in_specs, self.out_spec = in_specs, out_spec
        self.data_dependent, self.node = data_dependent, node
        # a run-time builtin (an operator on the VM's values, e.g. lists): its relay result
        # type, given to its numpy implementation
        self.out_type = out_type
        # per output, its dimensions as ints or expressions of the inputs' size variables
        self.out_dims: list[list[Any]] | None = None
        # ``symbol`` is the operator's upper-bound kernel (relay.op.upper_bound): outputs
        # allocated at the bound, the exact ones are prefixes sized by the kernel's counts
        self.bounded = False
        # the specs of the values the instruction passes after the arguments only for their
        # sizes (they bind size variables of ``out_dims`` that no argument has)
        self.size_specs: list[Any] = []


class Executable:
    """What ``relay.vm.compile`` returns: the bytecode of every function, the dataflow
    segments, the single-operator kernels and ONE compiled library (TVM's
    ``tvm.runtime.vm.Executable``)."""

    def __init__(self, functions: list[VMFunction], segments: list[SegmentInfo],
                 kernels: list[KernelInfo], lib: Module, host_lib: Module | None = None):
        self.functions = functions
        self.func_index = {f.name: i for i, f in enumerate(functions)}
        self.segments = segments
        self.kernels = kernels
        self.lib = lib
        # a GPU build: the single kernels' library, compiled for the host (None: ``lib``)
        self.host_lib = host_lib

    @property
    def bytecode(self) -> str:
        """The instructions of every function, readable."""
        lines = []
        for f in self.functions:
            lines.append(f"VM Function[{self.func_index[f.name]}]: {f.name}"
                         f"({', '.join(f.params)}) registers={f.num_regs}")
            for pc, ins in enumerate(f.code):
                lines.append(f"  {pc:3d}: {self._instr_str(ins)}")
            lines.append("")
        return "\n".join(lines)

    def _instr_str(self, ins: tuple) -> str:
        op = ins[0]
        if op == SEGMENT:
            seg = self.segments[ins[1]]
            return (f"segment {ins[1]} ({seg.name}, {seg.num_kernels} kernels) "
                    f"in=[{', '.join('$' + str(r) for r in ins[2])}] "
                    f"out=[{', '.join('$' + str(r) for r in ins[3])}]")
        if op == INVOKE:
            return (f"{'tail ' if ins[4] else ''}invoke @{self.functions[ins[1]].name}"
                    f"({', '.join('$' + str(r) for r in ins[2])}) -> ${ins[3]}")
        if op == KERNEL:
            k = self.kernels[ins[1]]
            how = k.symbol or "numpy"
            kind = ", upper bound" if k.bounded else ", data-dependent" if k.data_dependent else ""
            n = len(k.in_specs)
            sizes = (f"; sizes of {', '.join('$' + str(r) for r in ins[2][n:])}"
                     if len(ins[2]) > n else "")
            return (f"kernel {k.name} [{how}{kind}]"
                    f"({', '.join('$' + str(r) for r in ins[2][:n])}{sizes}) -> ${ins[3]}")
        if op == IF:
            return f"if ${ins[1]} else goto {ins[2]}"
        if op == GOTO:
            return f"goto {ins[1]}"
        if op == MOVE:
            return f"move ${ins[1]} <- ${ins[2]}"
        if op == TUPLE:
            return f"tuple ${ins[1]} <- ({', '.join('$' + str(r) for r in ins[2])})"
        if op == FIELD:
            return f"field ${ins[1]} <- ${ins[2]}.{ins[3]}"
        return f"ret ${ins[1]}"

    # ---- serialization (TVM's ``code, lib = exe.save()`` / ``Executable.load_exec``) -----------
    def save(self) -> tuple[bytes, Module]:
        """``(code, lib)``: the bytecode, segments and kernel descriptions as bytes, and the
        library (``lib.export_library(path)``; ``tvm.runtime.load_module(path)`` reads it
        back). ``Executable.load_exec(code, lib)`` rebuilds the executable. The bytes are a
        pickle (operators by name): load only what you saved yourself."""
        import pickle

        state = {
            "version": 1,
            "functions": [(f.name, f.params, f.specs, f.num_regs, f.code, f.ret_spec)
                          for f in self.functions],
            "segments": [(g.graph_json, g.params, g.in_specs, g.out_specs, g.name,
                          g.num_kernels) for g in self.segments],
            "kernels": [(k.name, k.op.name, k.attrs, k.symbol, k.in_specs, k.out_spec,
                         k.data_dependent, k.node, k.out_type, k.out_dims, k.bounded,
                         k.size_specs)
                        for k in self.kernels],
        }
        if self.host_lib is not None:
            raise NotImplementedError(
                "Executable.save / export_library of a GPU build (its kernels in two libraries, "
                "the device's and the host's) is not supported yet; compile it where it runs")
        return pickle.dumps(state), self.lib

    @staticmethod
    def load_exec(code: bytes | bytearray, lib: Module) -> Executable:
        """The executable saved by :meth:`save` (``code``) over its library ``lib``."""
        import pickle

        from ..relay.op.registry import get

        state = pickle.loads(bytes(code))  # noqa: S301 - the caller's own saved executable
        if not isinstance(state, dict) or state.get("version") != 1:
            raise ValueError("load_exec: not the bytes of Executable.save()")
        funcs = [VMFunction(*f) for f in state["functions"]]
        segs = [SegmentInfo(*g) for g in state["segments"]]
        kernels = []
        for n, op, attrs, sym, ins, out, dd, node, t, dims, *rest in state["kernels"]:
            kernels.append(KernelInfo(n, get(op), attrs, sym, ins, out, dd, node, t))
            kernels[-1].out_dims = dims
            kernels[-1].bounded = bool(rest and rest[0])
            kernels[-1].size_specs = list(rest[1]) if len(rest) > 1 else []
        return Executable(funcs, segs, kernels, lib)

    @property
    def mod(self) -> Module:
        """The executable as a runtime Module (TVM's ``exe.mod``): ``export_library(path)``
        writes one shared library that ``tvm.runtime.load_module`` reads back as a Module
        ``VirtualMachine`` runs (runtime/vm_library.py)."""
        from .vm_library import VMExecutableModule

        return VMExecutableModule(self)

    def export_library(self, file_name: str, fcompile: Any = None, **kwargs: Any) -> None:
        """``self.mod.export_library(file_name)``: the kernels and the bytecode in one file."""
        self.mod.export_library(file_name, fcompile, **kwargs)

    def get_function_params(self, func_name: str) -> list[str]:
        return list(self.functions[self._index(func_name)].params)

    def get_function_arity(self, func_name: str) -> int:
        return len(self.functions[self._index(func_name)].params)

    def get_function_param_name(self, func_name: str, index: int) -> str:
        return self.functions[self._index(func_name)].params[index]

    @property
    def global_vars(self) -> list[str]:
        return [f.name for f in self.functions]

    @property
    def primitive_ops(self) -> list[str]:
        """The compiled kernels' symbols (segments' fused functions and single kernels)."""
        return sorted(self.lib._all_names()) if hasattr(self.lib, "_all_names") else []

    @property
    def stats(self) -> str:
        n_ins = sum(len(f.code) for f in self.functions)
        numpy_ops = sorted({k.name for k in self.kernels if k.symbol is None})
        return (f"{len(self.functions)} functions, {n_ins} instructions, {len(self.segments)} "
                f"segments ({sum(s.num_kernels for s in self.segments)} kernel calls), "
                f"{len(self.kernels)} single kernels"
                + (f" (numpy implementation: {', '.join(numpy_ops)})" if numpy_ops else ""))

    def _index(self, func_name: str) -> int:
        i = self.func_index.get(func_name)
        if i is None:
            raise KeyError(f"the executable has no function {func_name!r}; functions: "
                           f"{', '.join(self.func_index)}")
        return i

    def __repr__(self) -> str:
        return (f"Executable({len(self.functions)} functions, {len(self.segments)} segments, "
                f"{len(self.kernels)} kernels)")


# ---- values -------------------------------------------------------------------------------------
def _aligned_copy(a: np.ndarray) -> np.ndarray:
    out = aligned_empty(a.shape, a.dtype)
    np.copyto(out, a)
    return out


def _copy_nd(a: np.ndarray, dev: Device) -> NDArray:
    out = fresh_ndarray(a.shape, a.dtype, dev)
    np.copyto(out._arr, a)
    return out


def _flatten(v: Any, out: list[NDArray]) -> list[NDArray]:
    if isinstance(v, tuple):
        for x in v:
            _flatten(x, out)
    else:
        out.append(v)
    return out


def _restructure(spec: Any, flat: Sequence[Any], pos: int = 0) -> tuple[Any, int]:
    """Rebuild a value of type ``spec`` from the flat list of its tensors."""
    if spec[0] == "tuple":
        items = []
        for s in spec[1]:
            v, pos = _restructure(s, flat, pos)
            items.append(v)
        return tuple(items), pos
    return flat[pos], pos + 1


def _spec_str(spec: Any) -> str:
    if spec[0] == "tuple":
        return "(" + ", ".join(_spec_str(s) for s in spec[1]) + ")"
    if spec[0] == "list":
        return f"List[{_spec_str(spec[2]) if spec[2] is not None else spec[1]}]"
    if spec[2] is None:
        return f"Tensor[{spec[1]}]"
    dims = ", ".join("?" if not isinstance(d, int) else str(d) for d in spec[2])
    return f"Tensor[({dims}), {spec[1]}]"


def _as_value(v: Any, spec: Any, where: str, env: dict[str, tuple[int, str]],
              dev: Device) -> Any:
    """An argument of type ``spec`` as a VM value, checked: dtype, rank, static dimensions and
    the dimensions that share a size variable (across all the arguments of the call)."""
    if spec[0] == "tuple":
        if not isinstance(v, (tuple, list)) or len(v) != len(spec[1]):
            raise TypeError(f"{where}: expected a tuple of {len(spec[1])} values "
                            f"{_spec_str(spec)}, got {type(v).__name__}")
        return tuple(_as_value(x, s, f"{where}[{k}]", env, dev)
                     for k, (x, s) in enumerate(zip(v, spec[1])))
    if spec[0] == "list":
        if not isinstance(v, (tuple, list)):
            raise TypeError(f"{where}: expected a list {_spec_str(spec)}, got "
                            f"{type(v).__name__}")
        elem = spec[2] if spec[2] is not None else ("tensor", spec[1], None)
        return [_as_value(x, elem, f"{where}[{k}]", {}, dev) for k, x in enumerate(v)]
    _, dtype, dims = spec
    on_dev = getattr(v, "_on_device", False) and v._device == dev
    # (an array already on the VM's GPU is checked on its shape and dtype and stays there)
    arr = v._arr if on_dev else host_array(v, dtype, where)
    if arr.dtype != np.dtype(dtype) and not (dtype == "bool" and arr.dtype == np.bool_):
        raise TypeError(f"{where}: expected dtype {dtype}, got {arr.dtype}")
    if dims is None:  # a list element of unknown rank: its dtype is all that is known
        dims = [None] * arr.ndim
    if arr.ndim != len(dims):
        raise ValueError(f"{where}: expected {len(dims)} dimensions {_spec_str(spec)}, got "
                         f"shape {arr.shape}")
    for d, (want, got) in enumerate(zip(dims, arr.shape)):
        if isinstance(want, int):
            if want != got:
                raise ValueError(f"{where}: dimension {d} must be {want} (the type is "
                                 f"{_spec_str(spec)}), got shape {arr.shape}")
        elif isinstance(want, str):
            have = env.get(want)
            if have is None:
                env[want] = (got, f"{where} dimension {d}")
            elif have[0] != got:
                raise ValueError(f"{where}: dimension {d} is {got}, but {have[1]} is "
                                 f"{have[0]}: the types say both are the same size")
    if on_dev:
        return v
    if isinstance(v, NDArray) and v._compact_aligned:
        return v
    if not (arr.flags.c_contiguous and arr.ctypes.data % ALIGNMENT == 0):
        arr = _aligned_copy(arr)
    return NDArray(arr, dev if dev.device_type == kDLCPU else _CPU)  # (a GPU VM: copied in
    # by the segment that reads it)


# ---- the machine --------------------------------------------------------------------------------
class _DevicePool:
    """Device memory for the VM's values on a GPU (a segment's outputs, copied out of its
    executor's storage): freed memory goes back to a free list per size instead of the driver,
    so repeated calls at the same shapes allocate nothing (TVM's pooled allocator). An array's
    memory returns to the pool when the array object is collected."""

    KEEP = 16  # free blocks kept per size

    def __init__(self, dev: Device):
        from .gpu_module import device_api

        self.dev, self.api = dev, device_api(dev)
        self.free: dict[int, list[Any]] = {}
        self.allocs = 0  # blocks taken from the driver (tests read it)

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        import weakref

        nbytes = max(ALIGNMENT, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
        try:  # (several threads may invoke the VM: the pop itself is atomic)
            mem = self.free[nbytes].pop()
        except (KeyError, IndexError):
            mem = self.api.alloc(nbytes, self.dev.device_id)
            self.allocs += 1
        arr = _pooled_class().wrap(mem, shape, dtype, self.dev, self.api)
        arr._keep = None
        weakref.finalize(arr, self._put, self.free, nbytes, mem)
        return arr

    @staticmethod
    def _put(free: dict[int, list[Any]], nbytes: int, mem: Any) -> None:
        blocks = free.setdefault(nbytes, [])
        if len(blocks) < _DevicePool.KEEP:
            blocks.append(mem)

    def copy_of(self, a: Any) -> Any:
        out = self.empty(a.shape, a._arr.dtype)
        return out.copyfrom(a)  # (device to device, queued)


_POOLED: Any = None


def _pooled_class() -> Any:
    """A device array of the pool: its ``alias()`` keeps it alive (its memory goes back to the
    pool only when no alias of it is left)."""
    global _POOLED
    if _POOLED is None:
        from .gpu_module import DeviceNDArray

        class PooledDeviceNDArray(DeviceNDArray):
            __slots__ = ("_keep",)

            def alias(self) -> Any:
                out: Any = PooledDeviceNDArray.wrap(self._mem, self.shape, self._arr.dtype,
                                                    self._device, self._api)
                out._keep = self
                return out

        _POOLED = PooledDeviceNDArray
    return _POOLED


def _to_host(v: Any) -> Any:
    """A VM value with its device arrays copied to the host (waits for the device)."""
    if isinstance(v, tuple):
        return tuple(_to_host(x) for x in v)
    if isinstance(v, list):
        return [_to_host(x) for x in v]
    if getattr(v, "_on_device", False):
        return NDArray(_aligned_copy(v.numpy()), _CPU)
    return v


def _to_device(v: Any, pool: _DevicePool) -> Any:
    """A VM value with its host tensors copied to the pool's device (lists stay on the host)."""
    if isinstance(v, tuple):
        return tuple(_to_device(x, pool) for x in v)
    if isinstance(v, NDArray) and not getattr(v, "_on_device", False):
        return pool.empty(v.shape, v._arr.dtype).copyfrom(v._arr)
    return v


class _Segment:
    """A dataflow region bound to its GraphExecutor; ``run(inputs) -> outputs`` (flat). On a GPU
    the executor's storage is device memory (per input shape, cached: graph_executor): inputs
    are copied in (host to device, or device to device), outputs out into pooled device
    arrays."""

    def __init__(self, info: SegmentInfo, lib: Module, dev: Device,
                 pool: _DevicePool | None = None):
        self.info = info
        self.pool = pool
        self.ex = ex = GraphExecutor(info.graph_json, lib, dev)
        if info.params:
            ex.load_params(info.params)
        self.n_in = sum(len(_flatten_spec(s)) for s in info.in_specs)
        self.flat_in = all(s[0] == "tensor" for s in info.in_specs)
        self.out_eids = ex._output_eids
        self.names = ex._input_names[: self.n_in]
        sym = ex._symbolic
        self.static_in = [not sym or not _is_sym(ex._sym[ex._input_eids[i]].dims)
                          for i in range(self.n_in)]
        self.where = f"segment {info.name}"
        self.dev = dev

    def run(self, inputs: list[NDArray]) -> list[NDArray]:
        if self.pool is not None:
            return self._run_gpu(inputs)
        ex = self.ex
        with ex._use.lock:  # inputs in, run, outputs out: one step (threads invoking the VM)
            entries, eids = ex._entries, ex._input_eids
            for i, a in enumerate(inputs):
                arr = a._arr
                if self.static_in[i]:
                    dst = entries[eids[i]]._arr
                    if arr.shape != dst.shape or arr.dtype != dst.dtype:
                        ex._checked(i, arr, f"{self.where}: input {i}")  # raises, naming it
                    np.copyto(dst, arr)
                else:
                    ex._checked(i, arr, f"{self.where}: input {i}")
                    ex._pending[i] = arr
                ex._unset.discard(self.names[i])
            ex.run()
            entries, dev = ex._entries, self.dev
            return [_copy_nd(entries[e]._arr, dev) for e in self.out_eids]


    def _run_gpu(self, inputs: list[NDArray]) -> list[NDArray]:
        ex, pool = self.ex, self.pool
        assert pool is not None
        with ex._use.lock:
            entries, eids = ex._entries, ex._input_eids
            for i, a in enumerate(inputs):
                on_dev = getattr(a, "_on_device", False)
                src = a if on_dev else a._arr
                if self.static_in[i]:
                    dst = entries[eids[i]]
                    if a.shape != dst.shape or a._arr.dtype != dst._arr.dtype:
                        raise VMError(f"{self.where}: input {i} is {a.shape} {a._arr.dtype}, "
                                      f"the segment takes {dst.shape} {dst._arr.dtype}")
                    dst.copyfrom(src)
                else:
                    want = ex._np_dtypes[eids[i]]
                    if a._arr.dtype != want:
                        raise VMError(f"{self.where}: input {i} has dtype {a._arr.dtype}, the "
                                      f"segment takes {want}")
                    ex._check_symbolic(ex._sym[eids[i]], a.shape, f"{self.where}: input {i}")
                    ex._pending[i] = src  # copied into the plan for its shapes by run()
                ex._unset.discard(self.names[i])
            ex.run()
            ex._pending.clear()  # (holds no device array past the run)
            entries = ex._entries
            return [pool.copy_of(entries[e]) for e in self.out_eids]


def _input_key(key: tuple[str, str]) -> str:
    return f"{key[1]!r} of @{key[0]}"


def _with_node(e: Exception, where: str) -> Exception:
    """``e`` with ``where`` in front of its message, of the same type when it can be made
    (an IndexError stays an IndexError), else a VMError."""
    try:
        new = type(e)(f"{where}: {e}")
        if str(new) == f"{where}: {e}":
            return new
    except Exception:  # noqa: BLE001 - an exception type with another constructor
        pass
    return VMError(f"{where}: {type(e).__name__}: {e}")


def _to_numpy(v: Any) -> Any:
    """A VM value as numpy implementations take it (lists stay lists, of arrays)."""
    if isinstance(v, tuple):
        return tuple(_to_numpy(x) for x in v)
    if isinstance(v, list):
        return [_to_numpy(x) for x in v]
    return v._arr


def _from_numpy(v: Any, spec: Any, node: str) -> Any:
    """A numpy implementation's result as a VM value of type ``spec`` (checked)."""
    kind = spec[0]
    if kind == "tuple":
        if not isinstance(v, (tuple, list)) or len(v) != len(spec[1]):
            raise VMError(f"{node}: expected a tuple of {len(spec[1])} values, got "
                          f"{type(v).__name__}")
        return tuple(_from_numpy(x, s, node) for x, s in zip(v, spec[1]))
    if kind == "list":
        elem = spec[2] if spec[2] is not None else ("tensor", spec[1], None)
        return [_from_numpy(x, elem, node) for x in v]
    arr = np.asarray(v)
    if arr.dtype != np.dtype(spec[1]):
        raise VMError(f"{node}: the result has dtype {arr.dtype}, its type says {spec[1]}")
    dims = spec[2]
    if dims is not None and (arr.ndim != len(dims) or any(
            isinstance(w, int) and w != g for w, g in zip(dims, arr.shape))):
        raise VMError(f"{node}: the result has shape {arr.shape}, which does not fit its type "
                      f"{_spec_str(spec)}")
    return _copy_nd(arr, _CPU) if not (arr.flags.c_contiguous and arr.flags.writeable) or \
        arr.__array_interface__["data"][0] % ALIGNMENT else NDArray(arr)


def _flatten_specs(specs: list[Any]) -> list[Any]:
    return [x for s in specs for x in _flatten_spec(s)]


def _flatten_spec(spec: Any) -> list[Any]:
    if spec[0] == "tuple":
        return [x for s in spec[1] for x in _flatten_spec(s)]
    return [spec]


def _is_sym(dims: Any) -> bool:
    return any(isinstance(d, str) for d in dims)


class _Kernel:
    """One operator with run-time output shapes (KernelInfo), bound to its library function."""

    def __init__(self, info: KernelInfo, lib: Module):
        self.info = info
        self.func = lib.get_function(info.symbol) if info.symbol else None
        self.fnumpy = info.op.get_attr("FNumpy")
        self.shape_fn = info.op.get_attr("FShapeFunc")
        self.out_flat = _flatten_spec(info.out_spec)
        self.upper = info.op.get_attr("FUpperBound") if info.bounded else None

    def out_shapes(self, arrays: list[np.ndarray], sizes: Sequence[tuple[int, ...]] = ()
                   ) -> list[tuple[int, ...]]:
        """The output shapes: the type's dimensions with the size variables bound by the
        inputs' shapes and ``sizes`` (the shapes of the values passed for their sizes), else
        the shape function."""
        from ..relay.op.shape_func import shape_func

        info = self.info
        if not info.data_dependent and info.out_dims is not None:
            shapes = self._shapes_from_types(arrays, sizes)
            if shapes is not None:
                return shapes
        if info.data_dependent:
            if self.shape_fn is None:
                raise VMError(f"{info.node}: operator {info.op.name} is data-dependent but has "
                              "no shape function")
            shapes = self.shape_fn(info.attrs, arrays)
        else:
            shapes = shape_func(info.op, info.attrs, [a.shape for a in arrays],
                                [str(a.dtype) for a in arrays])
        shapes = [tuple(int(d) for d in s) for s in shapes]
        if len(shapes) != len(self.out_flat):
            raise VMError(f"{info.node}: the shape function of {info.op.name} gives "
                          f"{len(shapes)} outputs, the type has {len(self.out_flat)}")
        for k, (s, spec) in enumerate(zip(shapes, self.out_flat)):
            if len(s) != len(spec[2]) or any(d < 0 for d in s) or any(
                    isinstance(w, int) and w != g for w, g in zip(spec[2], s)):
                raise VMError(f"{info.node}: the shape function of {info.op.name} gives output "
                              f"{k} the shape {s}, which does not fit its type "
                              f"{_spec_str(spec)}")
        return shapes

    def _shapes_from_types(self, arrays: list[np.ndarray],
                           sizes: Sequence[tuple[int, ...]] = ()
                           ) -> list[tuple[int, ...]] | None:
        """The output shapes from the type's dimensions, with the size variables bound by the
        inputs' shapes (and ``sizes``); None when a dimension reads a variable none binds."""
        from .function import compile_dim_expr

        env: dict[str, int] = {}
        have = [a.shape for a in arrays] + list(sizes)
        specs = _flatten_specs(self.info.in_specs) + _flatten_specs(self.info.size_specs)
        for spec, dims_had in zip(specs, have):
            for want, got in zip(spec[2] or (), dims_had):
                if isinstance(want, str):
                    if env.setdefault(want, got) != got:
                        return None  # the types' equal sizes differ: the shape function says
        out = []
        for dims in self.info.out_dims or []:
            shape = []
            for d in dims:
                if isinstance(d, int):
                    shape.append(d)
                    continue
                try:
                    fn, names = compile_dim_expr(d)
                except ValueError:
                    return None
                if not names <= env.keys():
                    return None
                shape.append(int(fn(env)))
            out.append(tuple(shape))
        return out

    def run(self, args: list[Any]) -> Any:
        sizes: list[tuple[int, ...]] = []
        if self.info.size_specs:  # the values after the arguments: passed for their sizes
            n = len(self.info.in_specs)
            sizes = [a.shape for a in _flatten(tuple(args[n:]), [])]
            args = args[:n]
        if self.info.out_type is not None:
            return self._run_builtin(args)
        flat = _flatten(tuple(args), [])
        if self.upper is not None:
            return self._run_bounded(flat)
        arrays = [a._arr for a in flat]
        try:
            shapes = self.out_shapes(arrays, sizes)
        except VMError:
            raise
        except Exception as e:  # noqa: BLE001 - name the node whatever the shape function raised
            raise VMError(f"{self.info.node}: the shape function of {self.info.op.name} failed "
                          f"on input shapes {[a.shape for a in arrays]}: "
                          f"{type(e).__name__}: {e}") from e
        if self.func is None:
            return self._run_numpy(args, shapes)
        outs = [fresh_ndarray(s, spec[1], _CPU) for s, spec in zip(shapes, self.out_flat)]
        try:
            self.func(*flat, *outs)
        except (RuntimeError, ValueError) as e:
            raise VMError(f"{self.info.node}: {e}") from e
        return _restructure(self.info.out_spec, outs)[0]

    def _run_bounded(self, flat: list[NDArray]) -> Any:
        """The upper-bound kernel (relay.op.upper_bound): outputs allocated at the bound from the
        input shapes, the kernel's counts give the exact shapes; each exact output is the
        prefix of its buffer (the kernel writes the exact layout there): a view, no copy. (The
        unwritten tail of a large bound is never touched: its pages are never mapped.)"""
        info, ub, func = self.info, self.upper, self.func
        assert ub is not None and func is not None
        arrays = [a._arr for a in flat]
        try:
            dims = ub.bound(info.attrs, arrays)
        except Exception as e:  # noqa: BLE001 - name the node whatever the bound raised
            raise VMError(f"{info.node}: {info.op.name}: no output bound for input shapes "
                          f"{[a.shape for a in arrays]}: {type(e).__name__}: {e}") from e
        if len(dims) != len(self.out_flat):
            raise VMError(f"{info.node}: the upper bound of {info.op.name} gives {len(dims)} "
                          f"outputs, the type has {len(self.out_flat)}")
        outs = []
        for d, spec in zip(dims, self.out_flat):
            shape = tuple(int(x[0]) if isinstance(x, tuple) else int(x) for x in d)
            outs.append(fresh_ndarray(shape, spec[1], _CPU))
        counts = fresh_ndarray((ub.num_counts,), "int64", _CPU)
        try:
            func(*flat, *outs, counts)
        except (RuntimeError, ValueError) as e:
            raise VMError(f"{info.node}: {e}") from e
        c = counts._arr.tolist()
        if ub.check is not None:
            try:
                ub.check(info.attrs, c, [a.shape for a in arrays])
            except ValueError as e:
                raise VMError(f"{info.node}: {e}") from e
        res = []
        for k, (d, out) in enumerate(zip(dims, outs)):
            if not any(isinstance(x, tuple) for x in d):
                res.append(out)
                continue
            exact: list[int] = []
            for x in d:
                if isinstance(x, tuple):
                    n = c[x[1]]
                    if not 0 <= n <= x[0]:
                        raise VMError(f"{info.node}: the kernel of {info.op.name} reports {n} "
                                      f"for dimension {len(exact)} of output {k}, outside its "
                                      f"bound 0..{x[0]}")
                    exact.append(n)
                else:
                    exact.append(int(x))
            res.append(prefix_view(out, tuple(exact)))
        return _restructure(info.out_spec, res)[0]

    def _run_builtin(self, args: list[Any]) -> Any:
        info = self.info
        try:
            res = self.fnumpy(info.attrs, [_to_numpy(a) for a in args], info.out_type)
        except Exception as e:  # noqa: BLE001 - name the node, keep the kind of error
            raise _with_node(e, f"{info.node}: {info.op.name}") from e
        return _from_numpy(res, info.out_spec, info.node)

    def _run_numpy(self, args: list[Any], shapes: list[tuple[int, ...]]) -> Any:
        from ..relay.ty import TensorType, TupleType

        def typ(spec: Any, pos: int) -> tuple[Any, int]:
            if spec[0] == "tuple":
                fields = []
                for s in spec[1]:
                    t, pos = typ(s, pos)
                    fields.append(t)
                return TupleType(fields), pos
            return TensorType(shapes[pos], spec[1]), pos + 1

        def np_value(v: Any) -> Any:
            return tuple(np_value(x) for x in v) if isinstance(v, tuple) else v._arr

        try:
            res = self.fnumpy(self.info.attrs, [np_value(a) for a in args],
                              typ(self.info.out_spec, 0)[0])
        except Exception as e:  # noqa: BLE001 - name the node, keep the kind of error
            raise _with_node(e, f"{self.info.node}: {self.info.op.name}") from e
        flat: list[Any] = []

        def collect(v: Any) -> None:
            if isinstance(v, (tuple, list)):
                for x in v:
                    collect(x)
            else:
                flat.append(v)

        collect(res)
        outs = []
        for k, (a, shp, spec) in enumerate(zip(flat, shapes, self.out_flat)):
            a = np.asarray(a, dtype=spec[1])
            if a.shape != shp:
                raise VMError(f"{self.info.node}: {self.info.op.name} gave output {k} the shape "
                              f"{a.shape}, its shape function {shp}")
            outs.append(_copy_nd(a, _CPU))
        return _restructure(self.info.out_spec, outs)[0]


class VirtualMachine:
    """``VirtualMachine(exe, device)``: runs the functions of an :class:`Executable` (see the
    module docstring). ``invoke(func_name, *args, **kwargs)`` returns the result (NDArray, or a
    tuple of results); ``set_input`` + ``run`` + ``get_outputs`` as TVM's stateful API."""

    def __init__(self, exe: Executable | Module, device: Device | Sequence[Device] | None = None,
                 memory_cfg: Any = None):
        del memory_cfg  # TVM's allocator choice: the segments' plans are pooled per shape
        dev = cpu(0) if device is None else device
        if isinstance(dev, (list, tuple)):
            if len(dev) != 1:
                raise ValueError(f"VirtualMachine runs on one device; got {len(dev)}")
            dev = dev[0]
        if not isinstance(dev, Device):
            raise TypeError(f"device must be a tvm Device (tvm.cpu(0)), got {type(dev).__name__}")
        inner = getattr(exe, "exe", None)  # a loaded VMExecutableModule (runtime/vm_library.py)
        if isinstance(inner, Executable):
            exe = inner
        if not isinstance(exe, Executable):
            raise TypeError(f"VirtualMachine takes a relay.vm Executable (or load_module's "
                            f"Module of its exported library), got {type(exe).__name__}")
        lib_type = getattr(exe.lib, "device_type", kDLCPU)  # a GPU build's device type
        if exe.host_lib is None and dev.device_type != kDLCPU:
            raise ValueError(f"this executable was compiled for the CPU; it runs on tvm.cpu(0), "
                             f"not {dev} (compile with relay.vm.compile(mod, target=\"cuda\" / "
                             "\"opencl\") for a GPU)")
        if exe.host_lib is not None and dev.device_type != lib_type:
            raise ValueError(f"this executable was compiled for device type {lib_type}; it does "
                             f"not run on {dev}")
        self.exe = exe
        self.device = dev
        self.module = self  # TVM code reads vm.module
        self._gpu = dev.device_type != kDLCPU
        self._pool = _DevicePool(dev) if self._gpu else None
        self._segments = [_Segment(s, exe.lib, dev, self._pool) for s in exe.segments]
        self._kernels = [_Kernel(k, exe.host_lib or exe.lib) for k in exe.kernels]
        self._code = [(f.code, f.num_regs) for f in exe.functions]
        self._inputs: dict[str, list[Any]] = {}
        self._partial: dict[str, dict[str, Any]] = {}
        self._outputs: Any = None
        # the stateful API from several threads (runtime/concurrency.py); invoke with inputs
        # needs no lock: each segment's executor has its own
        self._use = SharedUse("VM")

    # ---- calling ------------------------------------------------------------------------------
    def _bind_args(self, func_name: str, args: Sequence[Any], kwargs: dict[str, Any]
                   ) -> tuple[int, list[Any]]:
        idx = self.exe._index(func_name)
        f = self.exe.functions[idx]
        if len(args) > len(f.params):
            raise TypeError(f"@{f.name} takes {len(f.params)} inputs ({', '.join(f.params)}), "
                            f"got {len(args)}")
        values: dict[str, Any] = dict(zip(f.params, args))
        for k, v in kwargs.items():
            if k not in f.params:
                raise TypeError(f"@{f.name} has no input named {k!r}; inputs: "
                                f"{', '.join(f.params)}")
            if k in values:
                raise TypeError(f"@{f.name}: input {k!r} given twice")
            values[k] = v
        missing = [p for p in f.params if p not in values]
        if missing:
            raise TypeError(f"@{f.name}: input{'s' if len(missing) > 1 else ''} "
                            f"{', '.join(map(repr, missing))} not given")
        env: dict[str, tuple[int, str]] = {}
        bound = [_as_value(values[p], s, f"input {p!r}", env, self.device)
                 for p, s in zip(f.params, f.specs)]
        return idx, bound

    def invoke(self, func_name: str = "main", *args: Any, **kwargs: Any) -> Any:
        """Run ``func_name`` on ``args`` (by position, then by name); every input is checked
        (dtype, rank, static dimensions, dimensions of one size variable) before any kernel
        runs. Returns an NDArray or a tuple (fresh arrays: safe from several threads at once).
        Without inputs, those of ``set_input``: ConcurrentUseError when another thread set one
        that this thread set since its last run."""
        if not args and not kwargs and func_name in self._inputs:
            with self._use.lock:
                self._use.enter()
                self._use.before_run(_input_key)
                idx, bound = self.exe._index(func_name), self._inputs[func_name]
        else:
            idx, bound = self._bind_args(func_name, args, kwargs)
        out = self._execute(idx, bound)
        if self._pool is not None:  # a GPU: the result on the device (a host kernel's copied)
            out = _to_device(out, self._pool)
        return out

    def set_input(self, func_name: str = "main", *args: Any, **kwargs: Any) -> None:
        """Check and keep the inputs of ``func_name`` for ``run``/``invoke`` without inputs."""
        bound = self._bind_args(func_name, args, kwargs)[1]
        with self._use.lock:
            self._use.enter()
            self._inputs[func_name] = bound
            self._partial.pop(func_name, None)
            for p in self.exe.functions[self.exe._index(func_name)].params:
                self._use.set((func_name, p))

    def set_one_input(self, func_name: str, key: int | str, value: Any) -> None:
        """Set one input (by index or name) of ``func_name``, keeping the others set."""
        f = self.exe.functions[self.exe._index(func_name)]
        name = f.params[key] if isinstance(key, int) else key
        if name not in f.params:
            raise TypeError(f"@{f.name} has no input named {name!r}; inputs: "
                            f"{', '.join(f.params)}")
        with self._use.lock:
            self._use.enter()
            current = self._partial.setdefault(func_name, dict(zip(f.params, self._inputs.get(
                func_name, []))))
            current[name] = value
            self._use.set((func_name, name))
            if all(p in current for p in f.params):  # complete: checked together
                self._inputs[func_name] = self._bind_args(func_name, (), current)[1]

    def get_input_index(self, input_name: str, func_name: str = "main") -> int:
        params = self.exe.functions[self.exe._index(func_name)].params
        return params.index(input_name) if input_name in params else -1

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """``invoke("main", ...)`` (with the inputs of ``set_input`` when none are given); the
        result is kept for ``get_outputs``."""
        out = self.invoke("main", *args, **kwargs)
        with self._use.lock:
            self._use.enter()
            self._outputs = out
            self._use.after_run()
        return out

    invoke_stateful = run

    def get_outputs(self) -> list[NDArray]:
        """The tensors of the last ``run``'s result, flattened (as TVM's ``get_outputs``); they
        are the run's own arrays (a later run makes new ones). ConcurrentUseError when this
        thread ran and another thread ran since."""
        with self._use.lock:
            self._use.enter()
            if self._outputs is None:
                raise RuntimeError("get_outputs: call run() first")
            self._use.check_outputs("get_outputs")
            return _flatten(self._outputs, [])

    def get_num_outputs(self) -> int:
        return len(self.get_outputs())

    def get_output(self, index: int) -> NDArray:
        return self.get_outputs()[index]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.invoke("main", *args, **kwargs)

    # ---- the interpreter loop -----------------------------------------------------------------
    def _execute(self, fidx: int, args: list[Any]) -> Any:
        funcs, segments, kernels = self._code, self._segments, self._kernels
        code, nregs = funcs[fidx]
        regs: list[Any] = [None] * nregs
        regs[: len(args)] = args
        stack: list[tuple[list[tuple], list[Any], int, int, int]] = []
        pc = 0
        while True:
            ins = code[pc]
            op = ins[0]
            if op == SEGMENT:
                seg = segments[ins[1]]
                ins_regs = ins[2]
                if seg.flat_in:
                    ins_vals = [regs[r] for r in ins_regs]
                else:
                    ins_vals = _flatten(tuple(regs[r] for r in ins_regs), [])
                outs = seg.run(ins_vals)
                pos = 0
                for r, spec in zip(ins[3], seg.info.out_specs):
                    if spec[0] == "tensor":
                        regs[r] = outs[pos]
                        pos += 1
                    else:
                        regs[r], pos = _restructure(spec, outs, pos)
                pc += 1
            elif op == MOVE:
                regs[ins[1]] = regs[ins[2]]
                pc += 1
            elif op == IF:
                c = regs[ins[1]]
                c = c.numpy() if getattr(c, "_on_device", False) else c._arr  # (a sync)
                pc = pc + 1 if c else ins[2]
            elif op == GOTO:
                pc = ins[1]
            elif op == INVOKE:
                _, f, arg_regs, dst, tail = ins
                new_args = [regs[r] for r in arg_regs]
                if not tail:
                    if len(stack) >= MAX_FRAMES:
                        raise VMError(f"call depth {MAX_FRAMES} exceeded (runaway recursion "
                                      f"in @{self.exe.functions[f].name}?)")
                    stack.append((code, regs, pc + 1, dst, fidx))
                fidx = f
                code, nregs = funcs[f]
                regs = [None] * nregs
                regs[: len(new_args)] = new_args
                pc = 0
            elif op == RET:
                val = regs[ins[1]]
                if not stack:
                    return val
                code, regs, pc, dst, fidx = stack.pop()
                regs[dst] = val
            elif op == TUPLE:
                regs[ins[1]] = tuple(regs[r] for r in ins[2])
                pc += 1
            elif op == FIELD:
                regs[ins[1]] = regs[ins[2]][ins[3]]
                pc += 1
            elif op == KERNEL:
                if self._gpu:  # on the host: its inputs copied back (a sync)
                    regs[ins[3]] = kernels[ins[1]].run([_to_host(regs[r]) for r in ins[2]])
                else:
                    regs[ins[3]] = kernels[ins[1]].run([regs[r] for r in ins[2]])
                pc += 1
            else:
                raise VMError(f"bad opcode {op} at {pc} in @{self.exe.functions[fidx].name}")

    # ---- timing -------------------------------------------------------------------------------
    def benchmark(self, device: Device | None = None, *args: Any, func_name: str = "main",
                  repeat: int = 5, number: int = 5, min_repeat_ms: float | None = None,
                  limit_zero_time_iterations: int = 100, end_to_end: bool = False,
                  cooldown_interval_ms: float = 0, repeats_to_cooldown: int = 1,
                  **kwargs: Any) -> BenchmarkResult:
        """Seconds per ``invoke(func_name)`` (TVM's signature): the inputs ``args``/``kwargs``
        are checked and set once, then each call runs on them (``end_to_end``: each call also
        converts the inputs and copies the outputs to numpy)."""
        del limit_zero_time_iterations
        if device is not None and device != self.device:
            raise ValueError(f"benchmark: the VM runs on {self.device}, not {device}")
        check_counts("benchmark", number, repeat, min_repeat_ms or 0, cooldown_interval_ms)
        if args or kwargs:
            self.set_input(func_name, *args, **kwargs)
        elif func_name not in self._inputs:
            raise RuntimeError(f"benchmark: no inputs for {func_name!r}: pass them or call "
                               "set_input first")
        idx, bound = self.exe._index(func_name), self._inputs[func_name]
        if end_to_end:
            def step() -> None:
                out = self.invoke(func_name, *args, **kwargs)
                for t in _flatten(out if isinstance(out, tuple) else (out,), []):
                    t.numpy()
        else:
            def step() -> None:
                self._execute(idx, bound)
        step()
        return time_calls(step, self.device, number, repeat, min_repeat_ms or 0,
                          cooldown_interval_ms, repeats_to_cooldown)

    def time_evaluator(self, func_name: str, dev: Device, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, cooldown_interval_ms: float = 0,
                       f_preproc: str = "", *, repeats_to_cooldown: int = 1
                       ) -> Callable[..., BenchmarkResult]:
        """``vm.time_evaluator("invoke", dev, number=10)("main")`` (TVM's form; ``func_name``
        "invoke" times ``invoke(args...)``, "run"/"invoke_stateful" times ``run()``, or a
        function name of the executable times it on the callable's arguments)."""
        if not isinstance(dev, Device):
            raise TypeError(f"time_evaluator: dev must be a tvm Device, got {type(dev).__name__}")
        if dev != self.device:
            raise ValueError(f"time_evaluator: the VM runs on {self.device}, not {dev}")
        check_counts("time_evaluator", number, repeat, min_repeat_ms, cooldown_interval_ms,
                     f_preproc)
        if func_name in ("invoke",):
            fn: Callable[..., Any] = self.invoke
        elif func_name in ("run", "invoke_stateful"):
            fn = self.run
        else:
            self.exe._index(func_name)
            fn = lambda *a: self.invoke(func_name, *a)  # noqa: E731

        def evaluate(*args: Any) -> BenchmarkResult:
            fn(*args)
            return time_calls(lambda: fn(*args), dev, number, repeat, min_repeat_ms,
                              cooldown_interval_ms, repeats_to_cooldown, f_preproc)

        return evaluate

    def profile(self, *args: Any, func_name: str = "main", number: int = 10,
                **kwargs: Any) -> dict[str, float]:
        """Median seconds per segment and kernel over ``number`` calls (keyed by name)."""
        times: dict[str, list[float]] = {}
        clock = time.perf_counter

        def wrap(obj: Any, name: str) -> None:
            orig = obj.run

            def timed(*a: Any) -> Any:
                t0 = clock()
                try:
                    return orig(*a)
                finally:
                    times.setdefault(name, []).append(clock() - t0)
            obj.run = timed

        wrapped = ([(s, f"segment {i} ({s.info.name})") for i, s in enumerate(self._segments)]
                   + [(k, f"kernel {i} ({k.info.name})") for i, k in enumerate(self._kernels)])
        for obj, name in wrapped:
            wrap(obj, name)
        try:
            for _ in range(max(1, int(number))):
                self.invoke(func_name, *args, **kwargs)
        finally:
            for obj, _ in wrapped:
                del obj.run
        return {k: statistics.median(v) for k, v in times.items()}

    def __repr__(self) -> str:
        return f"VirtualMachine({self.exe!r}, {self.device})"
