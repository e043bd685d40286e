"""time_evaluator: result fields, TVM's number/repeat/min_repeat_ms semantics, checking."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy.runtime.evaluator import BenchmarkResult


def _args(n=1000):
    return tvm.nd.array(np.ones(n, "float32")), tvm.nd.array(np.ones(n, "float32")), tvm.nd.empty((n,))


def test_fields(kmod):
    a, b, c = _args()
    res = kmod.time_evaluator(kmod.entry_name, tvm.cpu(0), number=5, repeat=4)(a, b, c)
    assert isinstance(res, BenchmarkResult)
    assert len(res.results) == 4 and all(r > 0 for r in res.results)
    assert res.min <= res.median <= res.max and res.min <= res.mean <= res.max
    assert res.mean == pytest.approx(np.mean(res.results))
    assert res.std == pytest.approx(np.std(res.results))
    assert "mean=" in repr(res)
    np.testing.assert_array_equal(c.numpy(), 2)  # the function really ran


def test_min_repeat_ms_grows_number(kmod, monkeypatch):
    calls = []
    f = kmod.get_function("vadd")
    real = f._cfunc

    class Counting:
        def __call__(self, *a):
            calls.append(1)
            return real(*a)

    monkeypatch.setattr(f, "_cfunc", Counting())
    res = kmod.time_evaluator("vadd", tvm.cpu(0), number=1, repeat=2, min_repeat_ms=20)(*_args())
    assert len(res.results) == 2
    # each repeat lasted >= 20 ms, so far more than 1 + 2 calls were made
    assert len(calls) > 10
    assert sum(res.results) > 0


def test_numpy_outputs_written_back(kmod):
    c = np.zeros(8, "float32")
    kmod.time_evaluator("vadd", tvm.cpu(0), number=2)(np.ones(8, "float32"), np.ones(8, "float32"), c)
    np.testing.assert_array_equal(c, 2)


def test_checks(kmod):
    a, b, c = _args()
    with pytest.raises(TypeError, match="takes 3 argument"):
        kmod.time_evaluator("vadd", tvm.cpu(0))(a, b)
    with pytest.raises(ValueError, match="runs on cpu"):
        kmod.time_evaluator("vadd", tvm.device("cuda", 0))
    with pytest.raises(ValueError, match="number must be a positive int"):
        kmod.time_evaluator("vadd", tvm.cpu(0), number=0)
    with pytest.raises(AttributeError, match="no function"):
        kmod.time_evaluator("nope", tvm.cpu(0))
    with pytest.raises(RuntimeError, match="Assert fail"):
        kmod.time_evaluator("check_positive", tvm.cpu(0))(tvm.nd.array(-np.ones(2, "float32")))


def test_cache_flush_preproc_and_cooldown(kmod):
    a, b, c = _args()
    res = kmod.time_evaluator("vadd", tvm.cpu(0), number=3, repeat=2, cooldown_interval_ms=1,
                              f_preproc="cache_flush_cpu_non_first_arg")(a, b, c)
    assert len(res.results) == 2
    with pytest.raises(ValueError, match="unknown f_preproc"):
        kmod.time_evaluator("vadd", tvm.cpu(0), f_preproc="warp_speed")
