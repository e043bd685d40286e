"""tvmpy's parallel runtime: a small C thread pool that runs the LLVM backend's parallel loops.

Generated code calls ``tvmpy_parallel_run(f, closure)`` (see codegen/llvm_parallel.py) where
``f(closure)`` takes chunks of the loop from atomic counters in the closure until none are
left (first from the home shard of ``tvmpy_parallel_thread_index()``: 0 for the caller, a
worker's fixed slot + 1), so ``f`` may run on any number of threads >= 1. The caller runs ``f`` itself and only
waits for the workers that actually *entered* the job; a worker the OS has not scheduled yet
never holds the caller up (libgomp's ``GOMP_parallel`` waits at its closing barrier for every
thread of the team, which costs milliseconds per loop on a loaded machine).

The pool (:data:`SOURCE`) is compiled once per process and source version with the system C
compiler (object bytes cached in memory and in a user cache folder) and linked into every shared
library whose code calls it, with hidden symbols: each library has its own pool, and exported
libraries need neither a compiler nor libgomp to load. Threads: ``TVM_NUM_THREADS``, else
``OMP_NUM_THREADS``, else the CPUs of the process's affinity mask (read when the pool starts);
workers are created on the first parallel loop, spin briefly waiting for the next job
(``TVMPY_PARALLEL_SPIN_US``, default 100 us; yielding the CPU between polls, so that a caller
the OS put on the same CPU is not held up), then sleep on a futex, and exit after 1 s idle.
A fork child starts with an empty pool (its parallel loops stay parallel). A parallel loop
started while the pool is busy (another Python thread, or from inside a parallel body) runs
serially on its caller. One symbol is exported (protected visibility), :data:`STOP_SYMBOL`:
it stops the workers and joins them (they are joinable threads for that), after which no
thread runs the library's code; runtime/module.py calls it before unloading a library that
no Python object uses any more.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections.abc import Sequence

from .linker import compile_c, compiler

__all__ = ["SOURCE", "LINK_TOKEN", "STOP_SYMBOL", "pool_object", "cache_path", "num_threads"]

#: the link_libs token that makes :func:`tvmpy.runtime.linker.link_shared` link the pool
LINK_TOKEN = "tvmpy_parallel"
#: the one exported function of the pool: stops and joins its workers (before dlclose)
STOP_SYMBOL = "__tvmpy_pool_stop"

SOURCE = r"""
/* tvmpy parallel runtime (generated from tvmpy/runtime/parallel_pool.py). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define HIDDEN __attribute__((visibility("hidden")))
#define CLOSED ((uint64_t)1 << 31)
#define ACTIVE ((uint64_t)CLOSED - 1)
#define IDLE_EXIT_NS 1000000000LL
#define STOP_SYMBOL __tvmpy_pool_stop

typedef void (*tvmpy_task)(void*);

/* state = [generation:32 | closed:1 | active:31]. Only the thread holding `busy` changes the
   generation and the closed bit; workers change `active`, only through a CAS that also checks
   generation and closed, so nobody enters a closed or older job. */
static _Atomic uint64_t g_state = CLOSED;
static _Atomic(tvmpy_task) g_f;
static _Atomic(void*) g_closure;
static _Atomic uint32_t g_seq;      /* futex word: bumped by every publication */
static _Atomic int g_sleepers;      /* workers in (or about to enter) futex_wait */
static _Atomic int g_busy;          /* try-lock held by the caller running a job */
static _Atomic int g_workers;       /* live worker threads */
static int g_nthreads;              /* team size, caller included; 0 = not configured */
/* Workers are joinable, so that STOP_SYMBOL can wait until none runs this library's code any
   more (it may then be unloaded). Slot k: 0 free, 1 running, 2 exited (to be joined). */
#define MAX_SLOTS 4096
static pthread_t g_tids[MAX_SLOTS];
static _Atomic int g_slot[MAX_SLOTS];
static int g_nslots;                /* slots ever used (high-water mark); owner of g_busy only */
static _Atomic int g_stop;          /* set by STOP_SYMBOL: every worker exits */
static long g_spin_ns = 100000;
static __thread int t_in_pool;      /* running inside a job: nested parallel loops are serial */
static __thread int t_index;        /* 0: a caller; worker in slot k: k + 1 (stable) */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int env_int(const char* name) {
  const char* s = getenv(name);
  if (!s || !*s) return 0;
  char* end;
  long v = strtol(s, &end, 10);
  return (*end == 0 && v > 0 && v < 4096) ? (int)v : 0;
}

