"""Reduce a failing model to a small reproducer and write it as a pytest regression test.

Reduction keeps a model failing *the same way* (``same_failure``: the finding's kind, oracle
and, for errors, stage and message shape) while it shrinks, greedily until nothing more goes:

1. one output: only the ancestors of a single failing graph output are kept;
2. cuts (delta debugging over nodes): a node's outputs become graph inputs fed with the values
   onnxruntime computed for them on the original inputs, so everything feeding only that node
   disappears; tried from the graph inputs forwards, first in halves then one node at a time;
3. tail removal: an output node is dropped and its first input becomes the output;
4. attributes: each node attribute is removed (its ONNX default then applies) when the model
   still checks.

``to_pytest`` writes the result as a test that builds the model inline with ``onnx.helper``
(weights and inputs as literal arrays: a reduced model is small) and asserts the oracles agree.

    python -m tvmpy.testing.fuzz.reduce fuzz_out/models/seed_12.onnx -o tests/fuzz/test_x.py
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .oracles import DEFAULT_CONFIGS, Finding, check_model, run_reference

__all__ = ["reduce_model", "same_failure", "to_pytest", "main"]

Predicate = Callable[[Any, Mapping[str, np.ndarray]], bool]


def same_failure(target: Finding, configs: Sequence[str] | None = None) -> Predicate:
    """A predicate: does a model still produce a finding like ``target``?"""
    cfgs = tuple(configs) if configs else ((target.config,) if target.config != "*"
                                            else DEFAULT_CONFIGS)
    sig = target.signature()

    def pred(model: Any, feeds: Mapping[str, np.ndarray]) -> bool:
        try:
            import onnx

            onnx.checker.check_model(model, full_check=True)
            want = run_reference(model, feeds)
        except Exception:  # noqa: BLE001 - not a valid model any more
            return False
        found = check_model(model, feeds, cfgs, reference=want)
        for f in found:
            if f.kind != target.kind or (target.config != "*" and f.config != target.config):
                continue
            if target.kind == "mismatch" or f.signature() == sig:
                return True
        return False

    return pred


# ---------------------------------------------------------------------------------------------
# graph surgery


def _intermediates(model: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime's value of every tensor of the graph on ``feeds``."""
    import onnx
    from onnx import helper

    inferred = onnx.shape_inference.infer_shapes(model)
    types = {vi.name: vi.type.tensor_type.elem_type
             for vi in [*inferred.graph.value_info, *inferred.graph.output]}
    probe = copy.deepcopy(model)
    have = {o.name for o in probe.graph.output}
    for node in probe.graph.node:
        for name in node.output:
            if name and name not in have and name in types:
                probe.graph.output.append(helper.make_tensor_value_info(name, types[name], None))
                have.add(name)
    outs = run_reference(probe, feeds)
    return {o.name: v for o, v in zip(probe.graph.output, outs)}


def _prune(model: Any) -> Any:
    """Drop nodes, initializers and inputs that no graph output depends on."""
    g = model.graph
    needed = {o.name for o in g.output}
    keep = []
    for node in reversed(list(g.node)):
        if any(o in needed for o in node.output):
            keep.append(node)
            needed.update(i for i in node.input if i)
    keep.reverse()
    del g.node[:]
    g.node.extend(keep)
    inits = [t for t in g.initializer if t.name in needed]
    del g.initializer[:]
    g.initializer.extend(inits)
    ins = [i for i in g.input if i.name in needed]
    del g.input[:]
    g.input.extend(ins)
    return model


def _value_info(name: str, value: np.ndarray) -> Any:
    from onnx import helper
    from onnx.helper import np_dtype_to_tensor_dtype

    return helper.make_tensor_value_info(name, np_dtype_to_tensor_dtype(value.dtype),
                                         list(value.shape))


def _cut(model: Any, feeds: dict, values: dict, nodes: set[int]) -> tuple[Any, dict]:
    """Replace the outputs of ``nodes`` (indices) by graph inputs carrying their values."""
    m = copy.deepcopy(model)
    g = m.graph
    new_feeds = dict(feeds)
    outputs = {o.name for o in g.output}
    for k in sorted(nodes):
        for name in g.node[k].output:
            if name and name in values and name not in outputs:
                g.input.append(_value_info(name, values[name]))
                new_feeds[name] = values[name]
    kept = [n for k, n in enumerate(g.node) if k not in nodes]
    del g.node[:]
    g.node.extend(kept)
    _prune(m)
    names = {i.name for i in m.graph.input}
    return m, {k: v for k, v in new_feeds.items() if k in names}


