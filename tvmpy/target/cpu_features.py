"""The instruction-set features of a CPU, as LLVM defines it: the one place tvmpy asks.

:func:`isa_features` ``(triple, cpu, features)`` is the set of instruction-set extensions
(LLVM names: "avx2", "avx512f", "avx512vnni", "sse4a" ...) code compiled by a target machine
with that triple, CPU name and feature string (``-mattr``, applied with LLVM's implications:
``-avx2`` also drops every AVX-512 feature) may use. ``Target.isa_features``, the vector width,
the libmvec variants of the LLVM backend, the int8 instruction choice and the CPU requirement
recorded in every built library (:func:`requirement`) all come from it, so no list of CPU names
exists anywhere: a CPU LLVM knows is described by LLVM's own definition of it.

How, since llvmlite has no API for a CPU's features:

1. the features to ask about: on this machine's architecture the names LLVM's host detection
   reports (``get_host_cpu_features``: instruction-set features only, no tuning flags); for
   another architecture every feature LLVM knows for the triple, from the listing LLVM prints
   for the feature string ``+help`` (captured from file descriptors 1 and 2);
2. one IR module where, for each feature ``f``, a caller ``@p`` with the target machine's own
   features calls a callee ``@c`` marked ``"target-features"="+f"``, and a second caller ``@n``
   marked ``-f`` calls it too; the O2 pipeline runs with a target machine for the CPU. The
   inliner inlines a call only when the callee's features are a subset of the caller's
   (``TargetTransformInfo::areInlineCompatible`` compares the feature bits), so ``@p`` inlining
   means the CPU has ``f``; ``@n`` inlining although the caller lacks ``f`` means the inliner
   ignores ``f`` (X86's ignore list: tuning flags, and ``64bit``, ``cx16``, ``sahf``). Those
   cannot be probed and are left out unless the feature string names them (the host's does).
   For another architecture the result may hold tuning features the inliner compares
   ("fuse-aes"): harmless, the load check only refuses features a host detects as absent.

The host itself (its CPU name with its detected feature string, as ``Target("llvm")`` builds)
is answered from the host detection directly. Results are cached per (triple, cpu, features);
a probe takes ~0.2-1 s, once per process and CPU.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from ..runtime.host_cpu import host_cpu_name, host_features
from ..runtime.linker import _init_llvm_for, host_arch, triple_arch

__all__ = ["isa_features", "feature_names", "requirement", "captured_fds", "target_machine",
           "host_isa_features", "host_feature_string", "host_cpu_name", "CacheSizes",
           "DEFAULT_CACHE_SIZES", "host_cache_sizes"]

_lock = threading.RLock()


@contextlib.contextmanager
def captured_fds(fds: tuple[int, ...] = (2,)) -> Iterator[io.StringIO]:
    """Redirect file descriptors ``fds`` (where LLVM writes warnings and ``+help``) to a
    temporary file; the text is in the yielded StringIO once the block ends."""
    with _lock, tempfile.TemporaryFile(mode="w+b") as tmp:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = [os.dup(fd) for fd in fds]
        for fd in fds:
            os.dup2(tmp.fileno(), fd)
        out = io.StringIO()
        try:
            yield out
        finally:
            for fd, s in zip(fds, saved):
                os.dup2(s, fd)
                os.close(s)
            tmp.seek(0)
            out.write(tmp.read().decode(errors="replace"))
            out.seek(0)


def _llvm(triple: str) -> Any:
    import llvmlite.binding as llvm

    with _lock:
        _init_llvm_for(llvm, triple)
    return llvm


def target_machine(triple: str, cpu: str, features: str, what: str = "") -> Any:
    """An LLVM target machine (O3, PIC, default code model). LLVM only warns on stderr about an
    unknown CPU or feature (and later aborts the process in code generation): those raise a
    ValueError naming them instead."""
    llvm = _llvm(triple)
    try:
        target = llvm.Target.from_triple(triple)
    except RuntimeError as err:
        raise ValueError(f"LLVM does not know target triple {triple!r}: {err}") from None
    with captured_fds() as warnings:
        tm = target.create_target_machine(cpu=cpu, features=features, opt=3, reloc="pic",
                                          codemodel="default")
    bad = sorted(set(re.findall(r"'([^']*)' is not a recognized (processor|feature)",
                                warnings.read())))
    if bad:
        names = ", ".join(f"{kind} {name!r}" for name, kind in bad)
        raise ValueError(f"{what or 'target'}: LLVM does not know the {names} for {triple}; "
                         "leave out -mcpu/-mattr to compile for this machine")
    return tm


_HELP_SCRIPT = """
import llvmlite.binding as llvm, sys
llvm.initialize_all_targets()
llvm.Target.from_triple(sys.argv[1]).create_target_machine(cpu="generic", features="+help")
"""


def _parse_help(text: str) -> list[str]:
    names, section = [], False
    for line in text.splitlines():
        if line.startswith("Available"):
            section = line.startswith("Available features")
            continue
        m = re.match(r"\s+([A-Za-z0-9][\w.\-]*)\s+- ", line)
        if m and section:
            names.append(m.group(1))
    return names


@cache
def feature_names(triple: str) -> tuple[str, ...]:
    """Every feature name LLVM knows for ``triple``: what LLVM lists for the feature string
    ``+help``. LLVM prints that listing once per process, so a second triple is listed by a
    child process."""
    llvm = _llvm(triple)
    target = llvm.Target.from_triple(triple)
    with captured_fds((1, 2)) as out:
        target.create_target_machine(cpu="generic", features="+help")
    names = _parse_help(out.read())
    if not names:
        import subprocess

        proc = subprocess.run([sys.executable, "-c", _HELP_SCRIPT, triple], capture_output=True,
                              text=True, timeout=120)
        names = _parse_help(proc.stdout + proc.stderr)
    if not names:
        raise RuntimeError(f"LLVM listed no features for {triple} (its +help output changed?)")
    return tuple(names)


def _universe(triple: str) -> tuple[str, ...]:
    """The features to probe: on this machine's architecture the instruction-set features LLVM's
    host detection knows (no tuning flags), elsewhere every feature LLVM knows."""
    known = host_features() if triple_arch(triple) == host_arch() else None
    return tuple(sorted(known)) if known else feature_names(triple)


@lru_cache(maxsize=1)
def host_feature_string() -> str:
    """The host's detected features as an LLVM feature string ("+avx2,-avx512fp16,...")."""
    feats = host_features() or {}
    return ",".join(("+" if on else "-") + name for name, on in sorted(feats.items()))


