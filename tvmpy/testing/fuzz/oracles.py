"""The oracles of the whole-compiler fuzzer: run one ONNX model through onnxruntime (the
reference) and through tvmpy in several configurations, and report every disagreement.

Configurations (``CONFIGS``; each builds from the same ``relay.frontend.from_onnx`` import):

- ``relay-interp``: the relay reference interpreter (numpy per operator, no compilation);
- ``llvm-O0`` / ``llvm-O3``: ``relay.build`` at opt_level 0 (no graph passes but the required
  ones) and 3 (fusion, layout rewriting, Winograd, constant folding ...) with the LLVM backend;
- ``c-O3``: opt_level 3 through the C backend and the system compiler;
- ``llvm-O3-direct``: opt_level 3 with Winograd convolution turned off (only for models with a
  convolution, where it changes the program);
- ``llvm-O3-autotvm``: opt_level 3 where every tunable operator (AutoTVM template) takes a
  random valid point of its configuration space instead of the fallback (only for models that
  have tunable tasks);
- ``tir-interp``: opt_level 3 lowered to loop IR and executed by the loop-IR interpreter
  (``tvmpy.tir.interpreter``): the loop programs without any code generator;
- ``pytorch``: the model written as a torch module (``torch_emit.to_torch``; only for models it
  translates, and only when torch is installed), exported with ``torch.export`` and imported
  by ``relay.frontend.from_pytorch`` instead of ``from_onnx``, built at opt_level 3 for llvm.
  Eager torch must first agree with onnxruntime: when it does not (or torch cannot run or
  export the module) the emitter or torch is at fault, not tvmpy, and the model is skipped
  for this configuration (``ConfigSkipped``: counted in ``SKIPPED``, logged, no finding).

Comparison (``compare``): outputs must have onnxruntime's shapes and dtypes; integers and bools
compare exactly; floats pass when ``|got - want| <= rtol * |want| + atol * scale`` element-wise,
with ``scale = max |want|`` over the output (so an error is judged against the output's own
magnitude, as ``tvmpy bench`` does) and NaN/Inf where onnxruntime has them. ``rtol``/``atol`` per
dtype (``TOLERANCE``): float32 1e-4 / 1e-5, raised to 1e-4 / 1e-4 when the model accumulates
(convolutions, matrix products, reductions, normalizations: the summation order differs from
onnxruntime's); float16 1e-2 / 1e-2 (tvmpy computes float16 through float32, onnxruntime partly
in float16), also for float32 outputs of a model that computes through float16 anywhere
(``uses_float16``). The generator only makes models whose outputs move by at most a quarter
of these tolerances when every operator's result is perturbed by a few ulps (generator.py).

A finding is any of: a mismatch, an exception from tvmpy on a model onnxruntime runs (with the
compiler stage it came from: frontend, pass, schedule, tir, codegen, runtime), and, when run by
the campaign in a worker process, a hang (timeout) or a dead process (segfault).
"""

from __future__ import annotations

import logging
import random
import traceback
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Config", "CONFIGS", "DEFAULT_CONFIGS", "Finding", "TOLERANCE", "compare",
           "run_reference", "run_config", "run_pytorch", "uses_float16", "check_model",
           "assert_model_ok", "stage_of", "ConfigSkipped", "SKIPPED"]


@dataclass(frozen=True)
class Config:
    """One way of running a model through tvmpy."""

    name: str
    runner: str  # "relay-interp" | "build" | "tir-interp" | "pytorch"
    target: str = "llvm"
    opt_level: int = 3
    pass_config: tuple[tuple[str, Any], ...] = ()
    autotvm_random: bool = False
    # "conv": only for models with a convolution; "tunable": with AutoTVM tasks; "torch": with
    # a torch translation (torch_emit.to_torch), torch installed
    needs: str = ""


