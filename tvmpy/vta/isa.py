"""VTA's two-level ISA: 128-bit CISC instructions and 32-bit micro-ops (TVM's hw_spec.h).

Instructions are bit fields packed from the least significant bit in the order of hw_spec.h's
structs (``VTAMemInsn``, ``VTAGemInsn``, ``VTAAluInsn``); as a C compiler lays out ``uint64_t``
bit fields, a field that would straddle the two 64-bit words starts the second one. The widths
of the index fields follow the buffer depths of the configuration, so :func:`layout` is per
:class:`~tvmpy.vta.hw_config.HardwareConfig`. ``encode``/``decode`` round-trip every field;
a value out of its field's range raises :class:`IsaError` naming the field.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any, Union

from .hw_config import (
    ALU_NAMES,
    ALU_OPCODE_BIT_WIDTH,
    ALUOP_IMM_BIT_WIDTH,
    INS_BYTES,
    LOOP_ITER_WIDTH,
    MEM_ID_ACC,
    MEM_ID_INP,
    MEM_ID_OUT,
    MEM_ID_UOP,
    MEM_ID_WGT,
    MEM_NAMES,
    MEMOP_DRAM_ADDR_BIT_WIDTH,
    MEMOP_ID_BIT_WIDTH,
    MEMOP_PAD_BIT_WIDTH,
    MEMOP_SIZE_BIT_WIDTH,
    MEMOP_SRAM_ADDR_BIT_WIDTH,
    MEMOP_STRIDE_BIT_WIDTH,
    OPCODE_ALU,
    OPCODE_BIT_WIDTH,
    OPCODE_FINISH,
    OPCODE_GEMM,
    OPCODE_LOAD,
    OPCODE_STORE,
    ConfigError,
)

if TYPE_CHECKING:
    from .hw_config import HardwareConfig

__all__ = ["IsaError", "MemInsn", "GemmInsn", "AluInsn", "FinishInsn", "Uop", "Insn",
           "encode", "decode", "encode_stream", "decode_stream", "encode_uop", "decode_uop",
           "layout", "uop_layout", "check_layouts", "pipeline_stage"]


class IsaError(ValueError):
    """An instruction or micro-op field outside its range, or an unknown opcode."""


@dataclasses.dataclass
class _Deps:
    pop_prev: bool = False
    pop_next: bool = False
    push_prev: bool = False
    push_next: bool = False

    def _deps_str(self) -> str:
        flags = [n for n in ("pop_prev", "pop_next", "push_prev", "push_next") if getattr(self, n)]
        return f" [{' '.join(flags)}]" if flags else ""


@dataclasses.dataclass
class MemInsn(_Deps):
    """LOAD or STORE of a 2-D strided block, padded on the fly (loads only)."""

    opcode: int = OPCODE_LOAD
    memory_type: int = MEM_ID_INP
    sram_base: int = 0
    dram_base: int = 0
    y_size: int = 0
    x_size: int = 0
    x_stride: int = 0
    y_pad_0: int = 0
    y_pad_1: int = 0
    x_pad_0: int = 0
    x_pad_1: int = 0

    @property
    def is_nop(self) -> bool:
        return self.x_size == 0

    def __str__(self) -> str:
        op = "LOAD" if self.opcode == OPCODE_LOAD else "STORE"
        mem = MEM_NAMES.get(self.memory_type, f"mem{self.memory_type}").upper()
        if self.is_nop:
            return f"{op} {mem} nop{self._deps_str()}"
        pad = ""
        if self.y_pad_0 or self.y_pad_1 or self.x_pad_0 or self.x_pad_1:
            pad = f" pad y=({self.y_pad_0},{self.y_pad_1}) x=({self.x_pad_0},{self.x_pad_1})"
        return (f"{op} {mem} sram={self.sram_base:#06x} dram={self.dram_base:#010x} "
                f"y={self.y_size} x={self.x_size} stride={self.x_stride}{pad}{self._deps_str()}")


@dataclasses.dataclass
class _UopLoop(_Deps):
    """The fields GEMM and ALU share: micro-ops [uop_bgn, uop_end) run in a 2-level affine loop
    (``iter_out`` x ``iter_in``) whose indices advance by the ``*_factor_*`` strides."""

    reset: bool = False
    uop_bgn: int = 0
    uop_end: int = 0
    iter_out: int = 1
    iter_in: int = 1
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0

    @property
    def num_uop_iters(self) -> int:
        return self.iter_out * self.iter_in * max(self.uop_end - self.uop_bgn, 0)


@dataclasses.dataclass
class GemmInsn(_UopLoop):
    """acc[dst] += inp[src] x wgt[wgt]^T over uops [uop_bgn, uop_end) in a 2-level loop."""

    wgt_factor_out: int = 0
    wgt_factor_in: int = 0

    opcode = OPCODE_GEMM

    def __str__(self) -> str:
        return (f"GEMM{' reset' if self.reset else ''} uop=[{self.uop_bgn},{self.uop_end}) "
                f"out={self.iter_out}(acc {self.dst_factor_out} inp {self.src_factor_out} wgt "
                f"{self.wgt_factor_out}) in={self.iter_in}(acc {self.dst_factor_in} inp "
                f"{self.src_factor_in} wgt {self.wgt_factor_in}){self._deps_str()}")


@dataclasses.dataclass
class AluInsn(_UopLoop):
    """acc[dst] = op(acc[dst], imm or acc[src]) over uops in a 2-level loop."""

    alu_opcode: int = 0
    use_imm: bool = False
    imm: int = 0

    opcode = OPCODE_ALU

    def __str__(self) -> str:
        name = ALU_NAMES.get(self.alu_opcode, f"alu{self.alu_opcode}")
        operand = f" imm={self.imm}" if self.use_imm else ""
        return (f"ALU {name}{operand}{' reset' if self.reset else ''} "
                f"uop=[{self.uop_bgn},{self.uop_end}) out={self.iter_out}(dst "
                f"{self.dst_factor_out} src {self.src_factor_out}) in={self.iter_in}(dst "
                f"{self.dst_factor_in} src {self.src_factor_in}){self._deps_str()}")


@dataclasses.dataclass
class FinishInsn(_Deps):
    """End of the stream: the device raises its done flag."""

    opcode = OPCODE_FINISH

    def __str__(self) -> str:
        return f"FINISH{self._deps_str()}"


Insn = Union[MemInsn, GemmInsn, AluInsn, FinishInsn]


@dataclasses.dataclass(frozen=True)
class Uop:
    """One micro-op: accumulator, input (GEMM) or accumulator (ALU) source, weight index."""

    dst_idx: int
    src_idx: int
    wgt_idx: int = 0


# ---- layouts ------------------------------------------------------------------------------
Field = tuple[str, int, int, bool]  # name, bit offset, width, signed

_HEAD = [("opcode", OPCODE_BIT_WIDTH), ("pop_prev", 1), ("pop_next", 1), ("push_prev", 1),
         ("push_next", 1)]


def _pack(kind: str, widths: list[tuple[str, int]], total: int = 128,
          signed: frozenset[str] = frozenset()) -> tuple[Field, ...]:
    fields, pos = [], 0
    for name, width in widths:
        if width <= 0:
            raise ConfigError(f"{kind} field {name} would have {width} bits")
        if pos // 64 != (pos + width - 1) // 64:   # a uint64_t bit field never straddles words
            pos = (pos // 64 + 1) * 64
        fields.append((name, pos, width, name in signed))
        pos += width
    if pos > total:
        desc = ", ".join(f"{n}:{w}" for n, w in widths)
        raise ConfigError(f"the {kind} format needs {pos} bits, more than {total} ({desc}); "
                          f"make the buffers shallower (smaller LOG_*_BUFF_SIZE) or the tiles "
                          f"larger")
    return tuple(fields)


@functools.cache
def _layouts(cfg: HardwareConfig) -> dict[int, tuple[Field, ...]]:
    acc, inp, wgt, uop = (cfg.LOG_ACC_BUFF_DEPTH, cfg.LOG_INP_BUFF_DEPTH,
                          cfg.LOG_WGT_BUFF_DEPTH, cfg.LOG_UOP_BUFF_DEPTH)
    mem = _pack("LOAD/STORE instruction", _HEAD + [
        ("memory_type", MEMOP_ID_BIT_WIDTH), ("sram_base", MEMOP_SRAM_ADDR_BIT_WIDTH),
        ("dram_base", MEMOP_DRAM_ADDR_BIT_WIDTH), ("y_size", MEMOP_SIZE_BIT_WIDTH),
        ("x_size", MEMOP_SIZE_BIT_WIDTH), ("x_stride", MEMOP_STRIDE_BIT_WIDTH),
        ("y_pad_0", MEMOP_PAD_BIT_WIDTH), ("y_pad_1", MEMOP_PAD_BIT_WIDTH),
        ("x_pad_0", MEMOP_PAD_BIT_WIDTH), ("x_pad_1", MEMOP_PAD_BIT_WIDTH)])
    loops = [("reset", 1), ("uop_bgn", uop), ("uop_end", uop + 1),
             ("iter_out", LOOP_ITER_WIDTH), ("iter_in", LOOP_ITER_WIDTH),
             ("dst_factor_out", acc), ("dst_factor_in", acc)]
    gemm = _pack("GEMM instruction", _HEAD + loops + [
        ("src_factor_out", inp), ("src_factor_in", inp),
        ("wgt_factor_out", wgt), ("wgt_factor_in", wgt)])
    alu = _pack("ALU instruction", _HEAD + loops + [
        ("src_factor_out", acc), ("src_factor_in", acc),
        ("alu_opcode", ALU_OPCODE_BIT_WIDTH), ("use_imm", 1), ("imm", ALUOP_IMM_BIT_WIDTH)],
        signed=frozenset({"imm"}))
    finish = _pack("FINISH instruction", list(_HEAD))
    return {OPCODE_LOAD: mem, OPCODE_STORE: mem, OPCODE_GEMM: gemm, OPCODE_ALU: alu,
            OPCODE_FINISH: finish}


def layout(cfg: HardwareConfig, opcode: int) -> tuple[Field, ...]:
    """``(name, bit offset, width, signed)`` of every field of an ``opcode`` instruction."""
    try:
        return _layouts(cfg)[opcode]
    except KeyError:
        raise IsaError(f"unknown VTA opcode {opcode}") from None


@functools.cache
def uop_layout(cfg: HardwareConfig) -> tuple[Field, ...]:
    """The micro-op fields: dst (acc index), src (inp or acc index), wgt (wgt index)."""
    src = max(cfg.LOG_INP_BUFF_DEPTH, cfg.LOG_ACC_BUFF_DEPTH)
    return _pack("micro-op", [("dst_idx", cfg.LOG_ACC_BUFF_DEPTH), ("src_idx", src),
                              ("wgt_idx", cfg.LOG_WGT_BUFF_DEPTH)], total=32)


def check_layouts(cfg: HardwareConfig) -> None:
    """Raise ConfigError when an instruction or micro-op format cannot fit its width."""
    _layouts(cfg)
    uop_layout(cfg)


# ---- encode / decode ----------------------------------------------------------------------
def _put(kind: str, fields: tuple[Field, ...], values: dict[str, int]) -> int:
    word = 0
    for name, pos, width, signed in fields:
        v = int(values[name])
        lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
        if not lo <= v <= hi:
            raise IsaError(f"{kind} field {name}={v} does not fit its {width} bits "
                           f"({lo}..{hi})")
        word |= (v & ((1 << width) - 1)) << pos
    return word


def _get(fields: tuple[Field, ...], word: int) -> dict[str, int]:
    out = {}
    for name, pos, width, signed in fields:
        v = (word >> pos) & ((1 << width) - 1)
        if signed and v >> (width - 1):
            v -= 1 << width
        out[name] = v
    return out


_KIND = {OPCODE_LOAD: "LOAD", OPCODE_STORE: "STORE", OPCODE_GEMM: "GEMM", OPCODE_ALU: "ALU",
         OPCODE_FINISH: "FINISH"}


def encode(insn: Insn, cfg: HardwareConfig) -> int:
    """The 128-bit instruction word of ``insn``."""
    if isinstance(insn, MemInsn) and insn.opcode not in (OPCODE_LOAD, OPCODE_STORE):
        raise IsaError(f"a MemInsn has opcode LOAD or STORE, not {insn.opcode}")
    values = {f.name: int(getattr(insn, f.name)) for f in dataclasses.fields(insn)}
    values["opcode"] = insn.opcode
    if isinstance(insn, MemInsn) and insn.memory_type not in MEM_NAMES:
        raise IsaError(f"{_KIND[insn.opcode]} memory_type={insn.memory_type} is not a VTA "
                       f"memory id {sorted(MEM_NAMES.items())}")
    if isinstance(insn, AluInsn) and insn.alu_opcode not in ALU_NAMES:
        raise IsaError(f"ALU alu_opcode={insn.alu_opcode} is not one of {ALU_NAMES}")
    return _put(_KIND[insn.opcode] + " instruction", layout(cfg, insn.opcode), values)


def decode(word: int, cfg: HardwareConfig) -> Insn:
    """The instruction of a 128-bit word (inverse of :func:`encode`)."""
    opcode = word & ((1 << OPCODE_BIT_WIDTH) - 1)
    values: dict[str, Any] = _get(layout(cfg, opcode), word)
    del values["opcode"]
    flags = {k: bool(values.pop(k)) for k in ("pop_prev", "pop_next", "push_prev", "push_next")}
    if opcode in (OPCODE_LOAD, OPCODE_STORE):
        return MemInsn(opcode=opcode, **flags, **values)
    if opcode == OPCODE_GEMM:
        return GemmInsn(**flags, **{**values, "reset": bool(values["reset"])})
    if opcode == OPCODE_ALU:
        return AluInsn(**flags, **{**values, "reset": bool(values["reset"]),
                                   "use_imm": bool(values["use_imm"])})
    return FinishInsn(**flags)


def encode_stream(insns: list[Insn], cfg: HardwareConfig) -> bytes:
    """Instructions as the little-endian bytes the fetch module reads from DRAM."""
    return b"".join(encode(i, cfg).to_bytes(INS_BYTES, "little") for i in insns)


def decode_stream(data: bytes, cfg: HardwareConfig) -> list[Insn]:
    if len(data) % INS_BYTES:
        raise IsaError(f"an instruction stream is a multiple of {INS_BYTES} bytes, got "
                       f"{len(data)}")
    return [decode(int.from_bytes(data[i:i + INS_BYTES], "little"), cfg)
            for i in range(0, len(data), INS_BYTES)]


def encode_uop(uop: Uop, cfg: HardwareConfig) -> int:
    return _put("micro-op", uop_layout(cfg), {"dst_idx": uop.dst_idx, "src_idx": uop.src_idx,
                                              "wgt_idx": uop.wgt_idx})


def decode_uop(word: int, cfg: HardwareConfig) -> Uop:
    return Uop(**_get(uop_layout(cfg), int(word)))


def pipeline_stage(insn: Insn) -> int:
    """The module that runs ``insn``: 1 load, 2 compute, 3 store (runtime.cc's stages)."""
    if isinstance(insn, MemInsn):
        if insn.opcode == OPCODE_STORE:
            return 3
        return 2 if insn.memory_type in (MEM_ID_UOP, MEM_ID_ACC) else 1
    return 2


# keep the memory ids importable from here (TVM's hw_spec names)
MEM_IDS = {"uop": MEM_ID_UOP, "wgt": MEM_ID_WGT, "inp": MEM_ID_INP, "acc": MEM_ID_ACC,
           "out": MEM_ID_OUT}
