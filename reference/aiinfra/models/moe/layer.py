"""A mixture-of-experts layer: a router picks ``K`` of ``E`` SwiGLU experts per token.

Each token's hidden state ``x`` is scored against the ``E`` routed experts by a linear
router (Shazeer et al. 2017), ``s = softmax(W_r x)`` (Mixtral, Qwen-MoE, DeepSeek-V2)
or ``s = sigmoid(W_r x)`` (DeepSeek-V3, Sec. 2.1.2). The ``K`` best experts are
chosen, optionally only within the ``topk_groups`` best of ``n_groups`` expert groups
(DeepSeek-V2's device-limited, V3's node-limited routing), and the output is
``y = routed_scale * sum_k g_k FFN_{e_k}(x) + shared(x)`` with gate weights ``g_k``
taken from the scores, divided by their sum when ``norm_topk`` (Mixtral, V3). A
per-expert bias ``b`` (V3's auxiliary-loss-free balancing) enters the choice only,
never ``g``. With a capacity factor each expert takes at most ``C`` assignments of
a batch (Switch, Sec. 2.2); the rest are dropped and the token keeps only its
residual path.
Notation: ``T`` tokens, ``h`` hidden width, ``E`` routed experts, ``K`` chosen per
token, ``d_e`` an expert's width, ``C`` the capacity.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiinfra import checks
from aiinfra.models.layers import SwiGLU
from aiinfra.models.moe.balance import expert_load, update_expert_bias
from aiinfra.models.moe.routing import Routing, capacity_keep
from aiinfra.models.moe.spec import MoESpec

NORM_EPS = 1e-20  # DeepSeek-V3's code adds it to the sum of the K gate weights


class MoELayer(nn.Module):
    """Routed SwiGLU experts, optional shared experts, and the router.

    Args:
        d_model: hidden width ``h``.
        spec: the layer's shape and routing switches.
        bias_update: ``gamma`` of DeepSeek-V3's bias update, applied after each
            training-mode forward from that batch's load (0: the bias stays put).

    Raises:
        TypeError: ``spec`` is not a :class:`MoESpec`.
        ValueError: ``d_model`` < 1, ``bias_update`` < 0, or ``spec.shared_gate``
            without shared experts.
    """

    def __init__(
        self, d_model: int, spec: MoESpec, *, bias_update: float = 0.0
    ) -> None:
        super().__init__()
        if not isinstance(spec, MoESpec):
            raise TypeError(f"spec must be a MoESpec, got {type(spec).__name__}")
        checks.positive_int("d_model", d_model)
        if not isinstance(bias_update, (int, float)) or bias_update < 0:
            raise ValueError(f"bias_update must be >= 0, got {bias_update!r}")
        if spec.shared_gate and spec.n_shared == 0:
            raise ValueError("spec.shared_gate needs shared experts (n_shared > 0)")
        self.d_model, self.spec, self.bias_update = d_model, spec, float(bias_update)
        E = spec.n_experts
        self.router = nn.Linear(d_model, E, bias=False)  # W_r, (E, h)
        self.experts = nn.ModuleList(SwiGLU(d_model, spec.d_expert) for _ in range(E))
        self.shared = SwiGLU(d_model, spec.shared_width) if spec.n_shared else None
        self.shared_gate = (
            nn.Linear(d_model, 1, bias=False) if spec.shared_gate else None
        )
        # b of DeepSeek-V3 (e_score_correction_bias): on the router's device
        self.register_buffer(
            "expert_bias", torch.zeros(E, device=self.router.weight.device)
        )
        self.last_routing: Routing | None = None

    def _check(self, x: Tensor) -> None:
        if not isinstance(x, Tensor) or not x.is_floating_point():
            raise TypeError("x must be a floating-point tensor")
        if x.dim() < 1 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have last dimension d_model={self.d_model}, got shape "
                f"{tuple(x.shape)}"
            )

    def route(self, x: Tensor) -> Routing:
        """Score the experts and choose ``K`` per token.

        Args:
            x: tokens ``(T, h)``.

        Returns:
            The :class:`Routing` of the batch.

        Raises:
            TypeError: ``x`` is not a floating-point tensor.
            ValueError: ``x`` is not ``(T, h)``.
        """
        self._check(x)
        if x.dim() != 2:
            raise ValueError(f"route takes x of shape (T, h), got {tuple(x.shape)}")
        s, E, K = self.spec, self.spec.n_experts, self.spec.top_k
        dtype = torch.promote_types(x.dtype, torch.float32)  # route in fp32 or wider
        logits = F.linear(x.to(dtype), self.router.weight.to(dtype))  # (T, E)
        scores = logits.softmax(-1) if s.router == "softmax" else logits.sigmoid()
        # region choose
        choice = scores + self.expert_bias.to(dtype)  # bias: for the choice only
        if s.n_groups > 1:
            grouped = choice.unflatten(-1, (s.n_groups, E // s.n_groups))  # (T, G, E/G)
            if s.group_score == "max":  # DeepSeek-V2: a group's best expert
                group_score = grouped.amax(-1)  # (T, G)
            else:  # DeepSeek-V3: the sum of its two best
                group_score = grouped.topk(2, dim=-1).values.sum(-1)  # (T, G)
            best_groups = group_score.topk(s.topk_groups, dim=-1).indices  # (T, G_k)
            in_group = torch.zeros_like(group_score, dtype=torch.bool)
            in_group.scatter_(1, best_groups, True)  # (T, G)
            in_group = in_group.repeat_interleave(E // s.n_groups, dim=1)  # (T, E)
            choice = choice.masked_fill(~in_group, float("-inf"))
        experts = choice.topk(K, dim=-1).indices  # (T, K), best first
        weights = scores.gather(1, experts)  # unbiased scores, (T, K)
        if s.norm_topk:
            weights = weights / (weights.sum(-1, keepdim=True) + NORM_EPS)
        weights = weights * s.routed_scale
        # endregion
        kept = capacity_keep(experts, E, s.capacity(x.shape[0]))
        return Routing(logits, scores, weights, experts, kept)

    def experts_output(self, x: Tensor, routing: Routing) -> Tensor:
        """``sum_k kept_k g_k FFN_{e_k}(x)``, one masked gather per expert.

        Each expert runs on the tokens that chose it and kept it, as transformers'
        Mixtral block does; :mod:`aiinfra.models.moe.grouped` sorts instead.

        Args:
            x: tokens ``(T, h)``.
            routing: their routing.

        Returns:
            The routed output ``(T, h)``.
        """
        y = torch.zeros_like(x)
        w = routing.weights.to(x.dtype)  # (T, K)
        for i, expert in enumerate(self.experts):
            token, slot = torch.where((routing.experts == i) & routing.kept)  # (n_i,)
            if token.numel():
                out = expert(x[token]) * w[token, slot, None]  # (n_i, h)
                y.index_add_(0, token, out)
        return y

    def forward(self, x: Tensor) -> Tensor:
        """Route, run the experts, add the shared experts.

        Args:
            x: tokens ``(..., h)``.

        Returns:
            ``(..., h)``. The routing is kept in ``self.last_routing``.

        Raises:
            TypeError: ``x`` is not a floating-point tensor.
            ValueError: the last dimension of ``x`` is not ``h``.
        """
        self._check(x)
        x2 = x.reshape(-1, self.d_model)  # (T, h)
        routing = self.route(x2)
        self.last_routing = routing
        y = self.experts_output(x2, routing)  # (T, h)
        if self.shared is not None:
            shared = self.shared(x2)  # (T, h)
            if self.shared_gate is not None:  # Qwen-MoE
                shared = torch.sigmoid(self.shared_gate(x2)) * shared
            y = y + shared
        if self.training and self.bias_update > 0:
            load = expert_load(routing.experts, self.spec.n_experts)
            update_expert_bias(self.expert_bias, load, self.bias_update)
        return y.reshape(x.shape)


def moe_loop(layer: MoELayer, x: Tensor) -> Tensor:
    """The layer's output token by token, over each token's kept experts.

    The ground truth for :meth:`MoELayer.forward` and the grouped computation.

    Args:
        layer: the layer (its routing is reused, its expert code is not).
        x: tokens ``(T, h)``.

    Returns:
        ``(T, h)``.
    """
    routing = layer.route(x)
    rows = []
    for t in range(x.shape[0]):
        y_t = torch.zeros_like(x[t])  # (h,)
        for k in range(layer.spec.top_k):
            if routing.kept[t, k]:
                e = int(routing.experts[t, k])
                y_t = y_t + routing.weights[t, k].to(x.dtype) * layer.experts[e](x[t])
        if layer.shared is not None:
            shared = layer.shared(x[t])
            if layer.shared_gate is not None:
                shared = torch.sigmoid(layer.shared_gate(x[t])) * shared
            y_t = y_t + shared
        rows.append(y_t)
    return torch.stack(rows)  # (T, h)
