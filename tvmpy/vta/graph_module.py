"""The VTA part of a heterogeneous ``relay.build``: a runtime Module holding the VTA modules of
the offloaded fused functions, imported by the host (llvm) library so that the graph executor
finds every function through one library.

Its functions follow the prepared-call protocol of ``runtime/function.py`` (``prepare`` once,
``_cfunc(*raw)`` per run), as the graph executor calls them. The VTA driver sources travel in
the module's metadata: ``export_library`` of the factory writes them into the shared library's
metadata and ``load_module`` rebuilds this module from it (``runtime.module.META_LOADERS``), so
an exported model loads on an RPC server (``tvmpy rpc server --device vta``) like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..runtime.module import META_LOADERS, Module
from .build import VTAModule

__all__ = ["VTALibraryModule", "VTAFunction"]

TYPE_KEY = "vta"


class VTAFunction:
    """One offloaded function, callable as a runtime Function (arrays in argument order)."""

    def __init__(self, mod: VTAModule):
        self.mod = mod
        self.name = mod.name

    def __call__(self, *args: Any) -> None:
        self.mod(*args)

    def prepare(self, args: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        if len(args) != len(self.mod.params):
            raise TypeError(f"{self.name} takes {len(self.mod.params)} arguments, got "
                            f"{len(args)}")
        for p, a in zip(self.mod.params, args):
            if p["kind"] != "buffer":
                continue
            shape, dtype = tuple(getattr(a, "shape", ())), str(getattr(a, "dtype", ""))
            if shape != tuple(p["shape"]) or dtype != p["dtype"]:
                raise ValueError(f"argument {p['name']} must be {p['dtype']}{list(p['shape'])}, "
                                 f"got {dtype}{list(shape)}")
        return [tuple(args)], []

    def _cfunc(self, args: tuple) -> int:
        self.mod(*args)
        return 0

    def _raise_error(self, rc: int) -> None:
        raise RuntimeError(f"{self.name} failed (returned {rc})")


class VTALibraryModule(Module):
    """VTA modules by function name (see the module docstring)."""

    def __init__(self, modules: Sequence[VTAModule]):
        mods = [{"name": m.name, "params": m.params, "source": m.source,
                 "hw_config": m.hw_config} for m in modules]
        super().__init__(None, {"version": 1, "entry": "", "functions": [], "vta_modules": mods},
                         TYPE_KEY)
        self.vta_modules = {m.name: m for m in modules}
        self._vta_funcs = {n: VTAFunction(m) for n, m in self.vta_modules.items()}

    def _find(self, name: str) -> Any:
        f = self._vta_funcs.get(name)
        if f is not None:
            return f
        return super()._find(name)

    def function_names(self) -> list[str]:
        return list(self.vta_modules)

    def _all_names(self) -> list[str]:
        return list(self.vta_modules) + super()._all_names()

    def get_source(self, fmt: str = "") -> str:
        return "\n".join(m.get_source() for m in self.vta_modules.values())

    @classmethod
    def _from_meta(cls, meta: dict, path: str) -> VTALibraryModule:
        return cls([VTAModule(m["name"], m["source"], m["params"], m.get("hw_config"))
                    for m in meta.get("vta_modules", [])])


META_LOADERS[TYPE_KEY] = VTALibraryModule._from_meta
