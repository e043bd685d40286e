"""Import torchvision beside the CPU build of torch.

The torchvision wheel that resolves against the pinned CPU torch carries CUDA C operators
(``torchvision._C``) that do not load here; two of its modules register meta / autograd kernels
for those operators at import time and fail. The model definitions are pure Python and need
neither, so empty modules are installed in their place before the first ``import torchvision``.
Operators from ``torchvision.ops`` that call the C library (``nms``, ``roi_align``) stay
unavailable; the zoo does not use them.
"""

from __future__ import annotations

import sys
import types
from typing import Any

__all__ = ["torchvision"]

_STUBBED = ("torchvision._meta_registrations", "torchvision._autograd_registrations")


def torchvision() -> Any:
    """The ``torchvision`` module, imported with its C-operator registrations stubbed out."""
    if "torchvision" not in sys.modules:
        for name in _STUBBED:
            sys.modules.setdefault(name, types.ModuleType(name))
    import torchvision as tv  # type: ignore[import-untyped]

    return tv
