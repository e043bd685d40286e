"""Random well-typed ONNX models for the whole-compiler fuzzer, grown the NNSmith way.

A model starts from one or two graph inputs and grows a DAG one operator at a time: an operator
spec (``opspecs.SPECS``) picks operands from the tensors made so far whose shapes and dtypes
satisfy its constraints (creating broadcast partners, weights and index tensors as it needs
them), draws its attributes from their valid domain, and is *executed* on the tensors' concrete
values with onnx's reference evaluator. That gives the new tensors' shapes and values without a
separate shape calculus, and lets every insertion be checked for being well posed.

Well-posed values (instead of NNSmith's gradient search; simpler and documented here): the
generator knows every tensor's value on the model's actual inputs, so it refuses an insertion

- whose outputs are not finite or exceed ``MAX_MAGNITUDE`` (overflow, exp of large values);
- a sum (Add, Sub, reductions, matrix products, convolutions) whose result is tiny beside its
  terms (``CANCELLATION``): the result is rounding noise, whatever its order;
- whose result would flip under a tiny perturbation of its inputs (``Plan.check``): rounding
  functions and float->int casts near an integer, comparisons of nearly equal values, arg-max /
  top-k / hard-max with near ties, division, log, sqrt, reciprocal and the like near their
  poles, normalizations over nearly constant data. The margin is relative (``margin``: 1e-3
  for float32, 3e-2 for float16), far above the 1e-6 differences of summation order.

Beyond those per-operator margins, every tensor has a *noisy twin*: its value recomputed from
the inputs' twins with relative noise ``NOISE`` injected after every operator (as if each
operator were a different library's kernel). An insertion whose outputs' twins move by more
than ``STABILITY`` of the comparison's tolerance (or, for ints and bools, change at all) is
ill-conditioned and refused: this catches amplification along chains (a Tan near its pole
feeding a Cosh, a cancelling sum feeding a division) that no single operator's margin sees.

A refused insertion is retried with another operator or operands. Operands outside an
operator's domain (a ``Log`` with no positive tensor around) are made by an adapter
(``Abs`` then ``Add`` of a positive constant) or taken fresh from a new leaf.

``generate(seed)`` is deterministic: the same seed gives the same model and inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Case", "Builder", "Plan", "generate", "MAX_MAGNITUDE", "OPSET"]

OPSET = 18
# relative noise injected after each operator (float32 / float16 tensors): several ulps, the
# size of the differences between libraries' kernels (approximated transcendentals, fused or
# reordered sums)
NOISE = (2e-6, 1e-3)
# the twin must stay within STABILITY x the comparison's tolerance (rtol, atol x max |value|)
# of oracles.TOLERANCE (elementwise float32; float16)
STABILITY = 0.25
STABILITY_TOL = ((1e-4, 1e-5), (1e-2, 1e-2))
# how often an operator is tried relative to the others: the compute-heavy operators that
# have their own schedules, layouts and tuning templates are worth more models
WEIGHTS = {"Conv": 6.0, "MatMul": 4.0, "Gemm": 3.0, "ConvTranspose": 2.0, "MaxPool": 2.0,
           "AveragePool": 2.0, "Einsum": 2.0, "Softmax": 2.0, "BatchNormalization": 2.0,
           "LayerNormalization": 2.0, "Transpose": 2.0, "Reshape": 2.0, "Add": 2.0, "Mul": 2.0}
MAX_MAGNITUDE = 1e4
MAX_ELEMENTS = 4096
_DIMS = (1, 1, 2, 3, 4, 5, 6, 7, 8, 8, 11, 13, 16)


@dataclass
class Case:
    """A generated model with the inputs it is run on."""

    seed: int
    model: Any  # onnx.ModelProto
    feeds: dict[str, np.ndarray]
    ops: list[str]  # the op type of every node, in order

    def __repr__(self) -> str:
        return f"Case(seed={self.seed}, ops={self.ops})"


@dataclass
class Plan:
    """An operator instance proposed by a spec: the node and how to judge its values."""

    op: str
    inputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    n_out: int = 1
    # (input values, output values) -> is the result well posed? (None: always)
    check: Callable[[list[np.ndarray | None], list[np.ndarray]], bool] | None = None


def margin(dtype: Any) -> float:
    """The relative distance from a discontinuity a value needs to count as well posed."""
    return 3e-2 if np.dtype(dtype) == np.float16 else 1e-3


class Builder:
    """The model under construction: tensors with known values, nodes, leaves."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.values: dict[str, np.ndarray] = {}
        self.pool: list[str] = []  # tensors operators may consume, oldest first
        self.inputs: list[str] = []  # fed at run time
        self.inits: list[str] = []  # initializers (weights, shape operands)
        self.nodes: list[Any] = []
        self._n = 0
        # every tensor's value recomputed with relative noise injected after each operator
        # (``NOISE``): how far an output moves measures how ill-conditioned it is
        self.twins: dict[str, np.ndarray] = {}
        self.low_precision: set[str] = set()  # tensors computed through float16
        self._noise = np.random.default_rng(int(rng.integers(2 ** 63)))

    # -- names and values ---------------------------------------------------------------------
    def fresh(self, prefix: str = "t") -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def val(self, name: str) -> np.ndarray:
        return self.values[name]

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.values[name].shape)

    def dtype(self, name: str) -> np.dtype:
        return self.values[name].dtype

    # -- choosing operands --------------------------------------------------------------------
    def candidates(self, dtypes: Sequence[Any] = ("float32",), min_rank: int = 0,
                   max_rank: int = 6, pred: Callable[[np.ndarray], bool] | None = None
                   ) -> list[str]:
        ok = {np.dtype(d) for d in dtypes}
        return [t for t in self.pool
                if self.values[t].dtype in ok and min_rank <= self.values[t].ndim <= max_rank
                and (pred is None or pred(self.values[t]))]

    def pick(self, dtypes: Sequence[Any] = ("float32",), min_rank: int = 0, max_rank: int = 6,
             pred: Callable[[np.ndarray], bool] | None = None) -> str | None:
        """A pool tensor meeting the constraints, recent ones preferred (deep graphs)."""
        cands = self.candidates(dtypes, min_rank, max_rank, pred)
        if not cands:
            return None
        w = np.arange(1, len(cands) + 1, dtype=np.float64) ** 1.5
        return cands[int(self.rng.choice(len(cands), p=w / w.sum()))]

    def choose(self, seq: Sequence[Any]) -> Any:
        return seq[int(self.rng.integers(len(seq)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    # -- new tensors --------------------------------------------------------------------------
    def random_value(self, shape: Sequence[int], dtype: Any, low: float = -3.0,
                     high: float = 3.0) -> np.ndarray:
        dt = np.dtype(dtype)
        if dt == np.bool_:
            return self.rng.random(shape) < 0.5
        if dt.kind in "iu":
            lo = max(int(np.floor(low)), 0 if dt.kind == "u" else -(2 ** 20))
            return self.rng.integers(lo, max(int(np.ceil(high)), lo + 1), size=shape).astype(dt)
        return self.rng.uniform(low, high, size=shape).astype(dt)

    def const(self, value: np.ndarray, prefix: str = "c") -> str:
        """An initializer (weights, shape operands, indices)."""
        name = self.fresh(prefix)
        self.values[name] = self.twins[name] = np.asarray(value)
        if self.values[name].dtype == np.float16:
            self.low_precision.add(name)
        self.inits.append(name)
        return name

    def leaf(self, shape: Sequence[int], dtype: Any = "float32", low: float = -3.0,
             high: float = 3.0, feed: bool | None = None) -> str:
        """A new tensor of random values: a graph input or an initializer."""
        value = self.random_value(tuple(shape), dtype, low, high)
        if feed is None:
            feed = self.chance(0.5)
        if not feed:
            return self.const(value)
        name = self.fresh("x")
        self.values[name] = self.twins[name] = value
        if value.dtype == np.float16:
            self.low_precision.add(name)
        self.inputs.append(name)
        self.pool.append(name)
        return name

    def operand(self, shape: Sequence[int], dtype: Any, low: float = -3.0, high: float = 3.0,
                pred: Callable[[np.ndarray], bool] | None = None) -> str:
        """A tensor of exactly ``shape``/``dtype``: a pool tensor when one fits, else a leaf."""
        shape = tuple(shape)
        fits = [t for t in self.candidates((dtype,), pred=pred) if self.shape(t) == shape]
        if fits and self.chance(0.6):
            return self.choose(fits)
        return self.leaf(shape, dtype, low, high)

    def broadcast_partner(self, a: str, low: float = -3.0, high: float = 3.0,
                          pred: Callable[[np.ndarray], bool] | None = None) -> str:
        """A second operand for an elementwise op on ``a``: same shape, or one that broadcasts
        with it (size-1 axes, fewer leading axes, or axes where ``a`` has size 1)."""
        shape, dt = self.shape(a), self.dtype(a)
        fits = [t for t in self.candidates((dt,), pred=pred) if t != a and _broadcasts(
            self.shape(t), shape)]
        if fits and self.chance(0.5):
            return self.choose(fits)
        r = self.rng.random()
        if r < 0.3:
            new = list(shape)
        else:
            new = [1 if self.chance(0.5) else d for d in shape]
            for k, d in enumerate(shape):  # grow where a has size 1 (output bigger than both)
                if d == 1 and self.chance(0.3):
                    new[k] = int(self.choose((2, 3, 5)))
            if new and self.chance(0.3):
                new = new[int(self.rng.integers(len(new) + 1)):]
        if int(np.prod(np.broadcast_shapes(tuple(new), shape))) > MAX_ELEMENTS:
            new = [1] * len(new)
        return self.leaf(new, dt, low, high)

    # -- inserting ----------------------------------------------------------------------------
    def try_insert(self, plan: Plan) -> bool:
        """Run ``plan`` on the known values; keep it when it is well posed."""
        from onnx import helper

        ins = [self.values[i] if i else None for i in plan.inputs]
        outs = [self.fresh() for _ in range(plan.n_out)]
        node = helper.make_node(plan.op, plan.inputs, outs, name=f"n{len(self.nodes)}_{plan.op}",
                                **plan.attrs)
        try:
            with np.errstate(all="ignore"):
                got = _evaluate(node, {i: v for i, v in zip(plan.inputs, ins) if i})
        except Exception:  # noqa: BLE001 - an invalid combination: the spec's fault, retried
            return False
        if len(got) != len(outs) or not all(_healthy(v) for v in got):
            return False
        if not _agrees_with_shape_inference(node, ins, got, self.inits):
            return False
        if not _no_cancellation(node, plan.inputs, ins, got):
            return False
        if plan.check is not None:
            try:
                with np.errstate(all="ignore"):
                    if not plan.check(ins, got):
                        return False
            except Exception:  # noqa: BLE001
                return False
        low = any(i in self.low_precision for i in plan.inputs if i) or any(
            v.dtype == np.float16 for v in got)
        twins = self._twin_outputs(node, plan.inputs, low)
        if twins is None or not all(_stable(v, t, low) for v, t in zip(got, twins)):
            return False
        self.nodes.append(node)
        for name, v, t in zip(outs, got, twins):
            self.values[name] = v
            self.twins[name] = t
            if low:
                self.low_precision.add(name)
            self.pool.append(name)
        return True

    def _twin_outputs(self, node: Any, inputs: Sequence[str], low: bool
                      ) -> list[np.ndarray] | None:
        """The node on the inputs' noisy twins, its float outputs perturbed once more."""
        try:
            with np.errstate(all="ignore"):
                outs = _evaluate(node, {i: self.twins[i] for i in inputs if i})
        except Exception:  # noqa: BLE001 - a twin that breaks the op: not well posed
            return None
        noisy = []
        for o in outs:
            if o.dtype.kind == "f" and o.size:
                rel = NOISE[1] if low else NOISE[0]
                o = (o * (1 + rel * self._noise.uniform(-1, 1, o.shape))).astype(o.dtype)
            noisy.append(o)
        return noisy


def _stable(value: np.ndarray, twin: np.ndarray, low: bool) -> bool:
    """The twin is within ``STABILITY`` of the comparison's tolerance of the value (ints and
    bools: equal)."""
    if value.shape != twin.shape:
        return False
    if value.dtype.kind != "f":
        return bool(np.array_equal(value, twin))
    if value.size == 0:
        return True
    v, t = value.astype(np.float64), twin.astype(np.float64)
    if not np.isfinite(t).all():
        return False
    rtol, atol = STABILITY_TOL[1] if low else STABILITY_TOL[0]
    scale = float(np.abs(v).max())
    return bool((np.abs(v - t) <= STABILITY * (rtol * np.abs(v) + atol * scale)).all())


def _broadcasts(small: Sequence[int], big: Sequence[int]) -> bool:
    try:
        return tuple(np.broadcast_shapes(tuple(small), tuple(big))) == tuple(big)
    except ValueError:
        return False


def _healthy(v: np.ndarray) -> bool:
    v = np.asarray(v)
    if v.size > 4 * MAX_ELEMENTS or v.dtype == object:
        return False
    if v.dtype.kind == "f":
        return bool(np.isfinite(v).all() and (v.size == 0 or np.abs(v).max() <= MAX_MAGNITUDE))
    if v.dtype.kind in "iu":
        return bool(v.size == 0 or np.abs(v.astype(np.int64)).max() <= 2 ** 24)
    return v.dtype.kind == "b"


_SUMMING = {"Add", "Sub", "Sum", "Mean", "ReduceSum", "ReduceMean", "CumSum", "MatMul", "Gemm",
            "Conv", "ConvTranspose", "Einsum"}
CANCELLATION = 1e-3


def _no_cancellation(node: Any, names: Sequence[str], ins: list[np.ndarray | None],
                     outs: list[np.ndarray]) -> bool:
    """A sum whose result is tiny beside its terms (``max |out| < CANCELLATION * max`` of the
    same op on the terms' magnitudes) is rounding noise: ill posed to compare."""
    if node.op_type not in _SUMMING or outs[0].dtype.kind != "f" or outs[0].size == 0:
        return True
    from onnx import helper

    mag_node = node
    if node.op_type == "Sub":
        mag_node = helper.make_node("Add", list(node.input), list(node.output))
    feeds = {n: (np.abs(v) if v.dtype.kind == "f" else v)
             for n, v in zip(names, ins) if n and v is not None}
    try:
        with np.errstate(all="ignore"):
            mag = _evaluate(mag_node, feeds)[0]
    except Exception:  # noqa: BLE001
        return False
    top = float(np.abs(mag.astype(np.float64)).max())
    return top == 0.0 or float(np.abs(outs[0].astype(np.float64)).max()) >= CANCELLATION * top


def _agrees_with_shape_inference(node: Any, ins: list[np.ndarray | None],
                                 outs: list[np.ndarray], consts: Sequence[str]) -> bool:
    """onnx's shape inference gives the evaluated outputs' dtypes and shapes (the reference
    evaluator has bugs of its own, e.g. GlobalMaxPool on 1-D maps drops the channel axis)."""
    from onnx import defs, helper, numpy_helper, shape_inference

    try:
        schema = defs.get_schema(node.op_type, OPSET, "")
        types = {i: helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(v.dtype),
                                                  list(v.shape))
                 for i, v in zip(node.input, ins) if i and v is not None}
        data = {i: numpy_helper.from_array(np.asarray(v), i)
                for i, v in zip(node.input, ins) if i and v is not None and i in consts}
        inferred = shape_inference.infer_node_outputs(
            schema, node, types, data, opset_imports=[helper.make_opsetid("", OPSET)])
    except Exception:  # noqa: BLE001
        return False
    for name, v in zip(node.output, outs):
        t = inferred.get(name)
        if t is None:
            continue
        tt = t.tensor_type
        if tt.elem_type and tt.elem_type != helper.np_dtype_to_tensor_dtype(v.dtype):
            return False
        if tt.HasField("shape"):
            dims = tt.shape.dim
            if len(dims) != v.ndim:
                return False
            if any(d.HasField("dim_value") and d.dim_value != s for d, s in zip(dims, v.shape)):
                return False
    return True


_FIXED_OPS: list[Any] = []


def _fixed_ops() -> list[Any]:
    """Replacements for reference-evaluator kernels found wrong against onnxruntime and the
    operator's definition (onnx 1.23: LpNormalization with p=1 divides by the L2 norm; LRN is
    off by ~1e-3)."""
    if not _FIXED_OPS:
        from onnx.reference.op_run import OpRun

        class LpNormalization(OpRun):
            def _run(self, x, axis=None, p=None):  # type: ignore[override]
                axis = -1 if axis is None else axis
                p = 2 if p is None else p
                a = np.abs(x)
                norm = a.sum(axis=axis, keepdims=True) if p == 1 else \
                    np.sqrt((a * a).sum(axis=axis, keepdims=True))
                return ((x / norm).astype(x.dtype),)

        class LRN(OpRun):
            def _run(self, x, alpha=None, beta=None, bias=None, size=None):  # type: ignore[override]
                alpha = 1e-4 if alpha is None else alpha
                beta = 0.75 if beta is None else beta
                bias = 1.0 if bias is None else bias
                c = x.shape[1]
                sq = np.zeros_like(x, dtype=np.float64)
                for k in range(c):
                    lo, hi = max(0, k - (size - 1) // 2), min(c - 1, k + -(-(size - 1) // 2))
                    sq[:, k] = (x[:, lo:hi + 1].astype(np.float64) ** 2).sum(axis=1)
                return ((x / (bias + alpha / size * sq) ** beta).astype(x.dtype),)

        _FIXED_OPS.extend([LpNormalization, LRN])
    return _FIXED_OPS


def _evaluate(node: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnx's reference evaluator on one node at opset ``OPSET``."""
    from onnx.reference import ReferenceEvaluator

    ev = ReferenceEvaluator(node, opsets={"": OPSET}, new_ops=_fixed_ops())
    return [np.asarray(o) for o in ev.run(None, feeds)]


# ---------------------------------------------------------------------------------------------


def _initial_inputs(b: Builder) -> None:
    for _ in range(1 + int(b.rng.random() < 0.4)):
        rank = int(b.choose((1, 2, 2, 3, 3, 4, 4, 4, 4, 5)))
        shape = [int(b.choose(_DIMS)) for _ in range(rank)]
        while int(np.prod(shape)) > MAX_ELEMENTS:
            shape[int(np.argmax(shape))] //= 2
        r = b.rng.random()
        dtype = ("float32" if r < 0.78 else "float16" if r < 0.84 else "int64" if r < 0.9
                 else "int32" if r < 0.95 else "bool")
        b.leaf(shape, dtype, feed=True)


def generate(seed: int, max_nodes: int = 10, specs: Sequence[str] | None = None) -> Case:
    """A random model of 1..``max_nodes`` operators (seeded), with its inputs.

    ``specs`` restricts the operator catalog to those names (default: all of ``SPECS``).
    """
    from onnx import helper, numpy_helper

    from .opspecs import SPECS

    rng = np.random.default_rng(seed)
    b = Builder(rng)
    _initial_inputs(b)
    names = sorted(SPECS) if specs is None else list(specs)
    unknown = [n for n in names if n not in SPECS]
    if unknown:
        raise ValueError(f"unknown operator specs: {', '.join(unknown)}")
    weights = np.array([WEIGHTS.get(n, 1.0) for n in names])
    weights /= weights.sum()
    want = int(rng.integers(1, max_nodes + 1))
    attempts = 0
    while len(b.nodes) < want and attempts < 40 * want:
        attempts += 1
        spec = SPECS[names[int(rng.choice(len(names), p=weights))]]
        try:
            with np.errstate(all="ignore"):
                plan = spec(b)
        except (ValueError, IndexError, ZeroDivisionError):  # no fitting operands / attributes
            plan = None
        if plan is not None:
            b.try_insert(plan)
    if not b.nodes:
        raise RuntimeError(f"seed {seed}: no operator could be inserted")
    consumed = {i for n in b.nodes for i in n.input}
    produced = [o for n in b.nodes for o in n.output]
    outputs = [o for o in produced if o not in consumed]
    if b.chance(0.2):  # sometimes an intermediate tensor is an output too
        outputs.append(b.choose(produced))
    outputs = list(dict.fromkeys(outputs))

    def vi(name: str) -> Any:
        v = b.values[name]
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype),
                                             list(v.shape))

    used = consumed | set(outputs)
    inputs = [i for i in b.inputs if i in used]
    inits = [numpy_helper.from_array(np.asarray(b.values[i]), i) for i in b.inits if i in used]
    graph = helper.make_graph(b.nodes, f"fuzz_{seed}", [vi(i) for i in inputs],
                              [vi(o) for o in outputs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="tvmpy.fuzz")
    model.ir_version = min(model.ir_version, 10)
    import onnx

    onnx.checker.check_model(model, full_check=True)
    feeds = {i: np.asarray(b.values[i]) for i in inputs}
    return Case(seed, model, feeds, [n.op_type for n in b.nodes])
