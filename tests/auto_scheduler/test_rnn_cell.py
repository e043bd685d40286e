"""The LSTM/GRU recurrence (``nn.rnn_scan``) as an auto-scheduler task: its time step
(``topi.rnn.rnn_cell``) is what ``extract_tasks`` lists, weighted by occurrences x steps; a
record of the cell builds the recurrence around the record's schedule (one kernel, a tir loop
over time, a run-time sequence length kept); no record, a slower record or a bad record: the
untuned kernel. References: the op's numpy meaning (float64), onnxruntime."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import auto_scheduler, relay, te
from tvmpy.auto_scheduler import relay_integration
from tvmpy.driver import build
from tvmpy.relay.op import strategy as _strategy  # noqa: F401 - registers the strategies
from tvmpy.relay.op.rnn import padded_hidden, rnn_scan, rnn_scan_np
from tvmpy.runtime import cpu, ndarray
from tvmpy.topi import rnn

CELLS = [("LSTM", True), ("GRU", True), ("GRU", False)]


class _Attrs:
    def __init__(self, cell, hidden, reverse, lbr):
        self.cell, self.hidden, self.reverse, self.linear_before_reset = cell, hidden, reverse, lbr


def _host_ub(cell, n, hp):
    """The block of the packed ``R^T`` a build for the host reads (AlterOpLayout's
    ``_pack_rt``), or None where one block is the plain layout: it depends on the host's
    vector lanes (a 2-row LSTM of 32 units: one block of 32 with AVX-512, two of 16 with AVX2)."""
    ub = rnn.packed_block(cell, hp, tvm.target.Target("llvm").vector_lanes("float32"), n)
    return ub if hp // ub > 1 else None


def _cell_task(cell, n, hidden, lbr, deployed=False):
    """The cell's task: of the plain ``R^T`` layout, or (``deployed``) of the layout a model
    built for the host runs (packed where ``_host_ub`` says)."""
    hp = padded_hidden(hidden)
    key = rnn.rnn_cell_key(cell, n, hidden, hp, lbr, _host_ub(cell, n, hp) if deployed else None)
    return auto_scheduler.SearchTask(workload_key=key, target="llvm")


def _inputs(cell, t, n, hidden, rng):
    """Random scan inputs with the padded columns zero (as the frontends pad the weights)."""
    G, hp = rnn.GATES[cell], padded_hidden(hidden)

    def pad(a):
        a = a.reshape(*a.shape[:-1], G, hp).copy()
        a[..., hidden:] = 0
        return a.reshape(*a.shape[:-2], G * hp)

    xw = pad(rng.uniform(-1, 1, (t, n, G * hp)).astype("float32"))
    rt = pad(rng.uniform(-0.5, 0.5, (hidden, G * hp)).astype("float32"))
    h0 = rng.uniform(-1, 1, (n, hidden)).astype("float32")
    if cell == "LSTM":
        aux = rng.uniform(-1, 1, (n, hidden)).astype("float32")
    else:
        aux = rng.uniform(-1, 1, hp).astype("float32")
        aux[hidden:] = 0
    return xw, rt, h0, aux


def _stepped(cell, n, hidden, lbr, reverse, state):
    """The stepped kernel over a symbolic number of steps, the cell scheduled by ``state``."""
    G, hp = rnn.GATES[cell], padded_hidden(hidden)
    task = _cell_task(cell, n, hidden, lbr)
    sch, cell_tensors = task.compute_dag.apply_steps_from_state(state)
    xw = te.placeholder((te.var("T"), n, G * hp), "float32", "xw")
    rt = te.placeholder((hidden, G * hp), "float32", "rt")
    h0 = te.placeholder((n, hidden), "float32", "h0")
    aux = te.placeholder((n, hidden) if cell == "LSTM" else (hp,), "float32", "aux")
    outs = rnn.rnn_scan_stepped(xw, rt, h0, aux, cell, hidden, reverse, lbr, sch, cell_tensors)
    return build(te.create_schedule([o.op for o in outs]), [xw, rt, h0, aux, *outs], "llvm"), outs


@pytest.mark.parametrize("cell,lbr", CELLS)
@pytest.mark.parametrize("reverse", [False, True])
def test_tuned_step_scan_matches_numpy(cell, lbr, reverse):
    """Random sketches + annotations of the cell, run over 0, 1 and 7 steps (one kernel, the
    step count a run-time size), give the numpy meaning of rnn_scan; awkward sizes: batch 3,
    hidden 19 (padded to 32)."""
    n, hidden = 3, 19
    task = _cell_task(cell, n, hidden, lbr)
    states = auto_scheduler.sample_initial_population(task, 2, seed=11)
    assert states
    rng = np.random.default_rng(5)
    for state in states:
        _check_stepped(cell, n, hidden, lbr, reverse, state, rng)


def _check_stepped(cell, n, hidden, lbr, reverse, state, rng):
    """The stepped kernel built around ``state`` gives rnn_scan's numpy meaning over 7, 1
    and 0 steps (random inputs from ``rng``)."""
    mod, outs = _stepped(cell, n, hidden, lbr, reverse, state)
    n_real = 3 if cell == "LSTM" else 2
    for t in (7, 1, 0):
        ins = _inputs(cell, t, n, hidden, rng)
        want = rnn_scan_np(_Attrs(cell, hidden, reverse, lbr), *ins)
        args = [ndarray.array(a) for a in ins] + [
            ndarray.empty([t if not isinstance(getattr(d, "value", d), int) else int(d)
                           for d in o.shape], "float32") for o in outs]
        mod(*args)
        for k in range(n_real):
            np.testing.assert_allclose(args[4 + k].numpy(), want[k], rtol=1e-5, atol=2e-6,
                                       err_msg=f"{cell} lbr={lbr} T={t} output {k}\n{state}")


def _gate_stage_attached(state):
    """Whether the cell's gate GEMV (or its cache stage) is computed inside the epilogue's tiles
    (the slice-fusion sketch: a block of units, all its gates, then its state update)."""
    stages = state.stages
    return any(st.op_name.startswith("gates") and st.attach is not None
               and not stages[st.attach[0]].op_name.startswith("gates") for st in stages)


@pytest.mark.parametrize("cell,lbr", CELLS)
def test_slice_fused_cell_sketches_match_numpy(cell, lbr):
    """Every sketch of the cell, the slice-fused ones included (LSTM, GRU: the gates GEMV at the
    epilogue's tiles; GRU lbr=0's z/r gates feed two stages: not fused), randomly annotated and run
    as the stepped kernel forward and in reverse (one direction of a bidirectional layer) over
    7, 1 and 0 steps, gives rnn_scan's numpy meaning; batch 3, hidden 37 (padded to 48)."""
    import random

    from tvmpy.auto_scheduler.sketch_policy import annotate, generate_sketches

    n, hidden = 3, 37
    task = _cell_task(cell, n, hidden, lbr)
    sketches = generate_sketches(task)
    fused = [s for s in sketches if _gate_stage_attached(s)]
    assert fused  # GRU lbr=0: its candidate GEMV (elementwise rule)
    slice_fused = [s for s in fused if any(st.op_name in ("gates", "gates.local") and st.attach
                                           for st in s.stages)]
    assert len(slice_fused) == (4 if lbr else 0)
    rng, nrng = random.Random(13), np.random.default_rng(8)
    for i, sk in enumerate(fused):
        state = annotate(sk, rng, task.hardware_params)
        _check_stepped(cell, n, hidden, lbr, bool(i % 2), state, nrng)


