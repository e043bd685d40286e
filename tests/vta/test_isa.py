"""VTA ISA: encode/decode round trips over every field's range, range errors, disassembly."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvmpy.vta import hw_config as hc
from tvmpy.vta import isa

CONFIGS = [hc.default_config(), hc.HardwareConfig(log_batch=1),
           hc.HardwareConfig(log_block_in=5, log_block_out=5),
           hc.HardwareConfig(log_block_in=3, log_block_out=3, log_inp_buff_size=14,
                             log_wgt_buff_size=16, log_acc_buff_size=16)]
CLASSES = {hc.OPCODE_LOAD: isa.MemInsn, hc.OPCODE_STORE: isa.MemInsn,
           hc.OPCODE_GEMM: isa.GemmInsn, hc.OPCODE_ALU: isa.AluInsn,
           hc.OPCODE_FINISH: isa.FinishInsn}
BOOLS = {"pop_prev", "pop_next", "push_prev", "push_next", "reset", "use_imm"}


@st.composite
def instructions(draw):
    cfg = draw(st.sampled_from(CONFIGS))
    opcode = draw(st.sampled_from(sorted(CLASSES)))
    values = {}
    for name, _, width, signed in isa.layout(cfg, opcode):
        if name == "opcode":
            continue
        if name in BOOLS:
            values[name] = draw(st.booleans())
        elif name == "memory_type":
            values[name] = draw(st.sampled_from(sorted(hc.MEM_NAMES)))
        elif name == "alu_opcode":
            values[name] = draw(st.sampled_from(sorted(hc.ALU_NAMES)))
        elif signed:
            values[name] = draw(st.integers(-(1 << (width - 1)), (1 << (width - 1)) - 1))
        else:
            values[name] = draw(st.integers(0, (1 << width) - 1))
    cls = CLASSES[opcode]
    if cls is isa.MemInsn:
        values["opcode"] = opcode
    return cfg, cls(**values)


@settings(max_examples=300, deadline=None)
@given(instructions())
def test_encode_decode_round_trip(case):
    cfg, insn = case
    word = isa.encode(insn, cfg)
    assert 0 <= word < 1 << 128
    assert word & 0b111 == insn.opcode
    back = isa.decode(word, cfg)
    assert type(back) is type(insn) and back == insn
    assert isa.decode_stream(isa.encode_stream([insn, insn], cfg), cfg) == [insn, insn]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(CONFIGS), st.data())
def test_uop_round_trip(cfg, data):
    fields = {name: data.draw(st.integers(0, (1 << w) - 1)) for name, _, w, _ in isa.uop_layout(cfg)}
    uop = isa.Uop(**fields)
    word = isa.encode_uop(uop, cfg)
    assert 0 <= word < 1 << 32
    assert isa.decode_uop(word, cfg) == uop


def test_default_layout_matches_hw_spec():
    """The bit positions of TVM's hw_spec.h structs for the default configuration."""
    cfg = hc.default_config()
    mem = {n: (p, w) for n, p, w, _ in isa.layout(cfg, hc.OPCODE_LOAD)}
    assert mem["memory_type"] == (7, 3) and mem["sram_base"] == (10, 16)
    assert mem["dram_base"] == (26, 32) and mem["y_size"] == (64, 16)  # next 64-bit word
    assert mem["x_pad_1"] == (124, 4)
    gemm = {n: (p, w) for n, p, w, _ in isa.layout(cfg, hc.OPCODE_GEMM)}
    assert gemm["uop_bgn"] == (8, 13) and gemm["uop_end"] == (21, 14)
    assert gemm["iter_out"] == (35, 14) and gemm["iter_in"] == (49, 14)
    assert gemm["dst_factor_out"] == (64, 11) and gemm["wgt_factor_in"] == (118, 10)
    alu = {n: (p, w) for n, p, w, _ in isa.layout(cfg, hc.OPCODE_ALU)}
    assert alu["alu_opcode"] == (108, 2) and alu["use_imm"] == (110, 1)
    assert alu["imm"] == (111, 16)
    uop = {n: (p, w) for n, p, w, _ in isa.uop_layout(cfg)}
    assert uop == {"dst_idx": (0, 11), "src_idx": (11, 11), "wgt_idx": (22, 10)}
    # a hand-assembled LOAD INP word
    insn = isa.MemInsn(opcode=hc.OPCODE_LOAD, memory_type=hc.MEM_ID_INP, sram_base=3,
                       dram_base=0x40, y_size=2, x_size=5, x_stride=7, push_next=True)
    want = (0 | 1 << 6 | 2 << 7 | 3 << 10 | 0x40 << 26 | 2 << 64 | 5 << 80 | 7 << 96)
    assert isa.encode(insn, cfg) == want


