"""The shape of a mixture-of-experts layer as data: what a ``config.json`` says.

A MoE layer replaces the MLP of a Transformer block by ``E`` routed experts, each a
SwiGLU MLP of width ``d_e``, of which a router picks ``K`` per token (Shazeer et al.
2017; GShard; Switch), plus ``E_s`` shared experts every token goes through
(DeepSeekMoE). The published models differ in a handful of switches, all here:

=================  ========  =========  ======  =======  ======================
model              scoring   top-K      norm    groups   shared experts
=================  ========  =========  ======  =======  ======================
Mixtral 8x7B       softmax   2 of 8     yes     1        none
Qwen1.5-MoE        softmax   4 of 60    no      1        one MLP, sigmoid gate
DeepSeek-V2        softmax   6 of 160   no      3 of 8   2 (x16 routed scale)
DeepSeek-V3        sigmoid   8 of 256   yes     4 of 8   1 (x2.5 routed scale)
=================  ========  =========  ======  =======  ======================

Group-limited routing (DeepSeek-V2 Sec. 2.2.2, V3 Sec. 2.1.2) first keeps the
``topk_groups`` best of ``n_groups`` expert groups per token (groups map onto nodes,
so a token's experts live on at most that many nodes), then takes the top-K among
their experts; V2 scores a group by its best expert, V3 by the sum of its two best.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aiinfra import checks

ROUTERS = ("softmax", "sigmoid")
GROUP_SCORES = ("max", "top2")


@dataclass(frozen=True)
class MoESpec:
    """One MoE layer's routing and expert shapes.

    Attributes:
        n_experts: ``E``, routed experts.
        top_k: ``K``, routed experts per token, ``1 <= K <= E``.
        d_expert: ``d_e``, intermediate width of each routed expert (SwiGLU).
        n_shared: ``E_s``, shared experts every token uses (0: none).
        d_shared: intermediate width of the shared experts taken together, as one
            SwiGLU MLP (DeepSeek fuses its ``E_s`` shared experts into one MLP of
            width ``E_s d_e``; Qwen1.5-MoE gives its own width). ``None``:
            ``n_shared * d_expert``.
        shared_gate: the shared output is scaled by ``sigmoid(w^T x)`` (Qwen-MoE).
        router: ``"softmax"`` over the ``E`` logits (Mixtral, Qwen, DeepSeek-V2) or
            ``"sigmoid"`` of each logit (DeepSeek-V3).
        norm_topk: the ``K`` chosen weights are divided by their sum.
        routed_scale: the routed output is multiplied by this (DeepSeek's
            ``routed_scaling_factor``).
        n_groups: experts are split into this many equal groups (1: no limit).
        topk_groups: a token's experts come from at most this many groups.
        group_score: how a group is ranked: ``"max"`` of its scores (DeepSeek-V2)
            or the sum of its ``"top2"`` (DeepSeek-V3).
        capacity_factor: tokens an expert takes, as a multiple of the even share
            ``T K / E``; the rest are dropped (Switch). ``None``: no limit.

    Raises:
        ValueError: a field is out of range, ``E`` is not divisible by
            ``n_groups``, the kept groups hold fewer than ``K`` experts, or
            ``d_shared`` or ``shared_gate`` is set without shared experts.
    """

    n_experts: int
    top_k: int
    d_expert: int
    n_shared: int = 0
    d_shared: int | None = None
    shared_gate: bool = False
    router: str = "softmax"
    norm_topk: bool = True
    routed_scale: float = 1.0
    n_groups: int = 1
    topk_groups: int = 1
    group_score: str = "max"
    capacity_factor: float | None = None

    def __post_init__(self) -> None:
        for name in ("n_experts", "top_k", "d_expert", "n_groups", "topk_groups"):
            checks.positive_int(name, getattr(self, name))
        checks.non_negative_int("n_shared", self.n_shared)
        if self.d_shared is not None:
            checks.positive_int("d_shared", self.d_shared)
            if self.n_shared == 0:
                raise ValueError("d_shared is given but n_shared is 0")
        if self.top_k > self.n_experts:
            raise ValueError(
                f"top_k ({self.top_k}) must be <= n_experts ({self.n_experts})"
            )
        if self.router not in ROUTERS:
            raise ValueError(f"router must be one of {ROUTERS}, got {self.router!r}")
        if self.group_score not in GROUP_SCORES:
            raise ValueError(
                f"group_score must be one of {GROUP_SCORES}, got {self.group_score!r}"
            )
        if self.n_experts % self.n_groups:
            raise ValueError(
                f"n_experts ({self.n_experts}) must be divisible by n_groups "
                f"({self.n_groups})"
            )
        if self.topk_groups > self.n_groups:
            raise ValueError(
                f"topk_groups ({self.topk_groups}) must be <= n_groups "
                f"({self.n_groups})"
            )
        if self.topk_groups * (self.n_experts // self.n_groups) < self.top_k:
            raise ValueError(
                f"topk_groups ({self.topk_groups}) groups of "
                f"{self.n_experts // self.n_groups} experts hold fewer than top_k "
                f"({self.top_k}) experts"
            )
        if self.group_score == "top2" and self.n_groups > 1:
            if self.n_experts // self.n_groups < 2:
                raise ValueError("group_score 'top2' needs >= 2 experts per group")
        for name in ("norm_topk", "shared_gate"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.shared_gate and self.n_shared == 0:
            raise ValueError("shared_gate is True but n_shared is 0: nothing to gate")
        if not (isinstance(self.routed_scale, (int, float)) and self.routed_scale > 0):
            raise ValueError(f"routed_scale must be > 0, got {self.routed_scale!r}")
        if self.capacity_factor is not None and not (
            isinstance(self.capacity_factor, (int, float)) and self.capacity_factor > 0
        ):
            raise ValueError(
                f"capacity_factor must be > 0 or None, got {self.capacity_factor!r}"
            )

    @property
    def shared_width(self) -> int:
        """Intermediate width of the shared experts' one MLP (0: none)."""
        if self.n_shared == 0:
            return 0
        return (
            self.d_shared
            if self.d_shared is not None
            else self.n_shared * self.d_expert
        )

    def capacity(self, n_tokens: int) -> int | None:
        """``C = ceil(cf T K / E)``: tokens one expert takes from a batch of ``T``.

        Args:
            n_tokens: ``T``, tokens routed together (>= 0).

        Returns:
            The capacity, or ``None`` when ``capacity_factor`` is ``None``.
        """
        checks.non_negative_int("n_tokens", n_tokens)
        if self.capacity_factor is None:
            return None
        return math.ceil(self.capacity_factor * n_tokens * self.top_k / self.n_experts)
