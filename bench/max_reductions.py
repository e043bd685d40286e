"""Max reductions on x86 (issue 28 point 7): tvmpy's NaN-propagating float max, the native
MAXPS with a NaN fix-up (``codegen/llvm_arith._x86_min_max``), against ``llvm.maximum`` (the
old lowering) and onnxruntime, in the same run, interleaved.

    PYTHONPATH=. python bench/max_reductions.py [--threads 1] [--rounds 15] [--filter TEXT]

Sides: ``new`` (this lowering and schedules), ``old`` (``X86_SELECT_MINMAX = False``, the
small-plane GlobalMaxPool on its scalar chain, ``pooling.SMALL_PLANE_MAX_RFACTOR = False``, a
narrow kept axis reduced by a scalar loop, ``reduction.NARROW_KEPT_AXIS = False``),
``ort``. ``--zoo resnet50,googlenet`` A/Bs whole zoo models (best rounds, ms); ``--kernels``
the kernels alone (topi, time_evaluator; no onnxruntime). Prints each side's best round (us, wall clock: under load the best round is the least
disturbed one) and the per-round ratios' medians new/ort, old/ort, new/old.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

# the two tvmpy sides differ by module flags that neither the kernel cache's key names nor
# build worker processes see: no cache, kernels built in this process
os.environ["TVMPY_CACHE"] = "0"
os.environ["TVMPY_BUILD_WORKERS"] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from common import bench_clock, interleaved_samples, ort_bound_runner, ort_session, quartiles  # noqa: E402
from ops import Case, _node, _onnx_model, _rand, softmax_case, tvm_side, window_pool_case  # noqa: E402,I001


def reduce_max_case(shape: tuple[int, ...], axes: list[int]) -> Case:
    feeds = {"x": _rand(*shape)}
    out = tuple(1 if i in axes else d for i, d in enumerate(shape))
    node = _node("ReduceMax", ["x"], "y", axes=axes, keepdims=1)
    return Case(f"ReduceMax {'x'.join(map(str, shape))} axes {axes}", float(np.prod(shape)),
                lambda: _onnx_model([node], feeds, out, {}, opset=13), feeds)


def cases() -> list[Case]:
    out = [window_pool_case("gmp", "GlobalMaxPool", c, hw, 0, 0, 0)
           for c, hw in ((960, 7), (480, 14), (144, 56), (57, 13), (64, 1))]
    out += [window_pool_case("mp", "MaxPool", c, hw, 3, 2, 1)
            for c, hw in ((64, 112), (57, 17), (256, 56))]
    out += [reduce_max_case((8, 1000), [1]), reduce_max_case((64, 49, 97), [1]),
            reduce_max_case((3, 517, 7), [0, 1])]
    out += [softmax_case("softmax", (12, 128, 128)), softmax_case("softmax", (1, 1000))]
    return out


def build_side(c: Case, model: object, old: bool, rfactor: bool = True) -> object:
    with _flags(old, rfactor):
        m, _ = tvm_side(model, c.feeds, 3)
    return m


@contextlib.contextmanager
def _flags(old: bool, rfactor: bool = True) -> Iterator[None]:
    """The old lowering and schedules (``old``) or this branch's, for one build."""
    from tvmpy.codegen import llvm_arith
    from tvmpy.topi.x86 import pooling, reduction

    saved = (llvm_arith.X86_SELECT_MINMAX, pooling.SMALL_PLANE_MAX_RFACTOR,
             reduction.NARROW_KEPT_AXIS)
    llvm_arith.X86_SELECT_MINMAX = reduction.NARROW_KEPT_AXIS = not old
    pooling.SMALL_PLANE_MAX_RFACTOR = rfactor and not old
    try:
        yield
    finally:
        (llvm_arith.X86_SELECT_MINMAX, pooling.SMALL_PLANE_MAX_RFACTOR,
         reduction.NARROW_KEPT_AXIS) = saved


def _ratio(s: dict[str, list[float]]) -> Callable[[str, str], float]:
    """The median of the per-round ratios of side ``p`` to side ``q``."""
    return lambda p, q: quartiles([x / y for x, y in zip(s[p], s[q])])[1]


def zoo_ab(names: list[str], threads: int, rounds: int, cpu_time: bool = False) -> None:
    """Whole zoo models (real size): new and old builds and onnxruntime, interleaved."""
    from tvmpy.relay.testing import compare, zoo

    for name in names:
        entry = zoo.MODELS[name]
        spec = entry("real")
        model = zoo.to_onnx(spec)
        feeds = spec.feeds(seed=1)
        built = {}
        for side in ("new", "old"):
            mod, params = zoo.from_onnx(model, spec)
            with _flags(side == "old"):
                built[side] = zoo.build(mod, params, vm=entry.vm)
        ort = compare.ort_runner(model, threads=threads)
        for side, b in built.items():
            zoo.assert_close(b.run(feeds), ort(feeds), f"{name} {side}")
        runs = {k: functools.partial(b.run, feeds) for k, b in built.items()}
        runs["ort"] = functools.partial(ort, feeds)
        s = interleaved_samples(runs, rounds, pause=0.3, target_s=0.1,
                                clock=bench_clock(cpu_time, threads))
        med = {k: min(v) * 1e3 for k, v in s.items()}

        r = _ratio(s)
        print(f"{name:20s} new {med['new']:8.2f} ms  old {med['old']:8.2f} ms  ort "
              f"{med['ort']:8.2f} ms  new/ort {r('new', 'ort'):.2f}  old/ort {r('old', 'ort'):.2f}"
              f"  new/old {r('new', 'old'):.3f}", flush=True)


