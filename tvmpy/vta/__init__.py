"""VTA, the paper's deep-learning accelerator, as a software model (``import tvmpy.vta as vta``).

The hardware half (layer "vta hardware" of docs/ARCHITECTURE.md, numpy only):
``vta.hw_config`` (the design point), ``vta.isa`` (instructions and micro-ops),
``vta.simulator`` (the behavioural simulator, ``vta.simulator.stats()``) and ``vta.runtime``
(the JIT command queue).

The compiler half (TVM's ``vta`` package API): :func:`get_env` / :class:`Environment`
(``vta.environment``), the GEMM intrinsic (``vta.intrin``), the lowering passes
(``vta.transform``), :func:`lower` and :func:`build` (``vta.build``: a module whose Python host
driver runs on the runtime's command queue; ``f.save("gemm.o")`` and ``load_module`` round-trip).
"""

from __future__ import annotations

from . import graph_module, hw_config, isa, runtime, simulator, top  # graph_module: load_module
from .build import MAGIC as _MAGIC
from .build import build, build_config, load_vta_module, lower
from .environment import Environment, get_env

__all__ = ["hw_config", "isa", "runtime", "simulator", "graph_module", "top", "Environment", "get_env", "build", "build_config",
           "lower", "load_vta_module"]


def _is_vta_file(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(len(_MAGIC)) == _MAGIC


def _register_loader() -> None:
    from ..runtime import module as _rt_module

    if not any(p is _is_vta_file for p, _ in _rt_module.FILE_LOADERS):
        _rt_module.FILE_LOADERS.append((_is_vta_file, load_vta_module))


_register_loader()