@pytest.mark.parametrize("cell,lbr", [("LSTM", True), ("GRU", True)])
def test_stepped_kernel_keeps_the_step_vectorized(cell, lbr):
    """The stepped kernel keeps the vector loops of the step's schedule: its epilogue reads
    this step's state slot and writes the next one; with both slots in one buffer (different
    indices of one buffer) the vectorizer scalarized it (one scalar expf per lane)."""
    import random

    import tvmpy as tvm
    from tvmpy.auto_scheduler.loop_state import IteratorAnnotation
    from tvmpy.auto_scheduler.sketch_policy import annotate, generate_sketches

    n, hidden = 1, 64
    task = _cell_task(cell, n, hidden, lbr)
    sketches = [s for s in generate_sketches(task) if _gate_stage_attached(s)]
    rng = random.Random(0)
    last = "lstm_next" if cell == "LSTM" else "h_next"
    for _ in range(200):
        state = annotate(rng.choice(sketches), rng, task.hardware_params)
        its = state[state.stage_id(next(st.op for st in state.stages if st.op_name == last))].iters
        if its[-1].annotation == IteratorAnnotation.VECTORIZE:
            break
    else:
        pytest.fail("no annotation vectorizes the epilogue")
    G, hp = rnn.GATES[cell], padded_hidden(hidden)
    sch, cells = task.compute_dag.apply_steps_from_state(state)
    xw = te.placeholder((te.var("T"), n, G * hp), "float32", "xw")
    rt = te.placeholder((hidden, G * hp), "float32", "rt")
    h0 = te.placeholder((n, hidden), "float32", "h0")
    aux = te.placeholder((n, hidden) if cell == "LSTM" else (hp,), "float32", "aux")
    outs = rnn.rnn_scan_stepped(xw, rt, h0, aux, cell, hidden, False, lbr, sch, cells)
    text = str(tvm.lower(te.create_schedule([o.op for o in outs]), [xw, rt, h0, aux, *outs],
                         simple_mode=True))
    lines = [ln for ln in text.splitlines() if "sigmoid(" in ln]
    assert lines and all("ramp(" in ln for ln in lines), "\n".join(lines)