CONFIGS: dict[str, Config] = {c.name: c for c in [
    Config("relay-interp", "relay-interp"),
    Config("llvm-O0", "build", "llvm", 0),
    Config("llvm-O3", "build", "llvm", 3),
    Config("c-O3", "build", "c", 3),
    Config("llvm-O3-direct", "build", "llvm", 3, (("relay.x86.winograd", False),), needs="conv"),
    Config("llvm-O3-autotvm", "build", "llvm", 3, autotvm_random=True, needs="tunable"),
    Config("tir-interp", "tir-interp", "llvm", 3),
    Config("pytorch", "pytorch", "llvm", 3, needs="torch"),
]}
DEFAULT_CONFIGS = tuple(CONFIGS)

_ACCUMULATING = {"Conv", "ConvTranspose", "MatMul", "Gemm", "Einsum", "BatchNormalization",
                 "InstanceNormalization", "LayerNormalization", "RMSNormalization", "LpPool",
                 "AveragePool", "GlobalAveragePool", "GlobalLpPool", "LpNormalization",
                 "MeanVarianceNormalization", "Softmax", "LogSoftmax", "CumSum", "CumProd",
                 "LRN", "Det", "GRU", "LSTM", "RNN"}
_REDUCE_PREFIX = "Reduce"

# dtype -> (rtol, atol as a fraction of max |want|), elementwise / accumulating models
TOLERANCE: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {
    "float32": ((1e-4, 1e-5), (1e-4, 1e-4)),
    "float64": ((1e-9, 1e-10), (1e-9, 1e-9)),
    "float16": ((1e-2, 1e-2), (1e-2, 1e-2)),
}


class ConfigSkipped(Exception):
    """A configuration cannot judge this model, through no fault of tvmpy's (eager torch on
    the emitted module disagrees with onnxruntime, or torch cannot run or export it)."""


SKIPPED: Counter = Counter()  # "config: reason" -> models skipped so, in this process
_log = logging.getLogger(__name__)


@dataclass
class Finding:
    """One disagreement or failure of a configuration on a model."""

    kind: str  # "mismatch" | "error" | "timeout" | "crash"
    config: str  # the configuration's name ("*" when the whole check died)
    stage: str  # frontend | pass | schedule | tir | codegen | runtime | graph | unknown
    message: str
    output: int = -1  # the output that differs (mismatches)

    def signature(self) -> str:
        """What two findings share when they are (probably) the same bug: kind, stage and
        the message's first line with its numbers blanked."""
        import re

        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        first = re.sub(r"0x[0-9a-f]+|\d+(\.\d+)?(e[-+]?\d+)?", "#", first)
        return f"{self.kind}:{self.stage}:{first[:160]}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "config": self.config, "stage": self.stage,
                "message": self.message, "output": self.output}


# ---------------------------------------------------------------------------------------------
# comparison


def _accumulates(op_types: Sequence[str]) -> bool:
    return any(t in _ACCUMULATING or t.startswith(_REDUCE_PREFIX) for t in op_types)


def uses_float16(model: Any) -> bool:
    """Does any tensor of ``model`` hold float16 (a graph input, weight, cast target or an
    inferred intermediate)? Then every float output carries float16 rounding."""
    import onnx
    from onnx import TensorProto

    g = model.graph
    if any(t.data_type == TensorProto.FLOAT16 for t in g.initializer):
        return True
    try:
        g = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # noqa: BLE001 - fall back to the declared types
        pass
    return any(v.type.tensor_type.elem_type == TensorProto.FLOAT16
               for v in [*g.input, *g.output, *g.value_info])


