"""A decoder-only Transformer from the pieces of this package, Llama or GPT style.

The model (Vaswani et al. 2017, with the pre-norm, RMSNorm, RoPE and SwiGLU choices of
Llama, Touvron et al. 2023) embeds tokens, applies ``L`` identical blocks ``x = x +
Attn(Norm(x))``, ``x = x + MLP(Norm(x))``, normalizes once more and projects to
vocabulary logits with a head that is either its own matrix or the transposed embedding
(tied, Press & Wolf 2017). The config picks the pieces: the attention of every block is
grouped-query attention, or multi-head latent attention when ``kv_lora_rank`` is set;
the GPT-2/GPT-3 family (Radford et al. 2019, Brown et al. 2020) swaps RMSNorm for
LayerNorm, SwiGLU for a GELU MLP and RoPE for a learned table of positions added to the
embeddings, with biases everywhere. In a mixture-of-experts config the MLP of every
layer after the first ``first_dense_layers`` is a
:class:`~aiinfra.models.moe.layer.MoELayer` (DeepSeek-V3 keeps three dense layers first,
Mixtral none). Passing one cache per layer turns the same forward pass into incremental
decoding, as in :func:`generate_greedy`. Notation: ``B`` batch, ``T`` tokens, ``h``
width, ``V`` vocab.
"""

from __future__ import annotations

import os

import torch
from torch import Tensor, nn

from aiinfra.models.attention.gqa import GroupedQueryAttention, KVCache
from aiinfra.models.attention.mla import MultiHeadLatentAttention
from aiinfra.models.config import TransformerConfig
from aiinfra.models.hf.checkpoint import read_pretrained
from aiinfra.models.layers import GeluMLP, RMSNorm, RotaryEmbedding, SwiGLU
from aiinfra.models.moe.layer import MoELayer


def make_attention(
    config: TransformerConfig,
) -> GroupedQueryAttention | MultiHeadLatentAttention:
    """The attention the config asks for: MLA if ``kv_lora_rank`` > 0, else GQA."""
    if config.is_mla:
        return MultiHeadLatentAttention(config)
    return GroupedQueryAttention(config)


def make_norm(config: TransformerConfig) -> nn.Module:
    """RMSNorm (Llama) or LayerNorm with weight and bias (GPT-2/3)."""
    if config.norm == "layernorm":
        return nn.LayerNorm(config.d_model, config.norm_eps)
    return RMSNorm(config.d_model, config.norm_eps)


def make_mlp(config: TransformerConfig, layer: int = 0) -> nn.Module:
    """The MLP of layer ``layer``: MoE where the config says, else dense.

    Dense is SwiGLU (Llama) or the GELU MLP (GPT-2/3), with biases when ``bias``.

    Raises:
        ValueError: ``layer`` is not in ``[0, n_layers)``.
    """
    if config.is_moe_layer(layer):
        return MoELayer(config.d_model, config.moe_spec())
    if config.mlp == "gelu":
        return GeluMLP(config.d_model, config.d_ff, config.bias)
    return SwiGLU(config.d_model, config.d_ff, config.bias)


class Block(nn.Module):
    """One pre-norm decoder block: attention, then the MLP (or experts), each residual.

    Args:
        config: the model shape.
        layer: this block's index, which decides between a dense MLP and experts.
    """

    def __init__(self, config: TransformerConfig, layer: int = 0) -> None:
        super().__init__()
        self.attn_norm = make_norm(config)
        self.attn = make_attention(config)
        self.mlp_norm = make_norm(config)
        self.mlp = make_mlp(config, layer)

    def forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        """Shape ``(B, T, h)`` in and out; ``cache`` is this layer's KV cache."""
        x = x + self.attn(self.attn_norm(x), cache)
        return x + self.mlp(self.mlp_norm(x))


