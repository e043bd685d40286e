"""``Target("llvm -mcpu=znver4 -mattr=+avx512f")``: which backend, which CPU, which features.

Keys: ``kind`` ("llvm", "c"), ``mcpu`` (default: the host CPU), ``mattr`` (list of "+feat"),
``mtriple``, ``num_cores`` (threads for parallel loops). Derived: ``vector_width_bits``.

``with Target(...):`` makes it ``Target.current()`` for the calling thread only (as in TVM): a
thread started inside the block sees no current target.
"""

from __future__ import annotations

import os
import shlex
import threading
from functools import lru_cache
from typing import Any

from ..ir.dtype import bits_of

__all__ = ["Target", "as_target", "current_target", "host_cpu_name", "host_cpu_features"]

_KINDS = ("llvm", "c", "interp")
# the dispatch keys of a kind (``generic_func`` overrides; ``-keys=`` replaces them)
_DEFAULT_KEYS = {"llvm": ("cpu",), "c": ("cpu",)}


@lru_cache(maxsize=1)
def host_cpu_name() -> str:
    try:
        import llvmlite.binding as llvm

        return llvm.get_host_cpu_name()
    except Exception:  # pragma: no cover
        return "generic"


@lru_cache(maxsize=1)
def host_cpu_features() -> str:
    try:
        import llvmlite.binding as llvm

        return llvm.get_host_cpu_features().flatten()
    except Exception:  # pragma: no cover
        return ""


class TargetKind(str):
    """The target kind: a ``str`` ("llvm") that also has TVM's ``.name`` (``target.kind.name``)."""

    @property
    def name(self) -> str:
        return str(self)


class Target:
    """A parsed target string. Unknown options raise a ValueError naming them."""

    def __init__(self, target: str | Target | None = None, host: Any = None):
        if isinstance(target, Target):
            self.__dict__.update(target.__dict__)
            return
        if target is not None and not isinstance(target, str):
            raise TypeError(f"target must be a string such as 'llvm' or 'c', got {type(target).__name__} "
                            f"{target!r}")
        text = target or "llvm"
        parts = shlex.split(text)
        kind = parts[0]
        if kind not in _KINDS:
            raise ValueError(f"unknown target kind {kind!r} in {text!r}; supported: {', '.join(_KINDS)}")
        self.kind = TargetKind(kind)
        self.mcpu: str | None = None
        self.mattr: list[str] = []
        self.mtriple: str | None = None
        self.num_cores: int = os.cpu_count() or 1
        self.opt_level = 3
        self.keys: list[str] = list(_DEFAULT_KEYS.get(kind, (kind,)))
        for p in parts[1:]:
            if not p.startswith("-") or "=" not in p:
                raise ValueError(f"bad target option {p!r} in {text!r}: expected -key=value")
            key, _, value = p.lstrip("-").partition("=")
            if key == "mcpu":
                self.mcpu = value
            elif key == "mattr":
                self.mattr = [a for a in value.split(",") if a]
            elif key == "mtriple":
                self.mtriple = value
            elif key == "num-cores" or key == "num_cores":
                self.num_cores = int(value)
            elif key == "opt-level":
                self.opt_level = int(value)
            elif key == "keys":
                self.keys = value.split(",")
            else:
                raise ValueError(f"unknown target option -{key} in {text!r}; known: -mcpu -mattr -mtriple -num-cores -opt-level -keys")
        self.host = Target(host) if host is not None else None

    @property
    def cpu(self) -> str:
        """The CPU name for code generation (host CPU when -mcpu is absent)."""
        return self.mcpu or host_cpu_name()

    @property
    def features(self) -> str:
        """LLVM feature string: the host's features when -mcpu is absent, plus -mattr."""
        base = host_cpu_features() if self.mcpu is None or self.mcpu == host_cpu_name() else ""
        extra = ",".join(self.mattr)
        return ",".join(x for x in (base, extra) if x)

    @property
    def vector_width_bits(self) -> int:
        feats = self.features + "," + ",".join(self.mattr)
        cpu = self.cpu
        if "+avx512f" in feats or cpu.startswith(("znver4", "znver5", "skylake-avx512", "icelake", "sapphirerapids", "cascadelake")):
            return 512
        if "+avx2" in feats or "+avx" in feats or cpu.startswith(("znver", "haswell", "skylake", "broadwell")):
            return 256
        return 128

    def vector_lanes(self, dtype: str) -> int:
        return max(1, self.vector_width_bits // bits_of(dtype))

    def __str__(self) -> str:
        s = self.kind
        if self.mcpu:
            s += f" -mcpu={self.mcpu}"
        if self.mattr:
            s += " -mattr=" + ",".join(self.mattr)
        if self.mtriple:
            s += f" -mtriple={self.mtriple}"
        if self.keys != list(_DEFAULT_KEYS.get(self.kind, (self.kind,))):
            s += " -keys=" + ",".join(self.keys)
        return s

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Target) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    @staticmethod
    def current(allow_none: bool = True) -> Target | None:
        """The target of the innermost ``with Target(...)`` block (TVM's ``Target.current()``)."""
        return current_target(allow_none)

    # `with Target(...):` sets the current target of this thread (used by topi schedules)
    def __enter__(self) -> Target:
        _SCOPE.targets.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _SCOPE.targets.pop()


class _Scope(threading.local):
    """The ``with Target(...)`` blocks active in one thread (a new thread starts with none)."""

    def __init__(self) -> None:
        self.targets: list[Target] = []


_SCOPE = _Scope()


def as_target(target: Target | str | None, default: str | None = None) -> Target:
    """``target`` as a Target: a Target as is (not copied), a string parsed, None as
    ``Target(default)`` where the caller gives a default; anything else is a TypeError."""
    if isinstance(target, Target):
        return target
    if target is None and default is not None:
        return Target(default)
    if isinstance(target, str):
        return Target(target)
    raise TypeError(f"target must be a string such as 'llvm' or 'c', or a Target, got "
                    f"{type(target).__name__} {target!r}")


def current_target(allow_none: bool = True) -> Target | None:
    """The target of this thread's innermost ``with Target(...)`` block."""
    if _SCOPE.targets:
        return _SCOPE.targets[-1]
    if allow_none:
        return None
    raise RuntimeError("no current target: use `with tvm.target.Target(...)`")
