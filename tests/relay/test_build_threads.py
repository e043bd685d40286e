"""Build contexts are per thread: two threads building the same model at once, each inside its
own PassContext (opt level), target and autotvm dispatch context (its own tuning log), see
only their own settings. Barriers hold both threads inside their contexts at the same time."""

from __future__ import annotations

import threading
import time

import numpy as np

import tvmpy as tvm
from tvmpy import autotvm, relay
from tvmpy.autotvm.measure.measure import MeasureInput, MeasureResult
from tvmpy.autotvm.task import TaskExtractEnv, dispatcher
from tvmpy.contrib import graph_executor

TIMEOUT = 60  # seconds a barrier waits (a deadlock fails the test instead of hanging it)
N, K, M = 1, 40, 24  # the weight a graph input: dense stays unpacked at every opt level


def _model():
    x = relay.var("x", shape=(N, K))
    w = relay.var("w", shape=(M, K))
    return tvm.IRModule.from_expr(relay.Function([x, w], relay.nn.relu(relay.nn.dense(x, w))))


def _meet(barrier, what):
    try:
        barrier.wait(TIMEOUT)
    except threading.BrokenBarrierError:
        raise AssertionError(f"the other build never reached {what}: did one thread's context "
                             "answer both threads?") from None


class _Recording(autotvm.task.ApplyHistoryBest):
    """The history context, recording which thread each of its answers went to; the first
    answer waits until the other thread's context has answered too."""

    def __init__(self, path, barrier):
        super().__init__(path)
        self.answers: list[tuple[int, int]] = []  # (thread id, config index)
        self.barrier = barrier

    def _query_inside(self, target, workload):
        cfg = super()._query_inside(target, workload)
        if cfg is not None and workload is not None and workload[0] == "dense.x86":
            self.answers.append((threading.get_ident(), cfg.index))
            if len(self.answers) == 1:
                _meet(self.barrier, "its own dispatch context")
        return cfg


class _Seen:
    """A pass instrument: what the first pass of this build sees, once both builds are inside
    their contexts."""

    def __init__(self, barrier):
        self.barrier = barrier
        self.seen: dict | None = None

    def run_before_pass(self, mod, info):
        if self.seen is None:
            _meet(self.barrier, "its first pass")
            ctx = tvm.transform.PassContext.current()
            self.seen = {"opt_level": ctx.opt_level, "instrument": ctx.instruments[0] is self,
                         "target": str(tvm.target.Target.current()),
                         "dispatch": autotvm.DispatchContext.current}


def test_two_threads_build_with_their_own_contexts(tmp_path):
    mod = _model()
    rng = np.random.default_rng(12)
    wv = rng.standard_normal((M, K)).astype("float32")
    xv = rng.standard_normal((N, K)).astype("float32")
    with tvm.transform.PassContext(opt_level=3):
        (task,) = autotvm.task.extract_from_program(mod, {}, "llvm")
    space = task.config_space
    picks = {"a": 1, "b": len(space) - 2}  # two different configs of the one dense workload
    logs = {}
    for side, idx in picks.items():
        logs[side] = tmp_path / f"{side}.log"
        autotvm.record.save_to_file(
            [(MeasureInput(task.target, task, space.get(idx)),
              MeasureResult((1e-3,), 0, 0.1, time.time()))], logs[side])
    settings = {"a": (0, "llvm"), "b": (3, "llvm -num-cores=2")}
    enter, query = threading.Barrier(2), threading.Barrier(2)
    results: dict = {}
    errors: list = []

    def build(side):
        opt, target = settings[side]
        try:
            seen = _Seen(enter)
            with _Recording(str(logs[side]), query) as history:
                with tvm.transform.PassContext(opt_level=opt, instruments=[seen]):
                    lib = relay.build(mod, target=target)
                    after = tvm.transform.PassContext.current().opt_level
            gm = graph_executor.GraphModule(lib["default"](tvm.cpu()))
            gm.set_input("x", xv)
            gm.set_input("w", wv)
            gm.run()
            results[side] = (seen.seen, history, after, gm.get_output(0).numpy())
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append((side, e))
            enter.abort()
            query.abort()

    threads = [threading.Thread(target=build, args=(side,)) for side in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(2 * TIMEOUT)
    assert not errors, errors
    idents = {side: t.ident for side, t in zip(("a", "b"), threads)}
    want = np.maximum(xv @ wv.T, 0)
    for side, (seen, history, after, out) in results.items():
        opt, target = settings[side]
        assert seen["opt_level"] == opt and after == opt and seen["instrument"]
        assert seen["target"] == target
        assert seen["dispatch"] is history
        # every dense query of this thread went to its own log, and got its own config
        assert history.answers and {a[0] for a in history.answers} == {idents[side]}
        assert {a[1] for a in history.answers} == {picks[side]}
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    assert set(results) == {"a", "b"}


def test_a_new_thread_starts_at_the_root_contexts():
    seen = {}

    def child():
        seen["dispatch"] = autotvm.DispatchContext.current
        seen["extract"] = TaskExtractEnv.current
        seen["pass"] = tvm.transform.PassContext.current().opt_level
        seen["target"] = tvm.target.Target.current()

    with autotvm.apply_history_best([]) as history, TaskExtractEnv(), \
            tvm.transform.PassContext(opt_level=0), tvm.target.Target("llvm"):
        assert autotvm.DispatchContext.current is history
        t = threading.Thread(target=child)
        t.start()
        t.join(TIMEOUT)
    assert seen == {"dispatch": dispatcher.FALLBACK, "extract": None, "pass": 2, "target": None}
    assert autotvm.DispatchContext.current is dispatcher.FALLBACK