def compare(got: Sequence[np.ndarray], want: Sequence[np.ndarray],
            op_types: Sequence[str] = (), low_precision: bool = False) -> str | None:
    """None when ``got`` matches the reference ``want``, else what differs (first output).
    ``low_precision``: the model computes through float16 (float16 tolerance for all floats)."""
    if len(got) != len(want):
        return f"{len(got)} outputs, the reference has {len(want)}"
    acc = _accumulates(op_types)
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return f"output {k}: shape {g.shape}, the reference's is {w.shape}"
        if g.dtype != w.dtype:
            return f"output {k}: dtype {g.dtype}, the reference's is {w.dtype}"
        if w.size == 0:
            continue
        if w.dtype.kind in "biu":
            bad = g != w
            if bad.any():
                i = np.unravel_index(int(np.argmax(bad)), w.shape)
                return (f"output {k}: {int(bad.sum())} of {w.size} elements differ, e.g. at "
                        f"{tuple(int(x) for x in i)}: {g[i]!r} vs {w[i]!r}")
            continue
        key = "float16" if low_precision else str(w.dtype) if str(w.dtype) in TOLERANCE \
            else "float32"
        rtol, atol = TOLERANCE[key][1 if acc else 0]
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        nan_w, nan_g = np.isnan(w64), np.isnan(g64)
        if (nan_w != nan_g).any():
            return f"output {k}: NaN at {int((nan_w != nan_g).sum())} positions where the " \
                   "reference has none (or the reverse)"
        inf_w = np.isinf(w64)
        if (np.isinf(g64) != inf_w).any() or (g64[inf_w] != w64[inf_w]).any():
            return f"output {k}: infinities differ from the reference's"
        fin = ~(nan_w | inf_w)
        if not fin.any():
            continue
        scale = float(np.abs(w64[fin]).max())
        err = np.where(fin, np.abs(g64 - w64), 0.0)
        bound = rtol * np.abs(np.where(fin, w64, 0.0)) + atol * scale
        bad = err > bound
        if bad.any():
            i = np.unravel_index(int(np.argmax(err - bound)), w.shape)
            return (f"output {k}: max error {float(err.max()):.3g} (scale {scale:.3g}, "
                    f"{int(bad.sum())} of {w.size} elements beyond rtol {rtol:g} / atol "
                    f"{atol:g}*scale), e.g. at {tuple(int(x) for x in i)}: "
                    f"{float(g64[i]):.6g} vs {float(w64[i]):.6g}")
    return None


# ---------------------------------------------------------------------------------------------
# running