def _single_output(model: Any, k: int) -> Any:
    m = copy.deepcopy(model)
    out = m.graph.output[k]
    del m.graph.output[:]
    m.graph.output.append(out)
    return _prune(m)


def _drop_tail(model: Any, values: dict) -> Any | None:
    """The model without its output node: the node's first input becomes the output."""
    g = model.graph
    if len(g.output) != 1 or len(g.node) < 2:
        return None
    producer = next((n for n in g.node if g.output[0].name in n.output), None)
    if producer is None or not producer.input or producer.input[0] not in values:
        return None
    src = producer.input[0]
    if src in {i.name for i in g.input} | {t.name for t in g.initializer}:
        return None
    m = copy.deepcopy(model)
    del m.graph.output[:]
    m.graph.output.append(_value_info(src, values[src]))
    return _prune(m)


def reduce_model(model: Any, feeds: Mapping[str, np.ndarray], still_fails: Predicate,
                 budget: int = 400, log: Callable[[str], None] | None = None
                 ) -> tuple[Any, dict[str, np.ndarray]]:
    """The smallest variant of (model, feeds) found for which ``still_fails`` holds, within
    ``budget`` predicate calls (``still_fails(model, feeds)`` must hold at the start)."""
    say = log or (lambda s: None)
    calls = [0]

    def fails(m: Any, f: Mapping[str, np.ndarray]) -> bool:
        if calls[0] >= budget:
            return False
        calls[0] += 1
        return still_fails(m, f)

    feeds = dict(feeds)
    if len(model.graph.output) > 1:
        for k in range(len(model.graph.output)):
            cand = _single_output(model, k)
            if fails(cand, _used(cand, feeds)):
                model, feeds = cand, _used(cand, feeds)
                break
    changed = True
    while changed and calls[0] < budget:
        changed = False
        values = {**_intermediates(model, feeds), **feeds}
        n = len(model.graph.node)
        # cuts: a chunk of nodes from the inputs side (halves, quarters, ... single nodes)
        size = max(1, n // 2)
        while size >= 1 and not changed:
            for start in range(0, n - 1, size):
                chunk = set(range(start, min(start + size, n - 1)))
                if not chunk:
                    continue
                cand, cf = _cut(model, feeds, values, chunk)
                if len(cand.graph.node) < n and fails(cand, cf):
                    model, feeds, changed = cand, cf, True
                    say(f"cut {len(chunk)} node(s): {len(model.graph.node)} left")
                    break
            size //= 2
        if changed:
            continue
        cand = _drop_tail(model, values)
        if cand is not None and fails(cand, _used(cand, feeds)):
            model, feeds, changed = cand, _used(cand, feeds), True
            say(f"dropped the output node: {len(model.graph.node)} left")
            continue
        for k, node in enumerate(model.graph.node):
            for a in range(len(node.attribute)):
                cand = copy.deepcopy(model)
                del cand.graph.node[k].attribute[a]
                if fails(cand, feeds):
                    model, changed = cand, True
                    say(f"removed attribute {node.attribute[a].name} of {node.name}")
                    break
            if changed:
                break
    say(f"{calls[0]} checks")
    return model, feeds


def _used(model: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    names = {i.name for i in model.graph.input}
    return {k: v for k, v in feeds.items() if k in names}


# ---------------------------------------------------------------------------------------------
# the regression test


def _array_src(a: np.ndarray) -> str:
    a = np.asarray(a)
    if a.dtype.kind == "f":
        body = repr([float(x) for x in a.ravel()])
    elif a.dtype.kind == "b":
        body = repr([bool(x) for x in a.ravel()])
    else:
        body = repr([int(x) for x in a.ravel()])
    return f"np.array({body}, dtype=np.{a.dtype.name}).reshape({tuple(a.shape)!r})"


def _attr_src(attr: Any) -> str:
    from onnx import helper, numpy_helper

    v = helper.get_attribute_value(attr)
    if hasattr(v, "dims") and hasattr(v, "data_type"):  # a TensorProto
        return f"numpy_helper.from_array({_array_src(numpy_helper.to_array(v))})"
    if isinstance(v, bytes):
        return repr(v.decode())
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return repr([x.decode() for x in v])
    return repr(v)


def _vi_src(vi: Any) -> str:
    tt = vi.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in tt.shape.dim] if tt.HasField("shape") else None
    return f"helper.make_tensor_value_info({vi.name!r}, {tt.elem_type}, {dims!r})"


def _needs_numpy_helper(model: Any) -> bool:
    """Initializers or tensor-valued attributes are written with numpy_helper.from_array."""
    from onnx import AttributeProto

    return bool(model.graph.initializer) or any(
        a.type == AttributeProto.TENSOR for n in model.graph.node for a in n.attribute)


def to_pytest(model: Any, feeds: Mapping[str, np.ndarray], test_name: str,
              configs: Sequence[str], note: str = "") -> str:
    """Python source of a pytest module that rebuilds ``model`` inline and checks it."""
    from onnx import numpy_helper

    g = model.graph
    lines = [f'"""Regression test written by the fuzzer\'s reducer{": " + note if note else "."}"""',
             "", "import numpy as np", "import pytest", "",
             'onnx = pytest.importorskip("onnx")', 'pytest.importorskip("onnxruntime")', "",
             ("from onnx import helper, numpy_helper  # noqa: E402" if _needs_numpy_helper(model)
              else "from onnx import helper  # noqa: E402"), "",
             "from tvmpy.testing.fuzz.oracles import assert_model_ok  # noqa: E402", "", "",
             f"def {test_name}():"]
    lines.append("    nodes = [")
    for node in g.node:
        attrs = "".join(f", {a.name}={_attr_src(a)}" for a in node.attribute)
        dom = f", domain={node.domain!r}" if node.domain else ""
        lines.append(f"        helper.make_node({node.op_type!r}, {list(node.input)!r}, "
                     f"{list(node.output)!r}, name={node.name!r}{dom}{attrs}),")
    lines.append("    ]")
    lines.append("    inits = [")
    for t in g.initializer:
        lines.append(f"        numpy_helper.from_array({_array_src(numpy_helper.to_array(t))}, "
                     f"{t.name!r}),")
    lines.append("    ]")
    lines.append(f"    inputs = [{', '.join(_vi_src(i) for i in g.input)}]")
    lines.append(f"    outputs = [{', '.join(_vi_src(o) for o in g.output)}]")
    opsets = ", ".join(f"helper.make_opsetid({o.domain!r}, {o.version})"
                       for o in model.opset_import)
    lines.append('    graph = helper.make_graph(nodes, "reduced", inputs, outputs, inits)')
    lines.append(f"    model = helper.make_model(graph, opset_imports=[{opsets}])")
    lines.append("    onnx.checker.check_model(model, full_check=True)")
    lines.append("    feeds = {")
    for k, v in feeds.items():
        lines.append(f"        {k!r}: {_array_src(v)},")
    lines.append("    }")
    lines.append(f"    assert_model_ok(model, feeds, configs={tuple(configs)!r})")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    import onnx

    p = argparse.ArgumentParser(prog="python -m tvmpy.testing.fuzz.reduce",
                                description="reduce a failing model to a pytest regression test")
    p.add_argument("model", help="seed_N.onnx saved by the campaign (its seed_N.npz beside it)")
    p.add_argument("-o", "--output", help="the test file to write (default: print it)")
    p.add_argument("--configs", help="oracles to check (default: all)")
    p.add_argument("--budget", type=int, default=400, help="most checks to spend (default 400)")
    args = p.parse_args(argv)
    model = onnx.load(args.model)
    feeds = dict(np.load(os.path.splitext(args.model)[0] + ".npz"))
    configs = tuple(args.configs.split(",")) if args.configs else DEFAULT_CONFIGS
    findings = check_model(model, feeds, configs)
    if not findings:
        print(f"{args.model}: no finding with oracles {', '.join(configs)}", file=sys.stderr)
        return 1
    target = findings[0]
    print(f"reducing for: {target.config}: {target.kind}: {target.message[:200]}",
          file=sys.stderr)
    model, feeds = reduce_model(model, feeds, same_failure(target), budget=args.budget,
                                log=lambda s: print("  " + s, file=sys.stderr))
    name = "test_" + "".join(c if c.isalnum() else "_"
                             for c in os.path.splitext(os.path.basename(args.model))[0])
    keep = (target.config,) if target.config != "*" else configs
    src = to_pytest(model, feeds, name, keep,
                    note=f"{target.config}: {target.kind}: {target.message.splitlines()[0][:120]}")
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(src)
        print(f"wrote {args.output} ({len(model.graph.node)} nodes)", file=sys.stderr)
    else:
        print(src)
    return 0


if __name__ == "__main__":
    sys.exit(main())
