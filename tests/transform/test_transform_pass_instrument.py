"""Pass instruments as TVM's ``tvm.ir.instrument`` documents them: the decorator and the
subclass forms, the calling order, ``should_run`` skipping, ``PassTimingInstrument``,
``override_instruments``, and what happens when an instrument method raises."""

import re

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import relay
from tvmpy.ir.instrument import PassInstrument, PassTimingInstrument, pass_instrument


def _mod():
    a, b = relay.var("a", shape=(2, 5)), relay.var("b", shape=(2, 5))
    return tvm.IRModule.from_expr(relay.multiply(relay.add(a, b), relay.subtract(a, b)))


def _noop(name, log=None):
    @tvm.transform.module_pass(opt_level=1, name=name)
    def fn(mod, ctx):
        if log is not None:
            log.append(f"pass {name}")
        return mod

    return fn


@pass_instrument
class Recorder:
    """Logs every call to a shared list, tagged with its id; ``fail`` names a method that
    raises after logging."""

    def __init__(self, tag, log, fail=None, skip=()):
        self.tag, self.log, self.fail, self.skip = tag, log, fail, skip

    def _note(self, what):
        self.log.append(f"{self.tag} {what}")
        if what == self.fail:
            raise RuntimeError(f"{self.tag} broke in {what}")

    def enter_pass_ctx(self):
        self._note("enter")

    def exit_pass_ctx(self):
        self._note("exit")

    def should_run(self, mod, info):
        self._note("should_run")
        return info.name not in self.skip

    def run_before_pass(self, mod, info):
        self._note("before")

    def run_after_pass(self, mod, info):
        self._note("after")


def test_names_and_forms():
    assert tvm.instrument is tvm.ir.instrument
    assert issubclass(Recorder, PassInstrument) and Recorder.__name__ == "Recorder"
    assert pass_instrument(Recorder) is Recorder  # already an instrument: unchanged

    class Sub(PassInstrument):
        def __init__(self):
            super().__init__()
            self.names = []

        def run_before_pass(self, mod, info):
            self.names.append(info.name)

    sub = Sub()
    with tvm.transform.PassContext(instruments=[sub]):
        relay.transform.InferType()(_mod())
    assert sub.names == ["InferType"] and sub.name == "Sub"
    with pytest.raises(TypeError, match="decorates a class"):
        pass_instrument(lambda: None)
    with pytest.raises(TypeError, match=r"write Recorder\(\)"):
        tvm.transform.PassContext(instruments=[Recorder])
    with pytest.raises(TypeError, match="not a pass instrument"):
        tvm.transform.PassContext(instruments=[object()])


def test_call_order_two_instruments_two_passes():
    log = []
    with tvm.transform.PassContext(instruments=[Recorder("A", log), Recorder("B", log)]):
        mod = _noop("p1", log)(_mod())
        _noop("p2", log)(mod)
    per_pass = ["A should_run", "B should_run", "A before", "B before", "{}", "A after",
                "B after"]
    expected = (["A enter", "B enter"] + [x.format("pass p1") for x in per_pass]
                + [x.format("pass p2") for x in per_pass] + ["A exit", "B exit"])
    assert log == expected


def test_should_run_false_skips_but_every_instrument_is_asked():
    log = []
    ran = []
    insts = [Recorder("A", log, skip=("p1",)), Recorder("B", log)]
    with tvm.transform.PassContext(instruments=insts):
        out = _noop("p1", ran)(_mod())
    assert ran == [] and isinstance(out, tvm.IRModule)
    assert log == ["A enter", "B enter", "A should_run", "B should_run", "A exit", "B exit"]
    # a required pass is not offered to should_run
    log.clear()
    with tvm.transform.PassContext(instruments=insts, required_pass=["p1"]):
        _noop("p1", ran)(_mod())
    assert ran == ["pass p1"] and "A should_run" not in log


def test_pass_timing_instrument_tree_and_reset():
    timing = PassTimingInstrument()
    seq = tvm.transform.Sequential([relay.transform.FoldConstant(), _noop("Leaf")],
                                   name="Outer")
    with tvm.transform.PassContext(opt_level=3, instruments=[timing]):
        seq(_mod())
        text = timing.render()
    lines = text.splitlines()
    assert lines[0].startswith("Outer: ")
    # the sequence's passes are its children: one tab deeper
    assert any(ln.startswith("\tFoldConstant: ") for ln in lines)
    assert any(ln.startswith("\tLeaf: ") for ln in lines)
    pat = re.compile(r"^\t*\w+: \d+us \[-?\d+us\] \(\d+\.\d\d%; \d+\.\d\d%\)$")
    assert all(pat.match(ln) for ln in lines), text
    assert "(100.00%; 100.00%)" in lines[0]  # the only top-level pass
    # leaving the context clears the records
    assert PassTimingInstrument.render() == ""


