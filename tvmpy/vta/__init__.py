"""VTA: the versatile tensor accelerator as a software model (issue 27).

Compiler side (this file's names, TVM's ``vta`` package API): :func:`get_env`,
:class:`Environment`, :func:`build`, :func:`lower`.
"""

from .environment import Environment, get_env  # noqa: F401
from .build import build, lower  # noqa: F401
from .build import MAGIC as _MAGIC, load_vta_module as _load_vta_module  # noqa: E402


def _is_vta_file(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(len(_MAGIC)) == _MAGIC


def _register_loader() -> None:
    from ..runtime import module as _rt_module

    if not any(p is _is_vta_file for p, _ in _rt_module.FILE_LOADERS):
        _rt_module.FILE_LOADERS.append((_is_vta_file, _load_vta_module))


_register_loader()