def host_isa_features() -> frozenset[str]:
    """The instruction-set features of this machine's CPU (LLVM's host detection)."""
    return frozenset(name for name, on in (host_features() or {}).items() if on)


def _last_mention(features: str) -> dict[str, bool]:
    state: dict[str, bool] = {}
    for f in features.split(","):
        f = f.strip()
        if len(f) > 1 and f[0] in "+-":
            state[f[1:]] = f[0] == "+"
    return state


def _default_triple() -> str:
    import llvmlite.binding as llvm

    return str(llvm.get_default_triple())


@lru_cache(maxsize=256)
def isa_features(triple: str, cpu: str, features: str = "") -> frozenset[str]:
    """The instruction-set features code for ``triple``/``cpu``/``features`` may use."""
    native = triple_arch(triple) == host_arch()
    if native and cpu == host_cpu_name() and features == host_feature_string():
        return host_isa_features()
    if triple_arch(triple).startswith(("arm", "thumb")) and not native:
        # 32-bit ARM: enabling one feature on a function aborts LLVM for many of them (the
        # Thumb-only profiles: "does not support ARM mode execution"; thumb2 without v6t2), so
        # the probe cannot run; the features named in ``-mattr`` are what is known
        return frozenset(f for f, on in _last_mention(features).items() if on)
    with _lock:
        has, ignored = _probe(triple, cpu, features)
    explicit = _last_mention(features)
    return frozenset((has - ignored) | {f for f in ignored if explicit.get(f)})


def _probe(triple: str, cpu: str, features: str) -> tuple[set[str], set[str]]:
    """(features the CPU has, features the inliner ignores), by inlining (see the docstring)."""
    llvm = _llvm(triple)
    names = _universe(triple)
    pre = features + "," if features else ""
    lines = ["@g = global i32 0"]
    for i, f in enumerate(names):
        # disabling 64bit on a 64-bit triple aborts LLVM: that caller keeps the features as is
        neg = f"{pre}-{f}" if f != "64bit" else features or "+64bit"
        lines += [
            f"define internal void @c{i}() #{2 * i} {{\n  store volatile i32 {i}, ptr @g\n"
            "  ret void\n}",
            f"define void @p{i}() {{\n  call void @c{i}()\n  ret void\n}}",
            f"define void @n{i}() #{2 * i + 1} {{\n  call void @c{i}()\n  ret void\n}}",
            f'attributes #{2 * i} = {{ "target-features"="{pre}+{f}" }}',
            f'attributes #{2 * i + 1} = {{ "target-features"="{neg}" }}',
        ]
    tm = target_machine(triple, cpu, features, f"CPU {cpu!r}")
    ctx = llvm.create_context()
    mod = llvm.parse_assembly("\n".join(lines), context=ctx)
    mod.triple = triple
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=2))
    pb.getModulePassManager().run(mod, pb)
    has = {f for i, f in enumerate(names) if f"@c{i}(" not in str(mod.get_function(f"p{i}"))}
    ignored = {f for i, f in enumerate(names) if f"@c{i}(" not in str(mod.get_function(f"n{i}"))}
    return has, ignored


