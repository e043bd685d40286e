"""``relay.qnn``: the quantized dialect (TVM's QNN).

* ``relay.qnn.op``: ``quantize``, ``dequantize``, ``requantize``, ``conv2d``, ``dense``,
  ``batch_matmul``, ``add``, ``mul``, ``subtract``, ``concatenate``, ``sigmoid``,
  ``leaky_relu``, ``avg_pool2d``, ``global_avg_pool2d``, ``softmax``: integer tensors with scale and zero point
  expressions; their numpy meaning (the interpreter's) is onnxruntime's.
* ``relay.qnn.transform.CanonicalizeOps()``: lowers them to integer relay arithmetic (uint8 x int8
  products with int32 accumulation, zero-point correction terms, ORT's float32 requantization).
* ``relay.qnn.transform.FakeQuantizationToInteger()``: rewrites dequantize -> float ops ->
  quantize regions (ONNX QDQ graphs) into QNN operators.

``relay.build`` runs FakeQuantizationToInteger and CanonicalizeOps first when a module contains
QNN calls (after binding the parameters), so the graph passes and kernels only see standard ops.
"""

from . import canonicalize as _canonicalize  # noqa: F401  (registers FTVMQnnCanonicalize)
from . import op, transform  # noqa: F401
