"""The VTA environment (TVM's ``vta.environment``): the hardware parameters seen by the
compiler, the on-chip buffer scopes, the pragma names and the GEMM tensor intrinsic.

``vta.get_env()`` returns the current Environment (the innermost ``with env:``, else one made
from the default hardware configuration). Parameters come from vta-hw's ``HardwareConfig``
(``tvmpy.vta.hw_config``); any object with the ``LOG_*`` fields of ``vta_config.json`` (or such a
dict) works, so the compiler does not depend on how the configuration is loaded.
"""

from __future__ import annotations

import threading
from typing import Any

from ..tir.expr import IterVar, Range, Var

__all__ = ["Environment", "get_env", "MemoryInfo", "mem_info", "DevContext"]

# memory ids and queue ids (TVM's hw_spec.h / environment.py)
MEM_ID_UOP, MEM_ID_WGT, MEM_ID_INP, MEM_ID_ACC, MEM_ID_OUT = 0, 1, 2, 3, 4
QID_LOAD_INP = QID_LOAD_WGT = QID_LOAD_UOP = 1
QID_COMPUTE = QID_LOAD_OUT = 2
QID_STORE_OUT = 3
ALU_OPCODE_MIN, ALU_OPCODE_MAX, ALU_OPCODE_ADD, ALU_OPCODE_SHR = 0, 1, 2, 3

_DEFAULTS = {"LOG_INP_WIDTH": 3, "LOG_WGT_WIDTH": 3, "LOG_ACC_WIDTH": 5, "LOG_BATCH": 0,
             "LOG_BLOCK": 4, "LOG_UOP_BUFF_SIZE": 15, "LOG_INP_BUFF_SIZE": 15,
             "LOG_WGT_BUFF_SIZE": 18, "LOG_ACC_BUFF_SIZE": 17}


class MemoryInfo:
    """What the compiler knows of one on-chip buffer scope: the bits of one addressable entry
    (a tile), the element dtype, the capacity in bits, and the memory id DMA loads use."""

    def __init__(self, scope: str, unit_bits: int, elem_bits: int, max_num_bits: int,
                 mem_id: int, tile_elems: int):
        self.scope, self.unit_bits, self.elem_bits = scope, unit_bits, elem_bits
        self.max_num_bits, self.mem_id, self.tile_elems = max_num_bits, mem_id, tile_elems

    @property
    def max_entries(self) -> int:
        return self.max_num_bits // self.unit_bits

    def __repr__(self) -> str:
        return (f"MemoryInfo({self.scope}, tile={self.tile_elems} elems, "
                f"capacity={self.max_entries} tiles)")


class DevContext:
    """TVM's DevContext: the ``vta`` IterVar that coproc scopes hang on, and queue ids."""

    QID_LOAD_INP, QID_LOAD_WGT, QID_LOAD_OUT = QID_LOAD_INP, QID_LOAD_WGT, QID_LOAD_OUT
    QID_STORE_OUT, QID_COMPUTE = QID_STORE_OUT, QID_COMPUTE

    def __init__(self, env: Environment):
        self.vta_axis = IterVar(Range(0, 1), Var("vta", "int32"), 1, "vta")
        self.vta_push_uop = "VTAPushGEMMOp"

    def get_task_qid(self, qid: int) -> int:
        return qid


def _cfg_get(cfg: Any, key: str) -> int:
    if isinstance(cfg, dict):
        if key in cfg:
            return int(cfg[key])
    elif hasattr(cfg, key.lower()):  # vta-hw's HardwareConfig: the json keys in lower case
        return int(getattr(cfg, key.lower()))
    elif hasattr(cfg, key):
        return int(getattr(cfg, key))
    if key in ("LOG_BLOCK_IN", "LOG_BLOCK_OUT"):
        return _cfg_get(cfg, "LOG_BLOCK")
    return _DEFAULTS[key]


