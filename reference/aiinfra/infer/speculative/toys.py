"""Toy target and draft models for speculative decoding, from fixed seeds.

A random Transformer's next-token laws are nearly flat; multiplying its matrices by
``scale`` sharpens them (greedy decoding then does not fall into an early cycle).
A draft that is the target with every weight perturbed by N(0, sigma^2) noise accepts
less as ``sigma`` grows: one knob for how close the draft is.
"""

from __future__ import annotations

import copy

import torch

from aiinfra import checks
from aiinfra.models.config import TransformerConfig
from aiinfra.models.transformer import Transformer


def scaled_model(seed: int, scale: float = 1.0, **shape: object) -> Transformer:
    """A random :class:`Transformer` of ``shape`` from ``seed``, matrices scaled.

    ``shape`` holds :class:`TransformerConfig`'s fields; every 2-D weight is
    multiplied by ``scale``; the model is returned in eval mode.
    """
    checks.positive("scale", scale)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Transformer(TransformerConfig(**shape))
    with torch.no_grad():
        for w in model.parameters():
            if w.dim() == 2:
                w.mul_(scale)
    return model.eval()


def noisy_copy(model: Transformer, sigma: float, seed: int = 1) -> Transformer:
    """``model`` with every weight perturbed by N(0, sigma^2) noise from ``seed``."""
    checks.non_negative("sigma", sigma)
    draft = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for w in draft.parameters():
            w.add_(sigma * torch.randn(w.shape, generator=g))
    return draft.eval()
