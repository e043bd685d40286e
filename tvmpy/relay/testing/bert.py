"""A BERT-style encoder: token + position embeddings, then post-LN transformer layers
(multi-head self-attention with batch_matmul, GELU feed-forward, layer norms)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import op as _op
from ..expr import RelayExpr, const, var
from ..module import IRModule
from ..op import nn
from ..op import transform as T
from ._builder import Weights


def _linear(w: Weights, x: RelayExpr, name: str, cin: int, cout: int,
            lead: tuple[int, ...]) -> RelayExpr:
    """``x[*lead, cin] @ W^T + b`` as a 2-D dense between reshapes (as the frontends emit it:
    the dense kernels take 2-D data)."""
    y = nn.dense(T.reshape(x, (-1, cin)), w.normal(f"{name}_weight", (cout, cin)), units=cout)
    y = nn.bias_add(y, w.uniform(f"{name}_bias", (cout,), -0.1, 0.1), axis=-1)
    return T.reshape(y, (*lead, cout))


def _layer_norm(w: Weights, x: RelayExpr, name: str, hidden: int) -> RelayExpr:
    return nn.layer_norm(x, w.uniform(f"{name}_gamma", (hidden,), 0.5, 1.5),
                         w.uniform(f"{name}_beta", (hidden,), -0.1, 0.1), epsilon=1e-12)


def _attention(w: Weights, x: RelayExpr, name: str, batch: int, seq: int, hidden: int,
               heads: int) -> RelayExpr:
    dh = hidden // heads

    def heads_first(t: RelayExpr) -> RelayExpr:  # (B, S, H) -> (B*heads, S, dh)
        t = T.reshape(t, (batch, seq, heads, dh))
        return T.reshape(T.transpose(t, (0, 2, 1, 3)), (batch * heads, seq, dh))

    q = heads_first(_linear(w, x, f"{name}_query", hidden, hidden, (batch, seq)))
    k = heads_first(_linear(w, x, f"{name}_key", hidden, hidden, (batch, seq)))
    v = heads_first(_linear(w, x, f"{name}_value", hidden, hidden, (batch, seq)))
    scores = _op.tensor.multiply(nn.batch_matmul(q, k), const(np.float32(1.0 / np.sqrt(dh))))
    probs = nn.softmax(scores, axis=-1)
    ctx = nn.batch_matmul(probs, v, transpose_b=False)  # (B*heads, S, dh)
    ctx = T.transpose(T.reshape(ctx, (batch, heads, seq, dh)), (0, 2, 1, 3))
    return _linear(w, T.reshape(ctx, (batch, seq, hidden)), f"{name}_output", hidden, hidden,
                   (batch, seq))


def get_workload(num_layers: int = 4, hidden: int = 256, heads: int = 4, seq_len: int = 128,
                 batch_size: int = 1, intermediate: int | None = None, vocab_size: int = 1000,
                 seed: int = 0) -> tuple[IRModule, dict[str, Any]]:
    """``(mod, params)`` of the encoder; input ``input_ids`` (int64, [batch, seq]), output the
    last hidden states [batch, seq, hidden]."""
    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not divisible by heads {heads}")
    inter = intermediate or 4 * hidden
    w = Weights(seed, "float32")
    ids = var("input_ids", shape=(batch_size, seq_len), dtype="int64")
    tok = w.normal("word_embeddings", (vocab_size, hidden), fan_in=2)
    pos = w.normal("position_embeddings", (seq_len, hidden), fan_in=2)
    x = _op.tensor.add(T.take(tok, ids, axis=0), pos)
    x = _layer_norm(w, x, "embeddings_ln", hidden)
    for i in range(num_layers):
        name = f"layer{i}"
        a = _attention(w, x, f"{name}_attention", batch_size, seq_len, hidden, heads)
        x = _layer_norm(w, _op.tensor.add(a, x), f"{name}_attention_ln", hidden)
        h = nn.gelu(_linear(w, x, f"{name}_intermediate", hidden, inter,
                             (batch_size, seq_len)))
        h = _linear(w, h, f"{name}_ffn_output", inter, hidden, (batch_size, seq_len))
        x = _layer_norm(w, _op.tensor.add(h, x), f"{name}_output_ln", hidden)
    return w.module([ids], x)