class Environment:
    """The hardware parameters and compiler names of one VTA configuration (TVM's
    ``vta.Environment``): ``BATCH``, ``BLOCK_IN``, ``BLOCK_OUT``, element dtypes and widths,
    buffer scopes, pragma names (``dma_copy``, ``alu``), the ``gemm`` tensor intrinsic, and the
    targets (``target`` = ``ext_dev -device=vta``, ``target_host`` = llvm)."""

    current: Environment | None = None
    _local = threading.local()

    # scope / pragma names as TVM's
    inp_scope = "local.inp_buffer"
    wgt_scope = "local.wgt_buffer"
    acc_scope = "local.acc_buffer"
    dma_copy = "dma_copy"
    alu = "alu"
    TARGET = "sim"

    def __init__(self, cfg: Any = None):
        if cfg is None:
            cfg = _default_hw_config()
        elif isinstance(cfg, dict):
            try:
                from .hw_config import HardwareConfig
            except ImportError:
                pass
            else:
                cfg = HardwareConfig.from_dict(cfg)
        self.hw_config = cfg
        g = lambda k: _cfg_get(cfg, k)  # noqa: E731
        self.LOG_INP_WIDTH, self.LOG_WGT_WIDTH = g("LOG_INP_WIDTH"), g("LOG_WGT_WIDTH")
        self.LOG_ACC_WIDTH, self.LOG_BATCH = g("LOG_ACC_WIDTH"), g("LOG_BATCH")
        self.LOG_UOP_BUFF_SIZE, self.LOG_INP_BUFF_SIZE = g("LOG_UOP_BUFF_SIZE"), g("LOG_INP_BUFF_SIZE")
        self.LOG_WGT_BUFF_SIZE, self.LOG_ACC_BUFF_SIZE = g("LOG_WGT_BUFF_SIZE"), g("LOG_ACC_BUFF_SIZE")
        self.LOG_BLOCK_IN, self.LOG_BLOCK_OUT = g("LOG_BLOCK_IN"), g("LOG_BLOCK_OUT")
        self.INP_WIDTH = 1 << self.LOG_INP_WIDTH
        self.WGT_WIDTH = 1 << self.LOG_WGT_WIDTH
        self.ACC_WIDTH = 1 << self.LOG_ACC_WIDTH
        self.OUT_WIDTH = self.INP_WIDTH
        self.BATCH = 1 << self.LOG_BATCH
        self.BLOCK_IN = 1 << self.LOG_BLOCK_IN
        self.BLOCK_OUT = 1 << self.LOG_BLOCK_OUT
        self.INP_ELEM_BITS = self.BATCH * self.BLOCK_IN * self.INP_WIDTH
        self.WGT_ELEM_BITS = self.BLOCK_OUT * self.BLOCK_IN * self.WGT_WIDTH
        self.ACC_ELEM_BITS = self.BATCH * self.BLOCK_OUT * self.ACC_WIDTH
        self.OUT_ELEM_BITS = self.BATCH * self.BLOCK_OUT * self.OUT_WIDTH
        self.INP_ELEM_BYTES = self.INP_ELEM_BITS // 8
        self.WGT_ELEM_BYTES = self.WGT_ELEM_BITS // 8
        self.ACC_ELEM_BYTES = self.ACC_ELEM_BITS // 8
        self.OUT_ELEM_BYTES = self.OUT_ELEM_BITS // 8
        self.UOP_BUFF_SIZE = 1 << self.LOG_UOP_BUFF_SIZE
        self.INP_BUFF_SIZE = 1 << self.LOG_INP_BUFF_SIZE
        self.WGT_BUFF_SIZE = 1 << self.LOG_WGT_BUFF_SIZE
        self.ACC_BUFF_SIZE = 1 << self.LOG_ACC_BUFF_SIZE
        self.OUT_BUFF_SIZE = self.ACC_BUFF_SIZE // self.ACC_WIDTH * self.OUT_WIDTH
        self.acc_dtype = f"int{self.ACC_WIDTH}"
        self.inp_dtype = f"int{self.INP_WIDTH}"
        self.wgt_dtype = f"int{self.WGT_WIDTH}"
        self.out_dtype = f"int{self.OUT_WIDTH}"
        # TVM's names of the memory ids and opcodes
        self.MEM_ID_UOP, self.MEM_ID_WGT, self.MEM_ID_INP = MEM_ID_UOP, MEM_ID_WGT, MEM_ID_INP
        self.MEM_ID_ACC, self.MEM_ID_OUT = MEM_ID_ACC, MEM_ID_OUT
        self.mock_mode = False
        self._mock_env: Environment | None = None
        self._dev_ctx: DevContext | None = None
        self._gemm = None

    # ---- scoping ---------------------------------------------------------------------------
    def __enter__(self) -> Environment:
        stack = Environment._stack()
        stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        Environment._stack().pop()

    @staticmethod
    def _stack() -> list[Environment]:
        st = getattr(Environment._local, "stack", None)
        if st is None:
            st = Environment._local.stack = []
        return st

    # ---- derived ---------------------------------------------------------------------------
    @property
    def dev(self) -> DevContext:
        if self._dev_ctx is None:
            self._dev_ctx = DevContext(self)
        return self._dev_ctx

    @property
    def mock(self) -> Environment:
        """An environment whose ``gemm`` does nothing (TVM's ``env.mock``, for schedules whose
        compute is checked without the accelerator)."""
        if self._mock_env is None:
            self._mock_env = Environment(self.hw_config)
            self._mock_env.mock_mode = True
        return self._mock_env

    @property
    def gemm(self) -> Any:
        """The GEMM tensor intrinsic: ``out[i, j] += inp[i, k] * wgt[j, k]`` on one
        BATCH x BLOCK_IN by BLOCK_OUT x BLOCK_IN tile pair."""
        if self._gemm is None:
            from .intrin import gemm

            self._gemm = gemm(self, self.mock_mode)
        return self._gemm

    @property
    def target(self) -> Any:
        from ..target import Target

        return Target("ext_dev -device=vta -keys=vta,cpu")

    @property
    def target_host(self) -> str:
        return "llvm"

    @property
    def target_vta_cpu(self) -> str:
        return "llvm"

    def mem_info(self, scope: str) -> MemoryInfo:
        """The :class:`MemoryInfo` of an on-chip scope (ValueError for another scope)."""
        table = {
            self.inp_scope: MemoryInfo(self.inp_scope, self.INP_ELEM_BITS, self.INP_WIDTH,
                                       self.INP_BUFF_SIZE * 8, MEM_ID_INP,
                                       self.BATCH * self.BLOCK_IN),
            self.wgt_scope: MemoryInfo(self.wgt_scope, self.WGT_ELEM_BITS, self.WGT_WIDTH,
                                       self.WGT_BUFF_SIZE * 8, MEM_ID_WGT,
                                       self.BLOCK_OUT * self.BLOCK_IN),
            self.acc_scope: MemoryInfo(self.acc_scope, self.ACC_ELEM_BITS, self.ACC_WIDTH,
                                       self.ACC_BUFF_SIZE * 8, MEM_ID_ACC,
                                       self.BATCH * self.BLOCK_OUT),
        }
        if scope not in table:
            raise ValueError(f"{scope!r} is not a VTA on-chip scope; known: {sorted(table)}")
        return table[scope]

    def __repr__(self) -> str:
        return (f"vta.Environment(BATCH={self.BATCH}, BLOCK_IN={self.BLOCK_IN}, "
                f"BLOCK_OUT={self.BLOCK_OUT}, inp={self.inp_dtype}, wgt={self.wgt_dtype}, "
                f"acc={self.acc_dtype})")


def _default_hw_config() -> Any:
    try:
        from .hw_config import default_config  # vta-hw's
    except ImportError:  # the compiler alone: TVM's default vta_config.json
        return dict(_DEFAULTS)
    return default_config()


_default_env: Environment | None = None


def get_env() -> Environment:
    """The current VTA environment (innermost ``with env:``), else the default one."""
    global _default_env
    stack = Environment._stack()
    if stack:
        return stack[-1]
    if _default_env is None:
        _default_env = Environment()
    return _default_env


def mem_info(scope: str) -> MemoryInfo:
    return get_env().mem_info(scope)
