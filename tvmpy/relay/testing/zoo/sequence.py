"""Transformers, recurrent networks and a speech encoder (transformers' and torchvision's
definitions, or torch.nn modules), random weights.

Text models take ``input_ids`` (int64 [batch, seq]) and return their last hidden states (or
logits); ``small`` keeps every layer kind (embeddings, attention with its masks / relative
position biases, MLPs, norms) with 2 layers, narrow widths and short sequences; ``real`` is
the published base configuration at sequence length 128 (Whisper: 1500 frames).
"""

from __future__ import annotations

from typing import Any

from ._common import finish, first_output, image, seeded
from ._shim import torchvision
from .spec import Input, Spec

VOCAB_SMALL = 100


def _text(vocab: int, seq: int) -> tuple[list[Input], dict[str, int]]:
    return [Input("input_ids", ("batch", "seq"), "int64", high=vocab)], {"batch": 1, "seq": seq}


def _hf(model: Any, vocab: int, seq: int) -> Spec:
    inputs, dims = _text(vocab, seq)
    spec = finish(first_output(model, "last_hidden_state"), inputs, dims)
    positions = getattr(model.config, "max_position_embeddings", None)
    if positions:  # a learned position table bounds the sequence length
        spec.limits["seq"] = int(positions)
    return spec


def _transformers() -> Any:
    torchvision()  # transformers imports torchvision: stub its C registrations first
    import transformers

    return transformers


def bert(size: str) -> Spec:
    tf = _transformers()
    seeded(20)
    if size == "real":
        cfg = tf.BertConfig(attn_implementation="eager")
        return _hf(tf.BertModel(cfg, add_pooling_layer=False), cfg.vocab_size, 128)
    cfg = tf.BertConfig(vocab_size=VOCAB_SMALL, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                        attn_implementation="eager")
    return _hf(tf.BertModel(cfg, add_pooling_layer=False), VOCAB_SMALL, 16)


def distilbert(size: str) -> Spec:
    tf = _transformers()
    seeded(21)
    if size == "real":
        cfg = tf.DistilBertConfig(attn_implementation="eager")
        return _hf(tf.DistilBertModel(cfg), cfg.vocab_size, 128)
    cfg = tf.DistilBertConfig(vocab_size=VOCAB_SMALL, dim=32, n_layers=2, n_heads=4,
                              hidden_dim=64, max_position_embeddings=64,
                              attn_implementation="eager")
    return _hf(tf.DistilBertModel(cfg), VOCAB_SMALL, 16)


def gpt2(size: str) -> Spec:
    """GPT-2 blocks: causal self-attention (the mask built from the sequence length), GELU
    (tanh form) MLPs, pre-norm; no KV cache. An all-ones attention mask is passed: without
    one, transformers looks for packed sequences in the position ids (``torch.diff``, which
    has no ONNX form)."""
    import torch

    tf = _transformers()
    seeded(22)
    if size == "real":
        cfg = tf.GPT2Config(use_cache=False, attn_implementation="eager")
    else:
        cfg = tf.GPT2Config(vocab_size=VOCAB_SMALL, n_embd=32, n_layer=2, n_head=4,
                            n_positions=64, use_cache=False, attn_implementation="eager")

    class GPT2(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gpt2 = tf.GPT2Model(cfg)

        def forward(self, input_ids: Any) -> Any:
            mask = torch.ones_like(input_ids)
            return self.gpt2(input_ids, attention_mask=mask).last_hidden_state

    inputs, dims = _text(cfg.vocab_size, 128 if size == "real" else 16)
    spec = finish(GPT2(), inputs, dims)
    spec.limits["seq"] = cfg.n_positions
    return spec


def t5_encoder(size: str) -> Spec:
    """T5's encoder: RMS norm, bucketed relative position biases, gated-GELU feed-forward
    (the v1.1 form)."""
    tf = _transformers()
    seeded(23)
    if size == "real":
        cfg = tf.T5Config(d_model=768, d_kv=64, d_ff=2048, num_layers=12, num_heads=12,
                          feed_forward_proj="gated-gelu", use_cache=False,
                          attn_implementation="eager")
        return _hf(tf.T5EncoderModel(cfg), cfg.vocab_size, 128)
    cfg = tf.T5Config(vocab_size=VOCAB_SMALL, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                      num_heads=4, relative_attention_num_buckets=8,
                      feed_forward_proj="gated-gelu", use_cache=False,
                      attn_implementation="eager")
    return _hf(tf.T5EncoderModel(cfg), VOCAB_SMALL, 16)


def vit(size: str) -> Spec:
    vt = torchvision().models.vision_transformer
    seeded(24)
    if size == "real":
        return finish(torchvision().models.vit_b_16(), image(224))
    net = vt.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                               hidden_dim=32, mlp_dim=64, num_classes=10)
    return finish(net, image(32))


