"""Workloads for tests and benchmarks (TVM's ``relay.testing``): ResNet-18/34, MobileNetV2 and a
BERT-style encoder built directly in relay with random weights.

Each ``get_workload(...)`` returns ``(mod, params)``: weights are parameters of ``@main`` (relay
Vars named like ``stage1_unit1_conv1_weight``) and ``params`` maps those names to numpy arrays, so
``relay.build(mod, params=params)`` can bind them as constants.
"""

from . import bert, mobilenet_v2, resnet  # noqa: F401
from .helpers import create_workload, run_infer_type, run_opt_pass  # noqa: F401,E402
