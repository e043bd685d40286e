"""TVM 0.6's ``tvm.module`` namespace (``tvm.runtime`` since 0.7): ``tvm.module.load(path)``,
``tvm.module.Module``, ``tvm.module.enabled(target)``."""

from __future__ import annotations

from .runtime.enabled import enabled
from .runtime.module import Module
from .runtime.module import load_module as load

__all__ = ["Module", "load", "enabled"]
