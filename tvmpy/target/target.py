"""``Target("llvm -mcpu=znver4 -mattr=+avx512f")``: which backend, which CPU, which features.

Keys: ``kind`` ("llvm", "c"), ``mcpu`` (default: the host CPU), ``mattr`` (list of "+feat"),
``mtriple``, ``num_cores`` (threads for parallel loops; this machine's CPUs, or 4 for a foreign
triple), ``model`` and ``device`` (TVM's
``-model=bcm2711 -device=arm_cpu``; ``-device=arm_cpu`` makes the keys ``arm_cpu, cpu``).
Derived: ``arch`` (from ``-mtriple``, else the host's), ``is_foreign`` (code for another
architecture: built, exported with a cross compiler, never loaded here), ``isa_features`` (the
instruction-set features code for the target may use, as LLVM defines the CPU:
target/cpu_features.py; no list of CPU names) and from them ``vector_width_bits``.
A triple without ``-mcpu`` means LLVM's "generic" CPU of that architecture (as the LLVM backend
compiles it): the host's CPU name and features never leak into a foreign target.

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
from ..runtime.linker import host_arch, triple_arch
from .cpu_features import (
    DEFAULT_CACHE_SIZES,
    CacheSizes,
    host_cache_sizes,
    host_cpu_name,
    host_feature_string,
    isa_features,
)

__all__ = ["Target", "GPU_KINDS", "as_target", "resolve_target", "current_target", "host_cpu_name", "host_cpu_features",
           "host_arch", "triple_arch", "arm_cpu", "target_as_built", "record_cpu", "cpu_of",
           "cpu_applies", "record_applies", "same_target_as_built", "other_cpu_message"]

_KINDS = ("llvm", "c", "interp", "opencl", "cuda", "nvptx", "ext_dev")  # ext_dev: VTA (tvmpy.vta.build)
_KINDS += ("vulkan",)  # SPIR-V compute shaders (codegen/vulkan.py), run through the vulkan binding
_KINDS += ("webgpu",)  # WGSL compute shaders (codegen/webgpu.py), run on wgpu-py
#: GPU kinds: device code for a GPU, host code on ``Target.host`` (default llvm)
GPU_KINDS = ("opencl", "cuda", "nvptx")
GPU_KINDS += ("vulkan",)
GPU_KINDS += ("webgpu",)
#: ``num_cores`` of a target for another architecture when ``-num-cores`` is not given
FOREIGN_NUM_CORES = 4
# the dispatch keys of a kind (``generic_func`` overrides; ``-keys=`` replaces them)
_DEFAULT_KEYS = {"llvm": ("cpu",), "c": ("cpu",), "opencl": ("opencl", "gpu"),
                 "cuda": ("cuda", "gpu"), "nvptx": ("nvptx", "cuda", "gpu")}
_DEFAULT_KEYS["webgpu"] = ("webgpu", "gpu")
# GPU limits of a kind: max_num_threads, thread_warp_size, max_shared_memory_per_block (bytes)
_GPU_DEFAULTS = {"opencl": (256, 1, 48 * 1024), "cuda": (1024, 32, 48 * 1024),
                 "nvptx": (1024, 32, 48 * 1024)}
_DEFAULT_KEYS["vulkan"] = ("vulkan", "gpu")  # SPIR-V (codegen/vulkan.py)
_GPU_DEFAULTS["vulkan"] = (256, 1, 32 * 1024)  # TVM's vulkan defaults
# WebGPU's guaranteed limits: maxComputeInvocationsPerWorkgroup, maxComputeWorkgroupStorageSize
_GPU_DEFAULTS["webgpu"] = (256, 1, 16 * 1024)


def host_cpu_features() -> str:
    """This machine's features as an LLVM feature string (``+avx2,-avx512fp16,...``)."""
    return host_feature_string()


@lru_cache(maxsize=1)
def _default_triple() -> str:
    import llvmlite.binding as llvm

    return str(llvm.get_default_triple())


