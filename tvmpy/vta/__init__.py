"""VTA: the versatile tensor accelerator as a software model (issue 27).

Compiler side (this file's names, TVM's ``vta`` package API): :func:`get_env`,
:class:`Environment`, :func:`build`, :func:`lower`.
"""

from .environment import Environment, get_env  # noqa: F401
from .build import build, lower  # noqa: F401