def swin(size: str) -> Spec:
    """Swin: windowed attention with the relative position bias table, shifted windows
    (``torch.roll`` and the attention mask of the shifted partition), patch merging."""
    m = torchvision().models
    seeded(25)
    if size == "real":
        return finish(m.swin_t(), image(224))
    net = m.SwinTransformer(patch_size=[2, 2], embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                            window_size=[4, 4], stochastic_depth_prob=0.0, num_classes=10)
    return finish(net, image(32))


def mlp_mixer(size: str) -> Spec:
    """timm's MLP-Mixer: token-mixing and channel-mixing MLPs over patch embeddings."""
    from timm.models.mlp_mixer import MlpMixer

    seeded(26)
    if size == "real":
        return finish(MlpMixer(num_classes=1000, img_size=224, patch_size=16, num_blocks=12,
                               embed_dim=768), image(224))
    return finish(MlpMixer(num_classes=10, img_size=32, patch_size=8, num_blocks=2,
                           embed_dim=32), image(32))


# ---- recurrent -----------------------------------------------------------------------------
class _RNNLanguageModel:
    """Embedding -> a stacked LSTM / GRU (batch_first) -> a linear decoder to the vocabulary
    (the word language model of PyTorch's examples); ``bidirectional`` doubles the decoder's
    input (a tagger over the whole sequence)."""

    @staticmethod
    def build(cell: str, vocab: int, emb: int, hidden: int, layers: int,
              bidirectional: bool = False) -> Any:
        import torch.nn as nn

        class LM(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embed = nn.Embedding(vocab, emb)
                rnn = nn.LSTM if cell == "lstm" else nn.GRU
                self.rnn = rnn(emb, hidden, layers, batch_first=True,
                               bidirectional=bidirectional)
                self.decoder = nn.Linear(hidden * (2 if bidirectional else 1), vocab)

            def forward(self, input_ids: Any) -> Any:
                out, _ = self.rnn(self.embed(input_ids))
                return self.decoder(out)

        return LM()


def _rnn(cell: str, size: str, seed: int, bidirectional: bool = False) -> Spec:
    seeded(seed)
    if size == "real":
        vocab, emb, hidden, layers, seq = 10000, 256, 256, 2, 32
    else:
        vocab, emb, hidden, layers, seq = VOCAB_SMALL, 16, 24, 2, 7
    net = _RNNLanguageModel.build(cell, vocab, emb, hidden, layers, bidirectional)
    inputs, dims = _text(vocab, seq)
    return finish(net, inputs, dims)


def lstm_lm(size: str) -> Spec:
    return _rnn("lstm", size, 30)


def gru_lm(size: str) -> Spec:
    return _rnn("gru", size, 31)


def bilstm_tagger(size: str) -> Spec:
    return _rnn("lstm", size, 32, bidirectional=True)


# ---- speech --------------------------------------------------------------------------------
def whisper_encoder(size: str) -> Spec:
    """transformers' WhisperEncoder: two 1-D convs (the second strided) with GELU over the log-mel
    frames, sinusoidal positions, pre-norm attention blocks. Real: whisper-tiny's encoder (384
    wide, 4 layers, 6 heads) over 3000 frames (1500 positions). The frame count is fixed by
    the position table, so only the batch is dynamic."""
    tf = _transformers()
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    seeded(40)
    if size == "real":
        cfg = tf.WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6,
                               encoder_ffn_dim=1536, num_mel_bins=80, max_source_positions=1500,
                               attn_implementation="eager")
    else:
        cfg = tf.WhisperConfig(d_model=32, encoder_layers=2, encoder_attention_heads=4,
                               encoder_ffn_dim=64, num_mel_bins=16, max_source_positions=24,
                               attn_implementation="eager")
    frames = 2 * cfg.max_source_positions
    net = first_output(WhisperEncoder(cfg), "last_hidden_state")
    return finish(net, [Input("input_features", ("batch", cfg.num_mel_bins, frames))])
