"""ONNX conformance: onnx's own backend node tests run through tvmpy's ONNX backend.

The test cases are generated in process from the installed onnx
(``onnx.backend.test.loader.load_node_model_tests()``: one model + inputs + expected outputs per
case, ~1,880 cases in onnx 1.23), prepared with ``tvmpy.contrib.onnx_backend.TvmpyBackend`` and
compared with onnx's own check (``onnx.backend.test.runner.Runner.assert_similar_outputs``:
same count, shapes and dtypes, values within the case's rtol/atol).

Every case gets one outcome:

- ``pass``
- ``fail``        ran, but the outputs differ (values, shape or dtype): onnx's assertion message
- ``unsupported`` the importer refused an operator type (``OpNotImplemented``)
- ``error``       any other exception (its type and first line), or ``timeout``
- ``skipped``     the case is in a skip category below (out of the issue's scope)

Every graph input is fed at run time, as onnx's own runner does, with one build per test model
(shape-like inputs become ``relay.op.dyn`` operators; ``--bind-inputs`` is the older specializing
mode that imports them as constants). A pass's detail says when the graph executor handed the
model to the VM (control flow, data-dependent shapes) and which operators, if any, the VM ran with
their numpy implementation instead of a kernel (``host: ...``); the summary counts those passes.

Pass rate = pass / (all cases - skipped). Usage::

    python bench/onnx_conformance.py [--executor graph|debug|vm] [--filter REGEX] [--out FILE]

prints the totals, a per-operator table, the most frequent failure reasons, and writes a JSON
summary (``bench/onnx_conformance_<executor>.json`` by default: counts, per operator, the
passing case names and every other case's outcome).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import re
import signal
import sys
import time
import warnings
from typing import Any

import numpy as np

# Skip categories: (name, reason). A case is skipped when its model uses one of the operator
# types / value types listed for the category (see `skip_category`).
SKIP_CATEGORIES = {
    "strings": "string tensors and string operators (no string dtype in tvmpy)",
    "training": "ai.onnx.preview.training operators (Adagrad, Adam, Momentum, Gradient)",
    "randomness": "operators whose outputs are random, so no fixed expected output exists: "
                  "Bernoulli, RandomNormal[Like], RandomUniform[Like], Multinomial, Dropout in "
                  "training mode with ratio > 0",
}

_RANDOM_OPS = {"Bernoulli", "RandomNormal", "RandomNormalLike", "RandomUniform",
               "RandomUniformLike", "Multinomial"}
_STRING_OPS = {"StringNormalizer", "StringConcat", "StringSplit", "RegexFullMatch"}
_TRAINING_DOMAIN = "ai.onnx.preview.training"


# element types tvmpy holds as storage-only dtypes (tvmpy.ir.dtype.STORAGE_ONLY) ...
LOW_PRECISION = ["FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "BFLOAT16",
                 "FLOAT4E2M1", "FLOAT8E8M0", "INT4", "UINT4", "INT2", "UINT2"]


def _onnx_types(names: list[str]) -> set[int]:
    from onnx import TensorProto

    return {getattr(TensorProto, n) for n in names if hasattr(TensorProto, n)}


def _low_precision_types() -> set[int]:
    return _onnx_types(LOW_PRECISION)


def uses_low_precision(model: Any) -> bool:
    """Whether a test model has a tensor, attribute or Cast target of a LOW_PRECISION type."""
    return bool(_tensor_elem_types(model) & _low_precision_types())


def _value_types(model: Any) -> list[Any]:
    """TypeProtos of every graph input/output/value_info, and of every node's tensor attribute."""
    g = model.graph
    return [vi.type for vi in list(g.input) + list(g.output) + list(g.value_info)]