def test_override_instruments_on_the_current_context():
    log = []
    ctx = tvm.transform.PassContext.current()
    assert ctx.instruments == []
    timing = PassTimingInstrument()
    try:
        ctx.override_instruments([Recorder("A", log), timing])
        assert log == ["A enter"]
        relay.transform.InferType()(_mod())
        assert "InferType" in timing.render()
        assert log[-2:] == ["A before", "A after"]
    finally:
        ctx.override_instruments(None)
    assert log[-1] == "A exit" and ctx.instruments == []
    assert timing.render() == ""
    relay.transform.InferType()(_mod())
    assert log[-1] == "A exit"  # no longer instrumented


def test_enter_raises_exits_the_entered_ones_and_does_not_enter_the_context():
    log = []
    ctx = tvm.transform.PassContext(instruments=[Recorder("A", log), Recorder("B", log),
                                                 Recorder("C", log, fail="enter"),
                                                 Recorder("D", log)])
    with pytest.raises(RuntimeError, match="C broke in enter"):
        with ctx:
            raise AssertionError("the body must not run")
    assert log == ["A enter", "B enter", "C enter", "B exit", "A exit"]
    assert ctx.instruments == []
    assert tvm.transform.PassContext.current() is not ctx


def test_exit_raises_drops_the_rest():
    log = []
    ctx = tvm.transform.PassContext(instruments=[Recorder("A", log),
                                                 Recorder("B", log, fail="exit"),
                                                 Recorder("C", log)])
    with pytest.raises(RuntimeError, match="B broke in exit"):
        with ctx:
            pass
    assert log == ["A enter", "B enter", "C enter", "A exit", "B exit"]
    assert ctx.instruments == [] and tvm.transform.PassContext.current() is not ctx


def test_override_with_a_broken_enter_leaves_no_instruments():
    log = []
    ctx = tvm.transform.PassContext.current()
    with pytest.raises(RuntimeError, match="A broke in enter"):
        ctx.override_instruments([Recorder("A", log, fail="enter")])
    assert ctx.instruments == [] and log == ["A enter"]


@pytest.mark.parametrize("fail", ["should_run", "before", "after"])
def test_errors_inside_a_pass_call(fail):
    log = []
    with pytest.raises(RuntimeError, match=f"A broke in {fail}"):
        with tvm.transform.PassContext(instruments=[Recorder("A", log, fail=fail),
                                                    Recorder("B", log)]):
            _noop("p", log)(_mod())
    expected = {
        "should_run": ["A should_run"],
        "before": ["A should_run", "B should_run", "A before"],
        "after": ["A should_run", "B should_run", "A before", "B before", "pass p", "A after"],
    }[fail]
    assert log == ["A enter", "B enter"] + expected + ["A exit", "B exit"]


def test_pass_raising_skips_run_after_but_exits():
    log = []

    @tvm.transform.module_pass(opt_level=0)
    def broken(mod, ctx):
        log.append("pass")
        raise ValueError("bad pass")

    with pytest.raises(ValueError, match="bad pass"):
        with tvm.transform.PassContext(instruments=[Recorder("A", log)]):
            broken(_mod())
    assert log == ["A enter", "A should_run", "A before", "pass", "A exit"]


def test_counting_instrument_over_relay_build_matches_numpy():
    @pass_instrument
    class Count:
        def __init__(self):
            self.before = self.after = 0

        def enter_pass_ctx(self):
            self.before = self.after = 0

        def run_before_pass(self, mod, info):
            self.before += 1

        def run_after_pass(self, mod, info):
            self.after += 1

    count = Count()
    with tvm.transform.PassContext(opt_level=3, instruments=[count]):
        lib = relay.build(_mod(), "llvm")
    assert count.before == count.after > 5
    from tvmpy.contrib import graph_executor

    m = graph_executor.GraphModule(lib["default"](tvm.cpu()))
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 2, 5)).astype("float32")
    m.set_input("a", a)
    m.set_input("b", b)
    m.run()
    tvm.testing.assert_allclose(m.get_output(0).numpy(), (a + b) * (a - b), rtol=1e-6)


def test_printing_instruments(capsys):
    from tvmpy.ir.instrument import PassPrintingInstrument, PrintAfterAll, PrintBeforeAll

    with tvm.transform.PassContext(instruments=[PrintBeforeAll(), PrintAfterAll()]):
        relay.transform.InferType()(_mod())
    out = capsys.readouterr().out
    assert "Before Running Pass: PassInfo(InferType" in out
    assert "After Running Pass: PassInfo(InferType" in out and "def @main" in out
    with tvm.transform.PassContext(instruments=[PassPrintingInstrument(["FoldConstant"], [])]):
        relay.transform.InferType()(_mod())
        relay.transform.FoldConstant()(_mod())
    out = capsys.readouterr().out
    assert "Print IR before: FoldConstant" in out and "InferType\n" not in out