def _default_host(t: Target) -> Target | None:
    """The host a target gets when none is given: llvm for GPU kinds, none for CPU kinds."""
    return Target("llvm") if t.is_gpu else None


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
        if isinstance(target, dict):  # TVM 0.8's config form {"kind": "llvm", "mcpu": ...}
            target, cfg_host = _config_to_text(target)
            host = host if host is not None else cfg_host
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
        self.model: str | None = None
        self.device: str | None = None
        gpu = _GPU_DEFAULTS.get(kind)
        #: GPU limits (0 on CPU kinds): threads per block, warp size, shared bytes per block
        self.max_num_threads: int = gpu[0] if gpu else 0
        self.thread_warp_size: int = gpu[1] if gpu else 0
        self.max_shared_memory_per_block: int = gpu[2] if gpu else 0
        self.arch_name: str | None = None  # cuda/nvptx -arch=sm_80
        keys_given = False
        cores_given = False
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
                cores_given = True
            elif key == "opt-level":
                self.opt_level = int(value)
            elif key == "keys":
                self.keys = value.split(",")
                keys_given = True
            elif key == "model":
                self.model = value
            elif key == "device":
                self.device = value
            elif gpu and key.replace("-", "_") in ("max_num_threads", "thread_warp_size",
                                                   "max_shared_memory_per_block"):
                if not value.isdigit() or int(value) < 1:
                    raise ValueError(f"target option -{key} in {text!r}: expected a positive int")
                setattr(self, key.replace("-", "_"), int(value))
            elif gpu and key == "arch" and kind in ("cuda", "nvptx"):
                self.arch_name = value
            else:
                extra = (" -max_num_threads -thread_warp_size -max_shared_memory_per_block"
                         + (" -arch" if kind in ("cuda", "nvptx") else "")) if gpu else ""
                raise ValueError(f"unknown target option -{key} in {text!r}; known: -mcpu -mattr "
                                 "-mtriple -num-cores -opt-level -keys -model -device" + extra)
        self._cores_given = cores_given  # printed by __str__ only when given
        if not cores_given and gpu is None and self.is_foreign:
            # not this machine's core count: the same target string gives the same code on
            # every build machine (4: the Raspberry Pi 3/4 and most Arm boards)
            self.num_cores = FOREIGN_NUM_CORES
        if self.device and not keys_given and self.device not in self.keys:
            self.keys = [self.device] + self.keys
        if host is not None:
            self.host: Target | None = Target(host)
        else:
            self.host = Target("llvm") if gpu else None

    @property
    def is_gpu(self) -> bool:
        """A GPU kind (opencl, cuda, nvptx): lowered with the GPU phases, host code on .host."""
        return self.kind in GPU_KINDS

    @property
    def arch(self) -> str:
        """The architecture code is generated for: the triple's, else the host's."""
        return triple_arch(self.mtriple) if self.mtriple else host_arch()

    @property
    def is_foreign(self) -> bool:
        """Code for another architecture than this machine's (cannot be loaded here)."""
        return self.arch != host_arch()

    @property
    def cpu(self) -> str:
        """The CPU name for code generation (host CPU when -mcpu and -mtriple are absent; LLVM's
        "generic" for an explicit triple without -mcpu)."""
        if self.mcpu:
            return self.mcpu
        return "generic" if self.mtriple else host_cpu_name()  # as codegen/llvm.py compiles it

    @property
    def features(self) -> str:
        """The feature string the LLVM target machine is created with: the host's detected
        features when the target is this machine (no -mcpu and no -mtriple, or -mcpu naming the
        host CPU on the host's architecture), plus -mattr; for another named CPU only -mattr
        (LLVM applies the CPU's own features; :attr:`isa_features` lists them)."""
        host = (not self.is_foreign and self.mcpu == host_cpu_name()) or (
            self.mcpu is None and self.mtriple is None)
        base = host_cpu_features() if host else ""
        extra = ",".join(self.mattr)
        return ",".join(x for x in (base, extra) if x)

    @property
    def isa_features(self) -> frozenset[str]:
        """The instruction-set features (LLVM names: "avx2", "avx512vnni", "sse4a" ...) code for
        this target may use: the host's detected ones for this machine, LLVM's own definition
        of a named ``-mcpu`` (target/cpu_features.py), then ``-mattr`` with LLVM's implications
        (``-avx2`` drops AVX-512 too). Empty for GPU kinds and the interpreter."""
        if self.kind not in ("llvm", "c"):
            return frozenset()
        if self.mtriple is not None and self.mcpu is None:
            return isa_features(self.mtriple, "generic", ",".join(self.mattr))
        return isa_features(self.mtriple or _default_triple(), self.cpu, self.features)

    def has_feature(self, name: str) -> bool:
        """Whether code for this target may use the instruction-set feature ``name``."""
        return name in self.isa_features

    @property
    def vector_width_bits(self) -> int:
        """The widest vector registers of the target: 512 with AVX-512F, 256 with AVX, 128
        otherwise (and for NEON, WebAssembly simd128 and other architectures)."""
        if self.arch not in ("x86_64", "i386", "i686"):
            return 128  # NEON / WebAssembly simd128 (SVE's length is not fixed at compile time)
        feats = self.isa_features
        if "avx512f" in feats:
            return 512
        return 256 if "avx" in feats else 128

    def vector_lanes(self, dtype: str) -> int:
        return max(1, self.vector_width_bits // bits_of(dtype))

    @property
    def vector_registers(self) -> int:
        """Architectural vector registers register tiles are sized for: 32 with AVX-512F
        (zmm0-31) and on other architectures (AArch64 NEON's v0-v31; WebAssembly's locals are
        not a register file, its engines map them onto the host's), 16 on x86 without AVX-512
        (ymm/xmm0-15)."""
        if self.arch not in ("x86_64", "i386", "i686"):
            return 32
        return 32 if "avx512f" in self.isa_features else 16

    @property
    def folds_broadcasts(self) -> bool:
        """Whether a vector FMA takes a scalar broadcast from memory as its operand (AVX-512's
        embedded broadcast ``{1toN}``), so that a register tile's broadcasts need no registers;
        on AVX2, SSE and NEON every broadcast is a register of its own."""
        return self.arch in ("x86_64", "i386", "i686") and "avx512f" in self.isa_features

    @property
    def cache_sizes(self) -> CacheSizes:
        """Per-core L1D / L2 sizes the CPU schedules block for: this machine's when the target
        is this machine (no -mcpu and no -mtriple, or -mcpu naming the host CPU on its
        architecture), else :data:`~tvmpy.target.cpu_features.DEFAULT_CACHE_SIZES`."""
        host = (not self.is_foreign and self.mcpu == host_cpu_name()) or (
            self.mcpu is None and self.mtriple is None)
        return host_cache_sizes() if host and not self.is_gpu else DEFAULT_CACHE_SIZES

    @property
    def attrs(self) -> dict[str, Any]:
        """TVM's ``target.attrs``: the options given (``{"mcpu": "cortex-a72", "mattr": [...]}``;
        ``keys`` and ``kind`` are separate fields, as in TVM)."""
        out: dict[str, Any] = {}
        for p in shlex.split(str(self))[1:]:
            key, _, value = p.lstrip("-").partition("=")
            if key == "keys":
                continue
            out[key] = (value.split(",") if key == "mattr" else
                        int(value) if value.isdigit() else value)
        return out

    def export(self) -> dict[str, Any]:
        """TVM's ``target.export()``: the target as a config dict (``Target(d)`` rebuilds it)."""
        out: dict[str, Any] = {"kind": str(self.kind), "keys": list(self.keys), **self.attrs}
        if self.host is not None:
            out["host"] = self.host.export()
        return out

    def __str__(self) -> str:
        s = self.kind
        if self.mcpu:
            s += f" -mcpu={self.mcpu}"
        if self.mattr:
            s += " -mattr=" + ",".join(self.mattr)
        if self.mtriple:
            s += f" -mtriple={self.mtriple}"
        if self.model:
            s += f" -model={self.model}"
        if self.device:
            s += f" -device={self.device}"
        if getattr(self, "_cores_given", False):
            s += f" -num-cores={self.num_cores}"
        if self.opt_level != 3:
            s += f" -opt-level={self.opt_level}"
        gpu = _GPU_DEFAULTS.get(self.kind)
        if gpu:
            for i, k in enumerate(("max_num_threads", "thread_warp_size",
                                   "max_shared_memory_per_block")):
                if getattr(self, k) != gpu[i]:
                    s += f" -{k}={getattr(self, k)}"
            if self.arch_name:
                s += f" -arch={self.arch_name}"
        keys = list(_DEFAULT_KEYS.get(self.kind, (self.kind,)))
        if self.device and self.device not in keys:
            keys = [self.device] + keys
        if self.keys != keys:
            s += " -keys=" + ",".join(self.keys)
        return s

    def __repr__(self) -> str:
        # str() is the device target alone (TVM's text form, the tuning-log key); repr names the
        # host too when it is not the default one, so two targets that build differently differ
        if self.host is not None and self.host != _default_host(self):
            return f"Target({str(self)!r}, host={str(self.host)!r})"
        return f"Target({str(self)!r})"

    def _identity(self) -> tuple[str, str]:
        return str(self), "" if self.host is None else str(self.host)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Target) and self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

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


