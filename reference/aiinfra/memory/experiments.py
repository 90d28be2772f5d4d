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
:func:`aiinfra.memory.segments.checkpointed_peak_bytes`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from aiinfra.memory.activations import CORE_TERMS, saved_activation_terms
from aiinfra.memory.checkpoint import checkpoint_sequential
from aiinfra.memory.measure import SavedTensorLog, model_state_bytes
from aiinfra.memory.model_states import ModelStateBytes, model_states_bytes
from aiinfra.memory.tiny_gpt import TinyGPT, TinyGPTConfig
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
    cfg: TinyGPTConfig, b: int, dtype: torch.dtype = torch.bfloat16, seed: int = 0
) -> LayerMeasurement:
    """Run the transformer layers of a :class:`TinyGPT` forward and backward.

    Args:
        cfg: shape and recompute mode; s = ``cfg.seq_len``.
        b: micro-batch size.
        dtype: parameter and activation dtype.
        seed: seeds the weights, the input and the dropout masks.

    Returns:
        The measurement of ``cfg.n_layer`` layers (embedding and head excluded).
    """
    torch.manual_seed(seed)
    model = TinyGPT(cfg).to(dtype).train()
    x = torch.randn(b, cfg.seq_len, cfg.n_embd, dtype=dtype, requires_grad=True)
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
    """Korthikanti et al.'s per-layer bytes at ``act_bytes`` per element, plus the
    LayerNorm statistics the paper leaves out.

    Args:
        s, b, h, a: sequence, micro-batch, hidden size, heads.
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


def measure_model_states(
    mixed: bool, cfg: TinyGPTConfig | None = None, seed: int = 0
) -> tuple[ModelStateBytes, ModelStateBytes, int]:
    """Take one AdamW step and weigh the model states.

    Args:
        mixed: bf16 model with fp32 master weights if True, plain fp32 if False.
        cfg: the model (default: a 2-layer :class:`TinyGPTConfig`).
        seed: seeds the weights and the batch.

    Returns:
        (measured, formula, step counters): the formula is (2 + 2 + 12) Psi or
        (4 + 4 + 8) Psi; AdamW adds one 4-byte ``step`` tensor per parameter tensor,
        and the third item is their number.
    """
    cfg = cfg or TinyGPTConfig()
    torch.manual_seed(seed)
    model = TinyGPT(cfg).to(torch.bfloat16 if mixed else torch.float32)
    params = list(model.parameters())
    if mixed:
        opt = MasterWeights(params, lambda ps: torch.optim.AdamW(ps, lr=1e-3))
    else:
        opt = torch.optim.AdamW(params, lr=1e-3)
    idx = torch.randint(cfg.vocab_size, (2, cfg.seq_len))
    logits = model(idx)  # (B, T, V)
    F.cross_entropy(logits.float().flatten(0, 1), idx.flatten()).backward()
    opt.step()
    n = sum(p.numel() for p in params)
    formula = model_states_bytes(n) if mixed else model_states_bytes(n, 4, 4, 8)
    return model_state_bytes(model, opt), formula, len(params)


def gelu_chain(n_layers: int, width: int, seed: int = 0) -> list[nn.Module]:
    """n layers of Linear + GELU: each saves its input and the GELU input (a = 2c)."""
    torch.manual_seed(seed)
    return [nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(n_layers)]


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
    torch.manual_seed(seed)
    width = layers[0][0].in_features
    params = [p for layer in layers for p in layer.parameters()]
    x = torch.randn(b, width, requires_grad=True)  # (b, width)
    with SavedTensorLog(exclude=params) as log:
        y = checkpoint_sequential(layers, segments, x)
        forward_bytes = log.live_bytes
        y.sum().backward()
    return LayerMeasurement(forward_bytes, log.peak_bytes, log)
