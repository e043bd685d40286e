"""The VTA device: fetch, load, compute and store modules with dependency token queues.

The fetch module reads the instruction stream from DRAM and dispatches each instruction to the
module that runs it (load: LOAD inp/wgt; compute: GEMM, ALU, FINISH, LOAD uop/acc; store:
STORE). The three modules advance in parallel, each in its own program order. An instruction
starts when its module is free, it has been fetched, and every token it pops is available
(``pop_prev``/``pop_next`` read the queue from the previous/next module); when it ends it
pushes its tokens (``push_prev``/``push_next``). The four token queues are load->compute,
compute->load, compute->store and store->compute (RAW and WAR hazards between the modules).

The simulation is event driven: among the modules that can start their next instruction, the
one that starts earliest runs (functionally, at its start time), so the buffers see the order
the hardware would. Loads and stores share one DRAM channel of ``dram_bytes_per_cycle`` bytes
per cycle after ``dram_latency`` cycles. The GEMM core retires one micro-op iteration per cycle
and the tensor ALU one every :data:`ALU_II` cycles (TVM's HLS design, hardware/xilinx/src/vta.cc:
``READ_GEMM_UOP`` is pipelined at II=1, ``READ_ALU_UOP`` at II=2, since each ALU iteration reads
two accumulator tensors, its destination and its source, and writes one back).

The fetch module reads the stream in order, one instruction per ``INS_BYTES /
dram_bytes_per_cycle`` cycles, into three command queues of ``cmd_queue_depth`` entries
(:data:`CMD_QUEUE_DEPTH` = 512, the FIFOs of TVM's FPGA design, hardware/xilinx/scripts/vivado.tcl;
its HLS C simulation uses 8, ``STREAM_IN_DEPTH`` in vta.h): an instruction enters its module's
queue only once that module has taken the instruction ``cmd_queue_depth`` places before it, so
a module with a full queue stalls fetch, and with it every other module
(``fetch_queue_stall_cycles``). The token queues (1024 entries on the FPGA) are not bounded here.
When no module can start and instructions remain, the tokens they wait for can never come (or
fetch is stuck behind a full queue whose module waits for them): a :class:`DeadlockError` names
each blocked module, its instruction and the empty token queue or the full command queue.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Callable

from ..hw_config import (
    INS_BYTES,
    MEM_ID_ACC,
    MEM_ID_INP,
    MEM_ID_OUT,
    MEM_ID_UOP,
    MEM_ID_WGT,
    OPCODE_LOAD,
    STAGE_COMPUTE,
    STAGE_LOAD,
    STAGE_NAMES,
    STAGE_STORE,
    HardwareConfig,
)
from ..isa import AluInsn, FinishInsn, GemmInsn, Insn, MemInsn, decode_stream, pipeline_stage
from . import functional as F
from .blas import single_thread
from .dram import Dram

GEMM_PIPELINE_DEPTH = 4   # cycles to fill/drain the GEMM core's pipeline per instruction
ALU_PIPELINE_DEPTH = 4
ALU_II = 2                # cycles per ALU micro-op iteration (vta.cc: READ_ALU_UOP at II=2)
CMD_QUEUE_DEPTH = 512     # entries of each command queue fetch -> load/compute/store (FPGA)


class SimulatorError(RuntimeError):
    """An instruction stream the device cannot run."""


class DeadlockError(SimulatorError):
    """Every unfinished module waits for a token that no instruction will push."""


class DeviceTimeoutError(SimulatorError):
    """The stream ran longer than the ``wait_cycles`` the host waits for."""


# queue names: (producer stage, consumer stage)
_QUEUES = {(STAGE_LOAD, STAGE_COMPUTE): "load->compute", (STAGE_COMPUTE, STAGE_LOAD):
           "compute->load", (STAGE_COMPUTE, STAGE_STORE): "compute->store",
           (STAGE_STORE, STAGE_COMPUTE): "store->compute"}


_MEM_KIND = {MEM_ID_INP: "inp", MEM_ID_WGT: "wgt", MEM_ID_ACC: "acc", MEM_ID_UOP: "uop",
             MEM_ID_OUT: "out"}


def _neighbours(stage: int) -> tuple[int | None, int | None]:
    prev = {STAGE_LOAD: None, STAGE_COMPUTE: STAGE_LOAD, STAGE_STORE: STAGE_COMPUTE}[stage]
    nxt = {STAGE_LOAD: STAGE_COMPUTE, STAGE_COMPUTE: STAGE_STORE, STAGE_STORE: None}[stage]
    return prev, nxt


@dataclasses.dataclass
class Stats:
    """Counters of one or more runs (:func:`tvmpy.vta.simulator.stats` returns them as a dict)."""

    cycle_count: int = 0
    runs: int = 0
    busy: dict[str, int] = dataclasses.field(default_factory=lambda: collections.Counter())
    stall_token: dict[str, int] = dataclasses.field(default_factory=lambda: collections.Counter())
    stall_dram: dict[str, int] = dataclasses.field(default_factory=lambda: collections.Counter())
    stall_queue: dict[str, int] = dataclasses.field(default_factory=lambda: collections.Counter())
    counts: dict[str, int] = dataclasses.field(default_factory=lambda: collections.Counter())
    nbytes: dict[str, int] = dataclasses.field(default_factory=lambda: collections.Counter())
    gemm_counter: int = 0       # GEMM micro-op iterations that multiply (reset excluded)
    alu_counter: int = 0

    def as_dict(self) -> dict[str, float]:
        d: dict[str, float] = {"cycle_count": self.cycle_count, "runs": self.runs}
        for m in ("fetch", "load", "compute", "store"):
            d[f"{m}_busy_cycles"] = self.busy[m]
            d[f"{m}_stall_cycles"] = (self.stall_token[m] + self.stall_dram[m]
                                      + self.stall_queue[m])
            d[f"{m}_token_stall_cycles"] = self.stall_token[m]
            d[f"{m}_queue_stall_cycles"] = self.stall_queue[m]
            d[f"{m}_dram_stall_cycles"] = self.stall_dram[m]
        d["gemm_counter"] = self.gemm_counter
        d["alu_counter"] = self.alu_counter
        d["gemm_utilization"] = self.gemm_counter / self.cycle_count if self.cycle_count else 0.0
        for k in ("inp", "wgt", "acc", "uop", "insn"):
            d[f"{k}_load_nbytes"] = self.nbytes[k]
        d["out_store_nbytes"] = self.nbytes["out"]
        d["dram_read_bytes"] = sum(self.nbytes[k] for k in ("inp", "wgt", "acc", "uop", "insn"))
        d["dram_write_bytes"] = self.nbytes["out"]
        for k in ("insn", "load", "store", "gemm", "alu", "finish", "nop"):
            d[f"{k}_count"] = self.counts[k]
        return d

    def merge(self, other: Stats) -> None:
        self.cycle_count += other.cycle_count
        self.runs += other.runs
        for name in ("busy", "stall_token", "stall_dram", "stall_queue", "counts", "nbytes"):
            getattr(self, name).update(getattr(other, name))
        self.gemm_counter += other.gemm_counter
        self.alu_counter += other.alu_counter


class Device:
    """One simulated VTA: its buffers persist across runs; DRAM is shared with the host."""

    def __init__(self, cfg: HardwareConfig, dram: Dram,
                 on_stats: Callable[[Stats], None] | None = None,
                 cmd_queue_depth: int | None | str = "default") -> None:
        """``cmd_queue_depth``: entries per command queue (None: unbounded, no fetch stalls;
        "default": this module's :data:`CMD_QUEUE_DEPTH` when the device is made)."""
        if cmd_queue_depth == "default":
            cmd_queue_depth = CMD_QUEUE_DEPTH
        if cmd_queue_depth is not None and (not isinstance(cmd_queue_depth, int)
                                            or cmd_queue_depth < 1):
            raise ValueError(f"cmd_queue_depth must be at least 1 (or None), got "
                             f"{cmd_queue_depth}")
        self.cfg = cfg
        self.dram = dram
        self.buffers = F.Buffers(cfg)
        self.on_stats = on_stats
        self.cmd_queue_depth: int | None = cmd_queue_depth

    # ---- entry points ---------------------------------------------------------------------
    def run(self, insn_addr: int, insn_count: int, wait_cycles: int = 1 << 62,
            serial: bool = False) -> Stats:
        """Fetch ``insn_count`` instructions from DRAM at ``insn_addr`` and run them."""
        buf, off = self.dram.find(insn_addr, insn_count * INS_BYTES, "instruction fetch")
        data = buf.data[off:off + insn_count * INS_BYTES].tobytes()
        return self.run_insns(decode_stream(data, self.cfg), wait_cycles, serial)

    def run_insns(self, insns: list[Insn], wait_cycles: int = 1 << 62,
                  serial: bool = False) -> Stats:
        """Run decoded instructions (the stream a fetch would read). ``serial``: each
        instruction starts when the one before it in the stream has ended, whatever the
        tokens say (TVM's VTA_DEBUG_FORCE_SERIAL: the pipeline without latency hiding)."""
        with single_thread():
            run = _Run(self, insns)
            stats = run.simulate_serial() if serial else run.simulate()
        if self.on_stats is not None:
            self.on_stats(stats)
        if stats.cycle_count > wait_cycles:
            raise DeviceTimeoutError(f"the VTA stream needed {stats.cycle_count} cycles, more "
                                     f"than the {wait_cycles} the host waits")
        return stats


class _Run:
    """One run of an instruction stream through the cycle model."""

    def __init__(self, dev: Device, insns: list[Insn]) -> None:
        self.dev = dev
        self.cfg = dev.cfg
        self.insns = insns
        self.stats = Stats(runs=1)
        bw, lat = self.cfg.dram_bytes_per_cycle, self.cfg.dram_latency
        # when each instruction has been read from DRAM if fetch never stalls
        self.streamed = [lat + math.ceil((k + 1) * INS_BYTES / bw) for k in range(len(insns))]
        self.fetched: list[int] = []    # when each has entered its command queue (in order)
        self.depth = dev.cmd_queue_depth
        self.queues: dict[int, list[int]] = {STAGE_LOAD: [], STAGE_COMPUTE: [], STAGE_STORE: []}
        self.stage_of: list[int] = []
        self.slot: list[int] = []       # position of each instruction in its module's queue
        for k, insn in enumerate(insns):
            stage = pipeline_stage(insn)
            self.stage_of.append(stage)
            self.slot.append(len(self.queues[stage]))
            self.queues[stage].append(k)
        self.taken: dict[int, list[int]] = {s: [] for s in self.queues}  # when a module took each
        self.pos = {s: 0 for s in self.queues}    # each module's next instruction (its slot)
        self.time = {s: 0 for s in self.queues}   # when each module is free
        self.tokens: dict[tuple[int, int], collections.deque[int]] = {
            q: collections.deque() for q in _QUEUES}
        self.dram_free = 0

    def _where(self, k: int) -> str:
        return f"instruction #{k} ({self.insns[k]})"

    def _token_queues(self, stage: int, insn: Insn, k: int, verb: str) -> list[tuple[int, int]]:
        """The (producer, consumer) token queues ``insn`` pops from (``verb`` "pop") or pushes
        to ("push"), by its ``{verb}_prev`` / ``{verb}_next`` flags."""
        prev, nxt = _neighbours(stage)
        out = []
        for side, other in (("prev", prev), ("next", nxt)):
            if getattr(insn, f"{verb}_{side}"):
                if other is None:
                    where = "from" if verb == "pop" else "to"
                    raise SimulatorError(f"{self._where(k)}: the {STAGE_NAMES[stage]} module has "
                                         f"no {side} module to {verb} a token {where}")
                out.append((other, stage) if verb == "pop" else (stage, other))
        return out

    def _pops(self, stage: int, insn: Insn, k: int) -> list[tuple[int, int]]:
        return self._token_queues(stage, insn, k, "pop")

    def _pushes(self, stage: int, insn: Insn, k: int) -> list[tuple[int, int]]:
        return self._token_queues(stage, insn, k, "push")

    def _fetch_upto(self, k: int) -> bool:
        """Fetch (in order) up to instruction ``k``; False while a full queue stops it first."""
        while len(self.fetched) <= k:
            i = len(self.fetched)
            t = self.streamed[i]
            if i:
                t = max(t, self.fetched[i - 1] + self.streamed[i] - self.streamed[i - 1])
            stage, j = self.stage_of[i], self.slot[i]
            if self.depth is not None and j >= self.depth:
                gone = j - self.depth         # the entry that must have left the queue
                if gone < len(self.taken[stage]):
                    room = self.taken[stage][gone]
                elif gone == self.pos[stage]:   # the module's next: taken when it is free
                    room = max(self.time[stage], self.fetched[self.queues[stage][gone]])
                else:
                    return False        # its queue is full until the module takes one more
                if room > t:
                    self.stats.stall_queue["fetch"] += room - t
                    t = room
            self.fetched.append(t)
        return True

    def simulate(self) -> Stats:
        pos = self.pos
        time = self.time
        end = 0
        while True:
            best = None
            blocked: list[tuple[int, int, tuple[int, int] | None]] = []
            for stage in (STAGE_LOAD, STAGE_COMPUTE, STAGE_STORE):
                q = self.queues[stage]
                if pos[stage] == len(q):
                    continue
                k = q[pos[stage]]
                if not self._fetch_upto(k):
                    blocked.append((stage, k, None))
                    continue
                insn = self.insns[k]
                free = max(time[stage], self.fetched[k])
                ready = free
                missing = None
                for key in self._pops(stage, insn, k):
                    if not self.tokens[key]:
                        missing = key
                        break
                    ready = max(ready, self.tokens[key][0])
                if missing is not None:
                    blocked.append((stage, k, missing))
                elif best is None or ready < best[0]:
                    best = (ready, stage, k, free)
            if best is None:
                if blocked:
                    self._deadlock(blocked, pos)
                break
            ready, stage, k, free = best
            self.taken[stage].append(free)
            insn = self.insns[k]
            name = STAGE_NAMES[stage]
            for key in self._pops(stage, insn, k):
                self.tokens[key].popleft()
            self.stats.stall_token[name] += ready - free
            finish = self._execute(stage, insn, k, ready)
            time[stage] = finish
            end = max(end, finish)
            for key in self._pushes(stage, insn, k):
                self.tokens[key].append(finish)
            pos[stage] += 1
        self.stats.cycle_count = end
        n = len(self.insns)
        last = self.fetched[-1] if n else 0
        self.stats.busy["fetch"] = last - self.stats.stall_queue["fetch"]
        self.stats.counts["insn"] = n
        self.stats.nbytes["insn"] = n * INS_BYTES
        return self.stats

    def simulate_serial(self) -> Stats:
        end = 0
        for k, insn in enumerate(self.insns):
            stage = pipeline_stage(insn)
            self._pops(stage, insn, k)               # the flags must still make sense
            self._pushes(stage, insn, k)
            end = self._execute(stage, insn, k, max(end, self.streamed[k]))
        self.stats.cycle_count = end
        n = len(self.insns)
        self.stats.busy["fetch"] = self.streamed[-1] if n else 0
        self.stats.counts["insn"] = n
        self.stats.nbytes["insn"] = n * INS_BYTES
        return self.stats

    def _deadlock(self, blocked: list[tuple[int, int, tuple[int, int] | None]],
                  pos: dict) -> None:
        lines = []
        for stage, k, key in blocked:
            left = len(self.queues[stage]) - pos[stage]
            if key is None:
                i = len(self.fetched)
                lines.append(f"  {STAGE_NAMES[stage]} module waits for {self._where(k)}, which "
                             f"fetch never reaches: fetch is stuck at {self._where(i)}, whose "
                             f"{STAGE_NAMES[self.stage_of[i]]} command queue is full "
                             f"({self.depth} entries)")
                continue
            lines.append(f"  {STAGE_NAMES[stage]} module blocked at {self._where(k)}: it pops a "
                         f"{_QUEUES[key]} token and that queue is empty ({left} instruction(s) "
                         f"left in this module)")
        raise DeadlockError("VTA deadlock: no module can proceed and no remaining instruction "
                            "can push the tokens they wait for\n" + "\n".join(lines))

    def _dram(self, name: str, ready: int, nbytes: int) -> tuple[int, int]:
        """Start and end of a DRAM transfer of ``nbytes`` requested at ``ready``."""
        start = max(ready, self.dram_free)
        beats = math.ceil(nbytes / self.cfg.dram_bytes_per_cycle)
        self.dram_free = start + beats
        self.stats.stall_dram[name] += start - ready
        return start, int(start + self.cfg.dram_latency + beats)

    def _execute(self, stage: int, insn: Insn, k: int, ready: int) -> int:
        name = STAGE_NAMES[stage]
        where = self._where(k)
        st = self.stats
        bufs, dram = self.dev.buffers, self.dev.dram
        if isinstance(insn, MemInsn):
            if insn.x_size == 0:
                st.counts["nop"] += 1
                finish = ready + 1
            else:  # a 2-D DMA between DRAM and a buffer (stores check that they do not pad)
                is_load = insn.opcode == OPCODE_LOAD
                (F.run_load if is_load else F.run_store)(bufs, dram, insn, where)
                st.counts["load" if is_load else "store"] += 1
                nbytes = insn.x_size * insn.y_size * self.cfg.elem_bytes(insn.memory_type)
                st.nbytes[_MEM_KIND[insn.memory_type]] += nbytes
                start, finish = self._dram(name, ready, nbytes)
                total = ((insn.x_size + insn.x_pad_0 + insn.x_pad_1)
                         * (insn.y_size + insn.y_pad_0 + insn.y_pad_1))
                finish += total - insn.x_size * insn.y_size     # zero tiles: one per cycle
                if insn.x_stride != insn.x_size:                 # one burst per row
                    finish += insn.y_size - 1
                ready = start
        elif isinstance(insn, GemmInsn):
            F.run_gemm(bufs, insn, where)
            st.counts["gemm"] += 1
            n = insn.num_uop_iters
            if not insn.reset:
                st.gemm_counter += n
            finish = ready + n + GEMM_PIPELINE_DEPTH
        elif isinstance(insn, AluInsn):
            F.run_alu(bufs, insn, where)
            st.counts["alu"] += 1
            n = insn.num_uop_iters
            st.alu_counter += n
            finish = ready + ALU_II * n + ALU_PIPELINE_DEPTH
        elif isinstance(insn, FinishInsn):
            st.counts["finish"] += 1
            finish = ready + 1
        else:  # pragma: no cover - decode never produces anything else
            raise SimulatorError(f"{where}: not a VTA instruction")
        st.busy[name] += finish - ready
        return finish
