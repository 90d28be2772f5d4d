"""What recomputation costs in FLOPs: a second forward of what it dropped.

Recomputing an activation means running forward again, in backward, the operations
that produced it. Full recomputation (checkpointing every layer's input) runs every
layer's forward twice: its matmuls cost a third more than the 2 + 4 FLOPs per
parameter and token of forward and backward, whatever the model. Selective
recomputation (Korthikanti et al. 2022, Sec. 5) recomputes only the attention core,
``softmax(QK^T) V``: per layer 4 b T^2 H d FLOPs of forward (the two batched
matmuls over the full T x T square, PaLM's convention), a third of the attention
term ``12 L H d T`` per token of :func:`~aiinfra.models.flops.training_flops_per_token`.
So it costs ``T / (18 h)`` of a GPT layer's training FLOPs at most, under 1 % at
GPT-3's 2048 tokens. With a fused attention kernel there is no core left to drop:
the kernel already recomputes its scores inside its own backward, and the planner
offers selective recomputation only with the materialised softmax. The output
layer is never recomputed. Notation: T tokens, h width, H heads, d head width, L
layers, V vocabulary.
"""

from __future__ import annotations

from aiinfra.memory.activations import RECOMPUTE
from aiinfra.models.config import TransformerConfig
from aiinfra.models.flops import attention_flops_per_token, training_flops_per_token


def recompute_flops_per_token(
    cfg: TransformerConfig, seq: int, recompute: str
) -> float:
    """Extra training FLOPs per token that ``recompute`` adds.

    Args:
        cfg: the model.
        seq: T, tokens per sequence.
        recompute: ``"none"``, ``"selective"`` (the attention core) or ``"full"``
            (every layer; the output layer excluded).

    Returns:
        FLOPs per token of the second forward.

    Raises:
        ValueError: ``seq`` is not a positive integer or ``recompute`` is unknown.
    """
    if not isinstance(seq, int) or seq < 1:
        raise ValueError(f"seq must be a positive integer, got {seq!r}")
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {RECOMPUTE}, got {recompute!r}")
    # region extra
    head = 6 * cfg.vocab_size * cfg.d_model  # the output layer: not recomputed
    layers = training_flops_per_token(cfg, seq) - head  # forward + backward, 3 x F
    extra = {
        "none": 0.0,
        "selective": attention_flops_per_token(cfg, seq) / 3,  # QK^T and PV again
        "full": layers / 3,  # every layer's forward again
    }
    # endregion
    return extra[recompute]


def recompute_overhead(cfg: TransformerConfig, seq: int, recompute: str) -> float:
    """The extra FLOPs of ``recompute`` as a fraction of the step's model FLOPs.

    Args:
        cfg: the model.
        seq: T, tokens per sequence.
        recompute: ``"none"``, ``"selective"`` or ``"full"``.

    Returns:
        Extra FLOPs over :func:`~aiinfra.models.flops.training_flops_per_token`:
        what MFU leaves out and HFU counts.

    Raises:
        ValueError: as :func:`recompute_flops_per_token`.
    """
    extra = recompute_flops_per_token(cfg, seq, recompute)
    return extra / training_flops_per_token(cfg, seq)