static _Atomic int g_owner;          /* pid of the process that configured the pool */
static _Atomic int g_cfg_lock;       /* pid of the thread configuring it, 0 when free */

/* Configure the pool for this process: on first use, and in a fork child (which inherits the
   parent's counters but none of its threads, so it starts with an empty pool). */
static void configure(void) {
  int me = (int)getpid();
  for (;;) {  /* lock; a lock held by another pid was taken by a thread of the parent before
                 a fork and will never be released here: take it over */
    int holder = 0;
    if (atomic_compare_exchange_weak(&g_cfg_lock, &holder, me)) break;
    if (holder != 0 && holder != me &&
        atomic_compare_exchange_weak(&g_cfg_lock, &holder, me)) break;
    sched_yield();
  }
  if (atomic_load(&g_owner) != me) {
    int n = env_int("TVM_NUM_THREADS");
    if (!n) n = env_int("OMP_NUM_THREADS");
    if (!n) {
      cpu_set_t set;
      if (sched_getaffinity(0, sizeof(set), &set) == 0) n = CPU_COUNT(&set);
    }
    if (n < 1) n = 1;
    const char* spin = getenv("TVMPY_PARALLEL_SPIN_US");
    if (spin && *spin) g_spin_ns = atol(spin) * 1000L;
    atomic_store(&g_workers, 0);
    atomic_store(&g_sleepers, 0);
    for (int k = 0; k < g_nslots; ++k)  /* a fork child: the parent's workers do not exist */
      atomic_store(&g_slot[k], 0);
    g_nslots = 0;
    atomic_store(&g_stop, 0);
    atomic_store(&g_busy, 0);
    atomic_store(&g_state, atomic_load(&g_state) | CLOSED);
    g_nthreads = n;
    atomic_store(&g_owner, me);  /* last: other threads skip configure once they see it */
  }
  atomic_store(&g_cfg_lock, 0);
}

/* The team size (caller included) of this process's pool, configured on first use: the
   generated code asks it before its first launch, to cut the loop into that many shards. */
HIDDEN int tvmpy_parallel_num_threads(void) {
  if (g_nthreads <= 0) configure();
  return g_nthreads > 0 ? g_nthreads : 1;
}

/* This thread's index in the team: 0 for the caller of a job, k + 1 for the worker in slot k.
   A worker keeps its slot (and so its index) across jobs, so a parallel loop that gives each
   index the same share of its iterations in every job (the generated code's home shards) has
   each thread touch the same data as in the previous loop: the data its own cache holds. */
HIDDEN int tvmpy_parallel_thread_index(void) {
  return t_index;
}

/* Try to join the open job of `state` s; 1 when this thread ran it. */
static int try_join(uint64_t s) {
  if (!atomic_compare_exchange_strong(&g_state, &s, s + 1)) return 0;
  /* The CAS succeeded on the current generation while it was open, and it reads (acquire)
     the value the caller published with release after writing f and closure. f and closure
     are rewritten only by a later caller, after it closed this job and saw active == 0 (our
     decrement below is a release), so the values read here are this job's. */
  tvmpy_task f = atomic_load_explicit(&g_f, memory_order_relaxed);
  void* closure = atomic_load_explicit(&g_closure, memory_order_relaxed);
  t_in_pool = 1;
  f(closure);
  t_in_pool = 0;
  atomic_fetch_sub_explicit(&g_state, 1, memory_order_release);
  return 1;
}

