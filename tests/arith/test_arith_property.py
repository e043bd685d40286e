"""Property-based tests: on random integer expressions over a few bounded variables, the
simplified expression evaluates like the original, bounds / interval sets / modular sets contain
every sampled value, and can_prove never proves a false statement."""

from __future__ import annotations

import math
import os
import random

from arith_eval import Undefined, evaluate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tvmpy import arith, tir
from tvmpy.tir import expr as E

# ARITH_EXAMPLES=5000 runs a longer bug hunt (the default keeps the file fast)
EXAMPLES = int(os.environ.get("ARITH_EXAMPLES", "300"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# variables with their ranges [lo, hi] (inclusive); negative ranges exercise floor vs trunc
X = tir.Var("x")
Y = tir.Var("y")
Z = tir.Var("z")
N = tir.SizeVar("n")
RANGES = {X: (-9, 9), Y: (0, 7), Z: (0, 33), N: (0, 20)}
VARS = list(RANGES)


def _divisor(draw) -> E.PrimExpr:
    return E.IntImm("int32", draw(st.sampled_from([1, 2, 3, 4, 8, 16, -1, -2, -3, -4, 5, 7])))


@st.composite
def int_exprs(draw, depth: int = 4) -> E.PrimExpr:
    if depth == 0 or draw(st.integers(0, 4)) == 0:
        if draw(st.booleans()):
            return draw(st.sampled_from(VARS))
        return E.IntImm("int32", draw(st.integers(-12, 12)))
    op = draw(
        st.sampled_from(
            [
                "add",
                "sub",
                "mul",
                "mulc",
                "fdiv",
                "fmod",
                "tdiv",
                "tmod",
                "min",
                "max",
                "select",
                "ediv",
                "emod",
                "fdiv2",
                "fmod2",
            ]
        )
    )
    a = draw(int_exprs(depth - 1))
    if op == "add":
        return a + draw(int_exprs(depth - 1))
    if op == "sub":
        return a - draw(int_exprs(depth - 1))
    if op == "mul":
        return a * draw(int_exprs(depth - 2 if depth > 1 else 0))
    if op == "mulc":
        return a * E.IntImm("int32", draw(st.integers(-8, 8)))
    if op == "fdiv":
        return tir.floordiv(a, _divisor(draw))
    if op == "fmod":
        return tir.floormod(a, _divisor(draw))
    if op == "fdiv2":  # nested affine index patterns produced by split/fuse
        c = draw(st.sampled_from([2, 4, 8]))
        return tir.floordiv(
            a * c + draw(int_exprs(1)), E.IntImm("int32", c * draw(st.sampled_from([1, 2])))
        )
    if op == "fmod2":
        c = draw(st.sampled_from([2, 4, 8]))
        inner = a * c + draw(int_exprs(1))
        return (
            tir.floormod(inner, E.IntImm("int32", c))
            + tir.floordiv(inner, E.IntImm("int32", c)) * c
        )
    if op == "tdiv":
        return tir.truncdiv(a, _divisor(draw))
    if op == "tmod":
        return tir.truncmod(a, _divisor(draw))
    if op == "ediv":  # division by an expression (samples dividing by zero are skipped)
        return E.FloorDiv(a, draw(int_exprs(1)))
    if op == "emod":
        return E.Mod(a, draw(int_exprs(1)))
    if op == "min":
        return tir.min(a, draw(int_exprs(depth - 1)))
    if op == "max":
        return tir.max(a, draw(int_exprs(depth - 1)))
    b = draw(int_exprs(depth - 1))
    if draw(st.booleans()):  # a comparison of the two branches themselves (min/max patterns)
        cmp = draw(st.sampled_from([E.LT, E.LE, E.GT, E.GE]))
        x, y = (a, b) if draw(st.booleans()) else (b, a)
        return tir.Select(cmp(x, y), a, b)
    if draw(st.booleans()):  # only the chosen branch is evaluated (and may assume its side)
        if draw(st.booleans()):
            cmp = draw(st.sampled_from([E.LT, E.LE, E.GT, E.GE, E.EQ, E.NE]))
            cond = cmp(draw(st.sampled_from(VARS)), E.IntImm("int32", draw(st.integers(-5, 9))))
        else:
            cond = draw(bool_exprs(1))
        return E.Call("int32", "if_then_else", [cond, a, b])
    return tir.Select(draw(bool_exprs(1)), a, b)


@st.composite
def bool_exprs(draw, depth: int = 2) -> E.PrimExpr:
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        a, b = draw(int_exprs(2)), draw(int_exprs(2))
        cmp = draw(st.sampled_from([E.LT, E.LE, E.GT, E.GE, E.EQ, E.NE]))
        return cmp(a, b)
    op = draw(st.sampled_from(["and", "or", "not"]))
    a = draw(bool_exprs(depth - 1))
    if op == "not":
        return E.Not(a)
    b = draw(bool_exprs(depth - 1))
    return E.And(a, b) if op == "and" else E.Or(a, b)


def _samples(seed: int, count: int = 40) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for k in range(count):
        env = {}
        for v, (lo, hi) in RANGES.items():
            # always include the corners of the domain
            if k == 0:
                env[v] = lo
            elif k == 1:
                env[v] = hi
            else:
                env[v] = rng.randint(lo, hi)
        out.append(env)
    return out


def _bound_analyzer() -> arith.Analyzer:
    ana = arith.Analyzer()
    for v, (lo, hi) in RANGES.items():
        ana.bind(v, tir.Range(lo, hi + 1))
    return ana


def _values(e, samples):
    for env in samples:
        try:
            yield env, evaluate(e, env)
        except Undefined:
            continue


def _assert_same(orig, simp, samples):
    for env, want in _values(orig, samples):
        try:
            got = evaluate(simp, env)
        except Undefined as err:  # the simplified form may not be less defined
            raise AssertionError(f"{orig} -> {simp} undefined at {env}") from err
        assert got == want, (
            f"{orig}\n  -> {simp}\n  at { {v.name: x for v, x in env.items()} }: {got} != {want}"
        )


@SETTINGS
@given(e=int_exprs(), seed=st.integers(0, 10**6))
def test_simplify_preserves_value_with_bounds(e, seed):
    ana = _bound_analyzer()
    _assert_same(e, ana.simplify(e), _samples(seed))


@SETTINGS
@given(e=int_exprs(), seed=st.integers(0, 10**6))
def test_simplify_preserves_value_without_bounds(e, seed):
    # no facts: rules must hold for every value; sample wider than the bound ranges
    rng = random.Random(seed)
    samples = [
        {
            X: rng.randint(-40, 40),
            Y: rng.randint(-40, 40),
            Z: rng.randint(-40, 40),
            N: rng.randint(0, 40),
        }
        for _ in range(40)
    ]
    _assert_same(e, arith.Analyzer().simplify(e), samples)


@SETTINGS
@given(e=int_exprs(), seed=st.integers(0, 10**6))
def test_bounds_contain_values(e, seed):
    ana = _bound_analyzer()
    b = ana.const_int_bound(e)
    m = ana.modular_set(e)
    dom = {v: tir.Range(lo, hi + 1) for v, (lo, hi) in RANGES.items()}
    s = arith.Analyzer().int_set(e, dom)
    try:
        lo = evaluate(s.min_value, {}) if s.has_lower_bound() else None
        hi = evaluate(s.max_value, {}) if s.has_upper_bound() else None
    except Undefined:  # e.g. a constant division by zero kept as is
        lo = hi = None
    for env, v in _values(e, _samples(seed)):
        assert b.min_value <= v <= b.max_value, f"{e}: {v} outside {b} at {env}"
        if m.coeff:
            assert (v - m.base) % m.coeff == 0, f"{e}: {v} not in {m}"
        else:
            assert v == m.base, f"{e}: {v} != constant {m.base}"
        assert lo is None or lo <= v, f"{e}: {v} below int_set {s}"
        assert hi is None or v <= hi, f"{e}: {v} above int_set {s}"


@SETTINGS
@given(c=bool_exprs(), seed=st.integers(0, 10**6))
def test_can_prove_is_sound_and_bool_simplify(c, seed):
    ana = _bound_analyzer()
    samples = _samples(seed)
    _assert_same(c, ana.simplify(c), samples)
    if ana.can_prove(c):
        for env, v in _values(c, samples):
            assert v == 1, f"proved {c} but false at {env}"
    if ana.can_prove(E.Not(c)):
        for env, v in _values(c, samples):
            assert v == 0, f"proved not {c} but true at {env}"


@st.composite
def simple_conds(draw) -> E.PrimExpr:
    """Facts of the shapes passes assume: ``var cmp expr`` (loop guards, if conditions)."""
    cmp = draw(st.sampled_from([E.LT, E.LE, E.GT, E.GE, E.EQ, E.NE]))
    lhs = draw(st.sampled_from(VARS)) * E.IntImm("int32", draw(st.sampled_from([1, 1, 2, -1, 3])))
    rhs = draw(int_exprs(1))
    c = cmp(lhs, rhs)
    if draw(st.integers(0, 3)) == 0:
        c = E.And(c, draw(bool_exprs(0)))
    return c


@settings(SETTINGS, max_examples=EXAMPLES * 2 // 3)
@given(
    cond=st.one_of(simple_conds(), bool_exprs(1)),
    e=int_exprs(),
    goal=bool_exprs(0),
    seed=st.integers(0, 10**6),
)
def test_simplify_under_constraint(cond, e, goal, seed):
    ana = _bound_analyzer()
    samples = [env for env, v in _values(cond, _samples(seed, 120)) if v]
    with ana.constraint_scope(cond):
        simp = ana.simplify(e)
        proved = ana.can_prove(E.LT(e, E.IntImm("int32", 3)))
        goal_proved = ana.can_prove(goal)
        goal_refuted = ana.can_prove(E.Not(goal))
        bound = ana.const_int_bound(e)
    _assert_same(e, simp, samples)
    for env, v in _values(e, samples):
        assert not proved or v < 3, f"under {cond} proved {e} < 3, false at {env}"
        assert bound.min_value <= v <= bound.max_value, f"under {cond}: {e}={v} outside {bound}"
    for env, v in _values(goal, samples):
        assert not goal_proved or v, f"under {cond} proved {goal}, false at {env}"
        assert not goal_refuted or not v, f"under {cond} refuted {goal}, true at {env}"


@st.composite
def vector_exprs(draw, depth: int = 2) -> E.PrimExpr:
    lanes = 4
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            stride = E.IntImm("int32", draw(st.sampled_from([1, 1, 1, 2, 3, 4, 0, -1, -3])))
            if draw(st.booleans()):  # the aligned bases vectorization produces
                scale = E.IntImm("int32", draw(st.sampled_from([2, 3, 4, 8])))
                base = draw(st.sampled_from(VARS)) * scale + E.IntImm(
                    "int32", draw(st.integers(0, 3))
                )
            else:
                base = draw(int_exprs(2))
            return E.Ramp(base, stride, lanes)
        return E.Broadcast(draw(int_exprs(2)), lanes)
    op = draw(st.sampled_from(["add", "sub", "mul", "fdiv", "fmod", "tdiv", "tmod", "min"]))
    a = draw(vector_exprs(depth - 1))
    if op in ("add", "sub", "min"):
        b = draw(vector_exprs(depth - 1))
        return {"add": E.Add, "sub": E.Sub, "min": E.Min}[op](a, b)
    if op == "mul":
        return E.Mul(a, E.Broadcast(E.IntImm("int32", draw(st.integers(-4, 4))), lanes))
    cls = {"fdiv": E.FloorDiv, "fmod": E.FloorMod, "tdiv": E.Div, "tmod": E.Mod}[op]
    if draw(st.booleans()):
        return cls(a, E.Broadcast(E.IntImm("int32", draw(st.sampled_from([2, 3, 4, 8]))), lanes))
    return cls(a, E.Broadcast(_divisor(draw), lanes))


@st.composite
def vector_conds(draw) -> E.PrimExpr:
    cmp = draw(st.sampled_from([E.LT, E.LE, E.GT, E.GE]))
    return cmp(draw(vector_exprs(1)), draw(vector_exprs(0)))


@SETTINGS
@given(e=st.one_of(vector_exprs(), vector_conds()), seed=st.integers(0, 10**6))
def test_vector_simplify_preserves_lanes(e, seed):
    ana = _bound_analyzer()
    _assert_same(e, ana.simplify(e), _samples(seed, 20))


# ---- symbolic ranges: i in [0, n), j in [0, m) with n, m in [1, 12] ------------------------------
SI, SJ = tir.Var("i"), tir.Var("j")
SN, SM = tir.SizeVar("n"), tir.SizeVar("m")
SYM_VARS = [SI, SJ, SN, SM]


@st.composite
def sym_exprs(draw, depth: int = 3) -> E.PrimExpr:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if draw(st.integers(0, 3)):
            return draw(st.sampled_from(SYM_VARS))
        return E.IntImm("int32", draw(st.integers(-4, 9)))
    op = draw(
        st.sampled_from(
            ["add", "sub", "mul", "mulc", "fdiv", "fmod", "sdiv", "smod", "min", "max", "fused"]
        )
    )
    a = draw(sym_exprs(depth - 1))
    if op == "fused":  # the index of a fused loop pair and its decomposition
        f = SI * SM + SJ
        return draw(st.sampled_from([f, f // SM, f % SM, tir.floordiv(f, SM) * SM + f % SM]))
    if op in ("add", "sub", "min", "max"):
        b = draw(sym_exprs(depth - 1))
        return {"add": E.Add, "sub": E.Sub, "min": E.Min, "max": E.Max}[op](a, b)
    if op == "mul":
        return a * draw(sym_exprs(1))
    if op == "mulc":
        return a * E.IntImm("int32", draw(st.integers(-3, 8)))
    if op in ("fdiv", "fmod"):
        cls = E.FloorDiv if op == "fdiv" else E.FloorMod
        return cls(a, E.IntImm("int32", draw(st.sampled_from([2, 3, 4, 8]))))
    cls = E.FloorDiv if op == "sdiv" else E.FloorMod
    return cls(a, draw(st.sampled_from([SN, SM])))


def _sym_samples(seed: int, count: int = 30) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for k in range(count):
        n, m = (1, 1) if k == 0 else (rng.randint(1, 12), rng.randint(1, 12))
        out.append(
            {
                SN: n,
                SM: m,
                SI: rng.randrange(n) if k > 1 else n - 1,
                SJ: rng.randrange(m) if k > 1 else m - 1,
            }
        )
    return out


@SETTINGS
@given(
    e=sym_exprs(),
    goal_a=sym_exprs(2),
    goal_b=sym_exprs(2),
    cmp=st.sampled_from([E.LT, E.LE, E.EQ, E.NE]),
    seed=st.integers(0, 10**6),
)
def test_symbolic_ranges(e, goal_a, goal_b, cmp, seed):
    ana = arith.Analyzer()
    ana.bind(SI, tir.Range(0, SN))
    ana.bind(SJ, tir.Range(0, SM))
    samples = _sym_samples(seed)
    _assert_same(e, ana.simplify(e), samples)
    goal = cmp(goal_a, goal_b)
    proved, refuted = ana.can_prove(goal), ana.can_prove(E.Not(goal))
    for env, v in _values(goal, samples):
        assert not proved or v, f"proved {goal}, false at {env}"
        assert not refuted or not v, f"refuted {goal}, true at {env}"


# ---- div/mod pairs of congruent dividends: k * (x // c) * c + k * (y % c), y == x (mod c) ------
def _congruent_dividends(draw, c: int) -> tuple[E.PrimExpr, E.PrimExpr]:
    """(x, y): y equal to x modulo c by construction (a reduced coefficient, an added multiple
    of c, an outer split taken out), or off by one (must then stay a division)."""
    a, b = draw(int_exprs(2)), draw(int_exprs(1))
    p = draw(st.integers(1, 20))
    form = draw(st.sampled_from(["same", "reduced", "shifted", "outer", "off"]))
    if form == "outer":
        q = draw(st.sampled_from([2, 3, 4, 7]))
        p = c // math.gcd(c, q) * draw(st.integers(1, 3))  # c divides q * p
        return tir.floormod(a, E.IntImm("int32", q)) * p + b, a * p + b
    x = a * p + b
    if form == "same":
        return x, x
    if form == "reduced":
        return x, a * (p % c) + b
    if form == "shifted":
        return x, x + draw(int_exprs(1)) * c + E.IntImm("int32", c * draw(st.integers(-2, 2)))
    return x, x + 1


def _wide_env(rng: random.Random) -> dict:
    """Values outside the bound ranges (no facts: the rules must hold everywhere; n is a
    SizeVar, so it stays non-negative)."""
    return {X: rng.randint(-60, 60), Y: rng.randint(-60, 60), Z: rng.randint(-60, 60),
            N: rng.randint(0, 60)}


@st.composite
def split_pairs(draw) -> E.PrimExpr:
    c = draw(st.sampled_from([2, 3, 5, 7, 13, 16]))
    k = draw(st.sampled_from([1, 2, -3]))
    cc = E.IntImm("int32", c)
    if draw(st.integers(0, 3)) == 0:  # truncating pairs: one dividend
        x = y = draw(int_exprs(3))
        div, mod = tir.truncdiv(x, cc), tir.truncmod(y, cc)
    else:
        x, y = _congruent_dividends(draw, c)
        div, mod = tir.floordiv(x, cc), tir.floormod(y, cc)
    terms = [div * (c * k), mod * k if k != 1 else mod]
    if draw(st.booleans()):
        terms.append(draw(int_exprs(2)))
    order = draw(st.permutations(range(len(terms))))
    out = terms[order[0]]
    for n in order[1:]:
        out = out + terms[n]
    return out


@SETTINGS
@given(e=split_pairs(), seed=st.integers(0, 10**6))
def test_div_mod_pairs_preserve_value(e, seed):
    ana = _bound_analyzer()
    _assert_same(e, ana.simplify(e), _samples(seed))
    rng = random.Random(seed)
    wide = [_wide_env(rng) for _ in range(40)]
    _assert_same(e, arith.Analyzer().simplify(e), wide)


@st.composite
def vector_split_pairs(draw) -> E.PrimExpr:
    lanes = 4
    c = draw(st.sampled_from([2, 3, 5, 7, 13]))
    k = draw(st.sampled_from([1, 2, -3]))
    stride = draw(st.integers(-3, 5))
    x, y = _congruent_dividends(draw, c)
    if draw(st.booleans()):
        vx = E.Ramp(x, E.IntImm("int32", stride), lanes)
        stride2 = stride + c * draw(st.integers(-1, 1)) + draw(st.sampled_from([0, 0, 0, 1]))
        vy = E.Ramp(y, E.IntImm("int32", stride2), lanes)
    else:
        vx, vy = E.Broadcast(x, lanes), E.Broadcast(y, lanes)
    cb = E.Broadcast(E.IntImm("int32", c), lanes)
    if draw(st.integers(0, 3)) == 0:
        div, mod = E.Div(vx, cb), E.Mod(vx, cb)
    else:
        div, mod = E.FloorDiv(vx, cb), E.FloorMod(vy, cb)
    terms = [
        E.Mul(div, E.Broadcast(E.IntImm("int32", c * k), lanes)),
        E.Mul(E.Broadcast(E.IntImm("int32", k), lanes), mod),
    ]
    if draw(st.booleans()):
        terms.append(draw(vector_exprs(1)))
    order = draw(st.permutations(range(len(terms))))
    out = terms[order[0]]
    for n in order[1:]:
        out = E.Add(out, terms[n]) if draw(st.booleans()) else E.Sub(out, E.Sub(
            E.Broadcast(E.IntImm("int32", 0), lanes), terms[n]))
    return out


@SETTINGS
@given(e=vector_split_pairs(), seed=st.integers(0, 10**6))
def test_vector_div_mod_pairs_preserve_lanes(e, seed):
    ana = _bound_analyzer()
    _assert_same(e, ana.simplify(e), _samples(seed, 20))
    rng = random.Random(seed)
    wide = [_wide_env(rng) for _ in range(20)]
    _assert_same(e, arith.Analyzer().simplify(e), wide)
