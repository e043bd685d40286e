"""Fuzzer operator specs: indexing operators: gathers, scatters, compress, reverse_sequence."""

from __future__ import annotations

import numpy as np

from ._common import ANY, NUM, Builder, Plan, _axis, spec


@spec("Gather")
def gather(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY, min_rank=1)
    if x is None:
        return None
    shape = b.shape(x)
    axis = _axis(b, len(shape))
    d = shape[axis]
    ishape = [int(b.choose((1, 2, 3, 4))) for _ in range(int(b.rng.integers(0, 3)))]
    idx = b.rng.integers(-d, d, size=ishape).astype(b.choose(("int64", "int32")))
    return Plan(op, [x, b.const(idx, "idx")], {"axis": axis})


@spec("GatherElements")
def gather_elements(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY, min_rank=1)
    if x is None:
        return None
    shape = b.shape(x)
    axis = _axis(b, len(shape))
    ishape = [int(b.rng.integers(1, d + 1)) if d else 0 for d in shape]
    ishape[axis] = int(b.choose((1, 2, 3, shape[axis])))
    d = shape[axis]
    idx = b.rng.integers(-d, d, size=ishape).astype(np.int64)
    return Plan(op, [x, b.const(idx, "idx")], {"axis": axis})


@spec("GatherND")
def gather_nd(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY, min_rank=1)
    if x is None:
        return None
    shape = b.shape(x)
    bd = int(b.rng.integers(0, min(2, len(shape) - 1) + 1)) if len(shape) > 1 else 0
    last = int(b.rng.integers(1, len(shape) - bd + 1))
    mid = [int(b.choose((1, 2, 3))) for _ in range(int(b.rng.integers(0, 2)))]
    ishape = list(shape[:bd]) + mid + [last]
    idx = np.stack([b.rng.integers(-shape[bd + k], shape[bd + k], size=ishape[:-1])
                    for k in range(last)], axis=-1).astype(np.int64)
    return Plan(op, [x, b.const(idx, "idx")], {"batch_dims": bd})


@spec("ScatterElements")
def scatter_elements(b: Builder, op: str) -> Plan | None:
    x = b.pick(NUM, min_rank=1)
    if x is None:
        return None
    shape = b.shape(x)
    axis = _axis(b, len(shape))
    ishape = [int(b.rng.integers(1, d + 1)) for d in shape]
    axis_p = axis % len(shape)
    d = shape[axis]
    ishape[axis] = min(d, int(b.choose((1, 2, d))))
    # distinct target positions along the axis (duplicates make "none" order-dependent)
    perm = np.stack([b.rng.permutation(d)[:ishape[axis]] for _ in range(int(np.prod(ishape))
                                                                        // ishape[axis])])
    idx = np.moveaxis(perm.reshape([*ishape[:axis_p], *ishape[axis_p + 1:], ishape[axis_p]]),
                      -1, axis_p).astype(np.int64)
    idx = np.where(b.rng.random(idx.shape) < 0.3, idx - d, idx)
    upd = b.operand(ishape, b.dtype(x))
    red = _scatter_reduction(b, x)
    return Plan(op, [x, b.const(idx, "idx"), upd], {"axis": axis, "reduction": red})


@spec("ScatterND")
def scatter_nd(b: Builder, op: str) -> Plan | None:
    x = b.pick(NUM, min_rank=1)
    if x is None:
        return None
    shape = b.shape(x)
    last = int(b.rng.integers(1, len(shape) + 1))
    cells = int(np.prod(shape[:last]))
    n = int(b.rng.integers(1, min(cells, 4) + 1))
    flat = b.rng.permutation(cells)[:n]
    idx = np.stack(np.unravel_index(flat, shape[:last]), axis=-1).astype(np.int64)
    upd = b.operand([n, *shape[last:]], b.dtype(x))
    red = _scatter_reduction(b, x)
    return Plan(op, [x, b.const(idx, "idx"), upd], {"reduction": red})


def _scatter_reduction(b: Builder, x: str) -> str:
    if b.dtype(x) == np.float16:  # onnxruntime has no float16 scatter reductions
        return "none"
    return b.choose(("none", "none", "add", "mul", "max", "min"))


@spec("Compress")
def compress(b: Builder, op: str) -> Plan | None:
    x = b.pick(ANY, min_rank=1)
    if x is None:
        return None
    shape = b.shape(x)
    if b.chance(0.3):
        cond = b.rng.random(int(np.prod(shape))) < 0.5
        return Plan(op, [x, b.const(cond)])
    axis = _axis(b, len(shape))
    cond = b.rng.random(shape[axis]) < 0.6
    return Plan(op, [x, b.const(cond)], {"axis": axis})


@spec("ReverseSequence")
def reverse_sequence(b: Builder, op: str) -> Plan | None:
    x = b.pick(NUM, min_rank=2)
    if x is None:
        return None
    shape = b.shape(x)
    batch_axis = int(b.choose((0, 1)))
    time_axis = 1 - batch_axis
    lens = b.rng.integers(1, shape[time_axis] + 1, size=shape[batch_axis]).astype(np.int64)
    return Plan(op, [x, b.const(lens)], {"batch_axis": batch_axis, "time_axis": time_axis})