def resolve_target(target: Target | str | None = None) -> Target:
    """The target to compile for: ``target`` when given (a string parsed, as :func:`as_target`),
    else the current one (``with Target(...)``), else ``Target("llvm")`` (the host)."""
    if target is not None:
        return as_target(target)
    return current_target() or Target("llvm")


def current_target(allow_none: bool = True) -> Target | None:
    """The target of this thread's innermost ``with Target(...)`` block."""
    if _SCOPE.targets:
        return _SCOPE.targets[-1]
    if allow_none:
        return None
    raise RuntimeError("no current target: use `with tvm.target.Target(...)`")


def target_as_built(target: Target | str) -> str:
    """The text of ``target`` with the CPU its code is generated for made explicit: a CPU kind
    (llvm, c) without ``-mcpu`` gets ``-mcpu=<`Target.cpu`>`` (the host's CPU in LLVM's name,
    or "generic" for a triple alone), so that a tuning record says which CPU it was measured
    for; other kinds and explicit ``-mcpu`` targets are their ``str``."""
    t = as_target(target)
    if t.kind not in ("llvm", "c") or t.mcpu:
        return str(t)
    built = Target(t)
    built.mcpu = t.cpu
    return str(built)


def _with_mattr(cpu: str, mattr: list[str]) -> str:
    """``cpu`` and its ``-mattr`` as one CPU name ("znver4 -mattr=-avx512f"): the last mention
    of each feature, sorted; the bare name without ``-mattr``."""
    last: dict[str, str] = {}
    for a in mattr:
        a = a.strip()
        if a:
            last[a.lstrip("+-")] = a if a[0] in "+-" else "+" + a
    return cpu if not last else f"{cpu} -mattr={','.join(sorted(last.values()))}"


