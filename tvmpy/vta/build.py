"""``vta.lower`` / ``vta.build``: a te schedule for VTA -> host IR -> a module that drives the
runtime's command queue.

Design choice: the host function is compiled to **Python source** (a small driver) rather
than to machine code or interpreted node by node. Everything the host side of VTA does is
issue runtime calls (DMA, micro-kernels, tokens) from loops over integer indices; the data
itself never passes through the host code (it lives in the simulator's DRAM). Python source
runs those loops at interpreter speed with no per-node dispatch, prints as readable code
(``mod.get_source()``), and serialises as text: ``f.save("gemm.o")`` writes it with a header,
``tvmpy.runtime.load_module`` (through the file-loader hook) reads it back, so
``remote.upload`` / ``remote.load_module`` work on any server that imported ``tvmpy.vta``.
The micro-kernels are Python closures handed to ``push_gemm_op``/``push_alu_op`` (the
runtime records each once per key: call site plus the host values it uses).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..arith import simplify
from ..ir.module import IRModule
from ..tir import expr as E
from ..tir import stmt as S
from ..tir.function import PrimFunc
from ..tir.functor import post_order_visit, substitute
from .environment import get_env
from .intrin import UOP_SCOPE
from .transform import lowering as L

__all__ = ["lower", "build", "build_config", "VTAModule", "MAGIC", "load_vta_module", "use_command_queue"]

MAGIC = b"TVMPY-VTA-MODULE 1\n"
_PRAGMAS_REGISTERED = False


def _register_pragmas() -> None:
    global _PRAGMAS_REGISTERED
    if not _PRAGMAS_REGISTERED:
        from ..te.schedule_ops import UNIT_LOOP_PRAGMAS

        UNIT_LOOP_PRAGMAS.update({"dma_copy", "alu"})
        _PRAGMAS_REGISTERED = True


def lower_vta(s: Any, args: Sequence[Any], name: str = "default_function",
              binds: dict | None = None) -> PrimFunc:
    """The VTA host function of schedule ``s`` (see the pass list in
    :mod:`tvmpy.vta.transform`)."""
    from ..driver import _to_primfunc
    from ..tir.transform import Simplify, StorageFlatten

    _register_pragmas()
    env = get_env()
    func = s if isinstance(s, PrimFunc) else _to_primfunc(s, args, name, binds)
    mod = Simplify()(StorageFlatten()(IRModule({name: func})))
    func = mod[name]
    body = func.body
    for p in (L.inject_dma_intrin, L.alu_inplace, L.inject_alu_intrin, L.inject_coproc_sync,
              L.inject_virtual_thread, L.place_sram):
        body = p(env, body)
    func = Simplify()(IRModule({name: func.with_body(body)}))[name]
    body = L.lift_uop_kernels(env, func.body)
    return func.with_body(body).with_attr("target", "ext_dev")


def build_config(debug_flag: int = 0, **kwargs: Any) -> Any:
    """TVM's ``vta.build_config()`` (its pass list is :func:`lower_vta`'s, always applied):
    a PassContext, for tutorials that lower under ``with vta.build_config():``."""
    from ..transform import PassContext

    return PassContext(opt_level=3, **kwargs)


def lower(s: Any, args: Sequence[Any] | None = None, name: str = "default_function",
          binds: dict | None = None, simple_mode: bool = False) -> Any:
    """``vta.lower``: the lowered host IR (prints readably) as an IRModule."""
    from ..driver import LoweredModule

    out = LoweredModule()
    out[name] = lower_vta(s, args or [], name, binds)
    return out


# ---- Python code generation -----------------------------------------------------------------
class _PyGen:
    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.lines: list[str] = []
        self.kernels: list[str] = []
        self.used: set[str] = set()

    def name(self, v: E.Var) -> str:
        n = self.names.get(id(v))
        if n is None:
            base = "".join(c if c.isalnum() else "_" for c in v.name) or "v"
            n = f"{base}_{len(self.names)}"
            self.names[id(v)] = n
        return n

    def expr(self, e: Any) -> str:  # noqa: C901
        if isinstance(e, (int, np.integer)):
            return str(int(e))
        if isinstance(e, E.IntImm):
            return str(int(e.value))
        if isinstance(e, E.Var):
            return self.name(e)
        bin_ops = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "//", E.FloorMod: "%",
                   E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">=",
                   E.And: "and", E.Or: "or"}
        for cls, op in bin_ops.items():
            if type(e) is cls:
                return f"({self.expr(e.a)} {op} {self.expr(e.b)})"
        if isinstance(e, E.Min):
            return f"min({self.expr(e.a)}, {self.expr(e.b)})"
        if isinstance(e, E.Max):
            return f"max({self.expr(e.a)}, {self.expr(e.b)})"
        if isinstance(e, E.Div):
            return f"_tdiv({self.expr(e.a)}, {self.expr(e.b)})"
        if isinstance(e, E.Mod):
            return f"_tmod({self.expr(e.a)}, {self.expr(e.b)})"
        if isinstance(e, E.Not):
            return f"(not {self.expr(e.a)})"
        if isinstance(e, E.Cast):
            return f"int({self.expr(e.value)})"
        if isinstance(e, E.Select):
            return (f"({self.expr(e.true_value)} if {self.expr(e.condition)} else "
                    f"{self.expr(e.false_value)})")
        if isinstance(e, E.Call) and e.op == "if_then_else":
            c, t, f = e.args
            return f"({self.expr(t)} if {self.expr(c)} else {self.expr(f)})"
        if isinstance(e, E.Call) and e.op == "likely":
            return self.expr(e.args[0])
        if L._is_call(e, "VTATile"):
            return f"_tile({self.expr(e.args[1])}, {self.expr(e.args[2])})"
        raise L.VTALoweringError(f"VTA host code: cannot evaluate {e} on the host")

    def emit(self, s: Any, ind: int, out: list[str]) -> None:  # noqa: C901
        pad = "    " * ind
        if isinstance(s, S.SeqStmt):
            for x in s.seq:
                self.emit(x, ind, out)
        elif isinstance(s, S.For):
            v = self.name(s.loop_var)
            out.append(f"{pad}for {v} in range({self.expr(s.min)}, "
                       f"{self.expr(simplify(s.min + s.extent))}):")
            self.emit(s.body, ind + 1, out)
        elif isinstance(s, S.LetStmt):
            out.append(f"{pad}{self.name(s.var)} = {self.expr(s.value)}")
            self.emit(s.body, ind, out)
        elif isinstance(s, S.IfThenElse):
            out.append(f"{pad}if {self.expr(s.condition)}:")
            self.emit(s.then_case, ind + 1, out)
            if s.else_case is not None:
                out.append(f"{pad}else:")
                self.emit(s.else_case, ind + 1, out)
        elif isinstance(s, S.AssertStmt):
            out.append(f"{pad}if not {self.expr(s.condition)}:")
            msg = s.message.value if isinstance(s.message, E.StringImm) else str(s.message)
            out.append(f"{pad}    raise RuntimeError({msg!r})")
            self.emit(s.body, ind, out)
        elif isinstance(s, S.AttrStmt) and s.attr_key == L.UOP_KERNEL:
            self.kernel(s, ind, out)
        elif isinstance(s, S.AttrStmt):
            self.emit(s.body, ind, out)
        elif isinstance(s, S.Evaluate):
            self.evaluate(s.value, pad, out)
        elif isinstance(s, S.BufferStore):
            raise L.VTALoweringError(
                f"VTA: the stage writing {s.buffer.name} has no VTA form: mark a copy to or "
                f"from an on-chip scope with env.dma_copy, an accumulator update with env.alu, "
                f"or tensorize with env.gemm (host code does not touch tensors):\n{s}")
        else:
            raise L.VTALoweringError(f"VTA host code: unsupported statement "
                                     f"{type(s).__name__}:\n{s}")
        if not out or out[-1].endswith(":"):
            out.append(f"{pad}    pass" if out and out[-1].startswith(pad) else f"{pad}pass")

    def evaluate(self, v: Any, pad: str, out: list[str]) -> None:
        if isinstance(v, E.IntImm):
            return
        if L._is_call(v, "VTALoadBuffer2D"):
            a = v.args[1:]
            out.append(f"{pad}q.load_buffer_2d(_addr[{self.expr(a[0])!r}], "
                       + ", ".join(self.expr(x) for x in a[1:]) + ")")
        elif L._is_call(v, "VTAStoreBuffer2D"):
            a = v.args[1:]
            out.append(f"{pad}q.store_buffer_2d({self.expr(a[0])}, {self.expr(a[1])}, "
                       f"_addr[{self.expr(a[2])!r}], "
                       + ", ".join(self.expr(x) for x in a[3:]) + ")")
        elif L._is_call(v, "VTADepPush") or L._is_call(v, "VTADepPop"):
            fn = "dep_push" if v.args[0].value == "VTADepPush" else "dep_pop"
            out.append(f"{pad}q.{fn}({self.expr(v.args[1])}, {self.expr(v.args[2])})")
        else:
            raise L.VTALoweringError(f"VTA host code: unsupported call {v}")

    def kernel(self, s: S.AttrStmt, ind: int, out: list[str]) -> None:
        pad = "    " * ind
        kind = s.value.value  # type: ignore[attr-defined]
        k = len(self.kernels)
        free: list[E.Var] = []
        seen: set[int] = set()

        def f(n: Any) -> None:
            if isinstance(n, E.Var) and id(n) not in seen and n.dtype != "handle":
                seen.add(id(n))
                free.append(n)
        bound: set[int] = set()
        post_order_visit(s.body, lambda n: bound.add(id(n.loop_var)) if isinstance(n, S.For)
                         else None)
        def g(n: Any) -> None:
            if isinstance(n, S.For):
                post_order_visit(n.min, f)
                post_order_visit(n.extent, f)
            elif L._is_call(n, "VTAUopPush"):
                post_order_visit(n, f)
        post_order_visit(s.body, g)
        free = [v for v in free if id(v) not in bound]
        params = [self.name(v) for v in free]
        body: list[str] = []
        self.uops(s.body, 1, body, fold=2)
        self.kernels.append(f"def _kernel_{k}({', '.join(['q', *params])}):  # {kind}\n"
                            + "\n".join(body))
        key = f"(_mid, {k}, {', '.join(params)})" if params else f"(_mid, {k})"
        fn = "push_gemm_op" if kind == "VTAPushGEMMOp" else "push_alu_op"
        out.append(f"{pad}q.{fn}({key}, lambda: _kernel_{k}({', '.join(['q', *params])}))")

    def uops(self, s: Any, ind: int, out: list[str], fold: int) -> None:
        pad = "    " * ind
        if isinstance(s, S.For) and fold > 0:
            factors = _fold_factors(s)
            if factors is not None:
                zero = {s.loop_var: E.const(0, s.loop_var.dtype)}
                out.append(f"{pad}q.uop_loop_begin({self.expr(s.extent)}, "
                           + ", ".join(self.expr(x) for x in factors) + ")")
                self.uops(substitute(s.body, zero), ind, out, fold - 1)
                out.append(f"{pad}q.uop_loop_end()")
                return
        if isinstance(s, S.For):
            out.append(f"{pad}for {self.name(s.loop_var)} in range({self.expr(s.min)}, "
                       f"{self.expr(simplify(s.min + s.extent))}):")
            self.uops(s.body, ind + 1, out, 0)
        elif isinstance(s, S.SeqStmt):
            for x in s.seq:
                self.uops(x, ind, out, 0)
        elif isinstance(s, S.AttrStmt) and s.attr_key == UOP_SCOPE:
            self.uops(s.body, ind, out, 0)
        elif isinstance(s, S.Evaluate) and L._is_call(s.value, "VTAUopPush"):
            call: Any = s.value
            out.append(f"{pad}q.uop_push(" + ", ".join(self.expr(a) for a in call.args[1:]) + ")")
        else:
            raise L.VTALoweringError(f"VTA micro-kernel: unsupported statement {s}")


def _fold_factors(loop: S.For) -> tuple[E.PrimExpr, E.PrimExpr, E.PrimExpr] | None:
    """(dst, src, wgt) index steps of ``loop``, when every micro-op of its body moves by the
    same affine steps (the 2-level micro-op loop's factors); None otherwise."""
    pushes: list[E.Call] = []
    post_order_visit(loop.body, lambda n: pushes.append(n)
                     if L._is_call(n, "VTAUopPush") else None)
    inner: list[E.Var] = []
    post_order_visit(loop.body, lambda n: inner.append(n.loop_var)
                     if isinstance(n, S.For) else None)
    v = loop.loop_var
    res: list[E.PrimExpr | None] = [None, None, None]
    for p in pushes:
        for k, arg in enumerate(p.args[3:6]):
            step = simplify(substitute(arg, {v: v + 1}) - arg)
            if any(_uses(step, x) for x in [v, *inner]):
                return None
            if res[k] is None:
                res[k] = step
            elif not L._eq(res[k], step):
                return None
    if not pushes:
        return None
    return tuple(x if x is not None else E.const(0) for x in res)  # type: ignore[return-value]


def _uses(e: Any, v: E.Var) -> bool:
    from ..tir.functor import uses_var

    return uses_var(e, v)


def codegen_python(func: PrimFunc) -> str:
    """The Python driver source of a lowered VTA host function."""
    g = _PyGen()
    params = _param_var_names(func, g)
    body: list[str] = []
    g.emit(func.body, 1, body)
    scal = [g.name(p) for p in func.params if p.dtype != "handle"]
    head = [f"def {func.name}(q, _addr, {', '.join(scal)}):" if scal
            else f"def {func.name}(q, _addr):"]
    src = "\n".join(g.kernels) + "\n\n" + "\n".join(head + body) + "\n"
    return "# VTA host driver (generated by tvmpy.vta.build)\n" \
        f"# params: {', '.join(params)}\n" + src


_HELPERS = '''
def _tdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q

def _tmod(a, b):
    return a - _tdiv(a, b) * b

def _tile(off, tile):
    if off % tile:
        raise RuntimeError(f"VTA DMA: element offset {off} is not a multiple of the tile size {tile}")
    return off // tile
'''


# ---- the module -----------------------------------------------------------------------------
class VTAModule:
    """A built VTA function: called with arrays (NDArray or numpy) in the order of ``args``,
    it copies them into the simulated DRAM, runs the host driver on a runtime CommandQueue,
    synchronizes and copies every argument back."""

    type_key = "vta"

    def __init__(self, name: str, source: str, params: list[dict],
                 hw_config: dict | None = None):
        self.name, self.source, self.params = name, source, params
        #: the hardware configuration it was compiled for (vta_config.json form): a module
        #: loaded elsewhere (an RPC server) runs on a simulator of that design, not the default
        self.hw_config = hw_config
        self._fn: Any = None
        self.entry_name = name

    # TVM Module surface
    def get_source(self, fmt: str = "") -> str:
        return self.source

    def __getitem__(self, name: str) -> Any:
        return self.get_function(name)

    def get_function(self, name: str, query_imports: bool = False) -> Any:
        if name != self.name:
            raise AttributeError(f"VTA module has no function {name!r} (has {self.name!r})")
        return self

    @property
    def entry_func(self) -> VTAModule:
        return self

    def _compiled(self) -> Any:
        if self._fn is None:
            # micro-kernel keys start with this module's identity: queues are shared
            ns: dict[str, Any] = {"_mid": (self.name, next(_MODULE_IDS))}
            exec(compile(_HELPERS + self.source, f"<vta:{self.name}>", "exec"), ns)  # noqa: S102
            self._fn = ns[self.name]
        return self._fn

    def __call__(self, *args: Any, wait_cycles: int = 10_000_000) -> None:
        if len(args) != len(self.params):
            raise TypeError(f"{self.name} takes {len(self.params)} arguments "
                            f"({', '.join(p['name'] for p in self.params)}), got {len(args)}")
        env = _env_for(self.hw_config)
        q = _queue_for(env)
        addr: dict[str, int] = {}
        bufs = []
        scalars = []
        for p, a in zip(self.params, args):
            if p["kind"] == "scalar":
                scalars.append(int(a))
                continue
            arr = a.numpy() if hasattr(a, "numpy") and not isinstance(a, np.ndarray) else np.asarray(a)
            if tuple(arr.shape) != tuple(p["shape"]) or str(arr.dtype) != p["dtype"]:
                raise ValueError(f"{self.name}: argument {p['name']} must be {p['dtype']}"
                                 f"{list(p['shape'])}, got {arr.dtype}{list(arr.shape)}")
            buf = q.alloc_buffer(max(arr.nbytes, 1))
            buf.view(arr.dtype)[: arr.size] = arr.ravel()
            addr[p["var"]] = buf.addr
            bufs.append((a, buf, arr))
        try:
            self._compiled()(q, addr, *scalars)
            q.synchronize(wait_cycles)
            for a, buf, arr in bufs:
                out = np.asarray(buf.view(arr.dtype)[: arr.size]).reshape(arr.shape)
                if hasattr(a, "copyfrom"):
                    a.copyfrom(out)
                elif isinstance(a, np.ndarray) and a.flags.writeable:
                    a[...] = out
        finally:
            free = getattr(q, "free_buffer", None)
            if free is not None:  # the DRAM reuses freed ranges
                for _, buf, _ in bufs:
                    free(buf)

    def time_evaluator(self, name: str, dev: Any = None, number: int = 1, repeat: int = 1,
                       min_repeat_ms: float = 0, cooldown_interval_ms: float = 0,
                       f_preproc: str = "", **kw: Any) -> Any:
        """TVM's ``time_evaluator`` on the device: the **simulated** time of one call
        (the simulator's ``cycle_count`` at the design's clock), as a board's timer would give
        it; so AutoTVM measures VTA candidates by cycles, locally or through the fleet's
        ``vta`` devices (``runtime.measure``). ``min_repeat_ms`` and cache flushing do not
        apply (the count is exact)."""
        from types import SimpleNamespace

        from . import simulator

        hz = float(getattr(_env_for(self.hw_config).hw_config, "clock_mhz", 100.0)) * 1e6

        def run(*args: Any) -> Any:
            costs = []
            for _ in range(repeat):
                cycles = 0
                for _ in range(number):
                    simulator.clear_stats()
                    self(*args)
                    cycles += int(simulator.stats()["cycle_count"])
                costs.append(cycles / number / hz)
            return SimpleNamespace(mean=sum(costs) / len(costs), results=costs)
        return run

    def save(self, path: str, fmt: str = "") -> None:
        """Write the module (driver source + argument table) to ``path`` (any name, e.g.
        ``gemm.o`` as in TVM's tutorials); ``tvmpy.runtime.load_module`` reads it back."""
        meta = json.dumps({"name": self.name, "params": self.params,
                           "hw_config": self.hw_config})
        with open(path, "wb") as f:
            f.write(MAGIC + meta.encode() + b"\n" + self.source.encode())

    export_library = save

    def __repr__(self) -> str:
        return f"<VTAModule {self.name}>"


_QUEUES: dict[Any, Any] = {}
_MODULE_IDS = itertools.count()
_QUEUE_FACTORY: Any = None


def use_command_queue(factory: Any) -> None:
    """Run VTA modules on queues made by ``factory(env)`` (None: vta-hw's runtime
    ``CommandQueue(env.hw_config)``, the default)."""
    global _QUEUE_FACTORY
    _QUEUE_FACTORY = factory
    _QUEUES.clear()


_ENVS: dict[str, Any] = {}


def _env_for(cfg: dict | None) -> Any:
    """The current environment when it is the design ``cfg`` (or ``cfg`` is None), else one
    environment per design."""
    env = get_env()
    if cfg is None or _cfg_dict(env) == cfg:
        return env
    key = json.dumps(cfg, sort_keys=True)
    if key not in _ENVS:
        from .environment import Environment
        from .hw_config import HardwareConfig

        _ENVS[key] = Environment(HardwareConfig.from_dict(cfg))
    return _ENVS[key]


def _cfg_dict(env: Any) -> dict | None:
    to_dict = getattr(env.hw_config, "to_dict", None)
    return json.loads(json.dumps(to_dict())) if to_dict is not None else None


def _queue_key(env: Any) -> Any:
    """One queue per design (its vta_config.json form): keyed by ``id(env)`` alone, a
    collected environment's id reused by another design's would run on the old design's queue
    (wrong field widths, buffer depths and timing)."""
    cfg = _cfg_dict(env)
    return json.dumps(cfg, sort_keys=True) if cfg is not None else id(env)


def _queue_for(env: Any) -> Any:
    key = _queue_key(env)
    q = _QUEUES.get(key)
    if q is None:
        if _QUEUE_FACTORY is not None:
            q = _QUEUE_FACTORY(env)
        else:
            from .runtime import CommandQueue  # vta-hw's

            q = CommandQueue(env.hw_config)
        _QUEUES[key] = q
    return q


def load_vta_module(path: str) -> VTAModule:
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(MAGIC):
        raise ValueError(f"{path} is not a VTA module")
    meta_line, _, src = data[len(MAGIC):].partition(b"\n")
    meta = json.loads(meta_line)
    return VTAModule(meta["name"], src.decode(), meta["params"], meta.get("hw_config"))


def _params(func: PrimFunc) -> list[dict]:
    out = []
    for p in func.params:
        if p.dtype == "handle":
            b = func.buffer_map[p]
            dims = [E.const_value(d) for d in b.shape]
            if any(d is None for d in dims):
                raise L.VTALoweringError(f"vta.build: tensor {b.name} has a symbolic shape "
                                         f"{list(b.shape)}; VTA modules need constant shapes")
            shape = [int(d) for d in dims]  # type: ignore[arg-type]
            out.append({"kind": "buffer", "name": b.name, "var": "", "shape": shape,
                        "dtype": b.dtype})
        else:
            out.append({"kind": "scalar", "name": p.name, "var": "", "dtype": p.dtype})
    return out


def build(inputs: Any, args: Sequence[Any] | None = None, target: Any = "ext_dev",
          target_host: Any = None, name: str = "default_function",
          binds: dict | None = None) -> VTAModule:
    """``vta.build(s, [A, B, C], "ext_dev", env.target_host)``: a :class:`VTAModule`."""
    if isinstance(inputs, IRModule):
        funcs = list(inputs.functions.values())
        if len(funcs) != 1:
            raise ValueError("vta.build: one function per module")
        func: Any = funcs[0]
        if "tir.lowered" in func.attrs or func.attrs.get("target") != "ext_dev":
            raise ValueError("vta.build takes a schedule or vta.lower's module")
    else:
        func = lower_vta(inputs, args or [], name, binds)
    src = codegen_python(func)
    params = _params(func)
    for p, n in zip(params, _param_var_names(func)):
        p["var"] = n
    return VTAModule(func.name, src, params, _cfg_dict(get_env()))


def _param_var_names(func: PrimFunc, g: _PyGen | None = None) -> list[str]:
    """The driver's names of the parameters (a buffer's data var shares its parameter's)."""
    g = g or _PyGen()
    names = [g.name(p) for p in func.params]
    for p, n in zip(func.params, names):
        b = func.buffer_map.get(p)
        if b is not None:
            g.names[id(b.data)] = n
    return names
