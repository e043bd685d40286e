"""The interpreter's GPU semantics: a kernel's blocks and threads, shared memory, barriers.

A *kernel* is an outermost ``AttrStmt("thread_extent")`` whose direct chain of thread_extent
attributes binds every thread tag used in it (the form UnifyThreadBinding produces; IR with
thread attributes nested deeper keeps the serial-loop meaning). It runs as on a GPU:

- blocks run one after the other; within a block, every thread runs the body with its own
  environment (``local`` allocations are per thread), and ``shared`` allocations are one
  memory per block (the first thread to reach the allocation creates it, poisoned);
- threads run one at a time in a fixed order (thread 0, 1, ...; :func:`thread_order` reverses
  it), each until it reaches
  ``tir.tvm_storage_sync`` or its end; the barrier passes when every thread has reached it.
  A thread that reads shared memory before the barrier that should have protected it sees
  what the threads before it wrote (and poison for the rest), exactly the data race the
  barrier prevents, so a missing barrier changes the result;
- a barrier that only some threads reach (or reached a different number of times) raises
  RuntimeError ("barrier divergence");
- ``tvm_warp_shuffle_down(mask, v, offset, width, warp_size)`` exchanges values between the
  threads at the point of the call (a block-wide exchange between two barriers: every thread
  of the block must reach it, as the warp's lanes must on a GPU); so does
  ``tvm_warp_shuffle(mask, v, src_lane, width, warp_size)`` (lane ``src_lane`` of the caller's
  ``width``-lane segment); ``tvm_warp_activemask()`` is all ones.

Threads of a block with barriers are Python threads passing one token (deterministic order);
without barriers they are plain sequential calls.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from . import expr as E
from . import stmt as S
from .functor import post_order_visit

__all__ = ["KERNEL_KEY", "BARRIER_KEY", "LAUNCH_KEY", "TID_KEY", "kernel_chain", "run_kernel",
           "warp_shuffle_down", "warp_shuffle", "thread_order"]

KERNEL_KEY = 1  # env key: the block's shared memories (Python ids are never 1, 2, 3)
BARRIER_KEY = 2  # env key: the barrier callable of the running thread
LAUNCH_KEY = 3  # env key: name -> kernel runner, for tir.gpu_launch

TID_KEY = 4  # env key: the thread's linear id in its block (threadIdx.x fastest)
SYNC_OP = "tir.tvm_storage_sync"
SHUFFLE_DOWN_OP = "tir.tvm_warp_shuffle_down"
SHUFFLE_OP = "tir.tvm_warp_shuffle"
ACTIVEMASK_OP = "tir.tvm_warp_activemask"
#: seconds a block may wait for one phase before the interpreter gives up
PHASE_TIMEOUT = 300.0
_ORDER = ["forward"]


@contextlib.contextmanager
def thread_order(order: str) -> Iterator[None]:
    """Run the threads of each block in ``order``: "forward" (thread 0 first, the default) or
    "reverse" (the last thread first). A race in which a thread reads what a lower-numbered
    thread wrote without a barrier shows up only in the reverse order, and vice versa."""
    if order not in ("forward", "reverse"):
        raise ValueError(f"thread_order: expected 'forward' or 'reverse', got {order!r}")
    _ORDER.append(order)
    try:
        yield
    finally:
        _ORDER.pop()


def kernel_chain(s: S.AttrStmt) -> tuple[list[S.AttrStmt], S.Stmt, bool] | None:
    """(thread attrs at the top, body, has barriers) when ``s`` is a kernel in unified form."""
    chain: list[S.AttrStmt] = []
    node: Any = s
    while isinstance(node, S.AttrStmt) and node.attr_key == "thread_extent" and isinstance(
            node.node, E.IterVar):
        chain.append(node)
        node = node.body
    inner: list[Any] = []
    sync: list[Any] = []

    def f(n: Any) -> None:
        if isinstance(n, S.AttrStmt) and n.attr_key == "thread_extent":
            inner.append(n)
        elif isinstance(n, E.Call) and n.op in (SYNC_OP, SHUFFLE_DOWN_OP, SHUFFLE_OP):
            sync.append(n)

    post_order_visit(node, f)
    if inner:
        return None
    return chain, node, bool(sync)


class _Abort(BaseException):
    pass


class _Block:
    """Runs the threads of one block in a fixed order, switching at barriers."""

    def __init__(self, n: int):
        self.n = n
        self.sems = [threading.Semaphore(0) for _ in range(n)]
        self.done = [False] * n
        self.count = [0] * n
        self.finished_in_phase = False
        self.error: BaseException | None = None
        self.all_done = threading.Event()
        self.lock = threading.Lock()

    def barrier(self, i: int) -> None:
        self.count[i] += 1
        self._pass(i)
        if not self.sems[i].acquire(timeout=PHASE_TIMEOUT):
            raise RuntimeError("GPU interpreter: a barrier waited too long")
        if self.error is not None:
            raise _Abort()

    def _pass(self, i: int) -> None:
        with self.lock:
            alive = [j for j in range(self.n) if not self.done[j]]
            if not alive:
                self.all_done.set()
                return
            nxt = next((j for j in alive if j > i), None)
            if nxt is None:  # every live thread is at the barrier: the next phase begins
                nxt = alive[0]
                counts = {self.count[j] for j in alive}
                if self.finished_in_phase or len(counts) != 1:
                    self.error = RuntimeError(
                        "barrier divergence: tir.tvm_storage_sync reached by some threads of a "
                        "block and not by others (a barrier inside a thread-dependent branch "
                        "or loop)")
                    for s in self.sems:
                        s.release()
                    self.all_done.set()
                    return
                self.finished_in_phase = False
            self.sems[nxt].release()

    def _main(self, i: int, fn: Callable[[Callable[[], None]], None]) -> None:
        try:
            if not self.sems[i].acquire(timeout=PHASE_TIMEOUT):
                raise RuntimeError("GPU interpreter: a thread waited too long to start")
            if self.error is not None:
                return
            with np.errstate(all="ignore"):
                fn(lambda: self.barrier(i))
        except _Abort:
            return
        except BaseException as err:  # reported by run()
            with self.lock:
                if self.error is None:
                    self.error = err
            for s in self.sems:
                s.release()
            self.all_done.set()
            return
        with self.lock:
            self.done[i] = True
            if any(not d for d in self.done):
                self.finished_in_phase = True
        self._pass(i)

    def run(self, fns: list[Callable[[Callable[[], None]], None]]) -> None:
        threads = [threading.Thread(target=self._main, args=(i, f), daemon=True)
                   for i, f in enumerate(fns)]
        for t in threads:
            t.start()
        self.sems[0].release()
        if not self.all_done.wait(timeout=PHASE_TIMEOUT * 2):
            raise RuntimeError("GPU interpreter: a block did not finish")
        for t in threads:
            t.join(timeout=PHASE_TIMEOUT)
        if self.error is not None:
            raise self.error


def run_kernel(env: dict, chain: list[S.AttrStmt], extents: list[Any], body: Callable[[dict], None],
               has_sync: bool, as_int: Callable[[Any], int]) -> None:
    """Run a kernel's body for every block and thread (see the module docstring)."""
    blocks = [(a, as_int(e)) for a, e in zip(chain, extents)
              if not a.node.thread_tag.startswith("threadIdx")]
    threads = [(a, as_int(e)) for a, e in zip(chain, extents)
               if a.node.thread_tag.startswith("threadIdx")]
    dtype_of = {id(a.node.var): np.dtype(a.node.var.dtype) for a in chain}
    # threads ordered z, y, x: threadIdx.x fastest (the hardware's linear thread id)
    threads.sort(key=lambda t: "zyx".find(t[0].node.thread_tag[-1]))
    tspace = list(itertools.product(*[range(n) for _, n in threads]))
    if _ORDER[-1] == "reverse":
        tspace.reverse()
    for bidx in itertools.product(*[range(n) for _, n in blocks]):
        shared: dict[int, Any] = {}
        base = dict(env)
        base[KERNEL_KEY] = shared
        for (a, _), v in zip(blocks, bidx):
            base[id(a.node.var)] = dtype_of[id(a.node.var)].type(v)

        def thread_env(tid: tuple[int, ...], base: dict = base) -> dict:
            e = dict(base)
            lin = 0
            for (a, n), v in zip(threads, tid):  # tid: slowest tag first
                lin = lin * n + v
                e[id(a.node.var)] = dtype_of[id(a.node.var)].type(v)
            e[TID_KEY] = lin
            return e

        if not has_sync:
            for tid in tspace:
                body(thread_env(tid))
            continue

        def make(tid: tuple[int, ...], thread_env: Callable[..., dict] = thread_env
                 ) -> Callable[[Callable[[], None]], None]:
            def go(barrier: Callable[[], None]) -> None:
                e = thread_env(tid)
                e[BARRIER_KEY] = barrier
                body(e)

            return go

        _Block(len(tspace)).run([make(t) for t in tspace])


