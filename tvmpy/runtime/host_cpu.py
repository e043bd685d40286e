"""This machine's CPU features, and whether a library's code can run on it.

Code compiled for a CPU may use every instruction set extension that CPU has (LLVM emitted
AMD's SSE4A ``extrq`` for ``-mcpu=znver4``, which dies of SIGILL on an Intel Xeon). So every
module tvmpy builds records in its metadata (``"cpu"``: the LLVM triple, the CPU name and the
instruction-set features the code was compiled with, in LLVM's names; written by the code
generators from ``tvmpy.target.cpu_features``), and :func:`unsupported` compares that with this
machine before any of its code is loaded (``load_module``, ``Module.from_objects``, and so over
RPC, whose server loads through ``load_module``).

This machine's features come from

- LLVM's host detection (llvmlite ``get_host_cpu_features``: the names the compiler used), for
  the compiler (``tvmpy.target.cpu_features``) and for the load check in a process that has
  llvmlite loaded already, or
- Linux's ``/proc/cpuinfo`` flags, translated to LLVM's names by :data:`_CPUINFO` (x86-64,
  AArch64), for the load check otherwise: loading a library needs no compiler, so a process that
  only loads and runs libraries (the runtime alone with numpy) never imports llvmlite.

Only a feature detected *absent* refuses a library: one the detection does not know (newer
than the loader's LLVM, or without a kernel flag) is not held against the machine, and with no
detection at all (another OS, no llvmlite) nothing is refused.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Iterable, Mapping
from functools import lru_cache

from .linker import host_arch, triple_arch

__all__ = ["host_cpu_name", "host_features", "missing_features", "unsupported"]

# LLVM feature name -> the flag Linux prints in /proc/cpuinfo for it ("flags" on x86,
# "Features" on AArch64), for the features a compiler may emit instructions of
_CPUINFO_X86 = {
    "sse": "sse", "sse2": "sse2", "sse3": "pni", "ssse3": "ssse3", "sse4.1": "sse4_1",
    "sse4.2": "sse4_2", "sse4a": "sse4a", "popcnt": "popcnt", "lzcnt": "abm", "bmi": "bmi1",
    "bmi2": "bmi2", "movbe": "movbe", "cmov": "cmov", "cx8": "cx8", "cx16": "cx16",
    "sahf": "lahf_lm", "mmx": "mmx", "fxsr": "fxsr", "xsave": "xsave", "xsaveopt": "xsaveopt",
    "xsavec": "xsavec", "xsaves": "xsaves", "aes": "aes", "pclmul": "pclmulqdq",
    "vpclmulqdq": "vpclmulqdq", "vaes": "vaes", "gfni": "gfni", "sha": "sha_ni",
    "rdrnd": "rdrand", "rdseed": "rdseed", "adx": "adx", "f16c": "f16c", "fma": "fma",
    "fma4": "fma4", "xop": "xop", "tbm": "tbm", "avx": "avx", "avx2": "avx2",
    "avx512f": "avx512f", "avx512cd": "avx512cd", "avx512bw": "avx512bw",
    "avx512dq": "avx512dq", "avx512vl": "avx512vl", "avx512ifma": "avx512ifma",
    "avx512vbmi": "avx512vbmi", "avx512vbmi2": "avx512_vbmi2", "avx512vnni": "avx512_vnni",
    "avx512bitalg": "avx512_bitalg", "avx512vpopcntdq": "avx512_vpopcntdq",
    "avx512bf16": "avx512_bf16", "avx512fp16": "avx512_fp16",
    "avx512vp2intersect": "avx512_vp2intersect", "avxvnni": "avx_vnni",
    "amx-tile": "amx_tile", "amx-int8": "amx_int8", "amx-bf16": "amx_bf16",
    "clflushopt": "clflushopt", "clwb": "clwb", "clzero": "clzero", "fsgsbase": "fsgsbase",
    "prfchw": "3dnowprefetch", "movdiri": "movdiri", "movdir64b": "movdir64b",
    "serialize": "serialize", "rdpid": "rdpid",
}
_CPUINFO_AARCH64 = {
    "neon": "asimd", "fp-armv8": "fp", "aes": "aes", "sha2": "sha2", "sha3": "sha3",
    "crc": "crc32", "lse": "atomics", "fullfp16": "asimdhp", "dotprod": "asimddp",
    "rdm": "asimdrdm", "rcpc": "lrcpc", "sve": "sve", "sve2": "sve2", "i8mm": "i8mm",
    "bf16": "bf16", "fp16fml": "asimdfhm", "jsconv": "jscvt", "complxnum": "fcma",
}
_CPUINFO = {"x86_64": ("flags", _CPUINFO_X86), "aarch64": ("Features", _CPUINFO_AARCH64)}


def _cpuinfo() -> tuple[str, dict[str, bool]] | None:
    """(model name, {LLVM feature: present}) from /proc/cpuinfo; None where unreadable."""
    key, table = _CPUINFO.get(host_arch(), ("", {}))
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return None
    flags: set[str] | None = None
    model = ""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        name = name.strip()
        if name == key and flags is None:
            flags = set(value.split())
        elif name in ("model name", "CPU part") and not model:
            model = value.strip()
    if flags is None or not table:
        return None
    return model or "unknown", {llvm: kernel in flags for llvm, kernel in table.items()}


@lru_cache(maxsize=1)
def _detect() -> tuple[str, dict[str, bool] | None]:
    try:
        import llvmlite.binding as llvm

        return llvm.get_host_cpu_name(), dict(llvm.get_host_cpu_features())
    except Exception:  # no llvmlite (a runtime-only install), or it cannot tell
        found = _cpuinfo()
        return (found[0], found[1]) if found else (platform.processor() or "unknown", None)


def host_cpu_name() -> str:
    """This machine's CPU in LLVM's spelling (e.g. znver4, emeraldrapids); without llvmlite the
    model name from /proc/cpuinfo."""
    return _detect()[0]


def host_features() -> Mapping[str, bool] | None:
    """{LLVM feature name: present} of this machine; None where nothing can be detected."""
    return _detect()[1]


@lru_cache(maxsize=1)
def _cpuinfo_cached() -> tuple[str, dict[str, bool]] | None:
    return _cpuinfo()


def _loader_detect() -> tuple[str, Mapping[str, bool] | None]:
    """(CPU name, features) for the load check: LLVM's detection where llvmlite is loaded,
    else /proc/cpuinfo (importing llvmlite costs ~0.1 s and a compiler the runtime does not
    need), else LLVM's detection after all."""
    if "llvmlite.binding" not in sys.modules:
        found = _cpuinfo_cached()
        if found is not None:
            return found
    return _detect()


