"""The strategies of the dynamic and data-dependent operators, per target kind (their explicit
registrations in ``relay/op/strategy/dyn.py`` and ``data_dependent.py``): which implementation
and schedule each op gets on an llvm ("cpu"), a GPU and a plain C target."""

from __future__ import annotations

import pytest

from tvmpy import topi
from tvmpy.relay.op.strategy import _STRATEGIES, OpImplementation
from tvmpy.relay.op.strategy.generic import generic_schedule
from tvmpy.relay.op.strategy.gpu import schedule_fallback_gpu, schedule_injective_gpu
from tvmpy.target import Target

DYN_INJECTIVE = ["dyn.reshape", "dyn.squeeze", "dyn.expand_dims", "dyn.broadcast_to", "dyn.tile",
                 "dyn.full", "dyn.arange", "dyn.strided_slice", "dyn.nn.pad", "dyn.split",
                 "dyn.one_hot", "dyn.image.resize", "shape_of"]
DATA_DEPENDENT = ["argwhere", "compress", "unique", "vision.all_class_non_max_suppression"]


def _impl(op: str, target: str) -> OpImplementation:
    tgt = Target(target)
    return _STRATEGIES[op].dispatch(tgt)(None, None, None, tgt).best()


@pytest.mark.parametrize("op", DYN_INJECTIVE)
def test_dyn_injective_ops_take_the_x86_injective_schedule_on_cpu(op):
    cpu = _impl(op, "llvm")
    assert (cpu.name, cpu.plevel) == (op, 10)
    assert cpu.schedule.__wrapped__ is topi.x86.schedule_injective
    for target in ("cuda", "opencl"):  # the GPU injective schedule (threads bound)
        gpu = _impl(op, target)
        assert gpu.schedule is schedule_injective_gpu and gpu.compute is cpu.compute
        assert gpu.name == f"{op}.gpu"


def test_dyn_topk_keeps_the_generic_schedule_on_cpus_and_the_fallback_on_gpus():
    for target in ("llvm", "c"):
        impl = _impl("dyn.topk", target)
        assert (impl.name, impl.schedule) == ("dyn.topk", generic_schedule)
    for target in ("cuda", "opencl"):
        impl = _impl("dyn.topk", target)
        assert (impl.name, impl.schedule) == ("dyn.topk.gpu", schedule_fallback_gpu)


@pytest.mark.parametrize("op", DATA_DEPENDENT)
def test_data_dependent_ops_cpu_kernels_and_gpu_error(op):
    generic, cpu = _impl(op, "cuda -keys=generic"), _impl(op, "llvm")
    assert (generic.name, cpu.name) == (f"{op}.generic", f"{op}.x86")
    assert generic.compute is cpu.compute
    with pytest.raises(NotImplementedError, match=f"{op}: no GPU kernel"):
        _impl(op, "cuda")
