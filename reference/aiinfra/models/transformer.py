"""A decoder-only Transformer in the Llama style, from the pieces of this package.

The model (Vaswani et al. 2017, with the pre-norm, RMSNorm, RoPE and SwiGLU choices
of Llama, Touvron et al. 2023) embeds tokens, applies ``L`` identical blocks
``x = x + Attn(RMSNorm(x))``, ``x = x + MLP(RMSNorm(x))``, normalizes once more and
projects to vocabulary logits with a head that is either its own matrix or the
transposed embedding (tied, Press & Wolf 2017). The attention of every block is
grouped-query attention, or multi-head latent attention when the config sets
``kv_lora_rank``. Passing one cache per layer turns the same forward pass into
incremental decoding. Notation: ``B`` batch, ``T`` tokens, ``d`` width, ``V`` vocab.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from aiinfra.models.attention import GroupedQueryAttention, KVCache
from aiinfra.models.config import TransformerConfig
from aiinfra.models.layers import RMSNorm, SwiGLU
from aiinfra.models.mla import MultiHeadLatentAttention


def make_attention(
    config: TransformerConfig,
) -> GroupedQueryAttention | MultiHeadLatentAttention:
    """The attention the config asks for: MLA if ``kv_lora_rank`` > 0, else GQA."""
    if config.is_mla:
        return MultiHeadLatentAttention(
            config.d_model,
            config.n_heads,
            config.head_dim,
            config.kv_lora_rank,
            config.q_lora_rank,
            config.rope_head_dim,
            config.max_seq_len,
            config.rope_theta,
            config.norm_eps,
        )
    return GroupedQueryAttention(
        config.d_model,
        config.n_heads,
        config.n_kv_heads,
        config.head_dim,
        config.max_seq_len,
        config.rope_theta,
    )


class Block(nn.Module):
    """One pre-norm decoder block: attention, then the SwiGLU MLP, each residual.

    Args:
        config: the model shape.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(config.d_model, config.norm_eps)
        self.attn = make_attention(config)
        self.mlp_norm = RMSNorm(config.d_model, config.norm_eps)
        self.mlp = SwiGLU(config.d_model, config.d_ff)

    def forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        """Shape ``(B, T, d)`` in and out; ``cache`` is this layer's KV cache."""
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
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.norm_eps)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.head.weight = self.embed.weight  # one (V, d) matrix, used twice
        self.apply(_init_weights)

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
        x = self.embed(tokens)  # (B, T, d)
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i])  # (B, T, d)
        return self.head(self.norm(x))  # (B, T, V)


def _init_weights(module: nn.Module) -> None:
    """GPT-2's initialization: N(0, 0.02) for every matrix, ones for norm gains."""
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