def test_stepped_refuses_another_cell():
    n, hidden = 2, 16
    task = _cell_task("LSTM", n, hidden, True)
    state = auto_scheduler.sample_initial_population(task, 1, seed=0)[0]
    sch, cells = task.compute_dag.apply_steps_from_state(state)
    xw = te.placeholder((4, 3, 4 * 16), "float32", "xw")  # batch 3, the cell is batch 2
    rt = te.placeholder((16, 64), "float32", "rt")
    h0 = te.placeholder((3, 16), "float32", "h0")
    with pytest.raises(ValueError, match="not the LSTM cell of batch 3"):
        rnn.rnn_scan_stepped(xw, rt, h0, h0, "LSTM", 16, False, True, sch, cells)


def test_cell_workload_rejects_bad_sizes():
    with pytest.raises(ValueError, match="multiple of 16"):
        rnn.rnn_cell_workload("LSTM", 1, 20, 20)
    with pytest.raises(ValueError, match="LSTM or GRU"):
        rnn.rnn_cell_workload("RNN", 1, 16, 16)


def _rnn_model(cell, n, hidden, lbr, t, layers=2, bidirectional=False):
    """A relay program of ``layers`` stacked recurrences (each direction one rnn_scan over the
    same cell shape) on an input projection of t steps (t may be relay.Any())."""
    G, hp = rnn.GATES[cell], padded_hidden(hidden)
    x = relay.var("x", shape=(t, n, G * hp))
    rng = np.random.default_rng(3)
    params, h = {}, None
    for layer in range(layers):
        dirs = []
        for d in range(2 if bidirectional else 1):
            p = f"l{layer}d{d}"
            # the next layer's projection depends on the last layer's output
            xw = x if h is None else x + relay.var(f"{p}_mix", shape=(1, 1, G * hp)) * relay.sum(
                h, axis=[2], keepdims=True)
            ins = _inputs(cell, 1, n, hidden, rng)
            for nm, a in zip(("rt", "h0", "aux"), ins[1:]):
                params[f"{p}_{nm}"] = a
            if h is not None:
                mix = rng.uniform(-0.1, 0.1, (1, 1, G, hp)).astype("float32")
                mix[..., hidden:] = 0
                params[f"{p}_mix"] = mix.reshape(1, 1, G * hp)
            out = rnn_scan(xw, *(relay.var(f"{p}_{nm}", shape=params[f"{p}_{nm}"].shape)
                                          for nm in ("rt", "h0", "aux")),
                                    cell=cell, hidden=hidden, reverse=bool(d), linear_before_reset=lbr)
            dirs.append(relay.TupleGetItem(out, 0))
        h = dirs[0] if len(dirs) == 1 else dirs[0] + dirs[1]
    f = relay.Function(relay.analysis.free_vars(h), h)
    return tvm.IRModule.from_expr(f), {k: tvm.nd.array(v) for k, v in params.items()}