def warp_shuffle_down(env: dict, key: int, value: Any, offset: int, width: int,
                      warp_size: int) -> Any:
    """``tvm_warp_shuffle_down``: every thread of the block publishes ``value``, then reads
    the one of lane ``lane + offset`` of its ``width``-lane segment (its own past the end)."""
    barrier = env.get(BARRIER_KEY)
    shared = env.get(KERNEL_KEY)
    if barrier is None or shared is None:
        raise RuntimeError("tvm_warp_shuffle_down outside a GPU kernel")
    tid = env[TID_KEY]
    slot = shared.setdefault(("shfl", key), {})
    slot[tid] = value
    barrier()
    lane = tid % warp_size
    src = tid + offset if lane % width + offset < width else tid
    out = slot.get(src, value)
    barrier()
    return out


def warp_shuffle(env: dict, key: int, value: Any, src_lane: int, width: int,
                 warp_size: int) -> Any:
    """``tvm_warp_shuffle``: every thread of the block publishes ``value``, then reads the one
    of lane ``src_lane % width`` of its ``width``-lane segment of the warp."""
    barrier = env.get(BARRIER_KEY)
    shared = env.get(KERNEL_KEY)
    if barrier is None or shared is None:
        raise RuntimeError("tvm_warp_shuffle outside a GPU kernel")
    tid = env[TID_KEY]
    slot = shared.setdefault(("shfl", key), {})
    slot[tid] = value
    barrier()
    lane = tid % warp_size
    src = tid - lane + lane // width * width + src_lane % width
    if src not in slot:
        raise RuntimeError(f"tvm_warp_shuffle: lane {src_lane} of thread {tid}'s segment is not "
                           "a thread of the block")
    out = slot[src]
    barrier()
    return out
