"""The shared pass infrastructure (tvmpy.transform): Sequential's order and gating, the
thread-local PassContext, instruments, tir's PrimFuncPass and add_lower_pass phases 0-3,
relay's FunctionPass, and the DUMP_IR / DEBUG helper at both levels."""

import threading

import numpy as np
import pytest

import tvmpy as tvm
import tvmpy.transform as T
from tvmpy import relay, te, tir
from tvmpy.config import config
from tvmpy.te.schedule_ops import schedule_to_primfunc
from tvmpy.tir.transform import lower_intrin


def _recorder(log, name, opt_level=0, required=None):
    @T.module_pass(opt_level=opt_level, name=name, required=required)
    def record(mod, ctx):
        log.append(name)
        return mod

    return record


def _relay_mod():
    x = relay.var("x", shape=(2, 3))
    y = relay.add(relay.add(relay.const(np.ones((2, 3), "float32")),
                            relay.const(np.ones((2, 3), "float32"))), x)
    return tvm.IRModule.from_expr(relay.Function([x], y))


def test_transform_package_imports_neither_relay_nor_tir():
    import ast
    import pathlib

    root = pathlib.Path(T.__file__).parent
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                assert not mod.startswith(("relay", "tir")), (path.name, mod)
                assert not mod.startswith((".relay", ".tir", "..relay", "..tir")), path.name


def test_sequential_order_and_skipping_rules():
    log = []
    passes = [_recorder(log, "A", 0), _recorder(log, "B", 3), _recorder(log, "C", 1)]
    seq = T.Sequential(passes)
    mod = _relay_mod()
    with T.PassContext(opt_level=1):
        seq(mod)
    assert log == ["A", "C"]
    log.clear()
    with T.PassContext(opt_level=3):
        seq(mod)
    assert log == ["A", "B", "C"]
    log.clear()
    with T.PassContext(opt_level=0, required_pass=["B"]):  # required beats opt_level
        seq(mod)
    assert log == ["A", "B"]
    log.clear()
    with T.PassContext(opt_level=3, required_pass=["B"], disabled_pass=["B", "A"]):
        seq(mod)  # disabled beats required
    assert log == ["C"]
    log.clear()
    passes[1](mod)  # a pass called directly always runs
    assert log == ["B"]


def test_print_ir(capsys):
    mod = _relay_mod()
    assert T.Sequential([T.PrintIR("here")])(mod) is mod
    assert "PrintIR(here):\ndef @main(" in capsys.readouterr().out


def test_required_pass_runs_first_and_pass_info():
    log = []
    T.register_pass("RecordFirst", lambda: _recorder(log, "RecordFirst"))
    needs = _recorder(log, "Needs", 2, required=["RecordFirst"])
    assert isinstance(needs.info, T.PassInfo)
    assert (needs.info.name, needs.info.opt_level, needs.info.required) == (
        "Needs", 2, ["RecordFirst"])
    T.Sequential([needs])(_relay_mod())
    assert log == ["RecordFirst", "Needs"]