@pytest.mark.parametrize("insn, field", [
    (isa.GemmInsn(iter_out=1 << 14), "iter_out"),
    (isa.GemmInsn(uop_bgn=-1), "uop_bgn"),
    (isa.AluInsn(imm=1 << 15), "imm"),
    (isa.AluInsn(imm=-(1 << 15) - 1), "imm"),
    (isa.MemInsn(x_pad_0=16), "x_pad_0"),
    (isa.MemInsn(dram_base=1 << 32), "dram_base"),
    (isa.MemInsn(sram_base=1 << 16), "sram_base"),
])
def test_field_range_errors(insn, field):
    with pytest.raises(isa.IsaError, match=field):
        isa.encode(insn, hc.default_config())


def test_bad_codes():
    cfg = hc.default_config()
    with pytest.raises(isa.IsaError, match="memory_type=7"):
        isa.encode(isa.MemInsn(memory_type=7), cfg)
    with pytest.raises(isa.IsaError, match="opcode"):
        isa.encode(isa.MemInsn(opcode=hc.OPCODE_GEMM), cfg)
    with pytest.raises(isa.IsaError, match="unknown VTA opcode 6"):
        isa.decode(6, cfg)
    with pytest.raises(isa.IsaError, match="multiple of 16"):
        isa.decode_stream(b"\0" * 17, cfg)
    with pytest.raises(isa.IsaError, match="wgt_idx"):
        isa.encode_uop(isa.Uop(0, 0, 1 << 10), cfg)


def test_disassembly():
    text = [str(i) for i in (
        isa.MemInsn(opcode=hc.OPCODE_LOAD, memory_type=hc.MEM_ID_INP, sram_base=16, dram_base=4,
                    y_size=3, x_size=4, x_stride=9, y_pad_0=1, x_pad_1=2, pop_next=True),
        isa.MemInsn(opcode=hc.OPCODE_STORE, memory_type=hc.MEM_ID_OUT),
        isa.GemmInsn(reset=True, uop_bgn=2, uop_end=5, iter_out=3, dst_factor_out=4),
        isa.AluInsn(alu_opcode=hc.ALU_OPCODE_SHR, use_imm=True, imm=-3, push_prev=True),
        isa.FinishInsn())]
    assert text[0] == ("LOAD INP sram=0x0010 dram=0x00000004 y=3 x=4 stride=9 pad y=(1,0) "
                       "x=(0,2) [pop_next]")
    assert text[1] == "STORE OUT nop"
    assert text[2].startswith("GEMM reset uop=[2,5) out=3(acc 4")
    assert text[3].startswith("ALU shr imm=-3") and text[3].endswith("[push_prev]")
    assert text[4] == "FINISH"


def test_pipeline_stage():
    assert isa.pipeline_stage(isa.MemInsn(memory_type=hc.MEM_ID_WGT)) == hc.STAGE_LOAD
    assert isa.pipeline_stage(isa.MemInsn(memory_type=hc.MEM_ID_ACC)) == hc.STAGE_COMPUTE
    assert isa.pipeline_stage(isa.MemInsn(memory_type=hc.MEM_ID_UOP)) == hc.STAGE_COMPUTE
    assert isa.pipeline_stage(dataclasses.replace(isa.MemInsn(), opcode=hc.OPCODE_STORE)) == 3
    assert isa.pipeline_stage(isa.FinishInsn()) == hc.STAGE_COMPUTE
