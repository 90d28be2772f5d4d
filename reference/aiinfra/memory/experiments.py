"""The calculator against the tensors: measured bytes of a tiny GPT, on a CPU.

Three measurements, each paired with its formula. Activations: one layer of
:class:`aiinfra.memory.tiny_gpt.TinyGPT` run under
:class:`aiinfra.memory.measure.SavedTensorLog`, against the sum of Korthikanti et
al.'s terms at the measured element size (2 bytes in bf16, as in the paper; 4 in
fp32). The paper leaves out the mean and reciprocal standard deviation that each
LayerNorm keeps per token (O(sb), against O(sbh) for the rest); the prediction adds
them explicitly, so the two must agree to the byte. Model states: a real AdamW step
in fp32 and in bf16 with fp32 master weights, against (4 + 4 + 8) Psi and
(2 + 2 + 12) Psi plus AdamW's one 4-byte step counter per parameter tensor.
Checkpointing: a chain of layers run as k segments, against
:func:`aiinfra.memory.segments.checkpointed_peak_bytes`. The Llama family: layers of
the package's own Transformer built from a config, in fp32, against
:func:`aiinfra.memory.layer_terms.layer_activation_terms` plus what the eager
RMSNorm and mask keep beyond it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from aiinfra.memory.activations import CORE_TERMS, saved_activation_terms
from aiinfra.memory.checkpoint import checkpoint_sequential
from aiinfra.memory.measure import SavedTensorLog, model_state_bytes
from aiinfra.memory.model_states import ModelStateBytes, model_states_bytes
from aiinfra.memory.tiny_gpt import TinyGPT, tiny_gpt_config
from aiinfra.models.config import TransformerConfig
from aiinfra.models.transformer import Block
from aiinfra.precision.master_weights import MasterWeights


@dataclass(frozen=True)
class LayerMeasurement:
    """Saved-for-backward bytes of a stack of layers, measured.

    Attributes:
        forward_bytes: bytes saved when forward ends (what the formula counts).
        peak_bytes: most bytes held at once, recomputation in backward included.
        log: the full log, tensor by tensor.
    """

    forward_bytes: int
    peak_bytes: int
    log: SavedTensorLog


def measure_layers(
    config: TransformerConfig,
    b: int,
    dtype: torch.dtype = torch.bfloat16,
    recompute: str = "none",
    seed: int = 0,
) -> LayerMeasurement:
    """Run the transformer layers of a :class:`TinyGPT` forward and backward.

    Args:
        config: a GPT-2-family config with ``d_ff = 4 d_model``, as the formula
            assumes; s = ``config.max_seq_len``.
        b: micro-batch size.
        dtype: parameter and activation dtype.
        recompute: ``"none"``, ``"selective"`` or ``"full"``.
        seed: seeds the weights, the input and the dropout masks (the global random
            state is restored afterwards).

    Returns:
        The measurement of ``config.n_layers`` layers (embedding and head excluded).

    Raises:
        ValueError: ``config`` is not a GPT layer with a ``4 d_model`` MLP, or
            ``recompute`` is unknown.
    """
    if config.d_ff != 4 * config.d_model:
        raise ValueError(
            f"config.d_ff must be 4 * d_model = {4 * config.d_model} (the formula's "
            f"MLP), got {config.d_ff}"
        )
    s, h = config.max_seq_len, config.d_model
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(seed)  # weights and masks
        model = TinyGPT(config, recompute=recompute).to(dtype).train()
        x = torch.randn(b, s, h, dtype=dtype, requires_grad=True)  # (B, T, C)
        with SavedTensorLog(exclude=[*model.parameters(), *model.buffers()]) as log:
            y = x
            for block in model.blocks:
                y = block(y)  # (B, T, C)
            forward_bytes = log.live_bytes
            y.float().sum().backward()
    return LayerMeasurement(forward_bytes, log.peak_bytes, log)


def layer_norm_stats_bytes(s: int, b: int, stat_bytes: int) -> int:
    """Bytes of the mean and 1/std that a layer's two LayerNorms keep per token.

    Args:
        s: sequence length.
        b: micro-batch size.
        stat_bytes: bytes per statistic (the activation dtype on CPU; fp32 on CUDA).

    Returns:
        2 norms x 2 statistics x s b x ``stat_bytes``.
    """
    return 2 * 2 * s * b * stat_bytes


def predicted_layer_bytes(
    s: int, b: int, h: int, a: int, act_bytes: int, recompute: str = "none"
) -> int:
    """Korthikanti et al.'s per-layer bytes plus the LayerNorm statistics.

    The paper's terms are taken at ``act_bytes`` per element; the statistics are
    what the paper leaves out.

    Args:
        s: sequence length.
        b: micro-batch size.
        h: hidden size.
        a: attention heads.
        act_bytes: bytes per activation element (masks stay at one byte).
        recompute: ``"none"``, ``"selective"`` or ``"full"``.

    Returns:
        Bytes one layer saves for backward, as measured by :func:`measure_layers`.
    """
    if recompute == "full":
        return act_bytes * s * b * h  # only the layer input
    terms = saved_activation_terms(s, b, h, a, act_bytes, mask_bytes=1)
    if recompute == "selective":
        terms = {k: v for k, v in terms.items() if k not in CORE_TERMS}
    return sum(terms.values()) + layer_norm_stats_bytes(s, b, act_bytes)


def shrunk_config(
    config: TransformerConfig, k: int = 64, s: int = 16
) -> TransformerConfig:
    """One layer of ``config`` with h, f and d divided by ``k``: same H, G, f/h.

    Args:
        config: a dense model (a preset).
        k: divides ``d_model``, ``d_ff`` and ``head_dim`` (64 keeps d = 2 for
            128-wide heads, the smallest that RoPE rotates).
        s: the shrunk model's ``max_seq_len``.

    Returns:
        The shrunk config, one layer, a 256-token vocabulary.

    Raises:
        ValueError: ``k`` does not divide the three widths.
    """
    widths = {
        "d_model": config.d_model,
        "d_ff": config.d_ff,
        "head_dim": config.head_dim,
    }
    if any(w % k for w in widths.values()):
        raise ValueError(f"k = {k} must divide {widths}")
    small = {name: w // k for name, w in widths.items()}
    return dataclasses.replace(
        config, **small, n_layers=1, vocab_size=256, max_seq_len=s, sliding_window=0
    )


def measure_config_layers(
    config: TransformerConfig, b: int, s: int, seed: int = 0
) -> LayerMeasurement:
    """Run ``config.n_layers`` of the package's own :class:`Block` in fp32.

    The blocks are those :class:`~aiinfra.models.transformer.Transformer` builds
    from ``config`` (GQA, RoPE, RMSNorm, SwiGLU for the Llama family; MLA and
    experts, after ``first_dense_layers`` dense ones, for DeepSeek), written in
    eager PyTorch: what :func:`~aiinfra.memory.layer_terms.layer_activation_terms`
    counts with ``attention="materialised"``, plus :func:`eager_extras_bytes`.

    Args:
        config: a config with an RMSNorm and SwiGLU layer (GQA or MLA, dense
            or experts).
        b: micro-batch size.
        s: sequence length (at most ``config.max_seq_len``).
        seed: seeds the weights and the input (the global random state is
            restored afterwards).

    Returns:
        The measurement of the blocks (embedding and head excluded).

    Raises:
        ValueError: ``config`` is not a Llama-family layer (the GPT layer, with
            dropout, is :func:`measure_layers`'), or ``s`` does not fit it.
    """
    if config.mlp != "swiglu" or config.norm != "rmsnorm":
        raise ValueError(
            "config must be a Llama-family layer (rmsnorm, swiglu; GQA or MLA, "
            "dense or experts); the GPT layer with dropout is measured by "
            "measure_layers"
        )
    if not 1 <= s <= config.max_seq_len:
        raise ValueError(f"s must be in [1, {config.max_seq_len}], got {s}")
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(seed)
        blocks = [Block(config, i).train() for i in range(config.n_layers)]
        x = torch.randn(b, s, config.d_model, requires_grad=True)  # (B, T, h)
    states = [t for blk in blocks for t in (*blk.parameters(), *blk.buffers())]
    with SavedTensorLog(exclude=states) as log:
        y = x
        for block in blocks:
            y = block(y)  # (B, T, h)
        forward_bytes = log.live_bytes
        y.sum().backward()
    return LayerMeasurement(forward_bytes, log.peak_bytes, log)


def eager_extras_bytes(config: TransformerConfig, b: int, s: int) -> int:
    """What the package's eager layer saves beyond the count, in fp32, per layer.

    Each of the two RMSNorms, written as ``x * rsqrt(mean(x^2) + eps) * g``,
    keeps its normalised input before the gain (s b h) and its 1/rms per token
    (s b); the attention keeps its causal mask, s^2 bools shared by the batch.
    MLA's RMSNorms on its latents keep the same: s b (d_c + 1), and s b (d_c' + 1)
    when queries are compressed.

    Args:
        config: the model (h = ``d_model``; ``kv_lora_rank``, ``q_lora_rank``).
        b: micro-batch size.
        s: sequence length.

    Returns:
        Bytes per layer at 4 bytes per element.
    """
    widths = [config.d_model, config.d_model]  # the attention's and MLP's norms
    if config.is_mla:
        widths.append(config.kv_lora_rank)
        if config.q_lora_rank:
            widths.append(config.q_lora_rank)
    return sum(4 * s * b * (w + 1) for w in widths) + s * s


def measure_model_states(
    mixed: bool, config: TransformerConfig | None = None, seed: int = 0
) -> tuple[ModelStateBytes, ModelStateBytes, int]:
    """Take one AdamW step and weigh the model states.

    Args:
        mixed: bf16 model with fp32 master weights if True, plain fp32 if False.
        config: a GPT-2-family model (default: :func:`tiny_gpt_config`, 2 layers).
        seed: seeds the weights, the dropout masks and the batch (the global
            random state is restored afterwards).

    Returns:
        (measured, formula, step counters): the formula is (2 + 2 + 12) Psi or
        (4 + 4 + 8) Psi; AdamW adds one 4-byte ``step`` tensor per parameter tensor,
        and the third item is their number.
    """
    config = config or tiny_gpt_config()
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(seed)  # weights and masks
        model = TinyGPT(config).to(torch.bfloat16 if mixed else torch.float32)
        params = list(model.parameters())
        if mixed:
            opt = MasterWeights(params, lambda ps: torch.optim.AdamW(ps, lr=1e-3))
        else:
            opt = torch.optim.AdamW(params, lr=1e-3)
        idx = torch.randint(config.vocab_size, (2, config.max_seq_len))  # (B, T)
        logits = model(idx)  # (B, T, V)
        F.cross_entropy(logits.float().flatten(0, 1), idx.flatten()).backward()
        opt.step()
    n = sum(p.numel() for p in params)
    formula = model_states_bytes(n) if mixed else model_states_bytes(n, 4, 4, 8)
    return model_state_bytes(model, opt), formula, len(params)


def gelu_chain(n_layers: int, width: int, seed: int = 0) -> list[nn.Module]:
    """A chain of Linear + GELU layers; each saves its input and the GELU input.

    So one layer saves a = 2c bytes, c being the bytes of its input.

    Args:
        n_layers: n, layers in the chain.
        width: features in and out of every layer.
        seed: seeds the weights (the global random state is restored afterwards).

    Returns:
        The layers, ``nn.Sequential(nn.Linear, nn.GELU)`` each.
    """
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(seed)
        return [
            nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(n_layers)
        ]


def measure_segments(
    layers: list[nn.Module], segments: int, b: int, seed: int = 0
) -> LayerMeasurement:
    """Run a chain as ``segments`` checkpointed segments, forward and backward.

    Args:
        layers: the chain, ``nn.Sequential`` layers that start with an
            ``nn.Linear`` (as :func:`gelu_chain` builds).
        segments: k, 1 to ``len(layers)``.
        b: batch rows of the input.
        seed: seeds the input.

    Returns:
        Bytes saved after forward (the k checkpoints) and the peak in backward.
    """
    width = layers[0][0].in_features
    params = [p for layer in layers for p in layer.parameters()]
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(b, width, generator=generator, requires_grad=True)  # (b, width)
    with SavedTensorLog(exclude=params) as log:
        y = checkpoint_sequential(layers, segments, x)
        forward_bytes = log.live_bytes
        y.sum().backward()
    return LayerMeasurement(forward_bytes, log.peak_bytes, log)
