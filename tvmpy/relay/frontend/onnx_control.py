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

from ..expr import Constant, RelayExpr, const
from ..op import tensor, transform
from ..type_infer import infer_type

__all__ = ["CONVERTERS"]


def _shape(e: RelayExpr) -> list[int]:
    return [int(d) for d in infer_type(e).checked_type.shape]


def _bind(c: Any, name: str, e: RelayExpr) -> None:
    c.exprs[name] = e
    if isinstance(e, Constant):
        c.values[name] = e.data.numpy()
    else:
        c.values.pop(name, None)


def _run_graph(c: Any, g: Any) -> list[RelayExpr]:
    from onnx import numpy_helper

    from .onnx import _convert_nodes

    node = c.node
    for init in g.initializer:
        _bind(c, init.name, const(numpy_helper.to_array(init)))
    _convert_nodes(c, list(g.node), c.opset)
    c.node = node
    missing = [o.name for o in g.output if o.name not in c.exprs]
    if missing:
        raise c.fail(f"subgraph outputs {missing} are not computed by its nodes")
    return [c.exprs[o.name] for o in g.output]


def _if(c, i, a, n):
    cond = c.value(n[0], "cond")
    branch = a["then_branch"] if bool(np.asarray(cond).reshape(-1)[0]) else a["else_branch"]
    return _run_graph(c, branch)


def _scan(c, i, a, n):
    if c.opset < 9:
        raise c.fail("Scan before opset 9 (batched, with sequence_lens) is not supported")
    body = a["body"]
    M = int(a["num_scan_inputs"])
    N = len(body.input) - M
    K = len(body.output) - N
    states, xs = list(i[:N]), list(i[N:])
    in_axes = [int(v) % len(_shape(x)) for v, x in zip(a.get("scan_input_axes", [0] * M), xs)]
    in_dirs = list(a.get("scan_input_directions", [0] * M))
    out_axes = list(a.get("scan_output_axes", [0] * K))
    out_dirs = list(a.get("scan_output_directions", [0] * K))
    lengths = {_shape(x)[ax] for x, ax in zip(xs, in_axes)}
    if len(lengths) != 1:
        raise c.fail(f"scan inputs have different lengths {sorted(lengths)}")
    T = lengths.pop()
    outs: list[list[RelayExpr]] = [[] for _ in range(K)]
    for t in range(T):
        for j in range(N):
            _bind(c, body.input[j].name, states[j])
        for m in range(M):
            k = t if not in_dirs[m] else T - 1 - t
            sl = transform.take(xs[m], const(np.int64(k)), axis=in_axes[m])
            _bind(c, body.input[N + m].name, sl)
        res = _run_graph(c, body)
        states = res[:N]
        for k in range(K):
            outs[k].append(res[N + k])
    stacked = []
    for k in range(K):
        seq = outs[k][::-1] if out_dirs[k] else outs[k]
        r = len(_shape(seq[0])) + 1
        stacked.append(tensor.stack(seq, int(out_axes[k]) % r))
    return states + stacked


CONVERTERS = {"If": _if, "Scan": _scan}
