"""CPU features come from LLVM (tvmpy/target/cpu_features.py): the host's detected features for
this machine, LLVM's own definition of a named ``-mcpu``, ``-mattr`` on top with LLVM's
implications. No list of CPU names: CPUs the code never heard of get their real vector width
(issue 24: graniterapids and x86-64-v4 got 128-bit vectors, alderlake 128 instead of 256)."""

from __future__ import annotations

import threading

import pytest

from tvmpy.runtime.host_cpu import host_features
from tvmpy.target import Target
from tvmpy.target import cpu_features as cf

X86 = "x86_64-unknown-linux-gnu"


@pytest.mark.parametrize("text,bits", [
    ("llvm -mcpu=graniterapids", 512), ("llvm -mcpu=x86-64-v4", 512),
    ("llvm -mcpu=alderlake", 256), ("llvm -mcpu=x86-64", 128), ("llvm -mcpu=znver3", 256),
    ("llvm -mcpu=x86-64-v3", 256), ("llvm -mcpu=sapphirerapids", 512),
    ("llvm -mcpu=znver4 -mattr=-avx512f", 256), ("llvm -mcpu=graniterapids -mattr=-avx", 128),
    ("llvm -mcpu=x86-64 -mattr=+avx512f", 512), ("llvm -mcpu=x86-64-v2", 128),
    ("llvm -mtriple=x86_64-linux-gnu", 128), ("llvm -mtriple=aarch64-linux-gnu", 128),
    ("c -mcpu=alderlake", 256),
])  # fmt: skip
def test_vector_width_from_llvm_cpu_definitions(text, bits):
    t = Target(text)
    assert t.vector_width_bits == bits
    assert t.vector_lanes("float32") == bits // 32


def test_named_cpu_features():
    emr = Target("llvm -mcpu=emeraldrapids").isa_features
    assert {"avx512f", "avx512bw", "avx512vnni", "avx512fp16", "amx-tile"} <= emr
    assert "sse4a" not in emr  # AMD only: the instruction that killed the Intel test run
    zen4 = Target("llvm -mcpu=znver4").isa_features
    assert {"avx512f", "avx512vnni", "sse4a"} <= zen4 and "avx512fp16" not in zen4
    adl = Target("llvm -mcpu=alderlake").isa_features
    assert {"avx2", "fma", "avxvnni"} <= adl and not any(f.startswith("avx512") for f in adl)
    base = Target("llvm -mcpu=x86-64").isa_features
    assert {"sse", "sse2"} <= base and not base & {"sse3", "avx", "avx2", "sse4a"}
    # tuning flags (which the inliner does not compare, or that are not instruction sets) are
    # not features of the CPU
    assert not any(f.startswith(("fast-", "slow-", "prefer-", "tuning-", "false-deps"))
                   for f in emr | zen4)


def test_mattr_applies_with_llvm_implications():
    t = Target("llvm -mcpu=znver4 -mattr=-avx2")
    assert "avx2" not in t.isa_features and not any(f.startswith("avx512") for f in t.isa_features)
    assert "avx" in t.isa_features
    t = Target("llvm -mcpu=haswell -mattr=+avx512vnni")
    assert {"avx512vnni", "avx512f"} <= t.isa_features  # +avx512vnni implies AVX-512F
    t = Target("llvm -mcpu=haswell -mattr=+avx512f,-avx512f")  # the last mention wins
    assert "avx512f" not in t.isa_features and t.has_feature("avx2")


def test_host_target_uses_the_detected_features():
    host = {f for f, on in (host_features() or {}).items() if on}
    assert Target("llvm").isa_features == host
    assert Target("llvm").features == cf.host_feature_string()
    if "avx512f" in host:
        narrowed = Target("llvm -mattr=-avx512f").isa_features
        # LLVM's implications: every AVX-512 extension and AVX10 (AVX10.1 is AVX-512 under a
        # new name: Sapphire/Emerald/Granite Rapids list it) need AVX-512F
        assert narrowed == {f for f in host if not f.startswith(("avx512", "avx10"))}
        assert Target("llvm -mattr=-avx512f").vector_width_bits == 256


