"""Helpers for the pass tests: run a module on random inputs with the numpy interpreter."""

import numpy as np

from tvmpy import relay


def random_inputs(func, seed=0):
    rng = np.random.default_rng(seed)
    return {p.name_hint: rng.uniform(-1, 1, tuple(int(d) for d in p.type_annotation.shape))
            .astype(p.type_annotation.dtype) for p in func.params}


def run(mod, inputs):
    return relay.create_executor("debug", mod).evaluate()(**inputs)


def count_ops(expr, name):
    n = [0]

    def f(e):
        if isinstance(e, relay.Call) and getattr(e.op, "name", None) == name:
            n[0] += 1

    relay.post_order_visit(expr, f)
    return n[0]
