"""A small training run that shows a skewed router staying skewed, or being balanced.

A MoE layer learns a fixed random linear map ``y = W* x`` on Gaussian tokens. Its
router starts skewed: every token carries a constant feature, and the router weights
of two experts on that feature are large, so nearly all tokens choose those two
(``max / mean`` load near ``E / K``). Trained on the task loss alone, nothing pulls
tokens away from them: they are the experts that learn. With the Switch
load-balancing loss (Fedus et al. 2022) the router's gradient lowers the overloaded
experts' probabilities; with DeepSeek-V3's bias (Sec. 2.1.2) the choice is corrected
step by step without touching the gradient. The router is DeepSeek-V3's (sigmoid,
normalised top-K) for all three, so the methods differ in the balancing only.
Notation: ``T`` tokens per step, ``E`` experts, ``K`` per token, ``h`` width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from aiinfra.models.moe.balance import expert_load, load_balancing_loss
from aiinfra.models.moe.layer import MoELayer
from aiinfra.models.moe.spec import MoESpec

METHODS = ("none", "switch", "bias")


@dataclass(frozen=True)
class BalanceRunConfig:
    """The synthetic run; the defaults finish in well under a second per method.

    ``alpha`` and ``gamma`` are larger than the papers' (``1e-2`` and ``1e-3``)
    because the run has 80 steps, not hundreds of thousands.
    """

    d_model: int = 16  # h
    n_experts: int = 8  # E
    top_k: int = 2  # K
    d_expert: int = 16  # d_e
    tokens: int = 64  # T per step, fresh each step
    steps: int = 80
    lr: float = 1.0  # plain SGD
    skew: float = 2.0  # router weight of experts 0 and 1 on the constant feature
    alpha: float = 1.0  # Switch loss weight
    gamma: float = 2e-2  # bias update speed
    threads: int = 1  # intra-op threads: tiny tensors, more threads only spin
    seed: int = 0


@dataclass(frozen=True)
class BalanceRun:
    """What one method's run recorded.

    Attributes:
        method: ``"none"``, ``"switch"`` or ``"bias"``.
        load: tokens per expert at each step, ``(steps, E)`` int64.
        task_loss: the mean-squared error at each step, ``(steps,)``.
    """

    method: str
    load: Tensor
    task_loss: Tensor

    @property
    def imbalance(self) -> Tensor:
        """``max_i load_i / mean_i load_i`` at each step, ``(steps,)``."""
        load = self.load.double()
        return load.amax(1) / load.mean(1)


def _skewed_layer(cfg: BalanceRunConfig, g: torch.Generator, gamma: float) -> MoELayer:
    spec = MoESpec(cfg.n_experts, cfg.top_k, cfg.d_expert, router="sigmoid")
    layer = MoELayer(cfg.d_model, spec, bias_update=gamma)
    with torch.no_grad():  # every parameter from the generator, not the global RNG
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
        layer.router.weight[:, 0] = 0.0
        layer.router.weight[:2, 0] = cfg.skew  # experts 0 and 1 win every token
    return layer


def train_balance(method: str, cfg: BalanceRunConfig | None = None) -> BalanceRun:
    """Train the skewed layer with one balancing method and record its load.

    Args:
        method: ``"none"``, ``"switch"`` (load-balancing loss, weight ``alpha``) or
            ``"bias"`` (DeepSeek-V3's bias update, speed ``gamma``).
        cfg: the run; defaults to :class:`BalanceRunConfig`.

    Returns:
        The recorded :class:`BalanceRun`.

    Raises:
        ValueError: ``method`` is unknown.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    cfg = cfg or BalanceRunConfig()
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        return _train(method, cfg)
    finally:
        torch.set_num_threads(threads)  # the caller's setting, restored


def _train(method: str, cfg: BalanceRunConfig) -> BalanceRun:
    g = torch.Generator().manual_seed(cfg.seed)
    h = cfg.d_model
    w_star = torch.randn(h, h, generator=g) / h**0.5  # the map to learn, (h, h)
    layer = _skewed_layer(cfg, g, cfg.gamma if method == "bias" else 0.0)
    params = list(layer.parameters())
    loads, losses = [], []
    for _ in range(cfg.steps):
        x = torch.randn(cfg.tokens, h, generator=g)  # (T, h)
        x[:, 0] = 1.0  # the constant feature the router is skewed on
        y = layer(x)  # (T, h); a "bias" layer updates its bias here
        routing = layer.last_routing
        task = F.mse_loss(y, x @ w_star.T)
        loss = task
        if method == "switch":
            loss = loss + load_balancing_loss(routing, cfg.alpha)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        with torch.no_grad():  # plain SGD (torch.optim would import the compiler)
            for p, grad in zip(params, grads, strict=True):
                if grad is not None:  # an expert no token chose has none
                    p.sub_(cfg.lr * grad)
        loads.append(expert_load(routing.experts, cfg.n_experts))
        losses.append(task.detach())
    return BalanceRun(method, torch.stack(loads), torch.stack(losses))