def test_pass_context_is_thread_local():
    barrier = threading.Barrier(2)
    seen = {}

    def work(level):
        with T.PassContext(opt_level=level, config={"relay.FuseOps.max_depth": level + 1}):
            barrier.wait()  # both contexts are active now
            ctx = T.PassContext.current()
            log = []
            T.Sequential([_recorder(log, "L2", 2)])(_relay_mod())
            seen[level] = (ctx.opt_level, ctx.config["relay.FuseOps.max_depth"], log)
            barrier.wait()

    threads = [threading.Thread(target=work, args=(lvl,)) for lvl in (0, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {0: (0, 1, []), 3: (3, 4, ["L2"])}
    assert T.PassContext.current().opt_level == 2  # the default outside any `with`


def test_pass_context_config_keys_validated():
    with pytest.raises(ValueError, match="unsupported config 'tir.no_such_key'"):
        T.PassContext(config={"tir.no_such_key": 1})
    assert "tir.add_lower_pass" in T.PassContext.list_configs()


def test_instruments_see_every_pass_call():
    class Spy:
        def __init__(self):
            self.events = []

        def enter_pass_ctx(self):
            self.events.append("enter")

        def exit_pass_ctx(self):
            self.events.append("exit")

        def should_run(self, mod, info):
            return info.name != "Skipped"

        def run_before_pass(self, mod, info):
            self.events.append("before " + info.name)

        def run_after_pass(self, mod, info):
            self.events.append("after " + info.name)

    spy, log = Spy(), []
    with T.PassContext(instruments=[spy]):
        T.Sequential([_recorder(log, "Ran"), _recorder(log, "Skipped")], name="seq")(
            _relay_mod())
    assert log == ["Ran"]
    assert spy.events == ["enter", "before seq", "before Ran", "after Ran", "after seq", "exit"]


def _sched(n=16):
    a = te.placeholder((n, n), name="a")
    b = te.compute((n, n), lambda i, j: te.sigmoid(a[i, j]), name="b")
    s = te.create_schedule(b.op)
    _, j = s[b].op.axis
    s[b].vectorize(j)
    return s, [a, b]


def _stores(func):
    out = []
    tir.stmt_functor.post_order_visit(func.body, lambda n: out.append(n)
                                      if isinstance(n, tir.BufferStore) else None)
    return out


def test_add_lower_pass_phases(monkeypatch):
    # the C target gets the generic sigmoid rule, so LowerIntrin's effect is visible
    monkeypatch.setitem(lower_intrin.RULES, "c", dict(lower_intrin.GENERIC_RULES))
    seen = {}

    def recorder(phase):
        @tir.transform.prim_func_pass(opt_level=0, name=f"Record{phase}")
        def record(func, mod, ctx):
            assert isinstance(mod, tvm.IRModule) and ctx is T.PassContext.current()
            text = str(func)
            seen[phase] = {
                "dims": {len(st.buffer.shape) for st in _stores(func)},
                "ramp": "ramp(" in text,
                "sigmoid": "sigmoid(" in text,
            }
            return func

        return record

    s, args = _sched()
    phases = [(p, recorder(p)) for p in (3, 0, 2, 1)]
    with T.PassContext(config={"tir.add_lower_pass": phases}):
        f = tvm.lower(s, args, target="c")
    assert f.attrs.get("tir.lowered") is True
    assert seen[0]["dims"] == {2} and not seen[0]["ramp"]  # before flattening
    assert seen[1]["dims"] == {1} and not seen[1]["ramp"]  # flattened, not vectorized
    assert seen[2]["ramp"] and seen[2]["sigmoid"]  # vectorized, intrinsics not lowered
    assert seen[3]["ramp"] and not seen[3]["sigmoid"]  # LowerIntrin ran
    # a plain callable PrimFunc -> PrimFunc is accepted; the pass is gated by the context
    calls = []
    plain = [(1, lambda func: calls.append(1) or func)]
    with T.PassContext(config={"tir.add_lower_pass": plain}):
        tvm.lower(s, args)
    with T.PassContext(config={"tir.add_lower_pass": [(1, recorder(9))]},
                       disabled_pass=["Record9"]):
        tvm.lower(s, args)
    assert calls == [1] and 9 not in seen


def test_add_lower_pass_changes_the_built_code():
    n = 8
    a = te.placeholder((n,), name="a")
    b = te.compute((n,), lambda i: a[i] + 1.0, name="b")
    s = te.create_schedule(b.op)

    @tir.transform.prim_func_pass(opt_level=0)
    def double_store(func, mod, ctx):
        def post(op):
            if isinstance(op, tir.BufferStore):
                return tir.BufferStore(op.buffer, op.value * tir.const(2.0, "float32"),
                                       op.indices)
            return None

        return func.with_body(tir.stmt_functor.ir_transform(func.body, None, post,
                                                            ["tir.BufferStore"]))

    with T.PassContext(config={"tir.add_lower_pass": [(3, double_store)]}):
        f = tvm.build(s, [a, b])
    x = np.arange(n, dtype="float32")
    y = tvm.nd.empty((n,))
    f(tvm.nd.array(x), y)
    np.testing.assert_allclose(y.numpy(), 2 * (x + 1))


def test_tir_passes_on_a_module_from_lower():
    s, args = _sched(8)
    mod = tvm.lower(s, args, name="sig")  # an IRModule, as TVM 0.7+ returns
    out = tir.transform.Simplify()(mod)
    assert isinstance(out, tvm.IRModule) and out["sig"].attrs.get("tir.lowered")
    assert isinstance(tir.transform.Simplify(), T.Pass)
    # every pipeline pass has the TVM factory form; a module of form-1 IR goes through them
    f1 = schedule_to_primfunc(*_sched(8), "form1")
    seq = T.Sequential([tir.transform.StorageFlatten(), tir.transform.Simplify(),
                        tir.transform.LoopPartition(), tir.transform.VectorizeLoop(),
                        tir.transform.InjectVirtualThread(),
                        tir.transform.InjectDoubleBuffer(), tir.transform.StorageRewrite(),
                        tir.transform.UnrollLoop(), tir.transform.RemoveNoOp(),
                        tir.transform.LowerIntrin()])
    lowered = seq(tvm.IRModule.from_expr(f1))["main"]
    assert "ramp(" in str(lowered)
    tir.analysis.verify_lowered(lowered)


def test_prim_func_pass_forms():
    f1 = schedule_to_primfunc(*_sched(4), "k")
    x = relay.var("x", shape=(2,))
    mod = tvm.IRModule({"k": f1, "main": relay.Function([x], x)})

    @tir.transform.prim_func_pass(opt_level=1, name="Tag")
    def tag(func, mod, ctx):
        return func.with_attr("tagged", True)

    out = tag(mod)
    assert out["k"].attrs["tagged"] and out["main"] is mod["main"]  # relay kept as is
    assert tag.info.opt_level == 1 and tag.name == "Tag"
    drop = tir.transform.prim_func_pass(lambda f, m, c: None, opt_level=0)
    assert "k" not in drop(mod) and "main" in drop(mod)

    @tir.transform.prim_func_pass(opt_level=0)
    class SetAttr:
        def __init__(self, value):
            self.value = value

        def transform_function(self, func, mod, ctx):
            return func.with_attr("value", self.value)

    assert SetAttr(7)(mod)["k"].attrs["value"] == 7
    with pytest.raises(TypeError, match="must return a tir.PrimFunc"):
        tir.transform.prim_func_pass(lambda f, m, c: 1, opt_level=0)(mod)


def test_relay_function_pass_on_the_shared_infra():
    assert relay.transform.Sequential is T.Sequential
    assert relay.transform.PassContext is T.PassContext
    assert relay.IRModule is tvm.IRModule is tvm.ir.IRModule

    @relay.transform.function_pass(opt_level=2)
    def double(func, mod, ctx):
        return relay.Function(func.params, relay.multiply(func.body, relay.const(2.0)))

    assert isinstance(double, T.Pass) and double.name == "double"
    with T.PassContext(opt_level=1):
        out = T.Sequential([double])(_relay_mod())
    assert "multiply" not in str(out)
    with T.PassContext(opt_level=2):
        out = T.Sequential([relay.transform.FoldConstant(), double])(_relay_mod())
    x = np.ones((2, 3), "float32")
    got = relay.create_executor("debug", out).evaluate()(x)
    np.testing.assert_allclose(got, 2 * (x + 2))


def test_dump_and_debug_at_both_levels(tmp_path, capsys):
    x = relay.var("x", shape=(4,))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.exp(x) + relay.const(1.0)))
    with config(DUMP_IR=str(tmp_path), DEBUG=1), T.PassContext(opt_level=2):
        relay.build(mod, target="llvm")
    relay_files = sorted(p.name for p in (tmp_path / "relay").iterdir())
    assert relay_files[0] == "00_input.txt" and relay_files[1].startswith("01_")
    assert [int(f[:2]) for f in relay_files] == list(range(len(relay_files)))
    (func_dir,) = (tmp_path / "tir").iterdir()
    tir_files = sorted(p.name for p in func_dir.iterdir())
    assert tir_files[:4] == ["00_input.txt", "01_LegalizeStorageDtypes.txt",
                             "02_StorageFlatten.txt", "03_Simplify.txt"]
    assert tir_files[-1].endswith("_LowerIntrin.txt")
    out = capsys.readouterr().out
    assert "[relay.build] 01 " in out and f"[tir {func_dir.name}] 02 StorageFlatten" in out


