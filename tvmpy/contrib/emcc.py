"""TVM's ``tvm.contrib.emcc`` for tvmpy's WebAssembly target: ``create_tvmjs_wasm(output,
objects, options=None, cc=None)`` links wasm32 object files into a ``.wasm``.

tvmpy links a WebAssembly module when it is built (``tvm.build`` / ``relay.build`` with
``-mtriple=wasm32-unknown-unknown``), with wasi-libc from the ``ziglang`` wheel rather than
emscripten (codegen/llvm_wasm.py), so ``lib.export_library("net.wasm")`` needs no compiler;
TVM scripts that pass ``fcompile=emcc.create_tvmjs_wasm`` work unchanged (the module is already
linked). Called directly, it links objects (e.g. ``Module.save("k.o")`` of a wasm module) with
every default-visibility symbol exported; ``cc``: another wasm32-wasi compiler driver.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

__all__ = ["create_tvmjs_wasm"]


def create_tvmjs_wasm(output: str, objects: str | Sequence[str],
                      options: Sequence[str] | None = None,
                      cc: str | Sequence[str] | None = None) -> None:
    """Link wasm32 object files (paths) into the WebAssembly module ``output``."""
    from ..codegen.llvm_wasm import link_wasm

    paths = [objects] if isinstance(objects, (str, os.PathLike)) else list(objects)
    data = []
    for p in paths:
        with open(p, "rb") as fh:
            d = fh.read()
        if d[:4] != b"\0asm":
            raise ValueError(f"create_tvmjs_wasm: {p} is not a wasm32 object file")
        data.append(d)
    argv = shlex.split(cc) if isinstance(cc, str) else (list(cc) if cc else None)
    link_wasm(data, [], os.fspath(output), ["-Wl,--export-dynamic", *(options or [])], argv)


create_tvmjs_wasm.object_format = "o"  # type: ignore[attr-defined]  # as TVM's
