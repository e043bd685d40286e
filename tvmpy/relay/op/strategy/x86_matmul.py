"""The AutoTVM-tunable x86 implementations of the matmul ops (``nn.dense``,
``nn.contrib_dense_pack``, ``nn.batch_matmul``): TVM's strategy calls the templates registered
with ``autotvm.register_topi_compute`` / ``register_topi_schedule`` (``topi/x86/dense.py``) so
that ``relay.build`` records their workloads (task extraction) and uses the tuned configs of
``autotvm.apply_history_best``; untuned, they lower to the hand-tuned default schedules.

Each is registered on the one tuned-implementation hook (``register_tuned_implementation``,
keyed by its task name); the x86 strategies (``x86.py``) ask for it with
``tuned_implementation``. The templates need constant shapes: with a symbolic dimension the
hook answers None and the strategy keeps the plain computes and schedules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ....topi.x86 import dense as _x86
from . import register_tuned_implementation

__all__: list[str] = []


def _static(inputs: list) -> bool:
    for t in inputs:
        for d in t.shape:
            if not isinstance(getattr(d, "value", d), int):
                return False
    return True


def _od(attrs: Any, out_type: Any) -> str:
    return attrs.out_dtype or out_type.dtype


def _dense(attrs: Any, inputs: list, out_type: Any) -> list:
    return [_x86.dense_nopack(inputs[0], inputs[1], _od(attrs, out_type))]


def _dense_pack(attrs: Any, inputs: list, out_type: Any) -> list:
    return [_x86.dense_pack_x86(inputs[0], inputs[1], _od(attrs, out_type))]


def _contrib_dense_pack(attrs: Any, inputs: list, out_type: Any) -> list:
    units = _padded_units(attrs, inputs[1])
    extra = () if units is None else (units,)  # (the workload of an unpadded one is as before)
    return [_x86.contrib_dense_pack(inputs[0], inputs[1], _od(attrs, out_type), *extra)]


def _padded_units(attrs: Any, packed: Any) -> int | None:
    """``units`` of a ``contrib_dense_pack`` whose last panel is zero-padded, else None."""
    units = getattr(attrs.units, "value", attrs.units)
    npanel, _, nr = (int(getattr(d, "value", d)) for d in packed.shape)
    return None if units is None or int(units) == npanel * nr else int(units)


def _batch_matmul(attrs: Any, inputs: list, out_type: Any) -> list:
    return [_x86.batch_matmul_x86(inputs[0], inputs[1], _od(attrs, out_type),
                                  bool(attrs.transpose_a), bool(attrs.transpose_b))]


def _batch_matmul_pack(attrs: Any, inputs: list, out_type: Any) -> list:
    extra = () if attrs.transpose_b else (False,)  # (a B-transposed one's workload as before)
    return [_x86.batch_matmul_pack_x86(inputs[0], inputs[1], _od(attrs, out_type), *extra)]


def _sched(f: Callable[..., Any]) -> Callable[..., Any]:
    def schedule(attrs: Any, outs: list, target: Any) -> Any:
        return f(outs)

    schedule.__name__ = f.__name__
    return schedule


Impl = tuple[Callable[..., Any], Callable[..., Any]]


@register_tuned_implementation("dense.x86")
def _dense_tuned(attrs: Any, inputs: list, out_type: Any, target: Any) -> Impl | None:
    if not _static(inputs) or len(inputs[0].shape) != 2 or len(inputs[1].shape) != 2:
        return None
    return _dense, _sched(_x86.schedule_dense_nopack)


@register_tuned_implementation("dense_pack.x86")
def _dense_pack_tuned(attrs: Any, inputs: list, out_type: Any, target: Any) -> Impl | None:
    return (_dense_pack, _sched(_x86.schedule_dense_pack_x86)) if _static(inputs) else None


@register_tuned_implementation("contrib_dense_pack.x86")
def _contrib_dense_pack_tuned(attrs: Any, inputs: list, out_type: Any,
                              target: Any) -> Impl | None:
    if not _static(inputs):
        return None
    return _contrib_dense_pack, _sched(_x86.schedule_contrib_dense_pack)


@register_tuned_implementation("batch_matmul.x86")
def _batch_matmul_tuned(attrs: Any, inputs: list, out_type: Any, target: Any) -> Impl | None:
    return (_batch_matmul, _sched(_x86.schedule_batch_matmul_x86)) if _static(inputs) else None


@register_tuned_implementation("batch_matmul_pack.x86")
def _batch_matmul_pack_tuned(attrs: Any, inputs: list, out_type: Any,
                             target: Any) -> Impl | None:
    if not _static(inputs):
        return None
    return _batch_matmul_pack, _sched(_x86.schedule_batch_matmul_pack_x86)
