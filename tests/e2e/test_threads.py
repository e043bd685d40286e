"""One executor used from several threads at once (issue 24, point 4).

- ``infer(**inputs)`` (graph executor) and ``invoke`` (VM) from 8 threads: every result right;
- the stateful set_input/run/get_output sequence interleaved by 8 threads: every value a thread
  gets is its own input's result, or the call raises ConcurrentUseError; never another
  thread's result, never another exception (static and symbolic shapes, the VM's stateful API);
- the interleavings one by one (two threads driven step by step), the hand-overs that must keep
  working (a worker runs what another thread set; a lock around each sequence) and the views
  handed out before a second thread came, which keep their values.

Inputs are random and non-zero; the references are numpy.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.contrib import graph_executor
from tvmpy.contrib.graph_executor import ConcurrentUseError
from tvmpy.relay.analysis import free_vars
from tvmpy.runtime.vm import VirtualMachine

from .util import run_in_threads

THREADS, ITERS = 8, 150
K, H, O = 32, 48, 8  # x: (n, K) -> dense H, relu -> dense O


def _rand(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random float32 data, |x| in [0.25, 2], both signs (never zero)."""
    return (rng.uniform(0.25, 2.0, shape) * rng.choice([-1.0, 1.0], shape)).astype("float32")


PARAMS = (lambda r: {"w1": _rand(r, (H, K)) / 4, "b1": _rand(r, (H,)),
                     "w2": _rand(r, (O, H)) / 4})(np.random.default_rng(0))


def _mod(batch) -> tvm.IRModule:
    x = relay.var("x", shape=(batch, K))
    w1, b1, w2 = (relay.var(n, shape=PARAMS[n].shape) for n in ("w1", "b1", "w2"))
    y = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(x, w1), b1))
    out = relay.nn.dense(y, w2)
    return tvm.IRModule.from_expr(relay.Function(free_vars(out), out))


def _ref(x: np.ndarray) -> np.ndarray:
    y = np.maximum(x.astype("float64") @ PARAMS["w1"].T + PARAMS["b1"], 0)
    return y @ PARAMS["w2"].T.astype("float64")


def _wrong(got: np.ndarray, x: np.ndarray) -> str | None:
    want = _ref(x)
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    err = float(np.max(np.abs(got - want)))
    return None if err <= 1e-4 * (1 + float(np.max(np.abs(want)))) else f"max error {err:.3g}"


def _build(batch) -> object:
    with tvm.transform.PassContext(opt_level=3):
        return relay.build(_mod(batch), target="llvm", params=PARAMS)


@pytest.fixture(scope="module")
def static_lib():
    return _build(4)


@pytest.fixture(scope="module")
def dynamic_lib():
    return _build(relay.Any())


def _batch(k: int, i: int, dynamic: bool) -> int:
    return 1 + (k + i) % 5 if dynamic else 4


def _in_threads(work: Callable[[int], list[str]]) -> list[str]:
    """``work(k)`` on THREADS threads started together (util.run_in_threads)."""
    return run_in_threads(work, THREADS)


@pytest.mark.parametrize("dynamic", [False, True])
def test_infer_from_eight_threads_is_always_right(static_lib, dynamic_lib, dynamic):
    m = graph_executor.GraphModule((dynamic_lib if dynamic else static_lib)["default"](tvm.cpu()))

    def work(k: int) -> list[str]:
        rng, out = np.random.default_rng(100 + k), []
        for i in range(ITERS):
            x = _rand(rng, (_batch(k, i, dynamic), K))
            (got,) = m.infer(x=x)
            if bad := _wrong(got, x):
                out.append(f"thread {k} iteration {i}: {bad}")
        return out

    assert _in_threads(work) == []


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("style", ["set_run_get", "run_kwargs_get"])
def test_stateful_api_from_eight_threads_is_right_or_refused(static_lib, dynamic_lib, dynamic,
                                                             style):
    """Threads interleave set_input/run/get_output on one module: a thread gets its own
    result or ConcurrentUseError, never another thread's result (which it used to)."""
    m = graph_executor.GraphModule((dynamic_lib if dynamic else static_lib)["default"](tvm.cpu()))
    counts = {"ok": 0, "refused": 0}
    lock = threading.Lock()

    def work(k: int) -> list[str]:
        rng, out = np.random.default_rng(200 + k), []
        for i in range(ITERS):
            x = _rand(rng, (_batch(k, i, dynamic), K))
            try:
                if style == "set_run_get":
                    m.set_input("x", x)
                    m.run()
                else:
                    m.run(x=x)
                got = m.get_output(0).numpy()
            except ConcurrentUseError as e:
                assert "thread" in str(e) and "infer(" in str(e)
                with lock:
                    counts["refused"] += 1
                continue
            if bad := _wrong(got, x):
                out.append(f"thread {k} iteration {i}: {bad}")
            with lock:
                counts["ok"] += 1
        return out

    assert _in_threads(work) == []
    assert counts["ok"] + counts["refused"] == THREADS * ITERS and counts["ok"] > 0, counts


