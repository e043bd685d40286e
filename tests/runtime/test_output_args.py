"""The ABI records which buffers a kernel writes; a read-only array passed for one is refused
(instead of the result silently landing in a scratch copy)."""

import numpy as np
import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.codegen.abi import signature


def _add_one():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    return s, [A, B]


def test_signature_marks_written_buffers():
    s, args = _add_one()
    sig = signature(tvm.lower(s, args))
    assert [p.written for p in sig.params] == [False, True]


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_read_only_input_ok_read_only_output_refused(target):
    s, args = _add_one()
    f = tvm.build(s, args, target=target)
    a = np.random.default_rng(0).standard_normal(8).astype("float32")
    a.flags.writeable = False
    b = np.empty(8, np.float32)
    f(a, b)
    np.testing.assert_allclose(b, a + 1.0)
    b.flags.writeable = False
    with pytest.raises(ValueError, match="argument B is written by the kernel"):
        f(a, b)
