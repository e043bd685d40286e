"""VTA hardware configuration (TVM's ``vta_config.json`` and ``hw_spec.h`` derived sizes).

A :class:`HardwareConfig` is built from a vta_config.json-style dict (``LOG_INP_WIDTH``,
``LOG_BLOCK`` or ``LOG_BLOCK_IN``/``LOG_BLOCK_OUT``, ``LOG_*_BUFF_SIZE`` ...) plus the timing
knobs of the cycle model (``CLOCK_MHZ``, ``DRAM_BYTES_PER_CYCLE``, ``DRAM_LATENCY``). It checks
that the design can exist (an 8-bit datapath, buffers that hold at least one tile, instruction
fields that fit the 128-bit instruction and the 32-bit micro-op) and exposes the derived sizes
under TVM's names (``BATCH``, ``BLOCK_IN``, ``INP_ELEM_BYTES``, ``ACC_BUFF_DEPTH``, ...).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

# memory ids (hw_spec.h VTA_MEM_ID_*)
MEM_ID_UOP = 0
MEM_ID_WGT = 1
MEM_ID_INP = 2
MEM_ID_ACC = 3
MEM_ID_OUT = 4
MEM_NAMES = {MEM_ID_UOP: "uop", MEM_ID_WGT: "wgt", MEM_ID_INP: "inp", MEM_ID_ACC: "acc",
             MEM_ID_OUT: "out"}

# command queue / pipeline stage ids (TVM's environment.py QID_*, runtime.cc PipelineStage)
QID_LOAD_INP = 1
QID_LOAD_WGT = 1
QID_LOAD_UOP = 1
QID_LOAD_OUT = 2
QID_COMPUTE = 2
QID_STORE_OUT = 3
STAGE_LOAD, STAGE_COMPUTE, STAGE_STORE = 1, 2, 3
STAGE_NAMES = {STAGE_LOAD: "load", STAGE_COMPUTE: "compute", STAGE_STORE: "store"}

# opcodes (hw_spec.h VTA_OPCODE_*)
OPCODE_LOAD = 0
OPCODE_STORE = 1
OPCODE_GEMM = 2
OPCODE_FINISH = 3
OPCODE_ALU = 4

# ALU opcodes (VTA_ALU_OPCODE_*); SHR with a negative amount shifts left
ALU_OPCODE_MIN = 0
ALU_OPCODE_MAX = 1
ALU_OPCODE_ADD = 2
ALU_OPCODE_SHR = 3
ALU_NAMES = {ALU_OPCODE_MIN: "min", ALU_OPCODE_MAX: "max", ALU_OPCODE_ADD: "add",
             ALU_OPCODE_SHR: "shr"}

# ISA field widths that do not depend on the configuration (hw_spec.h)
LOG_INS_WIDTH = 7           # 128-bit instructions
LOG_UOP_WIDTH = 5           # 32-bit micro-ops
OPCODE_BIT_WIDTH = 3
ALU_OPCODE_BIT_WIDTH = 2
MEMOP_ID_BIT_WIDTH = 3      # 3 bits so that MEM_ID_OUT (4) fits (TVM's 2-bit field truncated it)
MEMOP_SRAM_ADDR_BIT_WIDTH = 16
MEMOP_DRAM_ADDR_BIT_WIDTH = 32
MEMOP_SIZE_BIT_WIDTH = 16
MEMOP_STRIDE_BIT_WIDTH = 16
MEMOP_PAD_BIT_WIDTH = 4
LOOP_ITER_WIDTH = 14
ALUOP_IMM_BIT_WIDTH = 16
INS_BYTES = (1 << LOG_INS_WIDTH) // 8
UOP_BYTES = (1 << LOG_UOP_WIDTH) // 8
PAGE_BYTES = 4096           # DRAM buffers are page aligned (VTA_PAGE_BYTES)


class ConfigError(ValueError):
    """A VTA configuration that cannot describe a working design."""


@dataclasses.dataclass(frozen=True)
class HardwareConfig:
    """One VTA design point. Field names are the vta_config.json keys, lower case."""

    log_inp_width: int = 3
    log_wgt_width: int = 3
    log_acc_width: int = 5
    log_batch: int = 0
    log_block_in: int = 4
    log_block_out: int = 4
    log_uop_buff_size: int = 15
    log_inp_buff_size: int = 15
    log_wgt_buff_size: int = 18
    log_acc_buff_size: int = 17
    clock_mhz: float = 100.0            # the PYNQ-Z1 design's clock
    dram_bytes_per_cycle: float = 8.0   # one 64-bit AXI beat per cycle
    dram_latency: int = 32              # cycles from a request to its first beat
    target: str = "sim"
    hw_ver: str = "0.0.1"

    def __post_init__(self) -> None:
        _validate(self)

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def from_dict(cls, cfg: dict[str, Any]) -> HardwareConfig:
        """From a vta_config.json dict (``LOG_BLOCK`` sets both block sizes)."""
        cfg = dict(cfg)
        if "LOG_BLOCK" in cfg:
            blk = cfg.pop("LOG_BLOCK")
            for key in ("LOG_BLOCK_IN", "LOG_BLOCK_OUT"):
                if key in cfg and cfg[key] != blk:
                    raise ConfigError(f"LOG_BLOCK={blk} contradicts {key}={cfg[key]}")
                cfg[key] = blk
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        ignored = {"HW_FREQ", "HW_CLK_TARGET", "MODEL", "LOG_BUS_WIDTH"}
        for key, value in cfg.items():
            name = key.lower()
            if name == "hw_freq":
                kwargs["clock_mhz"] = float(value)
                continue
            if name not in names:
                if key in ignored:
                    continue
                raise ConfigError(f"unknown VTA configuration key {key!r}; known: "
                                  f"{sorted(n.upper() for n in names)} and LOG_BLOCK")
            kwargs[name] = value
        return cls(**kwargs)

    @classmethod
    def from_json(cls, path: str) -> HardwareConfig:
        with open(path) as f:
            return cls.from_dict(json.load(f))

    def to_dict(self) -> dict[str, Any]:
        """The vta_config.json form (upper-case keys)."""
        return {f.name.upper(): getattr(self, f.name) for f in dataclasses.fields(self)}

    def replace(self, **changes: Any) -> HardwareConfig:
        return dataclasses.replace(self, **changes)

    # ---- derived sizes (hw_spec.h names) ------------------------------------------------
    @property
    def INP_WIDTH(self) -> int:  # noqa: N802 (TVM's spelling)
        return 1 << self.log_inp_width

    @property
    def WGT_WIDTH(self) -> int:  # noqa: N802
        return 1 << self.log_wgt_width

    @property
    def ACC_WIDTH(self) -> int:  # noqa: N802
        return 1 << self.log_acc_width

    @property
    def OUT_WIDTH(self) -> int:  # noqa: N802
        return self.INP_WIDTH

    @property
    def BATCH(self) -> int:  # noqa: N802
        return 1 << self.log_batch

    @property
    def BLOCK_IN(self) -> int:  # noqa: N802
        return 1 << self.log_block_in

    @property
    def BLOCK_OUT(self) -> int:  # noqa: N802
        return 1 << self.log_block_out

    @property
    def INP_ELEM_BITS(self) -> int:  # noqa: N802
        return self.BATCH * self.BLOCK_IN * self.INP_WIDTH

    @property
    def WGT_ELEM_BITS(self) -> int:  # noqa: N802
        return self.BLOCK_OUT * self.BLOCK_IN * self.WGT_WIDTH

    @property
    def ACC_ELEM_BITS(self) -> int:  # noqa: N802
        return self.BATCH * self.BLOCK_OUT * self.ACC_WIDTH

    @property
    def OUT_ELEM_BITS(self) -> int:  # noqa: N802
        return self.BATCH * self.BLOCK_OUT * self.OUT_WIDTH

    @property
    def INP_ELEM_BYTES(self) -> int:  # noqa: N802
        return self.INP_ELEM_BITS // 8

    @property
    def WGT_ELEM_BYTES(self) -> int:  # noqa: N802
        return self.WGT_ELEM_BITS // 8

    @property
    def ACC_ELEM_BYTES(self) -> int:  # noqa: N802
        return self.ACC_ELEM_BITS // 8

    @property
    def OUT_ELEM_BYTES(self) -> int:  # noqa: N802
        return self.OUT_ELEM_BITS // 8

    @property
    def UOP_ELEM_BYTES(self) -> int:  # noqa: N802
        return UOP_BYTES

    @property
    def INS_ELEM_BYTES(self) -> int:  # noqa: N802
        return INS_BYTES

    @property
    def UOP_BUFF_SIZE(self) -> int:  # noqa: N802
        return 1 << self.log_uop_buff_size

    @property
    def INP_BUFF_SIZE(self) -> int:  # noqa: N802
        return 1 << self.log_inp_buff_size

    @property
    def WGT_BUFF_SIZE(self) -> int:  # noqa: N802
        return 1 << self.log_wgt_buff_size

    @property
    def ACC_BUFF_SIZE(self) -> int:  # noqa: N802
        return 1 << self.log_acc_buff_size

    @property
    def OUT_BUFF_SIZE(self) -> int:  # noqa: N802
        return self.ACC_BUFF_DEPTH * self.OUT_ELEM_BYTES

    @property
    def LOG_UOP_BUFF_DEPTH(self) -> int:  # noqa: N802
        return self.log_uop_buff_size - (LOG_UOP_WIDTH - 3)

    @property
    def LOG_INP_BUFF_DEPTH(self) -> int:  # noqa: N802
        return self.log_inp_buff_size - (self.log_batch + self.log_block_in + self.log_inp_width - 3)

    @property
    def LOG_WGT_BUFF_DEPTH(self) -> int:  # noqa: N802
        return self.log_wgt_buff_size - (self.log_block_out + self.log_block_in
                                         + self.log_wgt_width - 3)

    @property
    def LOG_ACC_BUFF_DEPTH(self) -> int:  # noqa: N802
        return self.log_acc_buff_size - (self.log_batch + self.log_block_out
                                         + self.log_acc_width - 3)

    @property
    def UOP_BUFF_DEPTH(self) -> int:  # noqa: N802
        return 1 << self.LOG_UOP_BUFF_DEPTH

    @property
    def INP_BUFF_DEPTH(self) -> int:  # noqa: N802
        return 1 << self.LOG_INP_BUFF_DEPTH

    @property
    def WGT_BUFF_DEPTH(self) -> int:  # noqa: N802
        return 1 << self.LOG_WGT_BUFF_DEPTH

    @property
    def ACC_BUFF_DEPTH(self) -> int:  # noqa: N802
        return 1 << self.LOG_ACC_BUFF_DEPTH

    @property
    def OUT_BUFF_DEPTH(self) -> int:  # noqa: N802
        return self.ACC_BUFF_DEPTH

    @property
    def inp_dtype(self) -> str:
        return f"int{self.INP_WIDTH}"

    @property
    def wgt_dtype(self) -> str:
        return f"int{self.WGT_WIDTH}"

    @property
    def acc_dtype(self) -> str:
        return f"int{self.ACC_WIDTH}"

    @property
    def out_dtype(self) -> str:
        return f"int{self.OUT_WIDTH}"

    def elem_bytes(self, mem_id: int) -> int:
        """Bytes of one element (one tile) of memory ``mem_id`` in DRAM."""
        table = {MEM_ID_UOP: UOP_BYTES, MEM_ID_INP: self.INP_ELEM_BYTES,
                 MEM_ID_WGT: self.WGT_ELEM_BYTES, MEM_ID_ACC: self.ACC_ELEM_BYTES,
                 MEM_ID_OUT: self.OUT_ELEM_BYTES}
        if mem_id not in table:
            raise ValueError(f"unknown VTA memory id {mem_id} (known: {MEM_NAMES})")
        return table[mem_id]

    def buff_depth(self, mem_id: int) -> int:
        """Elements (tiles) that the on-chip buffer of ``mem_id`` holds."""
        table = {MEM_ID_UOP: self.UOP_BUFF_DEPTH, MEM_ID_INP: self.INP_BUFF_DEPTH,
                 MEM_ID_WGT: self.WGT_BUFF_DEPTH, MEM_ID_ACC: self.ACC_BUFF_DEPTH,
                 MEM_ID_OUT: self.OUT_BUFF_DEPTH}
        if mem_id not in table:
            raise ValueError(f"unknown VTA memory id {mem_id} (known: {MEM_NAMES})")
        return table[mem_id]

    def __str__(self) -> str:
        return (f"VTA {self.BATCH}x{self.BLOCK_IN}x{self.BLOCK_OUT} i{self.INP_WIDTH}"
                f"w{self.WGT_WIDTH}a{self.ACC_WIDTH} inp {self.INP_BUFF_SIZE >> 10}KiB wgt "
                f"{self.WGT_BUFF_SIZE >> 10}KiB acc {self.ACC_BUFF_SIZE >> 10}KiB uop "
                f"{self.UOP_BUFF_SIZE >> 10}KiB @{self.clock_mhz:g}MHz")


def default_config() -> HardwareConfig:
    """TVM's default vta_config.json (the PYNQ design: 1x16x16 int8 GEMM core)."""
    return HardwareConfig()


