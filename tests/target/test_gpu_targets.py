"""GPU target kinds (opencl, cuda, nvptx) and devices (issue 14)."""

from __future__ import annotations

import pytest

import tvmpy as tvm
from tvmpy.target import Target


@pytest.mark.parametrize("kind,keys,threads,warp", [
    ("opencl", ["opencl", "gpu"], 256, 1),
    ("cuda", ["cuda", "gpu"], 1024, 32),
    ("nvptx", ["nvptx", "cuda", "gpu"], 1024, 32),
])
def test_gpu_kinds(kind, keys, threads, warp):
    t = Target(kind)
    assert t.kind.name == kind and t.keys == keys and t.is_gpu
    assert t.max_num_threads == threads and t.thread_warp_size == warp
    assert t.max_shared_memory_per_block == 48 * 1024
    assert str(t.host) == "llvm" and not t.host.is_gpu
    assert Target(str(t)) == t


def test_gpu_options_and_host():
    t = Target("cuda -max_num_threads=512 -thread_warp_size=16 -arch=sm_80")
    assert (t.max_num_threads, t.thread_warp_size, t.arch_name) == (512, 16, "sm_80")
    assert Target(str(t)) == t and "-max_num_threads=512" in str(t)
    t = Target("opencl -max_shared_memory_per_block=32768", host="llvm -mcpu=generic")
    assert t.max_shared_memory_per_block == 32768 and t.host.mcpu == "generic"
    assert tvm.target.cuda(arch="sm_75").arch_name == "sm_75"
    assert tvm.target.opencl().kind == "opencl"
    assert not Target("llvm").is_gpu and Target("llvm").host is None
    with pytest.raises(ValueError, match="-max_num_threads .*expected a positive int"):
        Target("cuda -max_num_threads=abc")
    with pytest.raises(ValueError, match="unknown target option -arch"):
        Target("opencl -arch=sm_80")
    with pytest.raises(ValueError, match="unknown target option -max_num_threads"):
        Target("llvm -max_num_threads=4")


def test_gpu_devices():
    assert tvm.opencl(0).device_type == 4 and tvm.cl(1) == tvm.device("opencl", 1)
    assert tvm.cuda(0).device_type == 2 and tvm.gpu(0) == tvm.cuda(0) == tvm.device("cuda")
    assert str(tvm.opencl(0)) == "opencl(0)" and tvm.cuda(0).__dlpack_device__() == (2, 0)


def test_lower_with_gpu_target_selects_gpu_phases():
    from tvmpy import te
    from tvmpy.tir.pipeline import builtin_phases

    names = [p.name for ph in builtin_phases(Target("cuda")) for p in ph]
    assert {"LowerThreadAllreduce", "UnifyThreadBinding", "ThreadSync"} <= set(names)
    cpu = [p.name for ph in builtin_phases(Target("llvm")) for p in ph]
    assert "ThreadSync" not in cpu
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    f = tvm.lower(s, [A, B], target="opencl")
    assert f.attrs["target"] == Target("opencl")


@pytest.mark.parametrize("text", ["llvm -num-cores=3", "llvm -mcpu=znver4 -opt-level=2",
                                  "llvm -mtriple=aarch64-linux-gnu -mattr=+neon -num-cores=8",
                                  "opencl -max_num_threads=128", "cuda -arch=sm_80"])
def test_target_string_round_trips(text):
    """str(Target) keeps every option given (it is the key of tuning records)."""
    t = Target(text)
    back = Target(str(t))
    assert back == t
    assert (back.num_cores, back.opt_level, back.max_num_threads) == \
        (t.num_cores, t.opt_level, t.max_num_threads)


def test_target_host_is_part_of_identity() -> None:
    """Two GPU targets with different hosts build differently: they are not equal, and repr says why;
    str() stays the device target's text (TVM's form, the tuning-log key)."""
    from tvmpy.target import Target

    a = Target("opencl", host="llvm -mcpu=skylake")
    b = Target("opencl")
    assert a != b and hash(a) != hash(b)
    assert str(a) == str(b) == "opencl"
    assert "host='llvm -mcpu=skylake'" in repr(a)
    assert repr(b) == "Target('opencl')"  # the default host (llvm) is not spelt out
    assert Target("opencl", host="llvm") == b
    assert Target(a) == a and Target(a).host == a.host