def test_named_cpu_target_machine_gets_only_mattr():
    """A named CPU's target machine is created with the CPU name and -mattr only (LLVM applies
    the CPU's own features, as before: codegen unchanged), whatever isa_features lists."""
    from tvmpy.codegen.llvm import _cpu_of

    assert _cpu_of(Target("llvm -mcpu=alderlake -mattr=-avx2"))[1:] == ("alderlake", "-avx2")
    assert _cpu_of(Target("llvm -mcpu=graniterapids"))[1:] == ("graniterapids", "")


def test_unknown_cpu_is_an_error():
    with pytest.raises(ValueError, match="does not know the processor 'notacpu'"):
        cf.isa_features(X86, "notacpu", "")


def test_foreign_architecture_features():
    a76 = Target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76").isa_features
    assert {"neon", "dotprod", "fullfp16"} <= a76
    a72 = Target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72").isa_features
    assert "neon" in a72 and "dotprod" not in a72


def test_probe_is_thread_safe():
    cf.isa_features.cache_clear()
    out: list[frozenset] = []
    threads = [threading.Thread(target=lambda: out.append(cf.isa_features(X86, "icelake-server")))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 4 and all(o == out[0] for o in out) and "avx512vnni" in out[0]


def test_no_cpu_name_lists_in_the_package():
    """The name lists that gave graniterapids 128-bit vectors are gone: no code compares a CPU
    name with LLVM CPU names."""
    import pathlib
    import re

    root = pathlib.Path(cf.__file__).resolve().parents[1]
    names = re.compile(r"\"(skylake|icelake|cascadelake|sapphirerapids|haswell|znver\d?|"
                       r"alderlake|graniterapids|broadwell|tigerlake)[\w-]*\"")
    hits = [f"{p.relative_to(root)}:{n}" for p in root.rglob("*.py")
            for n, line in enumerate(p.read_text().splitlines(), 1) if names.search(line)]
    assert not hits, hits


def test_cache_sizes_host_and_foreign(monkeypatch):
    """The host's L1D / L2 sizes come from sysfs (then sysconf); a target that is not this
    machine (a named CPU, another triple) gets the defaults."""
    from tvmpy.target import Target, cpu_features

    host = cpu_features.host_cache_sizes()
    assert host.l1d >= 4096 and host.l2 >= host.l1d
    assert Target("llvm").cache_sizes == host
    assert Target("llvm -mtriple=aarch64-linux-gnu").cache_sizes == cpu_features.DEFAULT_CACHE_SIZES
    # sysfs unreadable and sysconf unknown: the defaults
    monkeypatch.setattr(cpu_features, "_sysfs_cache_sizes", lambda: {})
    monkeypatch.setattr(cpu_features.os, "sysconf", lambda name: -1)
    cpu_features.host_cache_sizes.cache_clear()
    try:
        assert cpu_features.host_cache_sizes() == cpu_features.DEFAULT_CACHE_SIZES
    finally:
        cpu_features.host_cache_sizes.cache_clear()


def test_fma512_units_from_features():
    from tvmpy.target.cpu_features import fma512_units

    assert fma512_units(frozenset({"avx2", "fma"})) == 0
    assert fma512_units(frozenset({"avx512f", "avx512bf16"})) == 1  # e.g. Zen 4
    assert fma512_units(frozenset({"avx512f", "amx-tile", "amx-bf16"})) == 2
    assert fma512_units(tvm_target_features("llvm -mcpu=sapphirerapids")) == 2
    assert fma512_units(tvm_target_features("llvm -mcpu=znver4")) == 1


def tvm_target_features(text):
    import tvmpy as tvm

    return tvm.target.Target(text).isa_features
