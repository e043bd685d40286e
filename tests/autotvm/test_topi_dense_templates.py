"""The x86 matmul AutoTVM templates (topi/x86/dense.py): spaces, the fallback == the hand-tuned
default schedule (lowered IR compared with a verbatim copy of the pre-template schedule),
random configs correct, task extraction from BERT, a short tuning run applied by relay.build."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import autotvm, te
from tvmpy.autotvm.space import FallbackConfigEntity
from tvmpy.autotvm.task import dispatcher
from tvmpy.te import create_schedule
from tvmpy.te.schedule import Schedule
from tvmpy.te.tensor import Tensor
from tvmpy.topi.nn import dense as nn_dense
from tvmpy.topi.nn.dense import batch_matmul
from tvmpy.topi.nn.utils import traverse_inline
from tvmpy.topi.utils import get_const_tuple
from tvmpy.topi.x86 import dense as D
from tvmpy.topi.x86.conv2d import _outputs

RNG = np.random.default_rng(11)
_panel = D.panel_width
_TAGS = D._TAGS


# --- the schedule as it was before it became a template (the PERFORMANCE GUARD's reference) ---
def _ref_tiled(s: Schedule, mm: Tensor, out: Tensor, mr: int | None = None) -> None:
    """Tile ``mr x nr`` over the last two axes of ``out``, accumulate each tile in registers
    (reduction outermost, rows unrolled, columns vectorized), parallel over (batch, panel)."""
    n = get_const_tuple(mm.shape[-1:], "matmul schedule: N", symbolic=False)[0]
    m = mm.shape[-2]
    m = int(m.value) if hasattr(m, "value") else m  # a symbolic M keeps the default tile
    mr = D.tile_rows() if mr is None else mr  # (12 rows on two-FMA-unit AVX-512 since 2026-11-30)
    nr, mr = _panel(n), (max(1, min(mr, m)) if isinstance(m, int) else mr)
    if mm.op is out.op:
        CC = s.cache_write(mm, "local")
    else:
        s[mm].set_scope("local")
        CC = mm
    *batch, i, j = s[out].op.axis
    io, ii = s[out].split(i, factor=mr)
    jo, ji = s[out].split(j, factor=nr)
    s[out].reorder(*batch, jo, io, ii, ji)
    s[out].vectorize(ji)
    task = s[out].fuse(*batch, jo) if batch else jo
    s[out].parallel(task)
    s[CC].compute_at(s[out], io)
    *_, ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    unroll_k = D.default_unroll_k(ck.dom.extent)  # (the reduction unrolled by 4 since 2026-11-30)
    if unroll_k > 1:
        cko, cki = s[CC].split(ck, factor=unroll_k)
        s[CC].reorder(cko, cki, ci, cj)
        s[CC].unroll(cki)
    else:
        cko = ck
        s[CC].reorder(ck, ci, cj)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    prefetch = D._prefetch_bytes(mm, m, mr)  # (a prepacked panel streamed with prefetches, 2026-11-30)
    if prefetch:
        s[CC].pragma(cko, "prefetch", prefetch)
    for t in mm.op.input_tensors:
        if t.op.tag == "matmul_pack":
            s[t].compute_at(s[out], task)
            s[t].vectorize(s[t].op.axis[-1])


def _ref_dot(s: Schedule, mm: Tensor, out: Tensor, nj: int = 8, mi: int = 2) -> None:
    """For ``dense`` with its untransposed ``[N, K]`` weight (rows contiguous along K): each
    output is a dot product of two contiguous rows. The reduction is split by the vector width
    and factored (rfactor), so an ``mi x nj`` tile of outputs accumulates in ``mi * nj`` vector
    registers over K/16 steps (each data vector reused for ``nj`` weight rows, each weight
    vector for ``mi`` data rows), then each is reduced horizontally. Without a packed copy of
    the weight this wins when K is long (the horizontal sums amortized, and packing a
    ``[N, K]`` weight with a 4 KiB row stride is slow)."""
    k = get_const_tuple((mm.op.reduce_axis[0].dom.extent,), "dense schedule: K", symbolic=False)[0]
    n = get_const_tuple(mm.shape[-1:], "dense schedule: N", symbolic=False)[0]
    m = mm.shape[-2]
    m = int(m.value) if hasattr(m, "value") else m
    vec = 16 if k >= 16 else k
    # tiles that divide N and M keep the register tile's extent constant (no guards)
    nj = max(d for d in range(1, min(nj, n) + 1) if n % d == 0)
    mi = max(d for d in range(1, min(mi, m) + 1) if m % d == 0) if isinstance(m, int) else 1
    (rk,) = s[mm].op.reduce_axis
    _, ki = s[mm].split(rk, factor=vec)
    rf = s.rfactor(mm, ki, factor_axis=len(mm.shape))
    s[rf].set_scope("local")
    *batch, i, j = s[out].op.axis
    io, ii = s[out].split(i, factor=mi)
    jo, ji = s[out].split(j, factor=nj)
    s[out].reorder(*batch, jo, io, ii, ji)
    task = s[out].fuse(*batch, jo, io)
    s[out].parallel(task)
    if mm.op is not out.op:
        s[mm].compute_at(s[out], task)
    s[rf].compute_at(s[out], task)
    *rb, ri, rj, rv = s[rf].op.axis
    (rko,) = s[rf].op.reduce_axis
    s[rf].reorder(*rb, rko, ri, rj, rv)
    s[rf].unroll(ri)
    s[rf].unroll(rj)
    s[rf].vectorize(rv)


def _ref_schedule(outs: Any, what: str) -> Schedule:
    outs = _outputs(outs)
    s = create_schedule([o.op for o in outs])
    found: list[Tensor] = []

    def cb(op: Any) -> None:
        if op.tag in _TAGS and not found:
            found.append(op.output(0))

    traverse_inline(s, outs[0].op, cb)
    if not found:
        raise ValueError(f"{what}: no dense/matmul/batch_matmul stage among the outputs' inputs")
    mm = found[0]
    out = D._anchor(mm, outs[0])  # (anchor, also past the crop of a padded product)
    attrs = mm.op.attrs
    # B read along K (dense, or a B-transposed product): contiguous rows -> dot products
    dot = mm.op.tag == "dense" or (mm.op.tag in ("matmul", "batch_matmul")
                                   and attrs.get("transpose_b") and not attrs.get("transpose_a"))
    # ... worth it when the rows are few or long (each dot ends in a 16-lane horizontal sum;
    # otherwise the tiled nest with strided B loads wins, measured)
    m, k = mm.shape[-2], mm.op.reduce_axis[0].dom.extent
    m = int(m.value) if hasattr(m, "value") else None
    k = int(k.value) if hasattr(k, "value") else 0
    plan, k_acc, _ = D._default_plan(mm)
    if plan == "gemv":  # few rows by packed panels
        D._schedule_gemv(s, mm, out, k_acc)
    elif dot and (m is None or m <= 8):
        _ref_dot(s, mm, out, nj=4, mi=1)
    elif dot and k >= 256:
        _ref_dot(s, mm, out)
    else:
        _ref_tiled(s, mm, out)
    return s



# ---------------------------------------------------------------------------------------------
T = "TENSOR"
F32 = "float32"
SHAPES = [(128, 256, 1024), (128, 1024, 256), (1, 512, 1000), (37, 61, 97), (4, 300, 24)]


def _case(name: str, m: int, k: int, n: int) -> tuple[tuple, Any, Any]:
    """``(task args, template call -> (inputs, out), reference (inputs, out))``."""
    a = te.placeholder((m, k), name="A")
    if name == "dense.x86":
        w = te.placeholder((n, k), name="W")
        return ((T, (m, k), F32), (T, (n, k), F32), F32), \
            ([a, w], D.dense_nopack(a, w, F32), D.schedule_dense_nopack), \
            ([a, w], nn_dense(a, w, None, F32))
    if name == "dense_pack.x86":
        w = te.placeholder((n, k), name="W")
        return ((T, (m, k), F32), (T, (n, k), F32), F32), \
            ([a, w], D.dense_pack_x86(a, w, F32), D.schedule_dense_pack_x86), \
            ([a, w], D.dense_pack(a, w, None, F32))
    if name == "contrib_dense_pack.x86":
        nr = _panel(n)
        p = te.placeholder((-(-n // nr), k, nr), name="P")
        return ((T, (m, k), F32), (T, tuple(int(d) for d in p.shape), F32), F32), \
            ([a, p], D.contrib_dense_pack(a, p, F32), D.schedule_contrib_dense_pack), \
            ([a, p], D.dense_prepacked(a, p, F32))
    b = te.placeholder((3, m, k), name="BA")
    bb = te.placeholder((3, n, k), name="BB")
    if name == "batch_matmul.x86":
        return ((T, (3, m, k), F32), (T, (3, n, k), F32), F32, False, True), \
            ([b, bb], D.batch_matmul_x86(b, bb, F32, False, True), D.schedule_batch_matmul_x86), \
            ([b, bb], batch_matmul(b, bb, None, F32, False, True))
    return ((T, (3, m, k), F32), (T, (3, n, k), F32), F32), \
        ([b, bb], D.batch_matmul_pack_x86(b, bb, F32), D.schedule_batch_matmul_pack_x86), \
        ([b, bb], D.batch_matmul_pack(b, bb, F32))


NAMES = ["dense.x86", "dense_pack.x86", "contrib_dense_pack.x86", "batch_matmul.x86",
         "batch_matmul_pack.x86"]


@pytest.fixture(autouse=True)
def _fresh_fallback(monkeypatch):
    """A fresh root context per test (no warnings leak between tests, no cached fallbacks)."""
    root = dispatcher.FallbackContext()
    root.silent = True
    monkeypatch.setattr(dispatcher.DispatchContext, "current", root)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_fallback_lowers_to_the_default_schedule(name, m, k, n):
    if name.startswith("batch") and m * k * n > 1 << 22:
        pytest.skip("batch cases on the small shapes only (time)")
    _, (ins, out, sched), (rins, ref) = _case(name, m, k, n)
    s = sched([out])
    got = str(tvm.lower(s, ins + [out]))
    want = str(tvm.lower(_ref_schedule([ref], "ref"), rins + [ref]))
    assert got == want


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("m,k,n", [(128, 256, 1024), (1, 512, 1000), (37, 61, 97)])
def test_space_is_sane_and_contains_the_fallback(name, m, k, n):
    args, (ins, out, sched), (rins, ref) = _case(name, m, k, n)
    task = autotvm.task.create(name, args=args, target="llvm")
    space = task.config_space
    assert 2 <= len(space) <= 100000
    batch = 3 if name.startswith("batch") else 1
    assert task.flop == 2.0 * batch * m * k * int(out.shape[-1])  # (prepacked: N rounded up)
    # the fallback's knob values, as the template chose them ...
    cfg = FallbackConfigEntity()
    with dispatcher.ApplyConfig(cfg):
        _case(name, m, k, n)[1][2]([_case(name, m, k, n)[1][1]])
    assert set(cfg.space_map) == set(space.space_map)
    knob = [space.space_map[key].entities.index(cfg[key]) for key in space.space_map]
    # ... are a point of the space, and that point (a tuned config) lowers to the default
    point = space.get(space.knob2point(knob))
    assert not point.is_fallback
    with dispatcher.ApplyConfig(point):
        _, (ins, out, sched), _ = _case(name, m, k, n)
        s = sched([out])
    want = str(tvm.lower(_ref_schedule([ref], "ref"), rins + [ref]))
    assert str(tvm.lower(s, ins + [out])) == want


def _run(s: Schedule, args: list, data: list[np.ndarray]) -> np.ndarray:
    f = tvm.build(s, args, "llvm")
    out = tvm.nd.array(np.zeros(get_const_tuple(args[-1].shape, symbolic=False), "float32"))
    f(*[tvm.nd.array(d) for d in data], out)
    return out.numpy()


def _unpack(p: np.ndarray, n: int) -> np.ndarray:
    """``[N/nr, K, nr]`` -> ``[N, K]``."""
    return p.transpose(0, 2, 1).reshape(-1, p.shape[1])[:n]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("m,k,n", [(37, 61, 97), (16, 64, 48)])
def test_random_configs_compute_the_product(name, m, k, n):
    args, _, _ = _case(name, m, k, n)
    task = autotvm.task.create(name, args=args, target="llvm")
    rnd = random.Random(f"{name}{m}")
    for index in rnd.sample(range(len(task.config_space)), 3):
        s, targs = task.instantiate(task.config_space.get(index))
        data = [RNG.standard_normal(get_const_tuple(t.shape, symbolic=False)).astype("float32")
                for t in targs[:-1]]
        got = _run(s, targs, data)
        a, b = data
        if name == "contrib_dense_pack.x86":
            want, got = a @ _unpack(b, n).T, got[:, :n]  # (columns past N: zero padding)
        elif name.startswith("batch"):
            want = a @ b.transpose(0, 2, 1)
        else:
            want = a @ b.T
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_symbolic_shapes_keep_the_plain_schedules():
    from tvmpy.relay.op.strategy import tuned_implementation

    def tuned(*inputs):
        return tuned_implementation("dense.x86", None, list(inputs), None, "llvm")

    n = te.var("n")
    a, w = te.placeholder((n, 8), name="A"), te.placeholder((4, 8), name="W")
    assert tuned(a, w) is None
    assert tuned(te.placeholder((2, 8)), w) is not None
    with pytest.raises(TypeError, match="cannot serialize"):  # (a workload needs constants)
        D.dense_pack_x86(a, w, F32)


def _small_bert():
    from tvmpy.relay.testing import bert

    return bert.get_workload(num_layers=1, hidden=64, heads=2, seq_len=32)[:2]


def _packed(k, n):
    """The prepacked weight shape ``[N/nr, K, nr]`` of an N x K dense on the host (nr: two
    vectors, 32 floats with AVX-512, 16 with AVX2)."""
    with tvm.target.Target("llvm"):
        nr = D.panel_width(n)
    return (n // nr, k, nr)


def test_extract_from_program_bert():
    mod, params = _small_bert()
    dense = [
        ("contrib_dense_pack.x86", ((32, 64), _packed(64, 64))),
        ("contrib_dense_pack.x86", ((32, 64), _packed(64, 256))),
        ("contrib_dense_pack.x86", ((32, 256), _packed(256, 64))),
    ]
    # q/k/v and the output projection share one workload (64 -> 64), the feed-forward two
    # more. Extraction lowers at opt_level 3 (as TVM's), so the dense layers are the
    # prepacked weights' (AlterOpLayout: [N/32, K, 32] panels) that an opt_level-3 build runs,
    # and the attention is FuseAttention's nn.attention (no template: no task)
    tasks = autotvm.task.extract_from_program(mod, params, "llvm")
    assert sorted(_names_and_shapes(tasks)) == sorted(dense)
    # without FuseAttention (the caller's disabled_pass holds): Q K^T is the B-transposed
    # (packed) batch_matmul, softmax(..) V the plain one
    with tvm.transform.PassContext(opt_level=3, disabled_pass=["FuseAttention"]):
        tasks = autotvm.task.extract_from_program(mod, params, "llvm")
    keys = [t.workload for t in tasks]
    assert len(keys) == len(set(keys))
    assert sorted(_names_and_shapes(tasks)) == sorted(dense + [
        ("batch_matmul_pack.x86", ((2, 32, 32), (2, 32, 32))),
        ("batch_matmul.x86", ((2, 32, 32), (2, 32, 32))),
    ])
    for t in tasks:
        assert len(t.config_space) >= 2 and t.flop > 0
    with tvm.transform.PassContext(opt_level=3, disabled_pass=["FuseAttention"]):
        only = autotvm.task.extract_from_program(mod, params, "llvm", ops=["batch_matmul.x86"])
    assert [t.name for t in only] == ["batch_matmul.x86"]


def _names_and_shapes(tasks):
    return [(t.name, tuple(a[1] for a in t.args if isinstance(a, tuple))) for t in tasks]


def _dense_net():
    from tvmpy import relay

    x = relay.var("x", shape=(32, 64))
    w = relay.var("w", shape=(256, 64))
    y = relay.nn.relu(relay.nn.dense(x, w))
    mod = tvm.IRModule.from_expr(relay.Function([x, w], y))
    params = {"w": RNG.uniform(-1, 1, (256, 64)).astype("float32")}
    return mod, params, RNG.uniform(-1, 1, (32, 64)).astype("float32")


def test_tune_dense_task_then_build_with_history_best(tmp_path, monkeypatch):
    from tvmpy import relay
    from tvmpy.autotvm.tuner import RandomTuner
    from tvmpy.contrib import graph_executor

    mod, params, x = _dense_net()
    with tvm.transform.PassContext(opt_level=3):  # AlterOpLayout: the weight packed, prepacked
        tasks = autotvm.task.extract_from_program(mod, params, "llvm")
    assert [t.name for t in tasks] == ["contrib_dense_pack.x86"]
    task = tasks[0]
    log = tmp_path / "dense.log"
    option = autotvm.measure_option(builder=autotvm.LocalBuilder(n_parallel=2),
                                    runner=autotvm.LocalRunner(number=2, repeat=1))
    RandomTuner(task, seed=2).tune(6, option, callbacks=[autotvm.callback.log_to_file(str(log))])
    recs = autotvm.record.load_from_file(str(log))
    assert len(recs) == 6
    ok = [(inp, res) for inp, res in recs if res.error_no == 0]
    assert ok, [res for _, res in recs]
    best = min(ok, key=lambda r: np.mean(r[1].costs))[0].config

    seen: list = []
    real = D._schedule_cfg

    def spy(cfg, outs, what):
        seen.append(cfg)
        return real(cfg, outs, what)

    monkeypatch.setattr(D, "_schedule_cfg", spy)
    with autotvm.apply_history_best(str(log)):
        with tvm.transform.PassContext(opt_level=3):
            lib = relay.build(mod, target="llvm", params=params)
    assert len(seen) == 1 and not seen[0].is_fallback
    assert seen[0].index == best.index
    assert seen[0].to_json_dict() == best.to_json_dict()
    m = graph_executor.GraphModule(lib["default"](tvm.cpu(0)))
    m.set_input(x=x)
    m.run()
    want = np.maximum(x @ params["w"].T, 0)
    np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)


def test_extract_from_onnx_bert_at_opt_level_3():
    """The ONNX BERT encoder as relay.build compiles it at opt_level 3 (dense weights packed at
    compile time): its tasks are the prepacked dense, and, without FuseAttention, the two
    attention batch_matmuls."""
    pytest.importorskip("onnx")
    from tvmpy import relay
    from tvmpy.relay.testing import onnx_models

    mod, params = relay.frontend.from_onnx(onnx_models.bert_encoder(layers=1, seq=32))
    dense = [
        ("contrib_dense_pack.x86", ((32, 256), _packed(256, 256))),
        ("contrib_dense_pack.x86", ((32, 256), _packed(256, 1024))),
        ("contrib_dense_pack.x86", ((32, 1024), _packed(1024, 256))),
    ]
    with tvm.transform.PassContext(opt_level=3):
        tasks = autotvm.task.extract_from_program(mod, params, "llvm")
    assert sorted(_names_and_shapes(tasks)) == sorted(dense)
    with tvm.transform.PassContext(opt_level=3, disabled_pass=["FuseAttention"]):
        tasks = autotvm.task.extract_from_program(mod, params, "llvm")
    assert sorted(_names_and_shapes(tasks)) == sorted(dense + [
        ("batch_matmul.x86", ((4, 32, 64), (4, 64, 32))),
        ("batch_matmul.x86", ((4, 32, 32), (4, 32, 64))),
    ])


@pytest.mark.parametrize("name,mode", [("dense_pack.x86", "tiled"),
                                       ("contrib_dense_pack.x86", "tiled"),
                                       ("dense.x86", "tiled"), ("dense.x86", "dot"),
                                       ("batch_matmul.x86", "dot")])
def test_every_knob_changes_the_program(name, mode):
    """From the default point, moving one knob of the active mode changes the lowered IR (no
    dead knobs); the knobs of the other mode are the ones that do not."""
    m, k, n = 48, 64, 96
    args, _, _ = _case(name, m, k, n)
    space = autotvm.task.create(name, args=args, target="llvm").config_space
    cfg = FallbackConfigEntity()
    with dispatcher.ApplyConfig(cfg):
        _case(name, m, k, n)[1][2]([_case(name, m, k, n)[1][1]])
    knob = [space.space_map[key].entities.index(cfg[key]) for key in space.space_map]
    names = list(space.space_map)
    if "mode" in names:
        knob[names.index("mode")] = space.space_map["mode"].entities.index(
            next(e for e in space.space_map["mode"].entities if e.val == mode))

    def lowered(kn: list[int]) -> str:
        with dispatcher.ApplyConfig(space.get(space.knob2point(kn))):
            _, (ins, out, sched), _ = _case(name, m, k, n)
            return str(tvm.lower(sched([out]), ins + [out]))

    base = lowered(knob)
    active = {"tiled": {"tile_y", "tile_x", "unroll_k", "row_blocks"},
              "dot": {"dot_y", "dot_x"}}[mode]
    for i, key in enumerate(names):
        if key == "mode" or len(space.space_map[key]) < 2:
            continue
        other = list(knob)
        other[i] = (knob[i] + 1) % len(space.space_map[key])
        assert (lowered(other) != base) == (key in active), key


@pytest.mark.parametrize("m,k,n", [(37, 61, 97), (16, 9, 33)])
def test_padded_templates_fallback_and_random_configs(m, k, n):
    """The templates on a partial last panel: contrib_dense_pack with ``units`` < panels*nr
    and batch_matmul_pack of an untransposed B. The fallback lowers to the default schedule,
    random configs compute the product."""
    nr = _panel(n)
    a, p = te.placeholder((m, k), name="A"), te.placeholder((-(-n // nr), k, nr), name="P")
    ba, bb = te.placeholder((3, m, k), name="BA"), te.placeholder((3, k, n), name="BB")
    cases = [
        ("contrib_dense_pack.x86", ((T, (m, k), F32), (T, tuple(int(d) for d in p.shape), F32),
                                    F32, n),
         [a, p], D.contrib_dense_pack(a, p, F32, n), D.schedule_contrib_dense_pack,
         D.dense_prepacked(a, p, F32, n)),
        ("batch_matmul_pack.x86", ((T, (3, m, k), F32), (T, (3, k, n), F32), F32, False),
         [ba, bb], D.batch_matmul_pack_x86(ba, bb, F32, False), D.schedule_batch_matmul_pack_x86,
         D.batch_matmul_pack(ba, bb, F32, transpose_b=False)),
    ]
    for name, args, ins, out, sched, ref in cases:
        assert tuple(int(d) for d in out.shape)[-1] == n
        want = str(tvm.lower(_ref_schedule([ref], "ref"), ins + [ref]))
        assert str(tvm.lower(sched([out]), ins + [out])) == want
        task = autotvm.task.create(name, args=args, target="llvm")
        rnd = random.Random(f"{name}{m}{n}")
        for index in rnd.sample(range(len(task.config_space)), 3):
            s, targs = task.instantiate(task.config_space.get(index))
            data = [RNG.standard_normal(get_const_tuple(t.shape, symbolic=False)).astype("float32")
                    for t in targs[:-1]]
            got = _run(s, targs, data)
            x, y = data
            want_v = x @ _unpack(y, n).T if name.startswith("contrib") else x @ y
            np.testing.assert_allclose(got, want_v, rtol=1e-4, atol=1e-3)