static void* worker_main(void* arg) {
  int slot = (int)(intptr_t)arg;
  t_index = slot + 1;
  uint32_t last_gen = 0xffffffffu;  /* the last job seen: joined, or found closed */
  int first = 1;
  long long idle_since = now_ns();
  for (;;) {
    if (atomic_load_explicit(&g_stop, memory_order_acquire)) break;
    uint64_t s = atomic_load_explicit(&g_state, memory_order_acquire);
    uint32_t gen = (uint32_t)(s >> 32);
    if ((first || gen != last_gen) && !(s & CLOSED)) {
      if (try_join(s)) {
        last_gen = gen;
        first = 0;
        idle_since = now_ns();
      }
      continue;  /* joined, or the state changed under us: look again */
    }
    if (gen != last_gen) idle_since = now_ns();  /* jobs are coming: stay */
    last_gen = gen;
    first = 0;
    /* no job: spin for a while (the next loop of a model usually follows within
       microseconds), then sleep until a publication or the idle timeout */
    long long t0 = now_ns(), t = t0;
    int found = 0;
    while (t - t0 < g_spin_ns) {
      for (int k = 0; k < 64; ++k) {
        uint64_t s2 = atomic_load_explicit(&g_state, memory_order_relaxed);
        if ((uint32_t)(s2 >> 32) != last_gen ||
            atomic_load_explicit(&g_stop, memory_order_relaxed)) { found = 1; break; }
        cpu_relax();
      }
      if (found) break;
      /* polite: a thread waiting for this CPU (the caller itself, when the OS woke this
         worker on the caller's CPU; or another process) runs first, instead of waiting up to
         the whole spin time for this worker to give up */
      sched_yield();
      t = now_ns();
    }
    if (found) continue;
    if (t - idle_since >= IDLE_EXIT_NS) break;
    uint32_t seq = atomic_load(&g_seq);
    atomic_fetch_add(&g_sleepers, 1);
    /* seq_cst: either the publisher sees our sleeper count, or we see its new state (or
       the stop request, which bumps g_seq after setting g_stop) */
    if ((uint32_t)(atomic_load(&g_state) >> 32) == last_gen && !atomic_load(&g_stop)) {
      long long left = IDLE_EXIT_NS - (t - idle_since);
      struct timespec ts = {(time_t)(left / 1000000000LL), (long)(left % 1000000000LL)};
      syscall(SYS_futex, &g_seq, FUTEX_WAIT_PRIVATE, seq, &ts, NULL, 0);
    }
    atomic_fetch_sub(&g_sleepers, 1);
  }
  atomic_store(&g_slot[slot], 2);  /* joined by the next spawn_workers or STOP_SYMBOL */
  atomic_fetch_sub(&g_workers, 1);
  return NULL;
}

/* Join the workers that exited (idle); the caller holds g_busy. */
static void reap_workers(void) {
  for (int k = 0; k < g_nslots; ++k) {
    if (atomic_load(&g_slot[k]) == 2) {
      pthread_join(g_tids[k], NULL);
      atomic_store(&g_slot[k], 0);
    }
  }
}

static void spawn_workers(void) {
  int want = g_nthreads - 1;
  int have = atomic_load(&g_workers);
  if (have >= want) return;
  reap_workers();
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  sigset_t all, old;
  sigfillset(&all);  /* workers never take the process's asynchronous signals (SIGINT...) */
  static const int sync_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP};
  for (unsigned k = 0; k < sizeof(sync_signals) / sizeof(sync_signals[0]); ++k)
    sigdelset(&all, sync_signals[k]);  /* a fault in a kernel is still reported normally */
  pthread_sigmask(SIG_SETMASK, &all, &old);
  for (int k = 0; have < want && k < MAX_SLOTS; ++k) {
    if (atomic_load(&g_slot[k]) != 0) continue;
    atomic_store(&g_slot[k], 1);
    atomic_fetch_add(&g_workers, 1);
    if (pthread_create(&g_tids[k], &attr, worker_main, (void*)(intptr_t)k) != 0) {
      atomic_store(&g_slot[k], 0);
      atomic_fetch_sub(&g_workers, 1);
      break;  /* no more threads: the caller and the workers that exist do the work */
    }
    if (k >= g_nslots) g_nslots = k + 1;
    ++have;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
}

