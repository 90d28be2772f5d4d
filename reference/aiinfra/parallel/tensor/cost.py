"""What tensor parallelism costs per layer: traffic, and time on a link (a model).

Per layer and training step, Megatron-LM's layout runs 4 all-reduces of the ``b T h``
activations (Shoeybi et al. 2019, Fig. 4), and sequence parallelism replaces each by
an all-gather and a reduce-scatter of the same buffer (Korthikanti et al. 2022), plus
one all-gather per column-parallel matmul group in backward: Megatron-LM saves the
input's sequence shard and gathers it again for the weight gradients
(``LinearWithGradAccumulationAndAsyncCommunication``), which is what makes the
activations ``1/p``. The
tests count those collectives on real ranks; here they are priced with the
alpha-beta model of :mod:`aiinfra.comm.cost` and set against the layer's matmul time
at a GPU's dense peak, which gives the share of a layer spent communicating when
nothing overlaps it. That share grows with ``p`` (the compute shrinks as 1/p, the
traffic does not) and with a slow link: the reason tensor parallelism stays inside a
node.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiinfra.comm import cost
from aiinfra.models.config import TransformerConfig

ALL_REDUCES_PER_LAYER = 4  # 2 forward (g), 2 backward (f)
SP_REGATHERS_PER_LAYER = 2  # backward all-gathers of the QKV and fc1 inputs


def layer_traffic(p: int, sp: bool = False) -> list[tuple[str, float]]:
    """The collectives of one layer per step, as (operation, multiple of b T h).

    Args:
        p: tensor-parallel ranks.
        sp: sequence parallelism.

    Raises:
        ValueError: ``p`` < 1.
    """
    if not isinstance(p, int) or p < 1:
        raise ValueError(f"p must be an integer >= 1, got {p!r}")
    if p == 1:
        return []
    if sp:  # per block: AG, RS forward; RS's AG, the re-gather, AG's RS backward
        forward = [("all_gather", 1.0), ("reduce_scatter", 1.0)]
        backward = [("all_gather", 1.0)] * 2 + [("reduce_scatter", 1.0)]
        blocks = SP_REGATHERS_PER_LAYER  # attention and MLP
        return forward * blocks + backward * blocks
    return [("all_reduce", 1.0)] * ALL_REDUCES_PER_LAYER


def layer_flops(c: TransformerConfig, tokens: int, seq: int) -> float:
    """Matmul FLOPs of one layer's forward and backward over ``tokens`` tokens.

    ``6 x`` the layer's matmul weights per token plus ``12 T h_attn`` for the scores
    and the weighted sum (PaLM, Appendix B), causal masking not subtracted.
    """
    h, d = c.d_model, c.head_dim
    weights = h * d * (2 * c.n_heads + 2 * c.n_kv_heads) + 3 * h * c.d_ff
    return tokens * (6 * weights + 12 * seq * c.n_heads * d)


@dataclass(frozen=True)
class LayerCost:
    """Seconds per layer and step: compute on one of ``p`` GPUs, communication."""

    compute: float
    communication: float

    @property
    def comm_share(self) -> float:
        """Communication / (compute + communication): its share if not overlapped."""
        return self.communication / (self.compute + self.communication)


def layer_cost(
    c: TransformerConfig,
    p: int,
    tokens: int,
    seq: int,
    peak_flops: float,
    link: cost.Link,
    sp: bool = False,
    bytes_per_element: int = 2,
) -> LayerCost:
    """Compute and communication time of one layer on a tensor-parallel group.

    Args:
        c: the model.
        p: tensor-parallel ranks (they split the compute).
        tokens: ``b T``, tokens of the micro-batch.
        seq: ``T``, the sequence length (for the attention scores).
        peak_flops: one GPU's dense peak, FLOP/s (compute at 100 %: a lower bound).
        link: the link the group's collectives use (alpha-beta model).
        sp: sequence parallelism.
        bytes_per_element: 2 for bf16 activations.

    Raises:
        ValueError: a size is not positive.
    """
    for name, value in (("tokens", tokens), ("seq", seq), ("peak_flops", peak_flops)):
        if value <= 0:
            raise ValueError(f"{name} must be > 0, got {value!r}")
    n = tokens * c.d_model * bytes_per_element  # bytes of b T h
    times = {
        "all_reduce": cost.ring_all_reduce_time,
        "all_gather": cost.ring_all_gather_time,
        "reduce_scatter": cost.ring_reduce_scatter_time,
    }
    comm = sum(times[op](k * n, p, link) for op, k in layer_traffic(p, sp))
    return LayerCost(layer_flops(c, tokens, seq) / p / peak_flops, comm)