def record_cpu(target_text: str) -> str | None:
    """The CPU of a tuning record's target text: its ``-mcpu``, with its ``-mattr`` when it has
    one (a schedule tuned with AVX-512 off is not one tuned for the whole CPU); None when it
    names no ``-mcpu`` (a GPU target, or a record written before records named their CPU,
    which matches any CPU)."""
    cpu, mattr = None, []
    for part in str(target_text).split():
        if part.startswith("-mcpu="):
            cpu = part.partition("=")[2] or None
        elif part.startswith("-mattr="):
            mattr = part.partition("=")[2].split(",")
    return _with_mattr(cpu, mattr) if cpu else None


def cpu_of(target: Target | str) -> str | None:
    """The CPU a build for ``target`` generates code for, with its ``-mattr`` (None for GPU and
    other non-CPU kinds): what :func:`record_cpu` of a record is compared with."""
    t = as_target(target)
    return _with_mattr(t.cpu, t.mattr) if t.kind in ("llvm", "c") else None


@lru_cache(maxsize=64)
def _same_features(a: str, b: str) -> bool:
    """Whether two CPU names of one ``-mcpu`` (:func:`_with_mattr`) give code the same
    instruction-set features (``-mattr=+avx512f`` on znver4 changes nothing)."""
    try:
        fa, fb = (Target(f"llvm -mcpu={x}").isa_features for x in (a, b))
    except (ValueError, RuntimeError):  # a CPU LLVM does not know here: compare the names
        return False
    return fa == fb and bool(fa)


def cpu_applies(rec_cpu: str | None, build_cpu: str | None) -> bool:
    """The one rule of which tuning records apply to a build (AutoTVM and the auto-scheduler):
    a record's CPU (:func:`record_cpu`) applies to a build for ``build_cpu`` (:func:`cpu_of`)
    when it is that CPU with the same instruction-set features (its ``-mattr``, if any, changes
    none of them), or when the record names none (older logs, GPU targets)."""
    if rec_cpu is None or rec_cpu == build_cpu:
        return True
    if build_cpu is None or rec_cpu.split()[0] != build_cpu.split()[0]:
        return False
    return _same_features(rec_cpu, build_cpu)