HIDDEN void tvmpy_parallel_run(tvmpy_task f, void* closure) {
  if (t_in_pool) { f(closure); return; }  /* nested: serial */
  if (atomic_load_explicit(&g_owner, memory_order_acquire) != (int)getpid()) configure();
  if (g_nthreads <= 1 || atomic_exchange_explicit(&g_busy, 1, memory_order_acquire)) {
    f(closure);  /* one thread, or another caller owns the pool: run serially */
    return;
  }
  spawn_workers();
  atomic_store_explicit(&g_f, f, memory_order_relaxed);
  atomic_store_explicit(&g_closure, closure, memory_order_relaxed);
  uint64_t s = atomic_load_explicit(&g_state, memory_order_relaxed);  /* closed, active 0 */
  uint32_t gen = (uint32_t)(s >> 32) + 1;
  atomic_store(&g_state, (uint64_t)gen << 32);  /* publish: open, active 0 (seq_cst) */
  atomic_fetch_add(&g_seq, 1);
  if (atomic_load(&g_sleepers) > 0)
    syscall(SYS_futex, &g_seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
  t_in_pool = 1;
  f(closure);
  t_in_pool = 0;
  /* close: no new entries; then wait for the workers that entered (they are running f, which
     ends as soon as the shared chunk counter is exhausted) */
  s = atomic_fetch_or_explicit(&g_state, CLOSED, memory_order_acq_rel) | CLOSED;
  for (int k = 0; (s & ACTIVE) != 0; ++k) {
    if (k < 2000) cpu_relax(); else sched_yield();
    s = atomic_load_explicit(&g_state, memory_order_acquire);
  }
  atomic_store_explicit(&g_busy, 0, memory_order_release);
}

/* Exported (found with dlsym; protected: never interposed): stop every worker and wait until
   each has exited, so that no thread runs this library's code and it can be unloaded. The
   runtime calls it before dlclose; a later parallel loop starts the pool again. */
__attribute__((visibility("protected"))) void STOP_SYMBOL(void) {
  if (atomic_load(&g_owner) != (int)getpid()) return;  /* no worker of ours in this process */
  while (atomic_exchange(&g_busy, 1)) sched_yield();  /* no job in flight from now on */
  atomic_store(&g_stop, 1);
  atomic_fetch_add(&g_seq, 1);
  syscall(SYS_futex, &g_seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
  for (int k = 0; k < g_nslots; ++k) {
    if (atomic_load(&g_slot[k]) != 0) {
      pthread_join(g_tids[k], NULL);
      atomic_store(&g_slot[k], 0);
    }
  }
  g_nslots = 0;
  atomic_store(&g_stop, 0);
  atomic_store(&g_busy, 0);
}
"""

def _env_threads(name: str) -> int:
    """``name``'s value when it is a thread count the pool accepts (1..4095), else 0."""
    # as the pool's strtol: leading white space, an optional sign, digits to the end
    t = os.environ.get(name, "").lstrip(" \t\n\v\f\r")
    digits = t[1:] if t[:1] in ("+", "-") else t
    v = int(digits) if digits.isascii() and digits.isdigit() else 0
    return v if 0 < v < 4096 and t[:1] != "-" else 0


def num_threads() -> int:
    """The team size a parallel loop started by this process would get (the pool's rule, read
    now): ``TVM_NUM_THREADS``, else ``OMP_NUM_THREADS``, else the CPUs of the affinity mask.
    (TVM's ``MaxConcurrency``: the thread count tuning records are measured at.)"""
    n = _env_threads("TVM_NUM_THREADS") or _env_threads("OMP_NUM_THREADS")
    if not n:
        try:
            n = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            n = os.cpu_count() or 1
    return max(1, n)


CFLAGS = ("-O2", "-std=gnu11", "-fPIC", "-fvisibility=hidden", "-pthread")

_lock = threading.Lock()
_objects: dict[str, bytes] = {}


def _key(cmd: list[str]) -> str:
    h = hashlib.sha256()
    h.update(SOURCE.encode())
    h.update("\0".join(cmd + list(CFLAGS)).encode())
    return h.hexdigest()[:24]


def cache_path(key: str) -> str:
    """Where the compiled pool with ``key`` is kept: ``$XDG_CACHE_HOME/tvmpy`` or
    ``~/.cache/tvmpy``, else a per-user folder in the temporary directory."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tvmpy", f"parallel_pool-{key}.o")


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data if data[:4] == b"\x7fELF" else None


def _write(path: str, data: bytes) -> bool:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return True
    except OSError:
        return False


def pool_object(cc: Sequence[str] | None = None) -> bytes:
    """The pool's object file, compiled on first use with ``cc`` (a compiler argv; default the
    configured ``CC``), e.g. a cross compiler for an AArch64 library. Cached per compiler
    command (which names its target: ``aarch64-linux-gnu-gcc``, ``zig cc -target ...``)."""
    cmd = compiler(list(cc) if cc is not None else None)
    key = _key(cmd)
    with _lock:
        obj = _objects.get(key)
        if obj is not None:
            return obj
        uid = os.getuid() if hasattr(os, "getuid") else 0
        paths = [cache_path(key),
                 os.path.join(tempfile.gettempdir(), f"tvmpy-{uid}", f"parallel_pool-{key}.o")]
        for p in paths:
            obj = _read(p)
            if obj is not None:
                break
        else:
            obj = compile_c(SOURCE, CFLAGS, name="tvmpy_parallel_pool", cc=cmd)
            for p in paths:
                if _write(p, obj):
                    break
        _objects[key] = obj
        return obj
