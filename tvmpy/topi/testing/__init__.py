"""Numpy references for the operators (TVM's ``topi.testing``): the definitions tests compare
against, written independently of the tensor-expression computes."""

from .bitserial_ref import *  # noqa: F401,F403
from .common_ref import *  # noqa: F401,F403,E402
from .nn_ref import *  # noqa: F401,F403