def _validate(c: HardwareConfig) -> None:
    ints = ("log_inp_width", "log_wgt_width", "log_acc_width", "log_batch", "log_block_in",
            "log_block_out", "log_uop_buff_size", "log_inp_buff_size", "log_wgt_buff_size",
            "log_acc_buff_size", "dram_latency")
    for name in ints:
        v = getattr(c, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ConfigError(f"{name.upper()} must be a non-negative integer, got {v!r}")
    if (c.log_inp_width, c.log_wgt_width) != (3, 3):
        raise ConfigError(f"LOG_INP_WIDTH/LOG_WGT_WIDTH must be 3 (int8 operands), got "
                          f"{c.log_inp_width}/{c.log_wgt_width}")
    if c.log_acc_width != 5:
        raise ConfigError(f"LOG_ACC_WIDTH must be 5 (int32 accumulators), got {c.log_acc_width}")
    for name in ("log_batch", "log_block_in", "log_block_out"):
        if getattr(c, name) > 7:
            raise ConfigError(f"{name.upper()}={getattr(c, name)} is too large (at most 7)")
    if not c.clock_mhz > 0 or not c.dram_bytes_per_cycle > 0:
        raise ConfigError(f"CLOCK_MHZ and DRAM_BYTES_PER_CYCLE must be positive, got "
                          f"{c.clock_mhz} and {c.dram_bytes_per_cycle}")
    depths = {"UOP": (c.LOG_UOP_BUFF_DEPTH, c.log_uop_buff_size, UOP_BYTES),
              "INP": (c.LOG_INP_BUFF_DEPTH, c.log_inp_buff_size, c.INP_ELEM_BYTES),
              "WGT": (c.LOG_WGT_BUFF_DEPTH, c.log_wgt_buff_size, c.WGT_ELEM_BYTES),
              "ACC": (c.LOG_ACC_BUFF_DEPTH, c.log_acc_buff_size, c.ACC_ELEM_BYTES)}
    for mem, (log_depth, log_size, elem) in depths.items():
        if log_depth < 0:
            raise ConfigError(f"the {mem} buffer (LOG_{mem}_BUFF_SIZE={log_size}: {1 << log_size}"
                              f" bytes) cannot hold one {elem}-byte tile")
        if log_depth > MEMOP_SRAM_ADDR_BIT_WIDTH:
            raise ConfigError(f"the {mem} buffer has 2^{log_depth} tiles, more than the "
                              f"{MEMOP_SRAM_ADDR_BIT_WIDTH}-bit SRAM address of a LOAD reaches")
    # the instruction formats must fit (isa.py builds them from this config)
    from .isa import check_layouts  # same layer: the ISA's field widths come from here
    check_layouts(c)
