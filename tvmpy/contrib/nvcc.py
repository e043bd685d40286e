"""TVM's ``tvm.contrib.nvcc``: CUDA C to PTX / cubin without a GPU and without a CUDA toolkit.

- **NVRTC** (the ``nvidia-cuda-nvrtc-cu12`` wheel) compiles CUDA C to PTX. It is called through
  ctypes on the wheel's ``libnvrtc.so.12``, not through cuda-python's ``cuda.bindings.nvrtc``:
  the installed cuda-python is 13.x while the wheel's NVRTC is 12.x, and the seven C functions
  used here are stable across both, so ctypes removes a version coupling and a dependency.
- **ptxas** (the ``nvidia-cuda-nvcc-cu12`` wheel's ``bin/ptxas``) assembles PTX into a cubin for
  one ``sm_XX``. It is what turns register or shared-memory overuse into an error on a machine
  without a GPU; ``ptxas -v``'s report is parsed into :class:`PtxasInfo` per kernel.

``compile_cuda(code, target_format="ptx"|"cubin", arch="sm_90")`` returns bytes (TVM's name).
Environment overrides: ``TVMPY_NVRTC`` (path of libnvrtc), ``TVMPY_PTXAS`` (path of ptxas).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["compile_cuda", "ptxas", "PtxasInfo", "CompileError", "find_nvrtc", "find_ptxas",
           "nvrtc_version", "parse_ptxas_info", "get_target_compute_version"]

DEFAULT_ARCH = "sm_90"


class CompileError(RuntimeError):
    """NVRTC or ptxas rejected the code; the message carries the log and a source excerpt."""


def _nvidia_dirs() -> list[str]:
    spec = importlib.util.find_spec("nvidia")
    return list(spec.submodule_search_locations or []) if spec is not None else []


def find_nvrtc() -> str:
    """Path of libnvrtc: ``TVMPY_NVRTC``, the nvidia-cuda-nvrtc-cu12 wheel, then the system."""
    env = os.environ.get("TVMPY_NVRTC")
    if env:
        return env
    for root in _nvidia_dirs():
        for name in ("libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc.so"):
            for sub in ("cuda_nvrtc/lib", "cu13/lib"):
                p = os.path.join(root, sub, name)
                if os.path.exists(p):
                    return p
    for d in ("/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu"):
        p = os.path.join(d, "libnvrtc.so")
        if os.path.exists(p):
            return p
    raise CompileError("NVRTC not found: pip install nvidia-cuda-nvrtc-cu12 (or set TVMPY_NVRTC "
                       "to the path of libnvrtc.so)")


def find_ptxas() -> str:
    """Path of ptxas: ``TVMPY_PTXAS``, the nvidia-cuda-nvcc-cu12 wheel, then PATH."""
    env = os.environ.get("TVMPY_PTXAS")
    if env:
        return env
    for root in _nvidia_dirs():
        p = os.path.join(root, "cuda_nvcc", "bin", "ptxas")
        if os.path.exists(p):
            return p
    found = shutil.which("ptxas") or ("/usr/local/cuda/bin/ptxas"
                                      if os.path.exists("/usr/local/cuda/bin/ptxas") else None)
    if found:
        return found
    raise CompileError("ptxas not found: pip install nvidia-cuda-nvcc-cu12 (or set TVMPY_PTXAS)")


_LOCK = threading.Lock()
_LIB: ctypes.CDLL | None = None


def _nvrtc() -> ctypes.CDLL:
    global _LIB
    with _LOCK:
        if _LIB is None:
            path = find_nvrtc()
            try:
                lib = ctypes.CDLL(path)
            except OSError as err:
                raise CompileError(f"cannot load NVRTC from {path}: {err}") from None
            vp, sz, cp = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
            lib.nvrtcCreateProgram.argtypes = [ctypes.POINTER(vp), cp, cp, ctypes.c_int,
                                               ctypes.POINTER(cp), ctypes.POINTER(cp)]
            lib.nvrtcCompileProgram.argtypes = [vp, ctypes.c_int, ctypes.POINTER(cp)]
            lib.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(vp)]
            for get in ("PTX", "ProgramLog", "CUBIN"):
                getattr(lib, f"nvrtcGet{get}Size").argtypes = [vp, ctypes.POINTER(sz)]
                getattr(lib, f"nvrtcGet{get}").argtypes = [vp, ctypes.c_char_p]
            lib.nvrtcGetErrorString.restype = cp
            lib.nvrtcGetErrorString.argtypes = [ctypes.c_int]
            lib.nvrtcVersion.argtypes = [ctypes.POINTER(ctypes.c_int)] * 2
            _LIB = lib
        return _LIB


def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC in use."""
    a, b = ctypes.c_int(), ctypes.c_int()
    _nvrtc().nvrtcVersion(ctypes.byref(a), ctypes.byref(b))
    return a.value, b.value


