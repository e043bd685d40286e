"""Every quantized-operator node test of the installed onnx (QLinearConv, QLinearMatMul,
QuantizeLinear, DequantizeLinear, ConvInteger, MatMulInteger, DynamicQuantizeLinear) through
tvmpy's ONNX backend, on the reference interpreter and compiled (CanonicalizeOps -> integer
kernels), checked with onnx's own comparison; the float8, float4 and int4/uint4/int2/uint2 cases
too."""

import re
import warnings

import numpy as np
import pytest

pytest.importorskip("onnx")

from onnx.backend.test.runner import Runner  # noqa: E402

from tvmpy.contrib.onnx_backend import TvmpyBackend  # noqa: E402

_QUANT = re.compile(r"^test_(qlinearconv|qlinearmatmul|quantizelinear|dequantizelinear|"
                    r"convinteger|matmulinteger|dynamicquantizelinear)")


def _cases():
    from onnx.backend.test.loader import load_node_model_tests

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = [c for c in load_node_model_tests() if _QUANT.match(c.name)]
    return [c for c in cases if not c.name.endswith("_expanded")]


CASES = _cases()


def test_every_quantized_op_is_covered():
    ops = {re.match(r"test_([a-z]+)", c.name).group(1) for c in CASES}  # type: ignore[union-attr]
    assert {"qlinearconv", "qlinearmatmul", "quantizelinear", "dequantizelinear",
            "convinteger", "matmulinteger", "dynamicquantizelinear"} <= ops
    assert len(CASES) >= 25


@pytest.mark.parametrize("executor", ["debug", "graph"])
def test_quantized_node_tests(executor):
    from onnx import TensorProto, numpy_helper

    failures = []
    for case in CASES:
        inputs, ref = [[numpy_helper.to_array(t) if isinstance(t, TensorProto) else t
                        for t in ts] for ts in case.data_sets[0]]
        try:
            rep = TvmpyBackend.prepare(case.model, "CPU", executor=executor)
            with np.errstate(all="ignore"):
                out = list(rep.run(inputs))
            Runner.assert_similar_outputs(ref, out, rtol=case.rtol, atol=case.atol)
        except Exception as e:  # noqa: BLE001 -- collect every failing case, then report
            failures.append(f"{case.name}: {type(e).__name__}: {str(e).strip()[:200]}")
    assert not failures, f"{len(failures)}/{len(CASES)} failed:\n" + "\n".join(failures)