def test_debug_pass_budget_names_slow_passes(caplog, capsys):
    """Under DEBUG, a pass (or one fused function's lowering) over PASS_BUDGET_MS logs a
    warning naming it; without DEBUG nothing is timed or logged."""
    import logging
    import time

    from tvmpy.transform.passes import run_sequence

    def slow(mod, ctx):
        time.sleep(0.05)
        return mod

    seq = T.Sequential([T.module_pass(slow, opt_level=0, name="SlowPass")])
    x = relay.var("x", shape=(4,))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.exp(x) + relay.const(1.0)))
    caplog.set_level(logging.WARNING, logger="tvmpy.transform")
    trace = T.PassTrace("unit")
    with config(DEBUG=1, PASS_BUDGET_MS=10.0):
        run_sequence(seq.passes, mod, T.PassContext(), T.PassTrace("unit"))
    msgs = [r.getMessage() for r in caplog.records if r.name == "tvmpy.transform"]
    assert len(msgs) == 1 and "pass SlowPass (unit pass 01) took" in msgs[0], msgs
    assert "PASS_BUDGET_MS" in msgs[0]
    caplog.clear()
    with config(DEBUG=1, PASS_BUDGET_MS=1e9):
        run_sequence(seq.passes, mod, T.PassContext(), T.PassTrace("unit"))
    with config(PASS_BUDGET_MS=0.0):  # DEBUG off: no budget
        run_sequence(seq.passes, mod, T.PassContext(), trace)
    assert not [r for r in caplog.records if r.name == "tvmpy.transform"]
    with config(DEBUG=1, PASS_BUDGET_MS=0.0), T.PassContext(opt_level=2):
        relay.build(mod, target="llvm")
    msgs = [r.getMessage() for r in caplog.records if r.name == "tvmpy.transform"]
    assert any(m.startswith("lowering fused_exp_add") and " took " in m for m in msgs), msgs
    assert any("(tir " in m for m in msgs), msgs
    capsys.readouterr()