def _excerpt(code: str, log: str, context: int = 2) -> str:
    """The source lines the log's first ``(LINE):`` errors point at, numbered."""
    lines = code.splitlines()
    wanted: list[int] = []
    for m in re.finditer(r"\((\d+)\): (?:error|catastrophic error)", log):
        n = int(m.group(1))
        if n not in wanted:
            wanted.append(n)
    if not wanted:
        return ""
    out = []
    for n in wanted[:3]:
        lo, hi = max(1, n - context), min(len(lines), n + context)
        for i in range(lo, hi + 1):
            out.append(f"{'>' if i == n else ' '}{i:5d} | {lines[i - 1]}")
        out.append("   ...")
    return "\nsource:\n" + "\n".join(out)


def _errors_only(log: str, keep: int = 12) -> str:
    """The error diagnostics of an NVRTC log (its warnings dropped), at most ``keep``."""
    blocks = [b for b in re.split(r"\n\s*\n", log) if b.strip()]
    errs = [b for b in blocks if re.search(r"\b(error|catastrophic error)\b", b)
            and "warning #" not in b.splitlines()[0]]
    if not errs:
        return log
    more = f"\n... {len(errs) - keep} more errors" if len(errs) > keep else ""
    return "\n\n".join(errs[:keep]) + more


def _arch_number(arch: str) -> int:
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+)[af]?", arch.strip())
    if not m:
        raise ValueError(f"invalid CUDA arch {arch!r}: expected e.g. 'sm_90' or 'sm_80'")
    return int(m.group(1))


def get_target_compute_version(arch: str | None = None) -> str:
    """'9.0' for 'sm_90' (TVM's name; the default arch when None)."""
    n = _arch_number(arch or DEFAULT_ARCH)
    return f"{n // 10}.{n % 10}"


