"""Differential test of the C backend: the random expression trees of test_llvm_fuzz.py (integer
wrap-around, floor/trunc division, shifts, bitwise ops, min/max with NaN, selects, casts; float32
without multiplications so FMA contraction cannot change rounding), compiled to C as scalar and
vector loops, bit-exact against the loop-IR interpreter."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tvmpy.ir import dtype as dt
from tvmpy.tir import interpreter

from .cases import aligned
from .test_c import make_lib
from .test_llvm_fuzz import DTYPES, IN_DTYPES, N, _inputs, _kernel, expr


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), out_dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_random_expressions_match_interpreter(data, out_dtype, seed):
    def make(vector: bool):
        return _kernel(out_dtype, lambda leaves: data.draw(expr(out_dtype, leaves, 4)), vector)

    funcs = [make(False), make(True)]
    lib = make_lib(funcs)
    ins = _inputs(np.random.default_rng(seed))
    for f in funcs:
        got = aligned(np.zeros(N, dt.to_numpy(out_dtype)))
        want = np.zeros(N, dt.to_numpy(out_dtype))
        assert lib(f.name, *[aligned(ins[k]) for k in IN_DTYPES], got) == 0
        interpreter.run(f, [ins[k].copy() for k in IN_DTYPES] + [want])
        np.testing.assert_array_equal(got, want, err_msg=f"{f.name}: {f.body.body.value}")
