"""``relay.vm``: compile a relay module for the virtual machine (TVM's ``tvm.relay.vm``).

    exe = relay.vm.compile(mod, target="llvm", params=params)
    vm = tvm.runtime.vm.VirtualMachine(exe, tvm.cpu(0))
    out = vm.invoke("main", x)

The compiler is relay/backend/vm.py, the machine runtime/vm.py (whose docstring says why a VM
and how it relates to the graph executor).
"""

from ..runtime.vm import Executable, VirtualMachine  # noqa: F401
from .backend.vm import VMCompileError, VMCompiler, VMExecutor, compile  # noqa: F401

__all__ = ["compile", "VMCompiler", "VMExecutor", "VMCompileError", "Executable",
           "VirtualMachine"]