def _tensor_elem_types(model: Any) -> set[int]:
    from onnx import AttributeProto

    out = {init.data_type for init in model.graph.initializer}
    for t in _value_types(model):
        if t.HasField("tensor_type"):
            out.add(t.tensor_type.elem_type)
    for node in _all_nodes(model):
        for at in node.attribute:
            if at.type == AttributeProto.TENSOR:
                out.add(at.t.data_type)
            elif at.name in ("to",) and at.type == AttributeProto.INT:
                out.add(at.i)
    return out


def _all_nodes(model: Any) -> list[Any]:
    nodes = list(model.graph.node)
    for f in model.functions:
        nodes += list(f.node)
    return nodes


def _random_dropout(model: Any, inputs: list | None) -> bool:
    """A Dropout in training mode with a ratio > 0 (values from initializers, Constant nodes or
    the case's inputs; a value not found counts as random)."""
    from onnx import numpy_helper

    known = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].type == 4:  # TENSOR
            known[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    fed = [vi.name for vi in model.graph.input if vi.name not in known]
    for name, v in zip(fed, inputs or []):
        if isinstance(v, (np.ndarray, np.generic)):  # (not a sequence or an absent optional)
            known[name] = np.asarray(v)
    for n in _all_nodes(model):
        if n.op_type != "Dropout" or len(n.input) < 3 or not n.input[2]:
            continue
        t = known.get(n.input[2])
        if t is not None and not bool(np.asarray(t).reshape(-1)[0]):
            continue
        r = known.get(n.input[1]) if n.input[1] else np.float32(0.5)
        if r is None or float(np.asarray(r).reshape(-1)[0]) > 0:
            return True
    return False


def skip_category(model: Any, inputs: list | None = None) -> str | None:
    """The skip category of a test model (``inputs``: the case's input values, which say whether
    a Dropout runs in training mode), or None when it is in scope."""
    from onnx import TensorProto

    nodes = _all_nodes(model)
    ops = {n.op_type for n in nodes}
    if any(n.domain == _TRAINING_DOMAIN for n in nodes):
        return "training"
    if ops & _RANDOM_OPS or _random_dropout(model, inputs):
        return "randomness"
    elems = _tensor_elem_types(model)
    if ops & _STRING_OPS or TensorProto.STRING in elems:
        return "strings"
    return None


def group_op(case: Any, by_name: dict[str, Any]) -> str:
    """The operator a case tests: its node's type (for an `_expanded` case, its base case's)."""
    base = re.sub(r"_expanded(_ver\d+)?$", "", case.name)
    model = by_name.get(base, case).model
    nodes = model.graph.node
    if len(nodes) == 1 or base != case.name:
        n = nodes[0]
    else:  # several nodes: the one that is not a Constant
        n = next((m for m in nodes if m.op_type != "Constant"), nodes[0])
    return n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"


def normalize(tensors: list) -> list[np.ndarray]:
    """TensorProtos (some generated cases hold them) to numpy arrays, as onnx's runner does."""
    from onnx import TensorProto, numpy_helper

    return [numpy_helper.to_array(t) if isinstance(t, TensorProto) else t for t in tensors]


class _Timeout(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def _short(msg: str, limit: int = 160) -> str:
    line = next((ln.strip() for ln in str(msg).splitlines() if ln.strip()), "")
    line = re.sub(r"0x[0-9a-f]+", "0x..", line)
    return line[:limit]


def run_case(case: Any, executor: str, timeout: int, opt_level: int | None = None,
             bind_inputs: bool = False) -> tuple[str, str]:
    """(outcome, detail) of one case. A pass's detail says how it ran when that is not plain
    compiled code: ``vm`` (the graph executor handed the model to the VM) and ``host: ops``
    (operators the VM ran with their numpy implementation, no kernel)."""
    from onnx.backend.test.runner import Runner

    from tvmpy.contrib.onnx_backend import TvmpyBackend
    from tvmpy.relay.frontend import OpNotImplemented

    inputs, ref = (normalize(t) for t in case.data_sets[0])
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(timeout)
    try:
        rep = TvmpyBackend.prepare(case.model, "CPU", executor=executor, opt_level=opt_level,
                                   bind_inputs=bind_inputs)
        with np.errstate(all="ignore"):
            out = list(rep.run(inputs))
        signal.alarm(0)
        Runner.assert_similar_outputs(ref, out, rtol=case.rtol, atol=case.atol)
    except _Timeout:
        return "error", f"timeout after {timeout} s"
    except OpNotImplemented as e:
        ops = re.findall(r"^\s+([\w.]+):", str(e), flags=re.M)
        return "unsupported", ",".join(ops)
    except AssertionError as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        msg = next((ln for ln in lines if ln.startswith(("Mismatched", "Output", "Items", "(s"))),
                   lines[0] if lines else "AssertionError")
        return "fail", _short(msg)
    except Exception as e:  # noqa: BLE001 -- every failure is recorded, none stops the run
        return "error", f"{type(e).__name__}: {_short(str(e))}"
    finally:
        signal.alarm(0)
    how = []
    if executor == "graph" and rep.executor_used != "graph":
        how.append(rep.executor_used)
    if rep.host_ops:
        how.append("host: " + ",".join(rep.host_ops))
    return "pass", "; ".join(how)


def _machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                         model)
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical cpus"


def load_cases() -> list[Any]:
    from onnx.backend.test.loader import load_node_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            return load_node_model_tests()


def _normalize_reason(detail: str) -> str:
    """Group similar messages: strip quoted names, numbers and shapes."""
    s = re.sub(r"'[^']*'", "'_'", detail)
    s = re.sub(r"\([^()]*\)", "(_)", s)
    s = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", s)
    return s[:120]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--executor", choices=["graph", "debug", "vm"], default=None,
                    help="default: $TVMPY_ONNX_BACKEND_EXECUTOR, else graph when relay.build "
                         "exists, else debug")
    ap.add_argument("--opt-level", type=int, default=None,
                    help="relay.build / relay.vm.compile opt_level (default 2)")
    ap.add_argument("--filter", default=None, help="regex on the case name")
    ap.add_argument("--low-precision", action="store_true",
                    help="only the cases with a bfloat16/float8/float4/int4/uint4/int2/uint2 "
                         "tensor")
    ap.add_argument("--bind-inputs", action="store_true",
                    help="the specializing mode: bind shape-like graph inputs as constants "
                         "(one build per their values); default: every input fed at run time, "
                         "one build per model")
    ap.add_argument("--timeout", type=int, default=60, help="seconds per case")
    ap.add_argument("--out", default=None, help="JSON summary path")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)

    import onnx

    from tvmpy.contrib.onnx_backend import default_executor

    executor = args.executor or default_executor()
    tag = executor if args.opt_level is None else f"{executor}_opt{args.opt_level}"
    cases = load_cases()
    by_name = {c.name: c for c in cases}
    if args.filter:
        cases = [c for c in cases if re.search(args.filter, c.name)]
    if args.low_precision:
        cases = [c for c in cases if uses_low_precision(c.model)]
    results: list[dict] = []
    t0 = time.time()
    for k, case in enumerate(cases):
        cat = skip_category(case.model, normalize(case.data_sets[0][0]))
        op = group_op(case, by_name)
        t = time.time()
        if cat is not None:
            outcome, detail = "skipped", cat
        else:
            outcome, detail = run_case(case, executor, args.timeout, args.opt_level,
                                       args.bind_inputs)
        results.append({"name": case.name, "op": op, "outcome": outcome, "detail": detail,
                        "seconds": round(time.time() - t, 3)})
        if not args.quiet:
            print(f"[{k + 1}/{len(cases)}] {outcome:11s} {case.name} {detail}"[:200], flush=True)
    elapsed = time.time() - t0

    counts = collections.Counter(r["outcome"] for r in results)
    skipped = collections.Counter(r["detail"] for r in results if r["outcome"] == "skipped")
    denom = len(results) - counts["skipped"]
    rate = counts["pass"] / denom if denom else 0.0
    per_op: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in results:
        per_op[r["op"]][r["outcome"]] += 1
    reasons = collections.Counter(
        (r["outcome"], _normalize_reason(r["detail"])) for r in results
        if r["outcome"] in ("fail", "error"))
    unsupported = collections.Counter(
        op for r in results if r["outcome"] == "unsupported" for op in r["detail"].split(","))

    print(f"\nONNX conformance (onnx {onnx.__version__}, executor {tag}): "
          f"{len(results)} node test cases in {elapsed:.0f} s")
    for o in ("pass", "fail", "error", "unsupported", "skipped"):
        print(f"  {o:12s} {counts[o]}")
    print(f"  pass rate: {counts['pass']}/{denom} = {100 * rate:.1f}% "
          f"(denominator: all cases minus the {counts['skipped']} skipped)")
    on_vm = sum(1 for r in results if r["outcome"] == "pass" and "vm" in r["detail"].split("; "))
    host = collections.Counter(op for r in results if r["outcome"] == "pass"
                               for part in r["detail"].split("; ") if part.startswith("host: ")
                               for op in part[6:].split(","))
    n_host = sum(1 for r in results if r["outcome"] == "pass" and "host: " in r["detail"])
    if executor == "graph":
        print(f"  of the passes, {on_vm} ran on the VM (the graph executor cannot run them)")
    print(f"  of the passes, {n_host} ran some operator with its numpy implementation "
          f"(no kernel): " + ", ".join(f"{op} ({n})" for op, n in host.most_common()))
    print("\nskipped by category:")
    for cat, n in skipped.most_common():
        print(f"  {n:4d}  {cat}: {SKIP_CATEGORIES[cat]}")
    print("\nunsupported operator types (cases):")
    print("  " + ", ".join(f"{op} ({n})" for op, n in unsupported.most_common()))
    print("\nmost frequent fail/error reasons:")
    for (o, msg), n in reasons.most_common(40):
        print(f"  {n:4d}  {o}: {msg}")
    print("\nper operator (pass/total in scope), not all passing:")
    for op in sorted(per_op):
        c = per_op[op]
        total = sum(c.values()) - c["skipped"]
        if total and c["pass"] < total:
            rest = ", ".join(f"{o} {c[o]}" for o in ("fail", "error", "unsupported") if c[o])
            print(f"  {op:28s} {c['pass']}/{total}  ({rest})")

    out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                   f"onnx_conformance_{tag}.json")
    summary = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": _machine(),
        "python": sys.version.split()[0], "onnx": onnx.__version__, "executor": executor,
        "opt_level": args.opt_level,
        "filter": args.filter, "low_precision": args.low_precision, "seconds": round(elapsed, 1),
        "counts": dict(counts), "denominator": denom, "pass_rate": round(rate, 4),
        "bind_inputs": args.bind_inputs, "passes_on_vm": on_vm, "passes_with_host_ops": n_host,
        "host_ops": dict(host.most_common()),
        "skip_categories": SKIP_CATEGORIES, "skipped_by_category": dict(skipped),
        "unsupported_ops": dict(unsupported.most_common()),
        "per_op": {op: dict(c) for op, c in sorted(per_op.items())},
        # every case: the names that pass, and the outcome detail of the others
        "passed": sorted(r["name"] for r in results if r["outcome"] == "pass"),
        "passed_how": {r["name"]: r["detail"] for r in results
                       if r["outcome"] == "pass" and r["detail"]},
        "not_passed": {r["name"]: f"{r['outcome']}: {r['detail']}" for r in results
                       if r["outcome"] != "pass"},
    }
    with open(out, "w") as f:
        json.dump(summary, f, indent=1)
    print(f"\nsummary written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
