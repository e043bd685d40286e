"""Smoke tests of the public arith API (detailed rule tests live in the other files)."""

from tvmpy import arith, tir
from tvmpy.tir import Range, Var


def test_public_api_basics():
    a = arith.Analyzer()
    i, j, x, y = Var("i"), Var("j"), Var("x"), Var("y")
    n = tir.SizeVar("n")
    a.bind(j, Range(0, 8))
    a.bind(i, Range(0, 64))
    assert a.can_prove_equal(a.simplify((i * 8 + j) // 8), i)
    assert a.can_prove_equal(a.simplify((i * 8 + j) % 8), j)
    assert a.simplify((x // 4) * 4 + x % 4) is x
    assert a.can_prove(i * 16 + j < 1024)
    assert not a.can_prove(i * 16 + j < 1015)
    b = a.const_int_bound(i * 8 + j)
    assert (b.min_value, b.max_value) == (0, 511)
    m = a.modular_set(i * 8 + 4)
    assert (m.coeff, m.base) == (8, 4)
    s = a.int_set(x * 8 + y, {x: Range(0, 4), y: Range(0, 8)})
    assert (s.min_value.value, s.max_value.value) == (0, 31)
    assert not a.can_prove(x < n)
    with a.constraint_scope(x < n):
        assert a.can_prove(x < n)
        assert a.can_prove(x * 4 + 3 < n * 4)
    assert not a.can_prove(x < n)
    assert a.const_int_bound(n).min_value == 0
    coeffs = arith.detect_linear_equation(x * 4 + y * n + 3, [x, y])
    assert [str(c) for c in coeffs] == ["4", "n", "3"]


def test_module_level_helpers_stay_functions():
    arith.Analyzer()  # importing the engine must not shadow arith.simplify
    x = Var("x")
    assert str(arith.simplify(x * 2 - x)) == "x"
    assert arith.can_prove(x < x + 1)


def test_module_simplify_inside_a_compilation_matches_a_fresh_analyzer():
    """Inside a compilation scope ``arith.simplify``/``can_prove`` reuse one fact-free
    Analyzer per thread (its memo tables serve the sub-expressions lowering simplifies over
    and over): the answers are those of a fresh Analyzer, facts bound elsewhere never leak
    in, and the reused one is dropped when the scope ends."""
    import threading

    from tvmpy.arith.sum_form import cache_scope

    x, y = Var("x"), Var("y")
    exprs = [(x * 4 + y * 4) // 4 - y, (x + 7) % 7 - x % 7, tir.max(x, x + 1) - x,
             (x * 6 + 3) // 3 % 2]
    want = [str(arith.Analyzer().simplify(e)) for e in exprs]
    bound = arith.Analyzer()
    bound.bind(x, Range(0, 4))
    with cache_scope():
        got = [str(arith.simplify(e)) for e in exprs + exprs]
        assert not arith.can_prove(x < 4)  # the facts of `bound` are its own
        assert arith.can_prove(x * 2 - x == x)
        with cache_scope():  # a nested part (one kernel) gets its own
            assert [str(arith.simplify(e)) for e in exprs] == want
        other: list[str] = []
        t = threading.Thread(target=lambda: other.extend(str(arith.simplify(e)) for e in exprs))
        t.start()
        t.join()
    assert got == want + want and other == want
    assert str(bound.simplify(tir.min(x, 9))) == "x"
    assert not hasattr(arith._LOCAL, "ana")


def test_compilation_scope_keeps_the_heap_out_of_full_collections():
    """A compilation leaves what is alive when it starts (and what it finished) out of the
    collector's full collections (gc.freeze), and gives it back when it ends; where objects
    were frozen already (a forked kernel worker) it leaves them frozen."""
    import gc

    from tvmpy.arith.sum_form import cache_scope, freeze_finished

    assert gc.get_freeze_count() == 0
    with cache_scope():
        assert gc.get_freeze_count() > 0
        with cache_scope():
            kept = [[i] for i in range(1000)]
            freeze_finished()
            assert gc.get_freeze_count() >= 1000
        assert kept
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with cache_scope():
            freeze_finished()
        # not unfrozen (0), nothing new frozen; frozen objects the scope's exit let go of (the
        # caches of earlier tests in this process, cleared at the scope's end) may be freed
        assert 0 < gc.get_freeze_count() <= frozen
        with cache_scope():
            kept = [[i] for i in range(1000)]
            freeze_finished()
            assert gc.get_freeze_count() <= frozen  # the new objects stay collectable
        assert kept
    finally:
        gc.unfreeze()
