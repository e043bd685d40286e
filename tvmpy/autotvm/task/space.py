"""TVM's import path ``autotvm.task.space``: the configuration space lives in
:mod:`tvmpy.autotvm.space`; this module re-exports it."""

from ..space import *  # noqa: F401,F403
from ..space import __all__  # noqa: F401
