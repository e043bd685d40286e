"""The fuzzer's operator catalog: for each ONNX operator, how to pick operands that satisfy its
shape and dtype constraints, draw attributes from their valid domain (edge cases included:
size-1 and prime dims, broadcasting, negative axes, strides / dilations / padding, groups),
and judge whether its result is well posed (see generator.py).

A spec is ``spec(builder) -> Plan | None`` (None: no operands fit now; the generator tries
another). ``SPECS`` maps a name (usually the op type) to its spec; the modules register
theirs on import.
"""

from . import elementwise, indexing, nn, reduction, shape  # noqa: F401 - they register
from ._common import SPECS

__all__ = ["SPECS"]
