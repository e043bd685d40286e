"""Shared pieces of the VTA operator schedules: the element-wise epilogue walk (TVM's
``_traverse`` in vta_conv2d.py / vta_dense.py), its buffer scopes, and the default (untuned)
tiles chosen from the shape and the on-chip buffer capacities."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ... import te
from ...tir import expr as E
from ...topi import tag as _tag

__all__ = ["Epilogue", "one_output", "traverse_epilogue", "schedule_epilogue_scopes", "attach_at_store",
           "bind_virtual_thread", "default_tiles", "tiles_overflow", "const_int", "as_pair",
           "divisors"]


def const_int(x: Any) -> int:
    v = E.const_value(x) if not isinstance(x, int) else x
    if v is None:
        raise ValueError(f"VTA operators need constant shapes, got {x}")
    return int(v)


def as_pair(x: Any) -> tuple:
    if isinstance(x, (int, E.IntImm)):
        return (const_int(x), const_int(x))
    x = tuple(const_int(v) for v in x)
    return x if len(x) != 1 else (x[0], x[0])


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@dataclass
class Epilogue:
    """The stages of ``main``'s element-wise epilogue: ops kept in the accumulator (``alu``),
    scalar constants (inlined), and placeholder inputs (a bias) with their consumer."""

    main: Any = None
    ewise_ops: list = field(default_factory=list)
    const_ops: list = field(default_factory=list)
    ewise_inputs: list = field(default_factory=list)


def one_output(outs: Any, who: str) -> Any:
    """The single output tensor of a VTA schedule's ``outs`` (a tensor or a list of one)."""
    outs = [outs] if isinstance(outs, te.Tensor) else list(outs)
    if len(outs) != 1:
        raise ValueError(f"{who}: one output")
    return outs[0]


def traverse_epilogue(output: Any, main_tag: str) -> Epilogue:
    """Walk from ``output`` back through element-wise/broadcast stages to the stage tagged
    ``main_tag``; anything else is an error naming the stage."""
    ep = Epilogue()
    seen: set[int] = set()

    def visit(op: Any) -> None:
        if id(op) in seen:
            return
        seen.add(id(op))
        if _tag.is_broadcast(op.tag) or _untagged_ewise(op):
            if op is not output.op:
                (ep.const_ops if not op.axis else ep.ewise_ops).append(op)
            for t in op.input_tensors:
                if isinstance(t.op, te.PlaceholderOp):
                    ep.ewise_inputs.append((op, t))
                else:
                    visit(t.op)
        elif op.tag == main_tag:
            if ep.main is not None:
                raise ValueError(f"VTA schedule: two {main_tag} stages in one output")
            ep.main = op.output(0)
        else:
            raise ValueError(f"VTA schedule: stage {op.name!r} (tag {op.tag!r}) is neither the "
                             f"{main_tag} stage nor element-wise; it cannot run on VTA's ALU")
    visit(output.op)
    if ep.main is None:
        raise ValueError(f"VTA schedule: no {main_tag} stage under {output.op.name}")
    if output.op is ep.main.op:
        raise ValueError("VTA schedule: the output must be an element-wise stage after the "
                         f"{main_tag} stage (at least the narrowing cast), stored by DMA")
    return ep


def _untagged_ewise(op: Any) -> bool:
    """An untagged ``te.compute`` without reduction (TVM's VTA tests write the clip so);
    the ALU lowering rejects it later if it is not element-wise."""
    return (isinstance(op, te.ComputeOp) and op.tag == "" and not op.reduce_axis
            and len(op.axis) > 0)


def schedule_epilogue_scopes(s: Any, env: Any, ep: Epilogue) -> list:
    """Accumulator scope and ``alu`` pragma for the epilogue ops, constants inlined; returns
    the accumulator cache reads of the epilogue's tensor inputs (to be DMA-loaded)."""
    caches = [s.cache_read(t, env.acc_scope, [consumer]) for consumer, t in ep.ewise_inputs]
    for op in ep.ewise_ops:
        s[op].set_scope(env.acc_scope)
        s[op].pragma(s[op].op.axis[0], env.alu)
    for op in ep.const_ops:
        s[op].compute_inline()
    return caches


def attach_at_store(s: Any, env: Any, output: Any, main: Any, ep: Epilogue, caches: list,
                    store_pt: Any) -> None:
    """The main op, its epilogue ops and the epilogue inputs' DMA loads (``caches``, from
    :func:`schedule_epilogue_scopes`) computed at ``output``'s store loop ``store_pt``."""
    s[main].compute_at(s[output], store_pt)
    for op in ep.ewise_ops:
        s[op].compute_at(s[output], store_pt)
    for t in caches:
        s[t].compute_at(s[output], store_pt)
        s[t].pragma(s[t].op.axis[0], env.dma_copy)


