"""``GraphExecutorFactory``: the runtime module ``relay.build`` returns and ``load_module``
returns for an exported one (graph JSON, library, parameters; ``f["default"](dev)``)."""

from __future__ import annotations

import ctypes
import os
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from .. import ndarray as nd
from ..device import Device
from ..graph_json import (
    parse_graph,
)
from ..module import Module, _module_from_meta
from ..ndarray import NDArray
from ..param_dict import load_param_dict, save_param_dict
from .executor import GraphExecutor

PARAMS_SYMBOL = "__tvmpy_graph_params"


FACTORY_TYPE_KEY = "GraphExecutorFactory"


class GraphExecutorFactory(Module):
    """A graph, its compiled library and its parameters: ``f[mod_name](dev)`` creates a
    :class:`GraphExecutor` with the parameters set (see the module docstring)."""

    def __init__(self, graph_json: str, lib: Module, params: Mapping[str, Any] | None = None,
                 mod_name: str = "default"):
        if not isinstance(graph_json, str):
            raise TypeError(f"graph_json must be a str, got {type(graph_json).__name__}")
        if not isinstance(lib, Module):
            raise TypeError(f"lib must be a runtime Module, got {type(lib).__name__}")
        if not isinstance(mod_name, str) or not mod_name:
            raise ValueError(f"mod_name must be a non-empty str, got {mod_name!r}")
        parse_graph(graph_json)  # fail early on malformed JSON
        meta = {"version": 1, "entry": "", "functions": [],
                "graph_executor": {"mod_name": mod_name, "graph_json": graph_json}}
        super().__init__(None, meta, FACTORY_TYPE_KEY)
        self.imported_modules.append(lib)
        self.graph_json = graph_json
        self.libmod_name = mod_name
        self.params: dict[str, NDArray] = {}
        for name, value in (params or {}).items():
            if not isinstance(name, str):
                raise TypeError(f"params: names must be str, got {name!r}")
            self.params[name] = value if isinstance(value, NDArray) else nd.array(value)

    @classmethod
    def _from_loaded(cls, lib: ctypes.CDLL, meta: dict, path: str) -> GraphExecutorFactory:
        info = meta.get("graph_executor") or {}
        subs = [_module_from_meta(lib, sub, path) for sub in meta.get("imports", [])]
        if len(subs) != 1 or "graph_json" not in info:
            raise ValueError(f"{path}: malformed graph executor factory metadata")
        params: dict[str, Any] = {}
        nbytes = int(info.get("params_nbytes", 0))
        if nbytes:
            try:
                addr = ctypes.addressof(ctypes.c_char.in_dll(lib, info["params_symbol"]))
            except ValueError:
                raise ValueError(f"{path}: the parameters symbol {info['params_symbol']} is "
                                 "missing") from None
            blob = (ctypes.c_ubyte * nbytes).from_address(addr)
            blob._lib = lib  # type: ignore[attr-defined]  # the views keep the library loaded
            # read-only views of the library's data: no copy until an executor is created
            params = {k: NDArray(v) for k, v in
                      load_param_dict(memoryview(blob), copy=False).items()}
        self = cls(info["graph_json"], subs[0], params, info.get("mod_name", "default"))
        self._lib = lib
        self._lib_path = path
        self._meta = {k: v for k, v in meta.items() if k != "imports"}
        return self

    # ---- TVM's factory API --------------------------------------------------------------------
    def get_graph_json(self) -> str:
        return self.graph_json

    def get_executor_config(self) -> str:
        return self.graph_json

    def get_lib(self) -> Module:
        return self.imported_modules[0]

    @property
    def lib(self) -> Module:
        return self.imported_modules[0]

    def get_params(self) -> dict[str, NDArray]:
        return dict(self.params)

    def __iter__(self) -> Iterator[Any]:
        """TVM's legacy ``graph, lib, params = relay.build(...)``: the graph JSON, the compiled
        library and the parameters (deprecated there as here: use ``lib["default"](dev)``)."""
        warnings.warn("unpacking relay.build's result into (graph, lib, params) is TVM's legacy "
                      "API; use graph_executor.GraphModule(factory['default'](dev))",
                      DeprecationWarning, stacklevel=2)
        return iter((self.graph_json, self.get_lib(), self.get_params()))

    def create(self, dev: Device | None = None, use_cuda_graph: bool | None = None
               ) -> GraphExecutor:
        """``factory["default"](dev)``: an executor with the parameters loaded;
        ``use_cuda_graph`` as :class:`GraphExecutor`'s (runtime/graph_executor/cuda_graph.py)."""
        ex = GraphExecutor(self.graph_json, self.get_lib(), dev, use_cuda_graph=use_cuda_graph)
        ex.load_params(self.params)
        return ex

    def get_function(self, name: str, query_imports: bool = True) -> Any:
        if name == self.libmod_name:
            return self.create
        return super().get_function(name, query_imports)

    def __contains__(self, name: str) -> bool:
        return name == self.libmod_name or super().__contains__(name)

    def export_library(self, file_name: str, fcompile: Any = None, addons: Any = None,
                       workspace_dir: str | None = None, **kwargs: Any) -> None:
        """One shared library: the code, the graph JSON and the parameters (``fcompile``, ``cc``,
        ``options``: as :meth:`Module.export_library`, e.g. a cross compiler)."""
        file_name = os.fspath(file_name)
        if getattr(self.get_lib(), "is_wasm", False) and self._lib_path is None:
            from ..wasm import export_factory

            return export_factory(self, file_name)
        if getattr(self.get_lib(), "api_name", None) == "webgpu":  # the web artefact
            from ..webgpu_artefact import export_factory as export_web

            return export_web(self, file_name, kwargs.pop("fallback", None))
        return super().export_library(file_name, fcompile, **kwargs)

    def _export_blobs(self, meta: dict) -> dict[str, bytes]:
        blob = save_param_dict(self.params)
        meta["graph_executor"] = dict(meta["graph_executor"], params_symbol=PARAMS_SYMBOL,
                                      params_nbytes=len(blob))
        return {PARAMS_SYMBOL: blob}

    def __repr__(self) -> str:
        return (f"GraphExecutorFactory(mod_name={self.libmod_name!r}, params={len(self.params)}, "
                f"lib={self.get_lib()!r})")
