"""A tensor-parallel plan, written as data, applied to the package's Transformer.

A plan maps module names (``*`` matches one level, as in
``torch.distributed.tensor.parallel.parallelize_module``) to a style:
``"colwise"`` (split the output features), ``"rowwise"`` (split the input features),
``"vocab"`` (split an embedding or the output head by vocabulary rows) and
``"sequence"`` (a norm that runs on sequence shards: sequence parallelism). Megatron's
layout (Shoeybi et al. 2019) is :data:`MEGATRON_PLAN`; with the norms sharded along
the sequence it is Korthikanti et al. (2022)'s :data:`SEQUENCE_PARALLEL_PLAN`. The
plan is checked against the model, then each block is rebuilt from the full layers:
:class:`~aiinfra.parallel.tensor.attention.TensorParallelAttention`,
:class:`~aiinfra.parallel.tensor.layers.TensorParallelSwiGLU`, and the
vocabulary-parallel embedding, head and loss (:mod:`~aiinfra.parallel.tensor.vocab`).
Each block counts its own collectives, so a test reads the traffic per layer.
"""

from __future__ import annotations

import fnmatch

import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from aiinfra.comm.counter import CommCounter
from aiinfra.models.attention.gqa import GroupedQueryAttention
from aiinfra.models.layers import SwiGLU
from aiinfra.models.transformer import Transformer
from aiinfra.parallel.tensor.attention import (
    TensorParallelAttention,
    check_heads,
)
from aiinfra.parallel.tensor.layers import TensorParallelSwiGLU
from aiinfra.parallel.tensor.ops import (
    CopyToTensorParallel,
    GatherFromSequenceParallel,
    shard_size,
)
from aiinfra.parallel.tensor.vocab import (
    VocabParallelEmbedding,
    vocab_parallel_cross_entropy,
    vocab_range,
)

STYLES = ("colwise", "rowwise", "vocab", "sequence")

MEGATRON_PLAN: dict[str, str] = {
    "embed": "vocab",
    "blocks.*.attn.wq": "colwise",
    "blocks.*.attn.wk": "colwise",
    "blocks.*.attn.wv": "colwise",
    "blocks.*.attn.wo": "rowwise",
    "blocks.*.mlp.w1": "colwise",
    "blocks.*.mlp.w3": "colwise",
    "blocks.*.mlp.w2": "rowwise",
    "head": "vocab",
}
SEQUENCE_PARALLEL_PLAN: dict[str, str] = MEGATRON_PLAN | {
    "blocks.*.attn_norm": "sequence",
    "blocks.*.mlp_norm": "sequence",
    "norm": "sequence",
}


def resolve_plan(model: nn.Module, plan: dict[str, str]) -> dict[str, str]:
    """Each module name of ``model`` that ``plan`` names, with its style.

    Raises:
        ValueError: a style is unknown, or a pattern matches no module.
    """
    names = [n for n, _ in model.named_modules() if n]
    out: dict[str, str] = {}
    for pattern, style in plan.items():
        if style not in STYLES:
            raise ValueError(
                f"plan[{pattern!r}] = {style!r}: style must be one of {STYLES}"
            )
        regex = fnmatch.translate(pattern).replace(".*", "[^.]*")
        hits = [n for n in names if fnmatch.re.fullmatch(regex, n)]
        if not hits:
            raise ValueError(f"plan key {pattern!r} matches no module of the model")
        out.update(dict.fromkeys(hits, style))
    return out


def _expect(styles: dict[str, str], names: dict[str, str], where: str) -> None:
    for name, style in names.items():
        if styles.get(name) != style:
            raise ValueError(
                f"plan must give {name!r} the style {style!r} (got "
                f"{styles.get(name)!r}): {where}"
            )


def check_plan(model: Transformer, plan: dict[str, str]) -> bool:
    """Validate ``plan`` for ``model``; returns whether it is sequence parallel.

    Raises:
        TypeError: ``model`` is not the package's
            :class:`~aiinfra.models.transformer.Transformer`, or ``plan`` not a dict.
        ValueError: the model is not a Llama-family Transformer (SwiGLU, GQA, RoPE),
            or the plan is not Megatron's layout (with or without sequence
            parallelism for every norm).
    """
    if not isinstance(model, Transformer):
        raise TypeError(
            f"model must be an aiinfra Transformer, got {type(model).__name__}"
        )
    if not isinstance(plan, dict):
        raise TypeError(f"plan must be a dict, got {type(plan).__name__}")
    c = model.config
    if c.is_mla or c.mlp != "swiglu" or c.position != "rope":
        raise ValueError(
            "model must use GQA attention, a SwiGLU MLP and RoPE (kv_lora_rank=0, "
            f"mlp='swiglu', position='rope'), got {c.kv_lora_rank=}, {c.mlp=}, "
            f"{c.position=}"
        )
    styles = resolve_plan(model, plan)
    norms = ["norm"] + [
        f"blocks.{i}.{n}" for i in range(c.n_layers) for n in ("attn_norm", "mlp_norm")
    ]
    sequence = [styles.get(n) == "sequence" for n in norms]
    if any(sequence) and not all(sequence):
        raise ValueError("plan must shard every norm along the sequence, or none")
    why = "column-parallel q/k/v and MLP input, row-parallel outputs (Megatron)"
    for i in range(c.n_layers):
        layer = {f"blocks.{i}.attn.w{x}": "colwise" for x in "qkv"}
        layer |= {f"blocks.{i}.mlp.w{x}": "colwise" for x in "13"}
        layer |= {f"blocks.{i}.attn.wo": "rowwise", f"blocks.{i}.mlp.w2": "rowwise"}
        _expect(styles, layer, why)
    _expect(styles, {"embed": "vocab", "head": "vocab"}, "split by vocabulary rows")
    return all(sequence)


