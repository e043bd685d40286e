"""TVM v0.6's name of :mod:`tvmpy.topi.utils` (``from tvm.topi.util import get_const_tuple``)."""

from .utils import *  # noqa: F401,F403
from .utils import __all__  # noqa: F401