def requirement(triple: str | None, cpu: str, features: str) -> dict:
    """The ``"cpu"`` entry of a module's metadata (runtime/host_cpu.py checks it at load time):
    the triple, CPU name and instruction-set features the code was compiled with."""
    triple = triple or _default_triple()
    return {"triple": triple, "name": cpu, "features": sorted(isa_features(triple, cpu, features))}


# --- data cache sizes (blocking choices of the CPU schedules) -----------------------------------

@dataclass(frozen=True)
class CacheSizes:
    """Per-core data cache sizes in bytes: ``l1d`` (level 1 data) and ``l2`` (level 2)."""

    l1d: int
    l2: int


DEFAULT_CACHE_SIZES = CacheSizes(l1d=32 * 1024, l2=1024 * 1024)
"""What a target other than this machine is assumed to have (a foreign or named CPU, or a host
whose sizes cannot be read): 32 KiB L1D, as every x86-64 core since 2006 has at least, and a
1 MiB L2 (Skylake-SP to Sapphire Rapids 1-2 MiB, Zen 2-4 0.5-1 MiB)."""


def _sysfs_cache_sizes() -> dict[int, int]:
    """{level: bytes} of cpu0's data/unified caches from Linux's sysfs ({} elsewhere)."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    found: dict[int, int] = {}
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return found
    for entry in entries:
        if not entry.startswith("index"):
            continue
        try:
            with open(os.path.join(base, entry, "level")) as f:
                level = int(f.read())
            with open(os.path.join(base, entry, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(base, entry, "size")) as f:
                text = f.read().strip().upper()
        except (OSError, ValueError):
            continue
        if kind not in ("Data", "Unified"):
            continue
        scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1:], 1)
        digits = text.rstrip("KMB")
        if digits.isdigit():
            found[level] = int(digits) * scale
    return found


@lru_cache(maxsize=1)
def host_cache_sizes() -> CacheSizes:
    """This machine's per-core L1D and L2 sizes (sysfs, then ``sysconf``), each falling back to
    :data:`DEFAULT_CACHE_SIZES` when it cannot be read."""
    found = _sysfs_cache_sizes()
    for level, name in ((1, "SC_LEVEL1_DCACHE_SIZE"), (2, "SC_LEVEL2_CACHE_SIZE")):
        if found.get(level, 0) <= 0:
            try:
                value = os.sysconf(name)
            except (ValueError, OSError, AttributeError):
                value = 0
            if value > 0:
                found[level] = value
    return CacheSizes(l1d=found.get(1) or DEFAULT_CACHE_SIZES.l1d,
                      l2=found.get(2) or DEFAULT_CACHE_SIZES.l2)


def fma512_units(features: frozenset[str] | set[str]) -> int:
    """512-bit fused multiply-adds a core of a CPU with the instruction-set ``features``
    (:attr:`Target.isa_features`) starts per cycle, as the CPU schedules assume it: 0 without
    AVX-512F; 2 with AMX (``amx-tile``: every core that has AMX, Sapphire Rapids and later
    Xeons, has two 512-bit FMA units, ports 0 and 5); else 1: Zen 4 runs a 512-bit FMA as two
    halves on its 256-bit units, client cores with AVX-512 (Ice Lake to Rocket Lake) fuse
    ports 0 and 1 for one, and older Xeons (Skylake-SP to Ice Lake-SP: one or two units by
    SKU, no feature tells) are taken at the lower figure. It sets how fast a compute-bound
    kernel runs against the memory traffic it needs (LLVM's host CPU name, which carries a
    scheduling model, is unreliable under virtualisation: a KVM guest on an Emerald Rapids
    Xeon reports "rocketlake")."""
    if "avx512f" not in features:
        return 0
    return 2 if "amx-tile" in features else 1