def _nvrtc_ptx(code: str, arch: str, options: Sequence[str], name: str) -> bytes:
    lib = _nvrtc()
    prog = ctypes.c_void_p()

    def check(rc: int, what: str) -> None:
        if rc != 0:
            raise CompileError(f"NVRTC {what} failed: {lib.nvrtcGetErrorString(rc).decode()}")

    check(lib.nvrtcCreateProgram(ctypes.byref(prog), code.encode(), name.encode(), 0, None, None),
          "nvrtcCreateProgram")
    try:
        opts = [f"--gpu-architecture=compute_{_arch_number(arch)}", "-default-device",
                "--std=c++17", "-diag-suppress=177,550", *options]
        argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        rc = lib.nvrtcCompileProgram(prog, len(opts), argv)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace").strip()
        if rc != 0:
            raise CompileError(f"NVRTC could not compile {name} for {arch} "
                               f"({lib.nvrtcGetErrorString(rc).decode()}), options {opts}:\n"
                               f"{_errors_only(log)}{_excerpt(code, log)}")
        check(lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
        out = ctypes.create_string_buffer(size.value)
        check(lib.nvrtcGetPTX(prog, out), "nvrtcGetPTX")
        return out.raw.rstrip(b"\0")
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


@dataclass
class PtxasInfo:
    """What ``ptxas -v`` reports for one kernel."""

    name: str
    arch: str
    registers: int = 0
    shared_bytes: int = 0
    stack_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    cmem: dict[int, int] = field(default_factory=dict)


def parse_ptxas_info(log: str) -> dict[str, PtxasInfo]:
    """Per-kernel register / smem / stack / spill figures from ``ptxas -v`` output."""
    infos: dict[str, PtxasInfo] = {}
    cur: PtxasInfo | None = None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '([^']+)' for '([^']+)'", line)
        if m:
            cur = infos.setdefault(m.group(1), PtxasInfo(m.group(1), m.group(2)))
            continue
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            cur = infos.get(m.group(1), cur)
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                      line)
        if m:
            cur.stack_bytes, cur.spill_stores, cur.spill_loads = map(int, m.groups())
        m = re.search(r"Used (\d+) registers", line)
        if m:
            cur.registers = int(m.group(1))
            sm = re.search(r"(\d+) bytes smem", line)
            cur.shared_bytes = int(sm.group(1)) if sm else 0
            for c in re.finditer(r"(\d+) bytes cmem\[(\d+)\]", line):
                cur.cmem[int(c.group(2))] = int(c.group(1))
    return infos


def ptxas(ptx: bytes | str, arch: str = DEFAULT_ARCH, options: Sequence[str] | None = None,
          timeout: float = 300.0) -> tuple[bytes, dict[str, PtxasInfo]]:
    """Assemble PTX into a cubin for ``arch`` (sm_XX) with ``ptxas -v``; returns the cubin and
    the per-kernel :class:`PtxasInfo`. Errors (syntax, too many registers or too much shared
    memory for the arch) raise :class:`CompileError` with ptxas's log."""
    n = _arch_number(arch)
    data = ptx.encode() if isinstance(ptx, str) else ptx
    m = re.search(rb"^\s*\.target\s+sm_(\d+)", data, re.M)
    if m and int(m.group(1)) > n:
        raise CompileError(f"ptxas: the PTX was generated for sm_{int(m.group(1))} (.target), which "
                           f"is newer than the requested sm_{n}: compile for arch='sm_{n}' instead")
    with tempfile.TemporaryDirectory(prefix="tvmpy_ptxas_") as tmp:
        src, out = os.path.join(tmp, "kernel.ptx"), os.path.join(tmp, "kernel.cubin")
        with open(src, "wb") as f:
            f.write(data)
        argv = [find_ptxas(), f"-arch=sm_{n}", "-v", *(options or []), "-o", out, src]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise CompileError(f"ptxas timed out after {timeout:.0f} s: {' '.join(argv)}") from None
        log = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0:
            raise CompileError(f"ptxas could not assemble the PTX for sm_{n} (exit "
                               f"{proc.returncode}):\n{log}{_excerpt(data.decode(errors='replace'), log.replace('kernel.ptx, line ', '('))}")
        with open(out, "rb") as f:
            return f.read(), parse_ptxas_info(log)


def compile_cuda(code: str, target_format: str = "ptx", arch: str | None = None,
                 options: Sequence[str] | str | None = None, path_target: str | None = None,
                 name: str = "kernel.cu") -> bytes:
    """Compile CUDA C ``code`` to ``target_format`` "ptx" (NVRTC) or "cubin" (NVRTC + ptxas for
    ``arch``, default sm_90). ``options`` are extra NVRTC options (e.g. ``-use_fast_math``).
    ``path_target``: also write the result there (TVM's argument)."""
    if target_format not in ("ptx", "cubin"):
        raise ValueError(f"compile_cuda: target_format must be 'ptx' or 'cubin', got "
                         f"{target_format!r} (fatbin needs the full CUDA toolkit)")
    if not isinstance(code, str):
        raise TypeError(f"compile_cuda: code must be a str of CUDA C, got {type(code).__name__}")
    arch = arch or DEFAULT_ARCH
    opts = options.split() if isinstance(options, str) else list(options or [])
    ptx = _nvrtc_ptx(code, arch, opts, name)
    result = ptx if target_format == "ptx" else ptxas(ptx, arch)[0]
    if path_target:
        with open(path_target, "wb") as f:
            f.write(result)
    return result
