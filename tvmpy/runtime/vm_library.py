"""A VM executable as ONE shared library, as ``export_library`` writes a graph executor's build.

    exe = relay.vm.compile(mod, target="llvm", params=params)
    exe.export_library("model.so")             # (TVM: exe.mod.export_library)
    loaded = tvm.runtime.load_module("model.so")   # a VMExecutableModule
    vm = tvm.runtime.vm.VirtualMachine(loaded, tvm.cpu(0))
    out = vm.invoke("main", x=x)               # or vm.set_input("main", x=x); vm.run()

The library holds the compiled kernels of the executable (its ``lib``), and in a read-only data
symbol the bytes of ``Executable.save()`` (bytecode, segments with their graph JSON and
parameters, kernel descriptions). The metadata ``load_module`` reads has ``type_key``
``"VMExecutable"`` and names that symbol and its size; loading rebuilds the executable with
``Executable.load_exec`` over the library's own code, so one file is all a deployment needs
(the graph executor's factory keeps its graph JSON and parameters the same way). The bytes are
``Executable.save()``'s pickle: load only libraries you trust, as loading any shared library
runs its code.
"""

from __future__ import annotations

import ctypes
from typing import Any

from .module import Module, _module_from_meta

__all__ = ["VMExecutableModule", "VM_TYPE_KEY", "CODE_SYMBOL"]

VM_TYPE_KEY = "VMExecutable"
CODE_SYMBOL = "__tvmpy_vm_code"


class VMExecutableModule(Module):
    """A runtime Module holding a VM :class:`~tvmpy.runtime.vm.Executable` (``.exe``) over its
    kernel library (the only import). ``VirtualMachine(module, dev)`` runs it;
    ``export_library(path)`` writes one shared library."""

    def __init__(self, exe: Any):
        meta = {"version": 1, "entry": "", "functions": [], "vm": {"format": 1}}
        super().__init__(None, meta, VM_TYPE_KEY)
        self.imported_modules.append(exe.lib)
        self.exe = exe

    @classmethod
    def _from_loaded(cls, lib: ctypes.CDLL, meta: dict, path: str) -> VMExecutableModule:
        from .vm import Executable

        info = meta.get("vm") or {}
        subs = [_module_from_meta(lib, sub, path) for sub in meta.get("imports", [])]
        nbytes = int(info.get("code_nbytes", 0))
        if len(subs) != 1 or not nbytes or info.get("format") != 1:
            raise ValueError(f"{path}: malformed VM executable metadata")
        try:
            addr = ctypes.addressof(ctypes.c_char.in_dll(lib, info["code_symbol"]))
        except ValueError:
            raise ValueError(f"{path}: the VM code symbol {info['code_symbol']} is missing"
                             ) from None
        code = ctypes.string_at(addr, nbytes)
        self = cls(Executable.load_exec(code, subs[0]))
        self._lib = lib
        self._lib_path = path
        self._meta = {k: v for k, v in meta.items() if k != "imports"}
        return self

    def _export_blobs(self, meta: dict) -> dict[str, bytes]:
        """The executable's bytes (``exe.save()``) next to the kernels, in one library."""
        code, _ = self.exe.save()
        meta["vm"] = dict(meta["vm"], code_symbol=CODE_SYMBOL, code_nbytes=len(code))
        return {CODE_SYMBOL: code}

    def __repr__(self) -> str:
        return f"VMExecutableModule({self.exe!r})"
