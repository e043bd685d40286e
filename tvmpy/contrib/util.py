"""TVM v0.6's name of :mod:`tvmpy.contrib.utils` (``from tvm.contrib import util``)."""

from .utils import TempDirectory, tempdir  # noqa: F401
