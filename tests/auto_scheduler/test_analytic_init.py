"""The analytic initial states (auto_scheduler/analytic_init.py): valid, numpy's result on
awkward shapes, replayable from the record format, sized by the target's vector unit and
register file, and measured in the search's first batch."""

from __future__ import annotations

import math

import pytest
from as_workloads import (
    check_state,
    conv2d_bias_relu,
    conv2d_transpose,
    depthwise_conv,
    depthwise_nchwc_silu,
    make_task,
    matmul,
    matmul_relu,
    pool_mean,
    row_sum,
    softmax,
)

from tvmpy import auto_scheduler
from tvmpy.auto_scheduler import MeasureInput, MeasureResult, generate_sketches
from tvmpy.auto_scheduler import transform_step as ts
from tvmpy.auto_scheduler.analytic_init import (
    analytic_states,
    private_operand,
    register_tile,
    vector_tile,
)
from tvmpy.auto_scheduler.evolution import state_key
from tvmpy.auto_scheduler.measure_record import dump_record_to_string, load_record_from_string
from tvmpy.auto_scheduler.search_policy import SketchPolicy
from tvmpy.auto_scheduler.search_task import HardwareParams

AWKWARD = [
    (matmul, (13, 7, 11)),  # primes everywhere
    (matmul, (1, 37, 5)),  # size 1
    (matmul_relu, (24, 40, 17)),  # 40: not a multiple of 16 lanes
    (conv2d_bias_relu, (1, 7, 9, 5, 3, 3, 3, 1, 1)),
    (conv2d_bias_relu, (1, 10, 10, 24, 8, 1, 1, 2, 0)),  # 1x1, stride 2
    (depthwise_conv, (1, 6, 11, 11, 3, 1)),
    (conv2d_transpose, (1, 4, 5, 5, 3, 4, 2)),
    (row_sum, (5, 33)),
    (pool_mean, (1, 3, 7, 7, 16)),
    (softmax, (3, 131)),  # rows longer than a vectorized loop: split with a guarded tail
]


def _vectorized_extents(state):
    """Extents of the vectorized loops of every stage of ``state``."""
    out = []
    for st in state.stages:
        for it in st.iters:
            if it.annotation == ts.IteratorAnnotation.VECTORIZE:
                out.append(it.extent)
    return out


@pytest.mark.parametrize("func,args", AWKWARD, ids=lambda x: getattr(x, "__name__", str(x)))
def test_analytic_states_give_numpys_result(func, args):
    task = make_task(func, args)
    states = analytic_states(task, generate_sketches(task))
    assert states, f"no analytic state for {func.__name__}{args}"
    for st in states:
        assert st.is_complete()
        ts.replay(task.compute_dag, st.transform_steps, check_complete=True)
    # built and run: the first four (every sketch's first variants come first)
    for st in states[:4]:
        check_state(task, st)


def test_analytic_states_replay_from_records():
    task = make_task(conv2d_bias_relu, (1, 12, 12, 32, 16, 3, 3, 1, 1))
    states = analytic_states(task, generate_sketches(task))
    assert len(states) >= 3
    for st in states:
        line = dump_record_to_string(MeasureInput(task, st), MeasureResult((1e-3,), 0, "", 0.1, 1.0))
        inp, _ = load_record_from_string(line)
        assert inp.state.transform_steps == st.transform_steps
        again = task.compute_dag.apply_steps_from_state(inp.state)
        first = task.compute_dag.apply_steps_from_state(st)
        import tvmpy as tvm

        assert str(tvm.lower(*again, simple_mode=True)) == str(tvm.lower(*first, simple_mode=True))
    check_state(task, load_record_from_string(dump_record_to_string(
        MeasureInput(task, states[0]), MeasureResult((1e-3,), 0, "", 0.1, 1.0)))[0].state)


def test_tiles_helpers():
    assert vector_tile(64, 16) == 16 and vector_tile(64, 16, 2) == 32
    assert vector_tile(12, 16) == 12 and vector_tile(40, 16) == 10  # a divisor, no tail
    assert vector_tile(37, 8) == 8  # a prime: one guarded tail
    assert register_tile([1, 28], 16) == [1, 14]
    assert register_tile([4, 7], 16) == [2, 7]
    # a conv's weights depend on the channel axis (0), its input on the pixel axes (1, 2):
    # a balanced channels x pixels tile needs the fewest loads per FMA
    conv = [{0}, {1, 2}]
    assert register_tile([8, 28, 28], 16, conv) == [4, 1, 4]
    assert register_tile([8, 28, 28], 16, conv, rank=1) != [4, 1, 4]
    # a matmul (rows axis 0; the columns vectorize): a row tile
    assert register_tile([48], 12, [{0}, set()]) == [12]
    assert register_tile([64], 12, [{0}, set()]) == [8]  # a divisor: no tail in the tile
    assert math.prod(register_tile([13, 1, 17], 12, [{0}, {2}])) <= 12


