"""Elementwise math at 1 thread: ns per element of every unary relay op, against exp and numpy.

Each case is a one-op relay function (or the composite a frontend emits: SiLU, HardSwish,
HardSigmoid, GELU, Softplus, Mish ...) on a float32 tensor of 96x112x112 = 1.2M elements (the
output of EfficientNet-B0's 16 -> 96 expansion conv), built at opt_level 3 for the host
("llvm"), run on the graph executor with the input set once (``run()`` timed). numpy computes
the same values (a ufunc with ``out=`` where there is one) in the same run. Every output is
checked against numpy before timing (``--no-check`` skips it).

Timing (bench/common.py ``interleaved_samples``): tvmpy and numpy interleaved, each round the
mean of a calibrated number of calls (~20 ms), ``--rounds`` rounds. Columns: ns per element of
the best round (the figure a loaded 2-core machine disturbs least) with the median in
brackets, the ratio of best rounds to ``exp``'s tvmpy time in the same run, numpy's best round
and tvmpy / numpy (best rounds).

    TVM_NUM_THREADS=1 taskset -c 0 python bench/unary.py [--rounds 7] [--filter sigmoid,tanh]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import (  # noqa: E402
    bench_threads,
    ensure_native_blas,
    interleaved_samples,
    machine_description,
    quartiles,
)

SHAPE = (1, 96, 112, 112)


@dataclass
class Case:
    name: str
    relay_fn: Callable[[Any], Any]      # relay var -> relay expr
    np_fn: Callable[[Any, Any], Any]     # (x, out) -> writes/returns the result
    lo: float = -8.0
    hi: float = 8.0
    rtol: float = 2e-5
    atol: float = 2e-6


def _cases() -> list[Case]:
    import numpy as np

    from tvmpy import relay
    from tvmpy.relay.frontend.common import softplus

    def c(v: float) -> Any:
        return relay.const(v, "float32")

    def uf(f: Any) -> Callable[[Any, Any], Any]:
        return lambda x, out: f(x, out=out)

    def sig(x: Any) -> Any:
        return 1 / (1 + np.exp(-x))

    def hswish(x: Any) -> Any:
        return relay.multiply(x, relay.clip(relay.add(relay.multiply(x, c(1 / 6)), c(0.5)), 0.0,
                                            1.0))

    def gelu_tanh(x: Any) -> Any:
        inner = relay.multiply(c(math.sqrt(2 / math.pi)),
                               relay.add(x, relay.multiply(c(0.044715),
                                                           relay.multiply(x, relay.multiply(x, x)))))
        return relay.multiply(relay.multiply(c(0.5), x), relay.add(c(1.0), relay.tanh(inner)))

    def np_gelu_tanh(x: Any) -> Any:
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

    def np_erf(x: Any) -> Any:
        import scipy.special

        return scipy.special.erf(x)

    def np_softplus(x: Any) -> Any:
        return np.logaddexp(x, 0)

    R = relay
    return [
        Case("exp", R.exp, uf(np.exp)),
        Case("x/(1+exp(-x))", lambda x: R.divide(x, R.add(c(1.0), R.exp(R.negative(x)))),
             lambda x, o: x / (1 + np.exp(-x))),
        Case("sigmoid", R.sigmoid, lambda x, o: sig(x)),
        Case("silu x*sigmoid(x)", lambda x: R.multiply(x, R.sigmoid(x)), lambda x, o: x * sig(x)),
        Case("tanh", R.tanh, uf(np.tanh)),
        Case("erf", R.erf, lambda x, o: np_erf(x), lo=-5, hi=5),
        Case("gelu (erf)", R.nn.gelu, lambda x, o: 0.5 * x * (1 + np_erf(x / math.sqrt(2))),
             lo=-5, hi=5),
        Case("gelu (tanh form)", gelu_tanh, lambda x, o: np_gelu_tanh(x), lo=-5, hi=5),
        Case("softplus", lambda x: softplus(x), lambda x, o: np_softplus(x)),
        Case("mish x*tanh(softplus)", lambda x: R.multiply(x, R.tanh(softplus(x))),
             lambda x, o: x * np.tanh(np_softplus(x))),
        Case("elu", lambda x: R.where(R.less(x, c(0.0)), R.subtract(R.exp(x), c(1.0)), x),
             lambda x, o: np.where(x < 0, np.expm1(np.minimum(x, 0)), x), atol=1e-6),
        Case("hardswish", hswish, lambda x, o: x * np.clip(x / 6 + 0.5, 0, 1)),
        Case("hardsigmoid", lambda x: R.clip(R.add(R.multiply(x, c(0.2)), c(0.5)), 0.0, 1.0),
             lambda x, o: np.clip(x * 0.2 + 0.5, 0, 1)),
        Case("log", R.log, uf(np.log), lo=1e-3, hi=100),
        Case("log2", R.log2, uf(np.log2), lo=1e-3, hi=100),
        Case("log1p", R.log1p, uf(np.log1p), lo=-0.9, hi=100),
        Case("sqrt", R.sqrt, uf(np.sqrt), lo=0, hi=100),
        Case("rsqrt", R.rsqrt, lambda x, o: 1 / np.sqrt(x), lo=1e-3, hi=100),
        Case("sin", R.sin, uf(np.sin), lo=-10, hi=10),
        Case("cos", R.cos, uf(np.cos), lo=-10, hi=10),
        Case("tan", R.tan, uf(np.tan), lo=-1.5, hi=1.5, rtol=1e-4),
        Case("atan", R.atan, uf(np.arctan)),
        Case("asin", R.asin, uf(np.arcsin), lo=-1, hi=1),
        Case("acos", R.acos, uf(np.arccos), lo=-1, hi=1),
        Case("sinh", R.sinh, uf(np.sinh), lo=-5, hi=5),
        Case("cosh", R.cosh, uf(np.cosh), lo=-5, hi=5),
        Case("asinh", R.asinh, uf(np.arcsinh)),
        Case("acosh", R.acosh, uf(np.arccosh), lo=1, hi=100),
        Case("atanh", R.atanh, uf(np.arctanh), lo=-0.99, hi=0.99, rtol=1e-4),
        Case("pow x^2", lambda x: R.power(x, c(2.0)), lambda x, o: np.square(x, out=o)),
        Case("pow x^2.5", lambda x: R.power(x, c(2.5)), lambda x, o: np.power(x, 2.5, out=o),
             lo=0, hi=10),
        Case("reciprocal 1/x", lambda x: R.divide(c(1.0), x), lambda x, o: np.reciprocal(x, out=o),
             lo=0.1, hi=10),
        Case("abs", R.abs, uf(np.abs)),
        Case("negative", R.negative, uf(np.negative)),
        Case("relu", R.nn.relu, lambda x, o: np.maximum(x, 0, out=o)),
        Case("clip", lambda x: R.clip(x, -1.0, 1.0), lambda x, o: np.clip(x, -1, 1, out=o)),
        Case("leaky_relu", lambda x: R.nn.leaky_relu(x, 0.1),
             lambda x, o: np.where(x > 0, x, 0.1 * x)),
        Case("round", R.round, uf(np.rint)),
        Case("floor", R.floor, uf(np.floor)),
        Case("ceil", R.ceil, uf(np.ceil)),
        Case("trunc", R.trunc, uf(np.trunc)),
        Case("sign", R.sign, uf(np.sign)),
    ]


def build(case: Case) -> Any:
    import tvmpy as tvm
    from tvmpy import relay
    from tvmpy.contrib import graph_executor

    x = relay.var("x", shape=SHAPE, dtype="float32")
    mod = tvm.IRModule.from_expr(relay.Function([x], case.relay_fn(x)))
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target="llvm")
    return graph_executor.GraphModule(lib["default"](tvm.cpu()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--filter", default="", help="comma-separated substrings of case names")
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()
    threads = bench_threads(args.threads)
    ensure_native_blas()
    import numpy as np

    print(f"# {machine_description()}, {threads} thread(s), {math.prod(SHAPE)} float32 elements, "
          f"load average {os.getloadavg()[0]:.2f} at start")
    print("| op | tvmpy ns/elem best (median) | / exp | numpy ns/elem | tvmpy / numpy |")
    print("|---|---|---|---|---|")
    n = math.prod(SHAPE)
    exp_ns = None
    wanted = [w for w in args.filter.split(",") if w]
    for case in _cases():
        if wanted and case.name != "exp" and not any(w in case.name for w in wanted):
            continue
        rng = np.random.default_rng(0)
        x = rng.uniform(case.lo, case.hi, SHAPE).astype("float32")
        m = build(case)
        m.set_input("x", x)
        m.run()
        out = np.empty(SHAPE, "float32")
        if not args.no_check:
            with np.errstate(all="ignore"):
                want = case.np_fn(x.astype("float64"), None)
            np.testing.assert_allclose(m.get_output(0).numpy(), want, rtol=case.rtol,
                                       atol=case.atol, err_msg=case.name)
        with np.errstate(all="ignore"):
            sides = {"tvmpy": m.run, "numpy": lambda f=case.np_fn, x=x, out=out: f(x, out)}
            t = interleaved_samples(sides, args.rounds, pause=0.05, target_s=0.02)
        best, med = min(t["tvmpy"]) * 1e9 / n, quartiles(t["tvmpy"])[1] * 1e9 / n
        np_best = min(t["numpy"]) * 1e9 / n
        if exp_ns is None:
            exp_ns = best
        print(f"| {case.name} | {best:.3f} ({med:.3f}) | {best / exp_ns:.2f} "
              f"| {np_best:.3f} | {best / np_best:.2f} |", flush=True)
    print(f"# load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
