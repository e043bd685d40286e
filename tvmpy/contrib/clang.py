"""``tvm.contrib.clang``: C/C++ source to LLVM IR text with clang, for ``pragma import_llvm``
(TVM's way to link a hand-written micro-kernel into generated code, e.g. the tensorize tutorial's
``s[C].pragma(yo, "import_llvm", clang.create_llvm(cc_code))``).

The compiler is ``clang`` or the newest ``clang-<N>`` on PATH, else the ``ziglang`` wheel's
``zig cc`` (clang inside; the project's WebAssembly and cross links use it too). The IR is parsed
by the LLVM that llvmlite bundles, which reads the IR of older clangs.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence

from .utils import tempdir

__all__ = ["find_clang", "create_llvm"]


def _versioned_clangs() -> list[str]:
    found: list[tuple[int, str]] = []
    for d in os.environ.get("PATH", "").split(os.pathsep):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            m = re.fullmatch(r"clang-(\d+)", n)
            if m and os.access(os.path.join(d, n), os.X_OK):
                found.append((int(m.group(1)), os.path.join(d, n)))
    return [p for _, p in sorted(found, reverse=True)]


def find_clang(required: bool = True) -> list[str]:
    """The clang commands available, best first (each an argv prefix joined by spaces, as
    TVM returns names). ``required``: raise when there is none."""
    cands: list[str] = []
    seen: set[str] = set()
    plain = shutil.which("clang")
    for path in ([plain] if plain else []) + _versioned_clangs():
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            cands.append(path)
    if importlib.util.find_spec("ziglang") is not None:
        cands.append(f"{sys.executable} -m ziglang cc")
    if required and not cands:
        raise RuntimeError("tvm.contrib.clang: no clang found: install clang (apt-get install "
                           "clang) or the ziglang wheel (pip install ziglang), or pass cc=")
    return cands


def create_llvm(inputs: str | Sequence[str], output: str | None = None,
                options: Sequence[str] | None = None, cc: str | None = None) -> str:
    """TVM's ``clang.create_llvm``: compile ``inputs`` (C/C++ source code, or paths of source
    files) to LLVM IR and return its text (also written to ``output`` when given). ``options``
    go to the compiler (e.g. ``["-O3"]``); ``cc`` is a compiler command (default:
    :func:`find_clang`'s first)."""
    if isinstance(inputs, str):
        inputs = [inputs]
    if not inputs or not all(isinstance(x, str) and x for x in inputs):
        raise TypeError(f"create_llvm: inputs must be source code or file paths, got {inputs!r}")
    cmd = (cc or find_clang()[0]).split()
    temp = tempdir()
    files = []
    for k, src in enumerate(inputs):
        if "\n" not in src and os.path.isfile(src):
            files.append(src)
        else:
            path = temp.relpath(f"input{k}.cc")
            with open(path, "w") as f:
                f.write(src)
            files.append(path)
    out = output if output else temp.relpath("output.ll")
    argv = [*cmd, "-S", "-emit-llvm", "-o", out, *(options or ()), *files]
    try:
        res = subprocess.run(argv, capture_output=True, text=True)
    except OSError as err:
        raise RuntimeError(f"create_llvm: cannot run {cmd[0]}: {err}") from None
    if res.returncode != 0:
        raise RuntimeError(f"create_llvm: compilation failed ({' '.join(argv)}):\n"
                           f"{res.stderr.strip() or res.stdout.strip()}")
    with open(out) as f:
        return f.read()
