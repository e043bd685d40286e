"""Reshape copy kernels: contiguous vector reads (issue 12).

A relay ``reshape`` of a contiguous tensor is lowered as a copy kernel (topi.reshape scheduled
with topi.x86.schedule_injective). This times, per shape, interleaved in one process:

* ``before``: the kernel built with the simplifier's congruent div/mod merges switched off (the
  read index stays ``(p // w) * w + p % w``: a gather per vector),
* ``after``: the kernel built as the simplifier now does it (one contiguous vector load),
* ``numpy``: ``np.copyto(out, a.reshape(newshape))`` into a preallocated array (the same bytes).

Every side reads the same input and writes a preallocated output; one sample per round is the mean
of a calibrated number of back-to-back calls. Prints median and the 25-75% spread per side and the
ratios of medians. Run: ``flock /tmp/tvmpy-bench.lock python bench/reshape_copy.py`` (add
``--threads N``; the default 2 is the issue's setting).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from collections.abc import Iterator

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ensure_native_blas, interleaved_samples, machine_description, quartiles  # noqa: E402

SHAPES = [
    ((64, 56, 56), (64, 3136)),
    ((128, 28, 28), (128, 784)),
    ((256, 7, 7), (256, 49)),
    ((7, 11, 3), (3, 77)),
    ((3, 7, 13), (273,)),
    ((5, 17), (85,)),
]


@contextlib.contextmanager
def merges_disabled() -> Iterator[None]:
    """The simplifier without the congruent div/mod merges (the behaviour before the fix)."""
    from tvmpy.arith import simplifier, sum_form

    saved = sum_form._merge_congruent, simplifier.fold_vector_splits
    sum_form._merge_congruent = lambda s, reparse: False
    simplifier.fold_vector_splits = lambda e, visit: None
    sum_form.clear_caches()
    try:
        yield
    finally:
        sum_form._merge_congruent, simplifier.fold_vector_splits = saved
        sum_form.clear_caches()


def build(shape: tuple, newshape: tuple):
    import tvmpy as tvm
    from tvmpy import te, topi

    A = te.placeholder(shape, "float32", name="A")
    B = topi.reshape(A, newshape)
    with tvm.target.Target("llvm"):
        s = topi.x86.schedule_injective([B])
        f = tvm.build(s, [A, B], "llvm")
    return f, "gather" in f.get_source("ll")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    os.environ["TVM_NUM_THREADS"] = str(args.threads)
    ensure_native_blas()
    import numpy as np

    import tvmpy as tvm

    print(f"# {machine_description()}, TVM_NUM_THREADS={args.threads}, "
          f"load average {os.getloadavg()[0]:.2f} at start")
    print("| reshape | before us (p25-p75) | after us (p25-p75) | numpy copyto us (p25-p75) "
          "| before/after | after/numpy | gather before/after |")
    print("|---|---|---|---|---|---|---|")
    for shape, newshape in SHAPES:
        with merges_disabled():
            f_before, g_before = build(shape, newshape)
        f_after, g_after = build(shape, newshape)
        a = np.random.default_rng(0).uniform(-3, 3, shape).astype("float32")
        ta, tb1, tb2 = tvm.nd.array(a), tvm.nd.empty(newshape), tvm.nd.empty(newshape)
        out = np.empty(newshape, "float32")
        f_before(ta, tb1)
        f_after(ta, tb2)
        want = a.reshape(newshape)
        np.testing.assert_array_equal(tb1.numpy(), want)
        np.testing.assert_array_equal(tb2.numpy(), want)
        a_view = a.reshape(newshape)
        sides = {
            "before": functools.partial(f_before, ta, tb1),
            "after": functools.partial(f_after, ta, tb2),
            "numpy": functools.partial(np.copyto, out, a_view),
        }
        t = interleaved_samples(sides, args.rounds, pause=0.05)
        q = {k: quartiles(v) for k, v in t.items()}

        def cell(k: str, q: dict = q) -> str:
            lo, med, hi = (x * 1e6 for x in q[k])
            return f"{med:.2f} ({lo:.2f}-{hi:.2f})"

        print(f"| {shape}->{newshape} | {cell('before')} | {cell('after')} | {cell('numpy')} "
              f"| {q['before'][1] / q['after'][1]:.2f}x | {q['after'][1] / q['numpy'][1]:.2f}x "
              f"| {g_before}/{g_after} |", flush=True)
    print(f"# load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
