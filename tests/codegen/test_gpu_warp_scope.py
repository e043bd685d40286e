"""Storage scope "warp" (memory shared by the lanes of a warp; TVM lowers it to shuffles) is not
lowered by tvmpy: every GPU code generator refuses it instead of treating it as per-thread
memory, which would read other lanes' parts uninitialized."""

import pytest

import tvmpy as tvm
from tvmpy import te
from tvmpy.codegen.gpu_source import GPUCodegenError


@pytest.mark.parametrize("target", ["opencl", "cuda", "nvptx"])
def test_warp_scope_is_refused(target):
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    AW = s.cache_read(A, "warp", [B])
    bx, tx = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[AW].compute_at(s[B], bx)
    s[AW].bind(s[AW].op.axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(GPUCodegenError, match="storage scope 'warp' of A.warp"):
        tvm.build(s, [A, B], target=target)
