"""Every operator with a compute, built alone with its "gpu" strategy for target "opencl" and run
on PoCL, against the relay interpreter (the same cases as test_op_strategy.py's CPU check)."""

import pytest
from test_op_strategy import _CASES, _COVERED, _TOL, check_call

# nn.contrib_dense_pack and the int8 blocked ops: CPU-only packed layouts (made by the x86
# AlterOpLayout; their only strategy is the x86 kernel); cast: its case casts to float16, which
# PoCL's CPU device lacks (cl_khr_fp16; the OpenCL runtime says so); shape_of (with the dyn
# ops): a generic and an x86 strategy only; nn.rnn_scan: on GPU targets the Legalize pass
# expands it into per-step ops before lowering (tests/relay/test_gpu_rnn.py runs that on opencl)
_CPU_ONLY = {"nn.contrib_dense_pack", "cast", "nn.contrib_conv2d_NCHWc_int8",
             "nn.contrib_depthwise_conv2d_NCHWc_int8", "nn.contrib_dense_pack_int8", "shape_of",
             "dyn.trilu", "dyn.dropout", "nn.rnn_scan"}


@pytest.mark.parametrize("name", [n for n in _COVERED if n not in _CPU_ONLY])
def test_op_on_opencl_matches_interpreter(name):
    tol = max(_TOL.get(name, 1e-5), 1e-5)
    check_call(_CASES[name][0], target="opencl", rtol=tol, atol=tol)