@pytest.mark.parametrize("cell,lbr", CELLS)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_extract_tasks_lists_the_cell_weighted_by_steps(cell, lbr, bidirectional):
    """Two layers (one or two directions each) of the same cell over 7 steps: one cell task of
    weight layers x directions x 7; the recurrence is no longer reported as not tunable."""
    n, hidden = 2, 24
    mod, params = _rnn_model(cell, n, hidden, lbr, 7, 2, bidirectional)
    tasks, weights = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    cells = [(t, w) for t, w in zip(tasks, weights) if rnn.CELL_WORKLOAD in t.workload_key]
    assert len(cells) == 1, [t.workload_key for t in tasks]
    task, w = cells[0]
    ub = _host_ub(cell, n, 32)
    assert json.loads(task.workload_key) == [rnn.CELL_WORKLOAD, cell, n, hidden, 32,
                                             True if cell == "LSTM" else lbr] + ([ub] if ub else [])
    assert w == 2 * (2 if bidirectional else 1) * 7
    assert not any("rnn_scan" in i.desc for i in relay_integration.not_tuned())
    # the cell's FLOPs: the GEMV over the hidden rows dominates (2 N H G Hp multiply-adds)
    assert task.compute_dag.flop_ct() >= 2 * n * hidden * rnn.GATES[cell] * 32


def _log(tmp_path, task, state, cost=1e-6):
    log = str(tmp_path / "cell.json")
    auto_scheduler.save_records(log, [auto_scheduler.MeasureInput(task, state)],
                                [auto_scheduler.MeasureResult((cost,), 0, "", 0.0, 0.0)])
    return log


def _build_vm(mod, params, log=None):
    from tvmpy.relay import vm as relay_vm
    from tvmpy.runtime.vm import VirtualMachine

    cfg = {"relay.backend.use_auto_scheduler": log is not None}
    ctx = auto_scheduler.ApplyHistoryBest(log) if log else auto_scheduler.ApplyHistoryBest([])
    with ctx, tvm.transform.PassContext(opt_level=3, config=cfg):
        exe = relay_vm.compile(mod, "llvm", params=params)
    return VirtualMachine(exe, cpu(0))


def _spy(monkeypatch):
    from tvmpy.relay.op.strategy import rnn as srnn

    calls = []
    real = srnn.rnn_scan_stepped

    def spy(*a, **k):
        calls.append(a[4])
        return real(*a, **k)

    monkeypatch.setattr(srnn, "rnn_scan_stepped", spy)
    return calls


