"""ONNX If and Scan where the graph stays a static dataflow graph.

- If: the condition must be known at import time (it usually tests a shape or an attribute);
  the chosen branch's nodes are converted in place.
- Scan (opset 9+): unrolled over the static length of the scan axis: each iteration converts the
  body with the body's inputs bound to the current states and input slices; scan outputs are
  stacked along their axes (reversed for direction 1).

Subgraph bodies read outer-scope tensors by name, as ONNX scoping allows. Loop, and If on a
value known only at run time, are not supported (control flow is out of the conformance
scope; these two serve operators whose function bodies use them, such as LinearAttention).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...expr import RelayExpr, const
from ...op import tensor, transform
from .context import ImportContext, shape_of
from .importer import convert_nodes
from .registry import Attrs, Inputs, Names, Output, converter


def _run_graph(ctx: ImportContext, g: Any) -> list[RelayExpr]:
    from onnx import numpy_helper

    node = ctx.node
    for init in g.initializer:
        ctx.bind(init.name, const(numpy_helper.to_array(init)))
    convert_nodes(ctx, list(g.node), ctx.opset)
    ctx.node = node
    missing = [o.name for o in g.output if o.name not in ctx.exprs]
    if missing:
        raise ctx.fail(f"subgraph outputs {missing} are not computed by its nodes")
    return [ctx.exprs[o.name] for o in g.output]


@converter("If")
def _if(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    cond = ctx.value(names[0], "cond")
    branch = attrs["then_branch"] if bool(np.asarray(cond).reshape(-1)[0]) else attrs["else_branch"]
    return _run_graph(ctx, branch)


@converter("Scan")
def _scan(ctx: ImportContext, inputs: Inputs, attrs: Attrs, names: Names) -> Output:
    if ctx.opset < 9:
        raise ctx.fail("Scan before opset 9 (batched, with sequence_lens) is not supported")
    body = attrs["body"]
    M = int(attrs["num_scan_inputs"])
    N = len(body.input) - M
    K = len(body.output) - N
    states, xs = list(inputs[:N]), list(inputs[N:])
    in_axes = [int(v) % len(shape_of(x)) for v, x in zip(attrs.get("scan_input_axes", [0] * M), xs)]
    in_dirs = list(attrs.get("scan_input_directions", [0] * M))
    out_axes = list(attrs.get("scan_output_axes", [0] * K))
    out_dirs = list(attrs.get("scan_output_directions", [0] * K))
    lengths = {shape_of(x)[ax] for x, ax in zip(xs, in_axes)}
    if len(lengths) != 1:
        raise ctx.fail(f"scan inputs have different lengths {sorted(lengths)}")
    T = lengths.pop()
    outs: list[list[RelayExpr]] = [[] for _ in range(K)]
    for t in range(T):
        for j in range(N):
            ctx.bind(body.input[j].name, states[j])
        for m in range(M):
            k = t if not in_dirs[m] else T - 1 - t
            sl = transform.take(xs[m], const(np.int64(k)), axis=in_axes[m])
            ctx.bind(body.input[N + m].name, sl)
        res = _run_graph(ctx, body)
        states = res[:N]
        for k in range(K):
            outs[k].append(res[N + k])
    stacked = []
    for k in range(K):
        seq = outs[k][::-1] if out_dirs[k] else outs[k]
        r = len(shape_of(seq[0])) + 1
        stacked.append(tensor.stack(seq, int(out_axes[k]) % r))
    return states + stacked