@pytest.mark.parametrize("target,lanes,regs", [
    ("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell", 8, 16),
    ("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512", 16, 32),
    ("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512 -mattr=-avx512f", 8, 16),
])
def test_tiles_follow_the_targets_vector_unit(target, lanes, regs):
    """Only inspects the states (no code for a foreign CPU runs): the vectorized loops are
    whole vectors of the target and the register tile's accumulators fit its register file."""
    task = auto_scheduler.SearchTask(func=matmul, args=(64, 128, 64), target=target)
    hp = task.hardware_params
    assert hp.vector_unit_bytes == lanes * 4 and hp.num_vector_registers == regs
    states = analytic_states(task, generate_sketches(task))
    assert states
    for st in states:
        vec = _vectorized_extents(st)
        assert vec and all(v % lanes == 0 for v in vec), (target, vec)
        # the register tile: the innermost spatial tile of the matmul stage (C or C.local)
        tiled = [s for s in st.stages if s.op_name in ("C", "C.local")
                 and any(i.iter_kind == 1 for i in s.iters)]
        assert len(tiled) == 1
        inner = tiled[0].iters[-2:]
        acc = inner[0].extent * inner[1].extent // lanes
        assert 2 <= acc <= regs, (target, [i.extent for i in inner])


def test_first_batch_holds_the_analytic_states():
    task = make_task(matmul_relu, (32, 48, 24))
    pol = SketchPolicy(task, seed=1, verbose=0)
    want = {state_key(s) for s in pol.analytic_states()}
    assert want
    batch = pol.next_batch(len(want) + 4)
    assert want <= {state_key(s) for s in batch}
    off = SketchPolicy(task, seed=1, verbose=0, params={"analytic_init": 0})
    assert off.analytic_states() == []
    # a smaller first batch: analytic states only, the first ones
    small = SketchPolicy(task, seed=1, verbose=0).next_batch(2)
    assert [state_key(s) for s in small] == [state_key(s) for s in pol.analytic_states()[:2]]


def test_measured_analytic_states_seed_the_evolution(monkeypatch):
    """After the first batch the evolutionary population starts from the measured analytic
    states, even when they are not the measured best."""
    from tvmpy.auto_scheduler import search_policy

    task = make_task(matmul, (32, 48, 24))
    pol = SketchPolicy(task, seed=2, verbose=0)
    batch = pol.next_batch(8)
    seeds = {state_key(s) for s in pol.analytic_states()}
    # the analytic states measured slow, random states fast
    ins = [MeasureInput(task, s) for s in batch]
    res = [MeasureResult((1.0 if state_key(s) in seeds else 1e-3,), 0, "", 0.1, 1.0) for s in batch]
    pol.record(ins, res)
    got: list = []

    def spy(init, *a, **k):
        got.extend(state_key(s) for s in init)
        return []

    monkeypatch.setattr(search_policy, "evolutionary_search", spy)
    pol.model = auto_scheduler.cost_model.XGBModel(seed=0)
    pol.next_batch(4)
    assert seeds & {state_key(s) for s in batch} <= set(got)


def test_hardware_params_default_register_file():
    assert HardwareParams().num_vector_registers == 16


def test_padding_placement_follows_its_reads_per_element():
    """Padding read once per window tap (depthwise) is inlined in the first analytic state;
    padding read once per output channel too (a 32-channel conv) is computed at the root;
    a later variant flips each."""
    from tvmpy.auto_scheduler.loop_state import ComputeAtKind

    def pad_places(task):
        return [next(s.compute_at for s in st.stages if s.op_name == "pad")
                for st in analytic_states(task, generate_sketches(task))]

    dw = pad_places(make_task(depthwise_conv, (1, 16, 14, 14, 3, 1)))
    conv = pad_places(make_task(conv2d_bias_relu, (1, 14, 14, 32, 32, 3, 3, 1, 1)))
    assert dw[0] == ComputeAtKind.INLINED and ComputeAtKind.ROOT in dw
    assert conv[0] == ComputeAtKind.ROOT and ComputeAtKind.INLINED in conv


def test_depthwise_register_tile_is_a_run_of_columns():
    """A depthwise conv's input depends on every tiled axis and on the vectorized one (no
    broadcast shared by several accumulators): the register tile holds half the
    accumulators and is a run of columns, not a 2-D tile (5x5 stride 2 NCHW16c over 28
    columns: 14 columns were 1.06x the x86 default, 2 rows x 4 columns 1.93x, 7 columns
    0.99x)."""
    # weights: channel block and lane; input: channel block, row, column and lane
    assert private_operand([{0, 3}, {0, 1, 2, 3}], [9, 28, 28, 16])
    assert not private_operand([{0, 3}, {1, 2}], [8, 28, 28, 16])  # a conv: broadcast input
    assert not private_operand([{0}, {1}], [48, 16])  # a matmul: broadcast rows
    assert not private_operand([{0, 3}, {0, 1, 2, 3}], [1, 1, 1, 16])  # nothing tiled
    dw = [{0}, {0, 1, 2}]  # the same, without the lane axis (register_tile's operands)
    assert register_tile([9, 28, 28], 8, dw) == [1, 2, 4]  # loads per FMA first
    assert register_tile([9, 28, 28], 8, dw, fewest_axes=True) == [1, 1, 7]
    task = make_task(depthwise_nchwc_silu, (1, 3, 56, 56, 5, 2, 2, 16))
    hp = task.hardware_params
    lanes = hp.vector_unit_bytes // 4
    states = analytic_states(task, generate_sketches(task))
    assert states
    for i, st in enumerate(states):
        conv = next(s for s in st.stages if s.op_name == "depthwise")
        n, c, y, x, lane = (it.extent for it in conv.iters[-5:])  # the register tile
        assert sum(1 for e in (n, c, y, x) if e > 1) <= 1, [n, c, y, x, lane]
        if i == 0:  # the first variant: half the register file, halved again
            assert c * y * x * -(-lane // lanes) <= max(1, hp.num_vector_registers // 4)
    check_state(task, states[0])