def missing_features(features: Iterable[str]) -> list[str]:
    """The ``features`` this machine is known to lack (sorted)."""
    have = _loader_detect()[1]
    if have is None:
        return []
    return sorted({f for f in features if have.get(f) is False})


def _requirements(meta: Mapping) -> list[Mapping]:
    """The ``"cpu"`` entries of a module's metadata and of all its imports."""
    out, todo = [], [meta]
    while todo:
        m = todo.pop()
        if isinstance(m.get("cpu"), Mapping):
            out.append(m["cpu"])
        todo.extend(i for i in m.get("imports", ()) if isinstance(i, Mapping))
    return out


def unsupported(meta: Mapping) -> str | None:
    """Why the code a module's metadata describes cannot run on this machine (it was compiled
    for a CPU with features this one lacks), or None. Code for another architecture is not
    judged here (the loader refuses it by its ELF header)."""
    reasons = []
    for req in _requirements(meta):
        triple = str(req.get("triple", ""))
        if triple_arch(triple) != host_arch():
            continue
        missing = missing_features(str(f) for f in req.get("features", ()))
        if missing:
            reasons.append(f"its code was compiled for CPU {req.get('name', '?')!r} ({triple}) and "
                           f"may use {', '.join(missing)}, which this machine's CPU "
                           f"({_loader_detect()[0]}) lacks")
    if not reasons:
        return None
    portable = " (e.g. -mcpu=x86-64-v3)" if host_arch() == "x86_64" else ""
    return "; ".join(dict.fromkeys(reasons)) + (
        "; build it for this machine (target \"llvm\") or for a CPU whose features this one has"
        f"{portable}, or run it on a machine with that CPU")