def _kernel_cases() -> dict[str, Callable[[], tuple[list, Any, Callable]]]:
    """topi computes with their x86 schedules: (inputs, output, schedule)."""
    from tvmpy import te, topi

    def gmp(*shape: int) -> tuple[list, Any, Callable]:
        a = te.placeholder(shape, name="A")
        return [a], topi.nn.global_pool(a, "max"), topi.x86.schedule_global_pool

    def mp(*shape: int) -> tuple[list, Any, Callable]:
        a = te.placeholder(shape, name="A")
        out = topi.nn.pool2d(a, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "max", separable=True)
        return [a], out, topi.x86.schedule_pool

    def rmax(shape: tuple[int, ...], axis: Any) -> tuple[list, Any, Callable]:
        a = te.placeholder(shape, name="A")
        return [a], topi.max(a, axis=axis, keepdims=True), topi.x86.schedule_reduce

    def smax(*shape: int) -> tuple[list, Any, Callable]:
        a = te.placeholder(shape, name="A")
        return [a], topi.nn.softmax_by_reciprocal(a), topi.x86.schedule_softmax

    return {
        "GlobalMaxPool 960x7x7": lambda: gmp(1, 960, 7, 7),
        "GlobalMaxPool 480x14x14": lambda: gmp(1, 480, 14, 14),
        "GlobalMaxPool 144x56x56": lambda: gmp(1, 144, 56, 56),
        "GlobalMaxPool 57x13x13": lambda: gmp(1, 57, 13, 13),
        "MaxPool 3x3/2 64x112x112": lambda: mp(1, 64, 112, 112),
        "MaxPool 3x3/2 57x17x17": lambda: mp(1, 57, 17, 17),
        "max 8x1000 axis 1": lambda: rmax((8, 1000), 1),
        "max 64x49x97 axis 1": lambda: rmax((64, 49, 97), 1),
        "max 3x517x7 axes 0,1": lambda: rmax((3, 517, 7), (0, 1)),
        "softmax 12x128x128": lambda: smax(12, 128, 128),
        "softmax 1x1000": lambda: smax(1, 1000),
    }


def kernels(rounds: int, filt: str) -> None:
    """Kernel level, new vs old: each side's best ``time_evaluator`` repeat over ``rounds``
    alternating rounds (no graph executor, no onnxruntime)."""
    import tvmpy as tvm

    print(f"{'kernel':32s} {'new us':>8s} {'old us':>8s} {'new/old':>8s}")
    for name, make in _kernel_cases().items():
        if filt not in name:
            continue
        fs = {}
        for side in ("new", "old"):
            ins, out, sched = make()
            with _flags(side == "old"), tvm.target.Target("llvm"):
                fs[side] = tvm.build(sched([out]), [*ins, out], "llvm")
        rng = np.random.default_rng(0)
        xs = [tvm.nd.array(rng.standard_normal([int(d) for d in t.shape]).astype("float32"))
              for t in ins]
        y = tvm.nd.empty(tuple(int(d) for d in out.shape))
        best = dict.fromkeys(fs, float("inf"))
        for _ in range(rounds):
            for side, f in fs.items():
                ev = f.time_evaluator(f.entry_name, tvm.cpu(0), number=50, repeat=3)
                best[side] = min(best[side], *ev(*xs, y).results)
        print(f"{name:32s} {best['new'] * 1e6:8.2f} {best['old'] * 1e6:8.2f}"
              f" {best['new'] / best['old']:8.2f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TVM_NUM_THREADS", "1")))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--filter", default="")
    ap.add_argument("--no-rfactor", action="store_true",
                    help="new side without the small-plane GlobalMaxPool rfactor")
    ap.add_argument("--zoo", default="", help="comma-separated zoo models to A/B instead")
    ap.add_argument("--cpu-time", action="store_true",
                    help="--zoo at 1 thread: rounds timed by process CPU time")
    ap.add_argument("--kernels", action="store_true",
                    help="kernel level (topi + x86 schedules, time_evaluator), new vs old")
    a = ap.parse_args()
    os.environ["TVM_NUM_THREADS"] = str(a.threads)
    if a.zoo:
        zoo_ab(a.zoo.split(","), a.threads, a.rounds, a.cpu_time)
        return
    if a.kernels:
        kernels(a.rounds, a.filter)
        return
    print(f"threads {a.threads}, rounds {a.rounds}; best rounds (us), ratios: per-round medians")
    print(f"{'case':48s} {'new':>8s} {'old':>8s} {'ort':>8s} {'new/ort':>8s} {'old/ort':>8s}"
          f" {'new/old':>8s}")
    for c in cases():
        if a.filter not in c.name:
            continue
        model = c.onnx_fn()
        sess = ort_session(model, a.threads)
        ort_run, ort_outs = ort_bound_runner(sess, c.feeds)
        ort_run()
        sides = {"new": build_side(c, model, False, not a.no_rfactor), "old": build_side(c, model, True)}
        for k, m in sides.items():
            m.run()
            np.testing.assert_allclose(m.get_output(0).numpy(), ort_outs[0].numpy(),
                                       rtol=1e-5, atol=1e-6, err_msg=f"{c.name} {k}")
        runs = {"new": sides["new"].run, "old": sides["old"].run, "ort": ort_run}
        s = interleaved_samples(runs, a.rounds, pause=0.02, target_s=0.005)
        med = {k: min(v) * 1e6 for k, v in s.items()}

        r = _ratio(s)
        print(f"{c.name:48s} {med['new']:8.2f} {med['old']:8.2f} {med['ort']:8.2f}"
              f" {r('new', 'ort'):8.2f} {r('old', 'ort'):8.2f} {r('new', 'old'):8.2f}",
              flush=True)


if __name__ == "__main__":
    main()
