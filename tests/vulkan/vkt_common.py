"""Shared by tests/vulkan (a plain module, not a conftest: this folder is no package, so that
``import vulkan`` finds the binding, not the folder). Vulkan tests run on Mesa's lavapipe (mesa-vulkan-drivers + libvulkan1) through the ``vulkan``
binding; they never skip: a missing driver fails them. Every shader a build makes here is
checked by ``spirv-val`` (TVMPY_SPIRV_VALIDATE=1, read by codegen/vulkan.py)."""

from __future__ import annotations

import os
from typing import Any

os.environ["TVMPY_SPIRV_VALIDATE"] = "1"  # set at import: builder subprocesses inherit it


def vulkan_device() -> Any:
    """tvm.vulkan(0), asserted to exist (the tests' ``dev`` fixture)."""
    import tvmpy as tvm

    d = tvm.vulkan(0)
    assert d.exist, ("no Vulkan device: install the 'vulkan' package, libvulkan1 and "
                     "mesa-vulkan-drivers (lavapipe)")
    return d
