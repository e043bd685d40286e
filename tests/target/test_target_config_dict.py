"""TVM 0.8's Target config forms: ``Target({"kind": ..., options})``, ``target.attrs``,
``target.export()`` (and back), and TVM 0.6's ``tvm.target.rasp()``."""

from __future__ import annotations

import pytest

import tvmpy as tvm
from tvmpy.target import Target


def test_from_dict_equals_string_form():
    d = {"kind": "llvm", "mcpu": "skylake-avx512", "mattr": ["+avx2", "-fma"], "num-cores": 3}
    t = Target(d)
    s = Target("llvm -mcpu=skylake-avx512 -mattr=+avx2,-fma -num-cores=3")
    assert str(t) == str(s)
    assert t.mcpu == "skylake-avx512" and t.mattr == ["+avx2", "-fma"] and t.num_cores == 3
    assert t.attrs == {"mcpu": "skylake-avx512", "mattr": ["+avx2", "-fma"], "num-cores": 3}
    assert t.attrs.get("mtriple") is None


def test_export_round_trip_with_host():
    c = Target("cuda -arch=sm_80 -max_num_threads=512", host="llvm -mcpu=znver4")
    d = c.export()
    assert d["kind"] == "cuda" and d["arch"] == "sm_80" and d["max_num_threads"] == 512
    assert d["host"]["mcpu"] == "znver4" and "gpu" in d["keys"]
    back = Target(d)
    assert str(back) == str(c) and str(back.host) == str(c.host)
    assert back.max_num_threads == 512


def test_dict_errors_are_clear():
    with pytest.raises(ValueError, match="needs a 'kind'"):
        Target({"mcpu": "skylake"})
    with pytest.raises(ValueError, match="unknown target option -bogus"):
        Target({"kind": "llvm", "bogus": 1})


def test_rasp_is_the_rasp3b_arm_cpu():
    r = tvm.target.rasp()
    assert str(r) == str(tvm.target.arm_cpu("rasp3b"))
    assert r.attrs["mtriple"] == "aarch64-linux-gnu" and "arm_cpu" in r.keys
    assert "-num-cores=2" in str(tvm.target.rasp("-num-cores=2"))


def test_a_dict_target_builds():
    import numpy as np

    from tvmpy import te

    A = te.placeholder((11,), name="A")
    B = te.compute((11,), lambda i: A[i] * 2.0, name="B")
    f = tvm.build(te.create_schedule(B.op), [A, B], target=Target({"kind": "llvm"}))
    a = np.arange(11, dtype="float32")
    out = tvm.nd.empty((11,), "float32")
    f(tvm.nd.array(a), out)
    tvm.testing.assert_allclose(out.numpy(), 2 * a)
