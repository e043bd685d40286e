"""``with Target(...)`` and ``with config(...)`` are per thread: two threads see their own scope,
and a thread started inside a ``with`` block sees the defaults."""

import threading

import pytest

from tvmpy import config
from tvmpy.target import Target, as_target, resolve_target


def _in_threads(*bodies):
    """Run each body in its own thread, all inside their scopes at once; return their results."""
    barrier = threading.Barrier(len(bodies))
    results: list = [None] * len(bodies)
    errors: list = []

    def run(i, body):
        try:
            results[i] = body(barrier)
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i, b)) for i, b in enumerate(bodies)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def _with_target(text):
    def body(barrier):
        with Target(text) as t:
            barrier.wait()  # both threads are inside their `with` now
            seen = Target.current()
            barrier.wait()
            assert seen is t
            return str(seen)
    return body


def test_two_threads_see_their_own_target():
    assert _in_threads(_with_target("llvm -mcpu=znver4"), _with_target("c")) == [
        "llvm -mcpu=znver4", "c"]
    assert Target.current() is None


def _with_debug(level):
    def body(barrier):
        with config.config(DEBUG=level):
            barrier.wait()
            seen = config.get("DEBUG")
            barrier.wait()
            return seen
    return body


def test_two_threads_see_their_own_config(monkeypatch):
    monkeypatch.delenv("DEBUG", raising=False)
    assert _in_threads(_with_debug(3), _with_debug(1)) == [3, 1]
    assert config.get("DEBUG") == 0


def test_thread_started_inside_with_sees_defaults(monkeypatch):
    monkeypatch.delenv("DUMP_IR", raising=False)
    seen = {}

    def child():
        seen["target"] = Target.current()
        seen["dump"] = config.get("DUMP_IR")

    with Target("c"), config.config(DUMP_IR="/tmp/x"):
        t = threading.Thread(target=child)
        t.start()
        t.join()
        assert str(Target.current()) == "c" and config.get("DUMP_IR") == "/tmp/x"
    assert seen == {"target": None, "dump": ""}


def test_as_target():
    t = Target("llvm")
    assert as_target(t) is t
    assert str(as_target("c")) == "c"
    assert str(as_target(None, default="c")) == "c"
    with pytest.raises(TypeError, match="target must be a string.*got NoneType None"):
        as_target(None)
    with pytest.raises(TypeError, match="got int 5"):
        as_target(5)


def test_resolve_target_given_then_current_then_llvm():
    """The one default-target rule (issue 30): the given target, else ``with Target``'s, else
    llvm; a new thread inside a ``with`` block falls back to llvm."""
    t = Target("c")
    assert resolve_target(t) is t and str(resolve_target("c")) == "c"
    assert resolve_target().kind == "llvm"
    with Target("c"):
        assert str(resolve_target()) == "c"
        assert str(resolve_target("llvm")).startswith("llvm")
        seen: list = []
        th = threading.Thread(target=lambda: seen.append(resolve_target().kind))
        th.start()
        th.join()
        assert seen == ["llvm"]
    with pytest.raises(TypeError, match="got int 5"):
        resolve_target(5)
