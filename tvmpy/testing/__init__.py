"""``tvm.testing``: the helpers TVM tutorials and test files use (see utils.py); the pytest
plugin giving tests the ``target`` / ``dev`` fixtures is :mod:`tvmpy.testing.plugin`."""

from __future__ import annotations

from .utils import *  # noqa: F403
from .utils import __all__  # noqa: F401