def record_applies(record_target: str, target: Target | str) -> bool:
    """Whether a record of ``record_target`` (its target text) applies to a build for
    ``target``: the same kind and, by :func:`cpu_applies`, the same CPU."""
    if str(record_target).split()[:1] != str(target).split()[:1]:
        return False
    return cpu_applies(record_cpu(record_target), cpu_of(target))


@lru_cache(maxsize=1024)
def _built_text(text: str) -> str:
    return target_as_built(text)


def same_target_as_built(a: Target | str, b: Target | str) -> bool:
    """Whether two targets generate code for the same target and CPU (``llvm`` on this host
    and ``llvm -mcpu=<this host's CPU>`` do): records of one are measurements of the other."""
    return _built_text(str(a)) == _built_text(str(b))


def other_cpu_message(who: str, cpus: Any, mine: str | None, target: Any, consequence: str
                      ) -> str:
    """The one warning text for records of another CPU that are not used."""
    names = ", ".join(repr(c) for c in sorted({str(c) for c in cpus}))
    return (f"{who}: records tuned for CPU {names} are not applied to this build for CPU "
            f"{mine!r} (target {target}): {consequence}. Tune on this CPU, or pass "
            "include_compatible=True to apply them anyway.")


# TVM's arm_cpu models (64-bit Linux): model -> (-model, -mcpu, -mattr)
_ARM_MODELS = {
    "rasp4b": ("bcm2711", "cortex-a72", "+neon"),
    "rasp4b64": ("bcm2711", "cortex-a72", "+neon"),
    "rasp3b": ("bcm2837", "cortex-a53", "+neon"),
    "rasp3b64": ("bcm2837", "cortex-a53", "+neon"),
    "a72": ("unknown", "cortex-a72", "+neon"),
    "a53": ("unknown", "cortex-a53", "+neon"),
    "a55": ("unknown", "cortex-a55", "+neon,+dotprod"),
    "a76": ("unknown", "cortex-a76", "+neon,+dotprod"),
    "pixel2": ("snapdragon835", "kryo", "+neon"),
    "rk3399": ("rk3399", "cortex-a72", "+neon"),
    "unknown": ("unknown", None, "+neon"),
}


def _config_to_text(cfg: dict) -> tuple[str, Any]:
    """A TVM config dict (``{"kind": "llvm", "mcpu": "cortex-a72", "mattr": ["+avx2"], "host":
    ...}``) -> (the target string, the host or None)."""
    cfg = dict(cfg)
    if "kind" not in cfg:
        raise ValueError(f"target config dict needs a 'kind' (e.g. 'llvm'), got {cfg!r}")
    host = cfg.pop("host", None)
    text = str(cfg.pop("kind"))
    for key, value in cfg.items():
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        elif isinstance(value, bool):
            value = str(value).lower()
        text += f" -{key}={value}"
    return text, host


def rasp(options: str | list[str] | None = None) -> Target:
    """TVM 0.6's ``tvm.target.rasp()``: ``arm_cpu("rasp3b")``."""
    return arm_cpu("rasp3b", options)


def arm_cpu(model: str = "unknown", options: str | list[str] | None = None) -> Target:
    """TVM's ``tvm.target.arm_cpu(model)``: an AArch64 Linux CPU target (triple
    aarch64-linux-gnu, the model's -mcpu and -mattr, keys ``arm_cpu, cpu``); ``options`` are
    appended (e.g. "-num-cores=4")."""
    if model not in _ARM_MODELS:
        raise ValueError(f"arm_cpu: unknown model {model!r}; known: {', '.join(sorted(_ARM_MODELS))}")
    name, mcpu, mattr = _ARM_MODELS[model]
    text = f"llvm -device=arm_cpu -model={name} -mtriple=aarch64-linux-gnu -mattr={mattr}"
    if mcpu:
        text += f" -mcpu={mcpu}"
    if options:
        text += " " + (options if isinstance(options, str) else " ".join(options))
    return Target(text)