class TensorParallelBlock(nn.Module):
    """A decoder block with its attention and MLP split over the group.

    The norms are replicated; under sequence parallelism they run on sequence shards.
    """

    def __init__(
        self, block: nn.Module, group: dist.ProcessGroup | None, sp: bool
    ) -> None:
        super().__init__()
        self.comm = CommCounter(group)  # this layer's collectives
        if not isinstance(block.attn, GroupedQueryAttention) or not isinstance(
            block.mlp, SwiGLU
        ):
            raise ValueError("block must hold GroupedQueryAttention and SwiGLU")
        self.attn_norm, self.mlp_norm = block.attn_norm, block.mlp_norm
        self.attn = TensorParallelAttention.from_attention(
            block.attn, group, sp, self.comm
        )
        mlp = TensorParallelSwiGLU.from_swiglu(block.mlp, group, sp)
        for layer in (mlp.w1, mlp.w2, mlp.w3):
            layer.comm = self.comm
        mlp.comm = self.comm
        self.mlp = mlp

    def forward(self, x: Tensor) -> Tensor:
        """``(b, T, h)``, or ``(b, T/p, h)`` shards under sequence parallelism."""
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class TensorParallelTransformer(nn.Module):
    """:class:`~aiinfra.models.transformer.Transformer` split by a plan.

    Args:
        model: the full model (its weights are sliced, not moved).
        plan: :data:`MEGATRON_PLAN` or :data:`SEQUENCE_PARALLEL_PLAN`.
        group: the tensor-parallel group (``None``: the world).

    Raises:
        ValueError: the plan does not fit the model (:func:`check_plan`), or the
            group size does not divide the heads, KV heads, ``d_ff`` or ``V``.
    """

    def __init__(
        self,
        model: Transformer,
        plan: dict[str, str] = MEGATRON_PLAN,
        group: dist.ProcessGroup | None = None,
    ) -> None:
        super().__init__()
        self.sequence_parallel = check_plan(model, plan)
        sp = self.sequence_parallel
        self.comm = CommCounter(group)  # embedding, head and loss
        p = self.comm.world_size
        c = model.config
        shard_size("d_ff", c.d_ff, p)
        vocab_range(c.vocab_size, 0, p)  # p | V, checked before any collective
        check_heads(c.n_heads, c.n_kv_heads, p)
        self.embed = VocabParallelEmbedding.from_embedding(
            model.embed, group, sp, self.comm
        )
        self.blocks = nn.ModuleList(
            TensorParallelBlock(b, group, sp) for b in model.blocks
        )
        self.norm = model.norm
        start, end = vocab_range(c.vocab_size, self.comm.rank, p)
        if c.tie_embeddings:
            self.head_weight = self.embed.weight  # the same (V/p, h) shard
        else:
            rows = model.head.weight.detach()[start:end].clone()  # (V/p, h)
            self.head_weight = nn.Parameter(rows)

    def replicated_parameters(self) -> list[nn.Parameter]:
        """Parameters every rank holds whole: the norms' (and row-parallel biases)."""
        out = list(self.norm.parameters())
        for b in self.blocks:
            out += list(b.attn_norm.parameters()) + list(b.mlp_norm.parameters())
            out += [x.bias for x in (b.attn.wo, b.mlp.w2) if x.bias is not None]
        return out

    def sync_sequence_parallel_grads(self) -> CommCounter:
        """All-reduce the replicated parameters' gradients (sequence parallel only).

        Each rank's norm saw only its shard of the sequence, so its gradient is a
        partial sum (Megatron's ``allreduce_layernorm_grads``). Returns the counter
        of those all-reduces; without sequence parallelism it issues none.
        """
        comm = CommCounter(self.comm.group)
        if self.sequence_parallel:
            for p in self.replicated_parameters():
                if p.grad is not None:
                    comm.all_reduce(p.grad)
        return comm

    def forward(self, tokens: Tensor, targets: Tensor | None = None) -> Tensor:
        """This rank's logits ``(b, T, V/p)``, or the mean loss given ``targets``.

        ``tokens`` and ``targets`` are ``(b, T)`` token ids, the same on every rank.

        Raises:
            ValueError: ``tokens`` is not 2-D, or ``T`` is not divisible by ``p``
                under sequence parallelism.
        """
        if tokens.dim() != 2:
            raise ValueError(f"tokens must be (b, T), got {tuple(tokens.shape)}")
        if self.sequence_parallel:
            shard_size("sequence length", tokens.shape[1], self.comm.world_size)
        x = self.embed(tokens)  # (b, T, h), or (b, T/p, h) under SP
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        if self.sequence_parallel:
            x = GatherFromSequenceParallel.apply(x, self.comm, 1)  # (b, T, h)
        else:
            x = CopyToTensorParallel.apply(x, self.comm)  # f
        logits = F.linear(x, self.head_weight)  # (b, T, V/p): no rank holds (b, T, V)
        if targets is None:
            return logits
        return vocab_parallel_cross_entropy(logits, targets, self.comm).mean()