def run_reference(model: Any, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime's outputs (one thread, all graph optimizations)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return [np.asarray(o) for o in sess.run(None, dict(feeds))]


_STAGES = [("relay/frontend/", "frontend"), ("relay/transform/", "pass"), ("topi/", "schedule"),
           ("te/", "schedule"), ("autotvm/", "schedule"), ("relay/op/", "graph"),
           ("relay/backend/", "graph"), ("relay/", "graph"), ("tir/", "tir"), ("arith/", "tir"),
           ("codegen/", "codegen"), ("runtime/", "runtime"), ("contrib/", "runtime")]


def stage_of(exc: BaseException) -> str:
    """The compiler stage an exception came from: the innermost tvmpy frame's package."""
    frames = traceback.extract_tb(exc.__traceback__)
    for fr in reversed(frames):
        path = fr.filename.replace("\\", "/")
        if "/tvmpy/" not in path or "/tvmpy/testing/" in path:
            continue
        rel = path.split("/tvmpy/", 1)[1]
        for prefix, stage in _STAGES:
            if rel.startswith(prefix):
                return stage
        return "unknown"
    return "unknown"


class _RandomConfigs:
    """An AutoTVM dispatch context answering every workload with a random point of its
    configuration space (seeded), instead of the fallback."""

    def __init__(self, seed: int, target: str) -> None:
        from ...autotvm.task.dispatcher import DispatchContext

        rng = random.Random(seed)
        chosen: dict[Any, Any] = {}

        class Ctx(DispatchContext):
            def _query_inside(self, tgt: Any, workload: Any) -> Any:
                if workload is None:
                    return None
                key = repr(workload)
                if key not in chosen:
                    from ...autotvm.task import create

                    task = create(workload[0], list(workload[1:]), target)
                    space = task.config_space
                    chosen[key] = space.get(rng.randrange(len(space)))
                return chosen[key]

        self.ctx = Ctx()
        self.chosen = chosen


def _import(model: Any) -> tuple[Any, dict]:
    from ...relay.frontend import from_onnx

    return from_onnx(model, freeze_params=False)


def _has_conv(mod: Any) -> bool:
    return "nn.conv2d" in str(mod) or "nn.conv1d" in str(mod)


def run_config(cfg: Config, mod: Any, params: dict, feeds: Mapping[str, np.ndarray],
               seed: int = 0) -> list[np.ndarray]:
    """Outputs of ``mod`` (imported from ONNX) run the way ``cfg`` says."""
    if cfg.runner == "relay-interp":
        from ...relay.interpreter import create_executor

        f = create_executor("debug", mod=mod).evaluate()
        with np.errstate(all="ignore"):
            out = f(**dict(feeds), **params)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        return [np.asarray(o.numpy() if hasattr(o, "numpy") else o) for o in outs]
    from ... import transform
    from ...relay.build_module import build

    ctx = transform.PassContext(opt_level=cfg.opt_level, config=dict(cfg.pass_config))
    rand = _RandomConfigs(seed, cfg.target) if cfg.autotvm_random else None
    with ctx:
        if rand is not None:
            with rand.ctx:
                lib = build(mod, target=cfg.target, params=params)
        else:
            lib = build(mod, target=cfg.target, params=params)
    if cfg.runner == "tir-interp":
        return _run_tir_interp(lib, feeds)
    from ...relay.testing.compare import tvm_runner

    return tvm_runner(lib)(feeds)


def _run_tir_interp(lib: Any, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Run the graph of a built library with its kernels executed by the loop-IR interpreter
    (the PrimFuncs the code generator compiled), one fresh array per graph entry (so neither
    the code generator nor the memory planner is involved)."""
    import json

    from ...tir.interpreter import run

    funcs = {f.name: f for f in getattr(lib, "lowered_funcs", None) or []}
    if not funcs:
        raise RuntimeError("tir-interp: the built library keeps no lowered PrimFuncs")
    graph = json.loads(lib.get_graph_json())
    shapes = graph["attrs"]["shape"][1]
    dtypes = graph["attrs"]["dltype"][1]
    row = graph["node_row_ptr"]
    values: dict[int, np.ndarray] = {}
    params = {k: np.asarray(v.numpy() if hasattr(v, "numpy") else v)
              for k, v in lib.get_params().items()}
    for nid, node in enumerate(graph["nodes"]):
        if node["op"] == "null":
            src = feeds.get(node["name"], params.get(node["name"]))
            if src is None:
                raise RuntimeError(f"tir-interp: no value for graph input {node['name']}")
            values[row[nid]] = np.array(src, dtype=dtypes[row[nid]])
            continue
        ins = [values[row[e[0]] + e[1]] for e in node["inputs"]]
        outs = [np.zeros(shapes[e], dtype=dtypes[e]) for e in range(row[nid], row[nid + 1])]
        fname = node["attrs"]["func_name"]
        if fname == "__nop":
            outs = [ins[0].reshape(outs[0].shape).copy()]
        else:
            run(funcs[fname], [*ins, *outs])
        for k, o in enumerate(outs):
            values[row[nid] + k] = o
    return [values[row[h[0]] + h[1]] for h in graph["heads"]]


def _torch_module(model: Any) -> Any:
    """``model`` as a torch module, or None (torch not installed, or no translation)."""
    try:
        from .torch_emit import to_torch
    except ImportError:  # torch is optional
        return None
    return to_torch(model)


def run_pytorch(cfg: Config, module: Any, feeds: Mapping[str, np.ndarray],
                want: Sequence[np.ndarray], op_types: Sequence[str] = (),
                low_precision: bool = False) -> list[np.ndarray]:
    """tvmpy's outputs for ``module`` (the model's torch translation, taking the feeds
    named in its ``input_names``, else all in order) through ``from_pytorch`` and
    ``relay.build``. Raises ``ConfigSkipped`` when torch cannot run or export the module, or
    eager torch disagrees with ``want``."""
    import torch

    names = list(getattr(module, "input_names", feeds))
    feeds = {n: feeds[n] for n in names}
    args = tuple(torch.from_numpy(np.array(feeds[n], copy=True)) for n in names)
    try:
        with torch.no_grad():
            eager = [np.asarray(o.numpy()) for o in module(*args)]
        program = torch.export.export(module, args)
    except Exception as exc:  # noqa: BLE001 - torch's (or the emitter's) fault
        raise ConfigSkipped(f"torch: {type(exc).__name__}: {exc}".splitlines()[0]) from exc
    diff = compare(eager, want, op_types, low_precision)
    if diff is not None:
        raise ConfigSkipped(f"eager torch disagrees with onnxruntime: {diff}")

    from ... import transform
    from ...relay.build_module import build
    from ...relay.frontend import from_pytorch
    from ...relay.testing.compare import tvm_runner

    infos = [(n, (list(np.shape(feeds[n])), str(np.asarray(feeds[n]).dtype))) for n in names]
    mod, params = from_pytorch(program, infos)
    with transform.PassContext(opt_level=cfg.opt_level, config=dict(cfg.pass_config)):
        lib = build(mod, target=cfg.target, params=params)
    return tvm_runner(lib)(feeds)


def _applicable(cfg: Config, mod: Any, tunable: Callable[[], bool]) -> bool:
    if cfg.needs == "conv":
        return _has_conv(mod)
    if cfg.needs == "tunable":
        return tunable()
    return True


def check_model(model: Any, feeds: Mapping[str, np.ndarray],
                configs: Sequence[str] = DEFAULT_CONFIGS, seed: int = 0,
                reference: Sequence[np.ndarray] | None = None,
                skipped: list[str] | None = None) -> list[Finding]:
    """Every finding of ``configs`` on ``model`` with inputs ``feeds`` (an empty list: all
    agree with onnxruntime). The reference may be given (the campaign already ran it).
    Configurations that could not judge the model (``ConfigSkipped``) are appended to
    ``skipped`` as ``"config: reason"`` and counted in ``SKIPPED``."""
    op_types = [n.op_type for n in model.graph.node]
    low = uses_float16(model)
    want = list(reference) if reference is not None else run_reference(model, feeds)
    findings: list[Finding] = []
    mod = params = None
    if any(CONFIGS[name].runner != "pytorch" for name in configs):
        try:
            mod, params = _import(model)
        except Exception as exc:  # noqa: BLE001 - every failure is a finding
            findings.append(Finding("error", "*", stage_of(exc), f"{type(exc).__name__}: {exc}"))
            if all(CONFIGS[name].runner != "pytorch" for name in configs):
                return findings
    tunable_cache: list[bool] = []
    torch_cache: list[Any] = []

    def torch_module() -> Any:
        if not torch_cache:
            torch_cache.append(_torch_module(model))
        return torch_cache[0]

    def tunable() -> bool:
        if not tunable_cache:
            from ...autotvm.task import extract_from_program

            try:
                tunable_cache.append(bool(extract_from_program(mod, params, "llvm")))
            except Exception:  # noqa: BLE001 - the builds report it
                tunable_cache.append(False)
        return tunable_cache[0]

    for name in configs:
        cfg = CONFIGS[name]
        try:
            if cfg.runner == "pytorch":
                module = torch_module()
                if module is None:
                    continue
                got = run_pytorch(cfg, module, feeds, want, op_types, low)
            else:
                if mod is None or not _applicable(cfg, mod, tunable):
                    continue
                got = run_config(cfg, mod, params, feeds, seed)
        except ConfigSkipped as exc:
            SKIPPED[f"{name}: {str(exc).split(':')[0]}"] += 1
            _log.info("%s skipped: %s", name, exc)
            if skipped is not None:
                skipped.append(f"{name}: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001
            findings.append(Finding("error", name, stage_of(exc),
                                    f"{type(exc).__name__}: {exc}"))
            continue
        diff = compare(got, want, op_types, low)
        if diff is not None:
            out = int(diff.split(":")[0].split()[-1]) if diff.startswith("output ") else -1
            findings.append(Finding("mismatch", name, "unknown", diff, out))
    return findings


def assert_model_ok(model: Any, feeds: Mapping[str, np.ndarray],
                    configs: Sequence[str] = DEFAULT_CONFIGS, seed: int = 0) -> None:
    """Raise AssertionError listing the findings (the form regression tests use)."""
    findings = check_model(model, feeds, configs, seed)
    if findings:
        lines = [f"{f.config}: {f.kind} ({f.stage}): {f.message}" for f in findings]
        raise AssertionError("tvmpy disagrees with onnxruntime:\n  " + "\n  ".join(lines))


@dataclass
class Outcome:
    """What one model's check produced (the campaign's unit of work)."""

    seed: int
    ops: list[str]
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    skipped: str = ""  # why the model was not checked (the generator's fault, not tvmpy's)