def bind_virtual_thread(s: Any, output: Any, axis: Any, outermost: Any, n: int) -> None:
    """``n`` virtual threads (``cthread``, interleaved instruction streams) over the tiles of
    ``axis``, moved outside ``outermost``; nothing when ``n`` is 1."""
    if n > 1:
        _, v_t = s[output].split(axis, factor=n)
        s[output].reorder(v_t, outermost)
        s[output].bind(v_t, te.thread_axis("cthread"))


def _capacity(env: Any) -> tuple[int, int, int]:
    """(input, weight, accumulator) buffer depths in tiles."""
    return (env.INP_BUFF_SIZE // env.INP_ELEM_BYTES, env.WGT_BUFF_SIZE // env.WGT_ELEM_BYTES,
            env.ACC_BUFF_SIZE // env.ACC_ELEM_BYTES)


def tiles_overflow(env: Any, *, h: int, w: int, co: int, ci: int, kh: int, kw: int,
                   stride: int, nthreads: int = 1, acc_copies: int = 1, b: int = 1
                   ) -> str | None:
    """Which on-chip buffer a conv/dense tile overflows (a message), or None when it fits:
    per virtual thread, the input window of ``ci`` channel blocks, ``co x ci`` weight tiles of
    ``kh x kw``, and ``acc_copies`` accumulator tiles per output element plus a bias tile per
    output channel block; ``b`` batch blocks per tile."""
    inp_cap, wgt_cap, acc_cap = _capacity(env)
    win = ((h - 1) * stride + kh) * ((w - 1) * stride + kw)
    need = {"accumulator": ((b * co * h * w * acc_copies + b * co) * nthreads, acc_cap),
            "input": (b * ci * win * nthreads, inp_cap),
            "weight": (co * ci * kh * kw * nthreads, wgt_cap)}
    for name, (n, cap) in need.items():
        if n > cap:
            return (f"the {name} buffer holds {cap} tiles, the tiling (h {h}, w {w}, co {co}, "
                    f"ci {ci}, {nthreads} virtual thread(s)) needs {n}")
    return None


def default_tiles(env: Any, *, b: int, co: int, oh: int, ow: int, ci: int, kh: int, kw: int,
                  stride: int, acc_copies: int = 1) -> dict[str, int]:
    """Untuned tiles: among the divisor tilings whose working set fits (halved per buffer when
    two virtual threads share it; ``acc_copies`` accumulator tiles per output element: 1, as the
    epilogue's ALU stages run in place, plus a bias tile per output channel block), the one moving the fewest DRAM bytes (input windows re-read per output
    channel tile, weights re-read per spatial tile), ties to fewer instructions."""
    best: tuple | None = None
    for nt_oc, nt_h in ((2, 1), (1, 2), (1, 1)):
        nt = nt_oc * nt_h
        for co_t in divisors(co):
            n_co = co // co_t
            if nt_oc > 1 and n_co % nt_oc:
                continue
            for h_t in divisors(oh):
                n_h = oh // h_t
                if nt_h > 1 and n_h % nt_h:
                    continue
                for w_t in divisors(ow):
                    if tiles_overflow(env, h=h_t, w=w_t, co=co_t, ci=1, kh=kh, kw=kw,
                                      stride=stride, nthreads=nt, acc_copies=acc_copies):
                        continue
                    win = ((h_t - 1) * stride + kh) * ((w_t - 1) * stride + kw)
                    for ci_t in divisors(ci):
                        if tiles_overflow(env, h=h_t, w=w_t, co=co_t, ci=ci_t, kh=kh, kw=kw,
                                          stride=stride, nthreads=nt, acc_copies=acc_copies):
                            continue
                        n_sp = n_h * (ow // w_t) * b
                        traffic = n_sp * n_co * ci * (win * env.INP_ELEM_BYTES
                                                      + co_t * kh * kw * env.WGT_ELEM_BYTES)
                        insns = n_sp * n_co * math.ceil(ci / ci_t)
                        key = (0 if nt > 1 else 1, traffic + 64 * insns, -co_t * h_t * w_t)
                        if best is None or key < best[0]:
                            best = (key, dict(h=h_t, w=w_t, co=co_t, ci=ci_t,
                                              oc_nthread=nt_oc, h_nthread=nt_h))
    if best is None:
        raise ValueError(f"VTA: no tiling of a {kh}x{kw} conv/dense layer fits the on-chip "
                         f"buffers of {env}")
    return best[1]