@pytest.mark.parametrize("cell,lbr", [("LSTM", True), ("GRU", False)])
def test_record_builds_with_a_dynamic_sequence(tmp_path, monkeypatch, cell, lbr):
    """A record of the cell, applied to a program over a run-time number of steps (relay.Any):
    the stepped kernel is built and gives the untuned build's result at 5 and 11 steps."""
    n, hidden = 2, 24
    mod, params = _rnn_model(cell, n, hidden, lbr, relay.Any(), 2, True)
    task = _cell_task(cell, n, hidden, lbr, deployed=True)
    log = _log(tmp_path, task, auto_scheduler.sample_initial_population(task, 1, seed=7)[0])
    calls = _spy(monkeypatch)
    ref = _build_vm(mod, params)
    assert calls == []
    tuned = _build_vm(mod, params, log)
    assert calls and set(calls) == {cell}
    G, hp = rnn.GATES[cell], padded_hidden(hidden)
    rng = np.random.default_rng(9)
    for t in (5, 11):
        x = rng.uniform(-1, 1, (t, n, G * hp)).astype("float32")
        want = ref.invoke("main", x=x).numpy()
        got = tuned.invoke("main", x=x).numpy()
        assert got.shape == (t, n, hidden)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_bad_record_warns_and_keeps_the_default(tmp_path, monkeypatch):
    """A record whose steps do not replay on the cell (a stage it does not have) is named in a
    warning and the untuned kernel is built."""
    n, hidden = 1, 16
    mod, params = _rnn_model("LSTM", n, hidden, True, 4, 1)
    task = _cell_task("LSTM", n, hidden, True)
    state = auto_scheduler.sample_initial_population(task, 1, seed=1)[0]
    log = _log(tmp_path, task, state)
    with open(log) as f:
        rec = json.loads(f.readline())
    text = json.dumps(rec)
    # point every step at a stage index the cell does not have
    bad = text.replace('"SP", 2', '"SP", 42').replace('["CA", 2', '["CA", 42')
    assert bad != text, text
    with open(log, "w") as f:
        f.write(bad + "\n")
    calls = _spy(monkeypatch)
    with pytest.warns(RuntimeWarning, match="topi.rnn_cell.*does not apply"):
        vm = _build_vm(mod, params, log)
    assert calls == []
    x = np.random.default_rng(0).uniform(-1, 1, (4, n, 64)).astype("float32")
    want = _build_vm(mod, params).invoke("main", x=x).numpy()
    np.testing.assert_allclose(vm.invoke("main", x=x).numpy(), want, rtol=1e-6, atol=1e-7)


def test_default_line_times_the_untuned_kernel_and_keeps_it(tmp_path, monkeypatch):
    """The safety net: the task scheduler's "default" line of a cell task is the untuned kernel
    over ``MEASURE_STEPS`` steps (per step); a record slower than it is not applied (the
    untuned kernel is built)."""
    n, hidden = 1, 16
    mod, params = _rnn_model("GRU", n, hidden, True, 3, 1)
    tasks, _ = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    task = next(t for t in tasks if rnn.CELL_WORKLOAD in t.workload_key)
    got = relay_integration.default_schedule_of(task)
    assert got is not None
    scans = [i for t in got[1] for i in t.op.input_tensors if i.op.tag == "rnn_scan"]
    assert scans and int(scans[0].op.input_tensors[0].shape[0]) == rnn.MEASURE_STEPS
    state = auto_scheduler.sample_initial_population(task, 1, seed=2)[0]
    log = _log(tmp_path, task, state, cost=10.0)  # a record far slower than any kernel
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        costs = relay_integration.measure_default_schedules([task], log, number=2, repeat=1,
                                                             min_repeat_ms=1)
    assert 0 < costs[0] < 10.0
    with open(log) as f:
        assert any('"default"' in line and "topi.rnn_cell" in line for line in f)
    assert auto_scheduler.ApplyHistoryBest(log).query(task.target, task.workload_key) is None
    calls = _spy(monkeypatch)
    _build_vm(mod, params, log)
    assert calls == []


@pytest.mark.parametrize("name,cell,runs", [("lstm_lm", "LSTM", 14), ("gru_lm", "GRU", 14),
                                            ("bilstm_tagger", "LSTM", 28)])