def test_vm_from_eight_threads(dynamic_lib):
    """invoke on one VM from 8 threads (one segment executor, plans per batch size): all right;
    its stateful set_input/run/get_outputs: right or ConcurrentUseError."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exe = relay.vm.compile(_mod(relay.Any()), "llvm", params=PARAMS)
    vm = VirtualMachine(exe, tvm.cpu())
    refused = []

    def work(k: int) -> list[str]:
        rng, out = np.random.default_rng(300 + k), []
        for i in range(ITERS):
            x = _rand(rng, (_batch(k, i, True), K))
            if bad := _wrong(vm.invoke("main", x).numpy(), x):
                out.append(f"invoke: thread {k} iteration {i}: {bad}")
            y = _rand(rng, (_batch(k, i + 1, True), K))
            try:
                vm.set_input("main", y)
                vm.run()
                got = vm.get_outputs()[0].numpy()
            except ConcurrentUseError:
                refused.append(1)
                continue
            if bad := _wrong(got, y):
                out.append(f"stateful: thread {k} iteration {i}: {bad}")
        return out

    assert _in_threads(work) == []
    assert len(refused) < THREADS * ITERS


# ---- the interleavings, one at a time -----------------------------------------------------------
class _Other:
    """A second thread that runs the functions it is given, one at a time, on request."""

    def __init__(self) -> None:
        self._todo: list = []
        self._cv = threading.Condition()
        self._t = threading.Thread(target=self._loop, name="other", daemon=True)
        self._t.start()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._todo:
                    self._cv.wait()
                fn, box = self._todo.pop(0)
            if fn is None:
                return
            try:
                box["value"] = fn()
            except BaseException as e:  # handed back to the caller
                box["error"] = e
            box["done"].set()

    def __call__(self, fn: Callable[[], object]) -> object:
        box: dict = {"done": threading.Event()}
        with self._cv:
            self._todo.append((fn, box))
            self._cv.notify()
        assert box["done"].wait(60), "the other thread hangs"
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def stop(self) -> None:
        with self._cv:
            self._todo.append((None, None))
            self._cv.notify()
        self._t.join(10)


@pytest.fixture
def other():
    o = _Other()
    yield o
    o.stop()


def _xs(n: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [_rand(rng, (4, K)) for _ in range(n)]


def test_input_set_again_by_another_thread_refuses_the_run(static_lib, other):
    m = graph_executor.GraphModule(static_lib["default"](tvm.cpu()))
    xa, xb, _ = _xs()
    m.set_input("x", xa)
    other(lambda: m.set_input("x", xb))
    with pytest.raises(ConcurrentUseError, match=r"input 'x', which this thread set, was set "
                                                 r"again by thread 'other'"):
        m.run()
    other(m.run)
    assert _wrong(other(lambda: m.get_output(0).numpy()), xb) is None
    m.set_input("x", xa)  # a new sequence of this thread: fine
    m.run()
    assert _wrong(m.get_output(0).numpy(), xa) is None


def test_outputs_replaced_by_another_threads_run_are_refused(static_lib, other):
    m = graph_executor.GraphModule(static_lib["default"](tvm.cpu()))
    xa, xb, _ = _xs()
    m.run(x=xa)
    other(lambda: m.run(x=xb))
    with pytest.raises(ConcurrentUseError, match=r"outputs of this thread's last run\(\) were "
                                                 r"replaced by a run\(\) in thread 'other'"):
        m.get_output(0)
    out = np.empty((4, O), "float32")
    with pytest.raises(ConcurrentUseError):
        m.get_output(0, out)
    assert _wrong(other(lambda: m.get_output(0).numpy()), xb) is None


def test_hand_overs_keep_working(static_lib, other):
    """A thread that sets and another that runs and reads (a worker given the module); a
    thread that reads what another ran (run_in_executor); a lock around each sequence."""
    m = graph_executor.GraphModule(static_lib["default"](tvm.cpu()))
    xa, xb, xc = _xs()
    m.set_input("x", xa)
    other(m.run)
    assert _wrong(other(lambda: m.get_output(0).numpy()), xa) is None
    m.set_input("x", xb)
    other(m.run)
    assert _wrong(m.get_output(0).numpy(), xb) is None  # this thread did not run: no check
    lock = threading.Lock()

    def sequence(x: np.ndarray) -> np.ndarray:
        with lock:
            m.set_input("x", x)
            m.run()
            return m.get_output(0).numpy()

    for x in (xa, xb, xc):
        assert _wrong(sequence(x), x) is None
        assert _wrong(other(lambda x=x: sequence(x)), x) is None


def test_views_from_before_a_second_thread_keep_their_values(static_lib, other):
    """One thread's get_output is a view (TVM's semantics: its next run overwrites it); once
    another thread uses the module, get_output returns copies, and a view still referenced
    keeps the values of the run it came from (the outputs move to fresh storage)."""
    m = graph_executor.GraphModule(static_lib["default"](tvm.cpu()))
    xa, xb, xc = _xs()
    m.run(x=xa)
    view = m.get_output(0)
    m.run(x=xb)  # one thread: the view follows its runs
    assert _wrong(view.numpy(), xb) is None
    other(lambda: m.run(x=xc))
    assert _wrong(view.numpy(), xb) is None  # not overwritten by the other thread's run
    got = other(lambda: m.get_output(0))
    assert _wrong(got.numpy(), xc) is None
    other(lambda: m.run(x=xa))
    assert _wrong(got.numpy(), xc) is None  # a copy: the later run does not change it
    assert _wrong(view.numpy(), xb) is None


def test_views_move_for_symbolic_shapes_too(dynamic_lib, other):
    m = graph_executor.GraphModule(dynamic_lib["default"](tvm.cpu()))
    rng = np.random.default_rng(9)
    xa, xb = _rand(rng, (3, K)), _rand(rng, (3, K))
    m.run(x=xa)
    view = m.get_output(0)
    other(lambda: m.run(x=xb))
    assert _wrong(view.numpy(), xa) is None
    assert _wrong(other(lambda: m.get_output(0).numpy()), xb) is None


def test_vm_stateful_interleaving_is_refused(other):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exe = relay.vm.compile(_mod(4), "llvm", params=PARAMS)
    vm = VirtualMachine(exe, tvm.cpu())
    xa, xb, _ = _xs()
    vm.set_input("main", xa)
    other(lambda: vm.set_input("main", xb))
    with pytest.raises(ConcurrentUseError, match=r"input 'x' of @main, which this thread set"):
        vm.run()
    vm.run(xa)
    other(lambda: vm.run(xb))
    with pytest.raises(ConcurrentUseError, match="get_outputs"):
        vm.get_outputs()
    assert _wrong(other(lambda: vm.get_outputs()[0].numpy()), xb) is None
    # one input at a time, mixed between threads: the first thread's input was replaced
    vm.set_one_input("main", "x", xa)
    other(lambda: vm.set_one_input("main", "x", xb))
    with pytest.raises(ConcurrentUseError):
        vm.invoke("main")


def test_parameters_are_configuration_not_a_threads_input(static_lib, other):
    """create() loads the parameters in the creating thread; another thread reloading them
    does not make this thread's next run an error (they are no input of its sequence). A
    worker sets its input and runs. get_input from a shared module is a read-only copy."""
    m = graph_executor.GraphModule(static_lib["default"](tvm.cpu()))
    xa, xb, _ = _xs()
    other(lambda: m.load_params(static_lib.get_params()))
    m.run(x=xa)
    assert _wrong(m.get_output(0).numpy(), xa) is None
    other(lambda: m.set_input("x", xb))
    other(m.run)
    assert _wrong(other(lambda: m.get_output(0).numpy()), xb) is None
    got = m.get_input("x")
    np.testing.assert_array_equal(got.numpy(), xb)
    with pytest.raises(ValueError, match="read-only"):
        got.copyfrom(xa)