class Transformer(nn.Module):
    """A decoder-only language model.

    Args:
        config: the model shape (see :class:`~aiinfra.models.config.TransformerConfig`).
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_embed = (
            nn.Embedding(config.max_seq_len, config.d_model)
            if config.position == "learned"
            else None  # RoPE rotates queries and keys inside attention instead
        )
        self.blocks = nn.ModuleList(Block(config, i) for i in range(config.n_layers))
        self.norm = make_norm(config)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.head.weight = self.embed.weight  # one (V, d) matrix, used twice
        self.apply(_init_weights)

    @classmethod
    def from_pretrained(
        cls, directory: str | os.PathLike, dtype: torch.dtype = torch.float32
    ) -> Transformer:
        """Load a Hugging Face checkpoint (:mod:`aiinfra.models.hf.checkpoint`).

        The model is built on the ``meta`` device (no memory, no random init), the
        checkpoint's tensors are assigned to it, and the RoPE tables computed.

        Args:
            directory: holds ``config.json`` and ``model.safetensors`` (or
                ``model.safetensors.index.json`` and its shards).
            dtype: element type of the parameters.

        Returns:
            The model, in evaluation mode.

        Raises:
            FileNotFoundError: a file is missing.
            ValueError: the config is not modelled, or a tensor is missing,
                unexpected or of the wrong shape.
        """
        config, state = read_pretrained(directory, dtype)
        with torch.device("meta"):
            model = cls(config)
        model.load_state_dict(state, assign=True)  # strict: every parameter, no other
        if config.tie_embeddings:
            model.head.weight = model.embed.weight  # assign=True made two parameters
        for module in model.modules():  # non-persistent buffers: still on meta
            if isinstance(module, RotaryEmbedding):
                table = RotaryEmbedding(
                    module.dim, module.max_seq_len, config.rope_theta
                )
                module.cos, module.sin = table.cos, table.sin
        return model.eval()

    def new_caches(
        self,
        batch_size: int,
        max_seq_len: int | None = None,
        dtype: torch.dtype | None = None,
    ) -> list[KVCache]:
        """One empty cache per layer, for :meth:`forward` to fill while decoding."""
        return [b.attn.new_cache(batch_size, max_seq_len, dtype) for b in self.blocks]

    def forward(self, tokens: Tensor, caches: list[KVCache] | None = None) -> Tensor:
        """Logits of the next token at every position.

        Args:
            tokens: token ids, shape ``(B, T)``.
            caches: one cache per layer (from :meth:`new_caches`); the tokens are
                then taken to follow those already cached.

        Returns:
            Logits, shape ``(B, T, V)``.

        Raises:
            ValueError: ``tokens`` is not 2-D, ``caches`` has the wrong length, or
                the positions run past ``max_seq_len`` or a cache's capacity.
        """
        if tokens.dim() != 2:
            raise ValueError(f"tokens must be (B, T), got {tuple(tokens.shape)}")
        if caches is not None and len(caches) != len(self.blocks):
            raise ValueError(
                f"caches has {len(caches)} entries, the model has "
                f"{len(self.blocks)} layers"
            )
        # region forward (the tokens and caches are checked above)
        x = self.embed(tokens)  # (B, T, h)
        if self.pos_embed is not None:
            start = 0 if caches is None else caches[0].length
            x = x + self.pos_embed(self._positions(start, tokens.shape[1]))  # (B, T, h)
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i])  # (B, T, h)
        return self.head(self.norm(x))  # (B, T, V)

    def _positions(self, start: int, T: int) -> Tensor:
        """Positions ``start .. start + T - 1`` for the learned table, checked."""
        if start + T > self.config.max_seq_len:
            raise ValueError(
                f"positions {start}..{start + T - 1} exceed the position table "
                f"(max_seq_len={self.config.max_seq_len})"
            )
        return torch.arange(start, start + T, device=self.embed.weight.device)  # (T,)


@torch.no_grad()
def generate_greedy(model: Transformer, prompt: Tensor, max_new_tokens: int) -> Tensor:
    """Greedy decoding with KV caches: one forward over the prompt, then one per token.

    Args:
        model: the language model.
        prompt: token ids, shape ``(B, T)``.
        max_new_tokens: tokens to append, each the argmax of the last logits.

    Returns:
        The prompt followed by the new tokens, shape ``(B, T + max_new_tokens)``.

    Raises:
        ValueError: ``max_new_tokens`` < 1, or the output would not fit
            ``max_seq_len``.
    """
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    B, T = prompt.shape
    caches = model.new_caches(B, T + max_new_tokens)
    logits = model(prompt, caches)  # (B, T, V)
    tokens = [prompt]
    for step in range(max_new_tokens):
        tokens.append(logits[:, -1].argmax(-1, keepdim=True))  # (B, 1)
        if step + 1 < max_new_tokens:
            logits = model(tokens[-1], caches)  # (B, 1, V)
    return torch.cat(tokens, dim=1)  # (B, T + max_new_tokens)


def _init_weights(module: nn.Module) -> None:
    """GPT-2's initialization: N(0, 0.02) for every matrix, zero biases, unit gains."""
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
