"""Two buffer parameters of one name (te.placeholder's default, every AutoTVM task's
arguments) are distinct arguments of a GPU function's launch plan."""

import numpy as np

import tvmpy as tvm
from tvmpy import te


def test_same_named_inputs_are_not_aliased():
    A = te.placeholder((37,))
    B = te.placeholder((37,))
    assert A.op.name == B.op.name
    C = te.compute((37,), lambda i: A[i] - 2.0 * B[i], name="C")
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=16)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    f = tvm.build(s, [A, B, C], target="opencl")
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, 37).astype("float32"), rng.uniform(-1, 1, 37).astype("float32")
    c = np.zeros(37, "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a - 2 * b, rtol=1e-6)
    names = [p["name"] for p in f.plan["functions"][0]["signature"]["params"]]
    assert len(set(names)) == 3, names