def test_zoo_model_with_a_tuned_cell_matches_onnxruntime(tmp_path, monkeypatch, name, cell, runs):
    """The zoo's recurrent models (small: 2 layers, hidden 24, 7 steps; through ONNX): the cell
    is a task of weight layers x directions x steps, and the model built with a record of it
    (a random sketch of the cell) gives onnxruntime's output."""
    from tvmpy.relay.testing import compare, zoo

    spec = zoo.MODELS[name]("small")
    model = zoo.to_onnx(spec)
    mod, params = zoo.from_onnx(model, spec)
    tasks, weights = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    cells = [(t, w) for t, w in zip(tasks, weights) if rnn.CELL_WORKLOAD in t.workload_key]
    assert len(cells) == 1 and cells[0][1] == runs, [(t.desc, w) for t, w in zip(tasks, weights)]
    task = cells[0][0]
    assert json.loads(task.workload_key)[1] == cell
    log = _log(tmp_path, task, auto_scheduler.sample_initial_population(task, 1, seed=5)[0])
    calls = _spy(monkeypatch)
    with auto_scheduler.ApplyHistoryBest(log), tvm.transform.PassContext(
            opt_level=3, config={"relay.backend.use_auto_scheduler": True}):
        lib = relay.build(mod, target="llvm", params=params)
    assert calls and set(calls) == {cell}
    feeds = spec.feeds(seed=3)
    got = compare.tvm_runner(lib)(feeds)
    want = compare.ort_runner(model, threads=1)(feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


# ---- R^T packed by the kernel's blocks (the x86 AlterOpLayout rewrite): the cell reads it too ---


def _packed_cell_task(cell, n, hidden, lbr):
    hp = padded_hidden(hidden)
    ub = rnn.packed_block(cell, hp, 16, n)
    assert hp // ub > 1, (hp, ub)  # a packing that is not the plain layout
    key = rnn.rnn_cell_key(cell, n, hidden, hp, lbr, ub)
    return auto_scheduler.SearchTask(workload_key=key, target="llvm"), ub


@pytest.mark.parametrize("cell,lbr", CELLS)
def test_packed_cell_sketches_match_numpy(cell, lbr):
    """The cell of a packed R^T ((Hp/ub, H, G*ub), the layout the deployed kernel reads):
    random sketches + annotations, run as the stepped kernel on the packed R^T forward and in
    reverse over 7, 1 and 0 steps, give rnn_scan's numpy meaning; batch 2, hidden 67 (a prime,
    padded to 80: five blocks of 16)."""
    n, hidden = 2, 67
    task, ub = _packed_cell_task(cell, n, hidden, lbr)
    G, hp = rnn.GATES[cell], padded_hidden(hidden)
    assert tuple(int(d) for d in task.compute_dag.tensors[1].shape) == (hp // ub, hidden, G * ub)
    states = auto_scheduler.sample_initial_population(task, 3, seed=4)
    assert states
    rng = np.random.default_rng(12)
    for i, state in enumerate(states):
        sch, cell_tensors = task.compute_dag.apply_steps_from_state(state)
        xw = te.placeholder((te.var("T"), n, G * hp), "float32", "xw")
        rt = te.placeholder((hp // ub, hidden, G * ub), "float32", "rt")
        h0 = te.placeholder((n, hidden), "float32", "h0")
        aux = te.placeholder((n, hidden) if cell == "LSTM" else (hp,), "float32", "aux")
        reverse = bool(i % 2)
        outs = rnn.rnn_scan_stepped(xw, rt, h0, aux, cell, hidden, reverse, lbr, sch, cell_tensors)
        mod = build(te.create_schedule([o.op for o in outs]), [xw, rt, h0, aux, *outs], "llvm")
        for t in (7, 1, 0):
            ins = list(_inputs(cell, t, n, hidden, rng))
            ins[1] = rnn.pack_rt_np(ins[1], cell, ub)
            want = rnn_scan_np(_Attrs(cell, hidden, reverse, lbr), *ins)
            args = [ndarray.array(a) for a in ins] + [
                ndarray.empty([t if not isinstance(getattr(d, "value", d), int) else int(d)
                               for d in o.shape], "float32") for o in outs]
            mod(*args)
            for k in range(3 if cell == "LSTM" else 2):
                np.testing.assert_allclose(args[4 + k].numpy(), want[k], rtol=1e-5, atol=2e-6,
                                           err_msg=f"{cell} lbr={lbr} T={t} output {k}")


def test_stepped_refuses_a_cell_of_the_other_layout():
    """A cell of the plain layout does not step a packed R^T (nor the reverse)."""
    n, hidden = 1, 67
    task, ub = _packed_cell_task("LSTM", n, hidden, True)
    hp = padded_hidden(hidden)
    plain = _cell_task("LSTM", n, hidden, True)
    xw = te.placeholder((4, n, 4 * hp), "float32", "xw")
    h0 = te.placeholder((n, hidden), "float32", "h0")
    for t, rt_shape in ((plain, (hp // ub, hidden, 4 * ub)), (task, (hidden, 4 * hp))):
        state = auto_scheduler.sample_initial_population(t, 1, seed=0)[0]
        sch, cells = t.compute_dag.apply_steps_from_state(state)
        rt = te.placeholder(rt_shape, "float32", "rt")
        with pytest.raises(ValueError, match="not the LSTM cell"):
            rnn.rnn_scan_stepped(xw, rt, h0, h0, "LSTM", hidden, False, True, sch, cells)


@pytest.mark.parametrize("cell,lbr", [("LSTM", True), ("GRU", False)])
def test_packed_model_tunes_the_packed_cell(tmp_path, monkeypatch, cell, lbr):
    """A model whose R^T the CPU target packs (hidden 67, padded 80: five blocks; bidirectional):
    extract_tasks lists the cell of the packed layout (its block in the key), its default line
    is the untuned kernel on the packed R^T, a record of it builds the stepped kernel on the
    packed R^T, and a record of the plain layout's cell does not apply (the packed untuned
    kernel is built). All three builds give the same results."""
    n, hidden = 1, 67
    hp = padded_hidden(hidden)
    mod, params = _rnn_model(cell, n, hidden, lbr, 5, 2, True)
    tasks, weights = auto_scheduler.extract_tasks(mod["main"], params, "llvm")
    cells = [(t, w) for t, w in zip(tasks, weights) if rnn.CELL_WORKLOAD in t.workload_key]
    assert len(cells) == 1 and cells[0][1] == 2 * 2 * 5, [t.workload_key for t in tasks]
    task, ub = _packed_cell_task(cell, n, hidden, lbr)
    assert cells[0][0].workload_key == task.workload_key
    G = rnn.GATES[cell]
    got = relay_integration.default_schedule_of(task)
    assert got is not None
    scans = [i for t in got[1] for i in t.op.input_tensors if i.op.tag == "rnn_scan"]
    assert scans and tuple(int(d) for d in scans[0].op.input_tensors[1].shape) == (
        hp // ub, hidden, G * ub)
    x = np.random.default_rng(4).uniform(-1, 1, (5, n, G * hp)).astype("float32")
    want = _build_vm(mod, params).invoke("main", x=x).numpy()
    calls = _spy(monkeypatch)
    log = _log(tmp_path, task, auto_scheduler.sample_initial_population(task, 1, seed=3)[0])
    tuned = _build_vm(mod, params, log)
    assert calls and set(calls) == {cell}
    np.testing.assert_allclose(tuned.invoke("main", x=x).numpy(), want, rtol=1e-5, atol=1e-6)
    calls.clear()
    plain = _cell_task(cell, n, hidden, lbr)
    (tmp_path / "plain").mkdir()
    log = _log(tmp_path / "plain", plain,
               auto_scheduler.sample_initial_population(plain, 1, seed=3)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no record of the key: no warning
        fallback = _build_vm(mod, params, log)
    assert calls == []
    np.testing.assert_allclose(fallback.invoke("main", x=x).numpy(), want, rtol=1e-6, atol=1e-7)
