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
``set_input``, which copies into the input's own storage; ``set_input_zero_copy``, and with
``zero_copy_inputs`` (opt-in) ``run(**inputs)`` / ``infer``, bind a 64-byte aligned,
C-contiguous, writable numpy input of a static CPU graph in place instead: its pointer patched
into the plan's calls, executor.py ``_bind``);
on a CPU, from a plan's third run on,
one foreign call: a native function, JIT-compiled once per process, walks a table of the
plan's calls and their arguments (native_run.py; the Python loop between kernels ran on caches
the kernels had evicted, 1.5-3 us per kernel). Running before every input was set
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
On a GPU the same holds with device memory: one device buffer per storage, the dynamic ones
per plan (``storage.device_views``), the inputs copied into the plan's buffers by ``run()``.

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

**CUDA** (cuda_graph.py): the executor queues every launch and its ``set_input`` /
``get_output(i, out=...)`` copies on a stream of its own; with ``use_cuda_graph=True`` (or
``TVMPY_USE_CUDA_GRAPH=1``, or TVM's ``contrib.cuda_graph.cuda_graph_executor``) each plan's
launch sequence is captured as a CUDA graph after its first run and replayed with one
``cuGraphLaunch`` per run (host calls split it into segments; a capture the driver refuses falls
back to plain launches with a warning).

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

The package, by concern: ``parse.py`` (the graph JSON's nodes, checked), ``storage.py`` (arenas,
device buffers, the per-shape plans), ``executor.py`` (``GraphExecutor``), ``factory.py``
(``GraphExecutorFactory``), ``cuda_graph.py`` (the CUDA stream and graphs).
"""

from ..concurrency import ConcurrentUseError
from ..graph_json import GraphJSONError
from .executor import GraphExecutor, ProfileReport
from .factory import FACTORY_TYPE_KEY, PARAMS_SYMBOL, GraphExecutorFactory

__all__ = ["GraphExecutor", "GraphExecutorFactory", "GraphJSONError", "ProfileReport",
           "ConcurrentUseError", "PARAMS_SYMBOL", "FACTORY_TYPE_KEY"]
