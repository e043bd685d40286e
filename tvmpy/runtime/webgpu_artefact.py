"""The web artefact of a webgpu build (docs/WEB_ARTEFACT.md): one ``.wasm`` file holding the
WGSL kernels, launch plans, graph and params in custom sections, and optionally the wasm32 CPU
fallback of the same model as the module's code (``runtime/wasm.py``'s format, unchanged).

- :func:`export_kernels` / :func:`export_factory`: what ``export_library("x.wasm")`` of a
  ``tvm.build(..., "webgpu")`` module / ``relay.build(mod, target="webgpu")`` factory writes;
  ``fallback=`` (a wasm32 build of the same functions / model) puts its code in the same file.
- :func:`load_artefact`: ``tvm.runtime.load_module("x.wasm")`` of such a file: the WebGPU module
  (or graph factory) on wgpu-py; :func:`load_fallback` gives the wasm32 CPU one.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .wasm import (
    METADATA_SECTION,
    WASM_MAGIC,
    custom_section,
    load_wasm,
    read_custom_sections,
)

__all__ = ["WEBGPU_SECTION", "WEBGPU_PARAMS_SECTION", "export_kernels", "export_factory",
           "artefact_bytes", "load_artefact", "load_fallback", "is_webgpu_artefact"]

WEBGPU_SECTION = "tvmpy.webgpu"
WEBGPU_PARAMS_SECTION = "tvmpy.webgpu.params"
FORMAT, VERSION = "tvmpy-webgpu", 1
_EMPTY_MODULE = WASM_MAGIC + b"\x01\0\0\0"


def _program(host: Any, graph_json: str | None, fallback: bool) -> dict:
    dm = host.device_module
    if dm is None or host.api_name != "webgpu":
        raise ValueError("export: a webgpu web artefact needs a module built for target "
                         f"webgpu with its kernels (got a {host.api_name} module"
                         + ("" if dm is not None else " without device code") + ")")
    kernels = json.loads(dm.source)
    features = sorted({f for k in kernels.values() for f in k.get("features", [])})
    most = max((sum(1 for a in k["args"] if a["kind"] == "buffer") for k in kernels.values()),
               default=0)
    return {"format": FORMAT, "version": VERSION, "features": features,
            "limits": {"maxStorageBuffersPerShaderStage": most}, "entry": host.entry_name,
            "kernels": kernels, "plan": host.plan, "graph": graph_json, "fallback": fallback}


def artefact_bytes(host: Any, graph_json: str | None = None, params: bytes | None = None,
                   fallback: bytes | None = None) -> bytes:
    """The artefact's bytes: ``fallback`` (a tvmpy wasm32 module's bytes, with its own
    sections) or the empty module, then the WebGPU sections."""
    base = fallback if fallback is not None else _EMPTY_MODULE
    if not base.startswith(_EMPTY_MODULE):
        raise ValueError("export: the fallback must be a WebAssembly module (a wasm32 build)")
    prog = _program(host, graph_json, fallback is not None)
    out = base + custom_section(WEBGPU_SECTION, json.dumps(prog, sort_keys=True).encode())
    if params is not None:
        out += custom_section(WEBGPU_PARAMS_SECTION, params)
    return out


def _write(file_name: str, data: bytes) -> None:
    file_name = os.fspath(file_name)
    if not file_name.endswith(".wasm"):
        raise ValueError(f"export_library: a webgpu build is exported as one .wasm web artefact "
                         f"(docs/WEB_ARTEFACT.md), not {file_name!r}")
    tmp = f"{os.path.abspath(file_name)}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, file_name)


def _fallback_lib_bytes(fallback: Any) -> bytes:
    if not getattr(fallback, "is_wasm", False):
        raise ValueError("export_library(fallback=...): expected a wasm32 build (target "
                         "'llvm -mtriple=wasm32-unknown-unknown'), got "
                         f"{type(fallback).__name__}")
    return bytes(fallback.wasm_bytes())


def export_kernels(host: Any, file_name: str, fallback: Any = None) -> None:
    """``export_library("x.wasm")`` of a ``tvm.build(..., "webgpu")`` module."""
    fb = _fallback_lib_bytes(fallback) if fallback is not None else None
    _write(file_name, artefact_bytes(host, fallback=fb))


def export_factory(factory: Any, file_name: str, fallback: Any = None) -> None:
    """``export_library("x.wasm")`` of a ``relay.build(mod, target="webgpu")`` factory;
    ``fallback``: the factory of the same model built for wasm32 (its code, graph and params go
    into the same file, readable by ``web/tvmpy_wasm.mjs`` as before)."""
    from .param_dict import save_param_dict
    from .wasm import factory_bytes

    fb = None
    if fallback is not None:
        if not getattr(fallback.get_lib(), "is_wasm", False):
            raise ValueError("export_library(fallback=...): expected the factory of a wasm32 "
                             "build of the same model (relay.build(mod, target='llvm "
                             "-mtriple=wasm32-unknown-unknown'))")
        fb = factory_bytes(fallback)
    data = artefact_bytes(factory.get_lib(), factory.graph_json,
                          save_param_dict(factory.params), fb)
    _write(file_name, data)


def is_webgpu_artefact(sections: dict) -> bool:
    return WEBGPU_SECTION in sections


def load_artefact(path: str) -> Any:
    """The WebGPU side of an artefact: a GPU host module, or a graph factory for a model."""
    from .gpu_module import GPUHostModule

    with open(path, "rb") as f:
        data = f.read()
    sections = read_custom_sections(data)
    try:
        prog = json.loads(bytes(sections[WEBGPU_SECTION]).decode("utf-8"))
    except (KeyError, ValueError) as err:
        raise ValueError(f"{path}: no readable {WEBGPU_SECTION!r} section ({err!r})") from None
    if prog.get("format") != FORMAT or prog.get("version") != VERSION:
        raise ValueError(f"{path}: web artefact format {prog.get('format')!r} version "
                         f"{prog.get('version')!r}; this tvmpy reads {FORMAT} {VERSION}")
    host = GPUHostModule.create("webgpu", json.dumps(prog["kernels"], sort_keys=True),
                                prog["plan"], prog.get("entry", ""))
    if prog.get("graph") is None:
        return host
    from .graph_executor import GraphExecutorFactory
    from .param_dict import load_param_dict

    blob = sections.get(WEBGPU_PARAMS_SECTION)
    params = load_param_dict(bytes(blob)) if blob is not None else {}
    return GraphExecutorFactory(prog["graph"], host, params, "default")


def load_fallback(path: str) -> Any:
    """The wasm32 CPU fallback of an artefact (``runtime/wasm.py``'s module or factory)."""
    with open(path, "rb") as f:
        sections = read_custom_sections(f.read())
    if METADATA_SECTION not in sections:
        raise ValueError(f"{path}: this web artefact has no wasm32 CPU fallback (export it with "
                         "export_library(..., fallback=<the wasm32 build>))")
    return load_wasm(path, webgpu=False)
