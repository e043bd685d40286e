"""TVM's ``tvm.contrib.cc``: compiler commands for ``export_library``.

``create_shared(output, objects, options=None, cc=None)`` links objects into a shared library;
``cross_compiler(compile_func, options=None, ...)`` returns an ``fcompile(output, objects,
options=None)`` callable for ``Module.export_library(path, fcompile)``::

    lib.export_library("net.so", cc.cross_compiler("aarch64-linux-gnu"))       # a triple
    lib.export_library("net.so", cc.cross_compiler("aarch64-linux-gnu-gcc"))   # a compiler
    lib.export_library("net.so", cc.cross_compiler("zig cc -target aarch64-linux-gnu"))

A triple picks that architecture's default toolchain (runtime/linker.py ``cross_compiler``):

- **primary: Debian's ``gcc-aarch64-linux-gnu``** (``apt-get install gcc-aarch64-linux-gnu``):
  the distribution's own cross GCC and glibc, the same glibc (2.36) and libgcc the Debian arm64
  packages of the qemu sysroot ship, so what it links loads there; it brings ``libgomp`` for the
  ``gomp`` parallel runtime and a full ``binutils`` (``ld -r``, ``.incbin``).
- **fallback: the ``ziglang`` wheel** (``pip install ziglang``; ``python -m ziglang cc -target
  aarch64-linux-gnu``): no root and no apt needed, one wheel for every target, but it links
  against its own glibc stubs and has no libgomp; used when no ``aarch64-linux-gnu-gcc`` is on
  PATH.

The callable carries ``cc_command`` (the compiler argv): export_library compiles the pieces a
library needs besides the generated code (the parallel pool's C object) with the same compiler,
so they are built for the same architecture.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Callable, Sequence
from typing import Any

from ..runtime.linker import compiler

__all__ = ["create_shared", "cross_compiler", "get_cc", "compiler_command"]

def get_cc() -> str:
    """The default C compiler's path (``CC``), as TVM's ``cc.get_cc()``."""
    return shutil.which(compiler()[0]) or compiler()[0]


def compiler_command(spec: str | Sequence[str]) -> list[str]:
    """The compiler argv for ``spec``: a target triple ("aarch64-linux-gnu": that
    architecture's default cross toolchain), a compiler name or path, or a full command."""
    return compiler(spec)


def create_shared(output: str, objects: str | Sequence[str], options: Sequence[str] | None = None,
                  cc: str | Sequence[str] | None = None) -> None:
    """Link ``objects`` (paths) into the shared library ``output`` with ``cc`` (default ``CC``;
    a triple such as "aarch64-linux-gnu" names its cross toolchain)."""
    cmd = compiler_command(cc) if cc is not None else compiler()
    objs = [objects] if isinstance(objects, str) else list(objects)
    argv = cmd + ["-shared", "-fPIC", "-o", output] + objs + list(options or [])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"linking {output} failed (exit {proc.returncode}):\n  "
                           f"{shlex.join(argv)}\n{proc.stdout}{proc.stderr}")


class _FCompile:
    """An ``fcompile(output, objects, options=None)`` with TVM's attributes."""

    def __init__(self, func: Callable[..., Any], cc_command: list[str] | None,
                 options: Sequence[str], output_format: str):
        self._func = func
        self.cc_command = cc_command
        self.options = list(options)
        self.output_format = output_format

    def __call__(self, output: str, objects: Sequence[str], options: Sequence[str] | None = None,
                 **kwargs: Any) -> Any:
        return self._func(output, objects, self.options + list(options or []), **kwargs)

    def __repr__(self) -> str:
        cmd = shlex.join(self.cc_command) if self.cc_command else repr(self._func)
        return f"cross_compiler({cmd!r}, options={self.options})"


def cross_compiler(compile_func: str | Sequence[str] | Callable[..., Any],
                   options: Sequence[str] | None = None, output_format: str | None = None,
                   get_target_triple: Any = None, add_files: Sequence[str] | None = None
                   ) -> _FCompile:
    """An ``fcompile`` for ``export_library`` that links with ``compile_func`` (a triple such as
    "aarch64-linux-gnu", a compiler command, or another fcompile callable) plus ``options``
    (and ``add_files``, extra objects/sources linked in)."""
    extra = list(options or []) + list(add_files or [])
    if callable(compile_func):
        inner = compile_func
        cmd = getattr(compile_func, "cc_command", None)
        return _FCompile(lambda out, objs, opts, **kw: inner(out, objs, opts, **kw), cmd, extra,
                         output_format or getattr(compile_func, "output_format", "so"))
    cmd = compiler_command(compile_func)
    return _FCompile(lambda out, objs, opts, **kw: create_shared(out, objs, opts, cmd), cmd,
                     extra, output_format or "so")
