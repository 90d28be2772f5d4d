"""SmoothQuant: move the activations' outliers into the weights, then W8A8.

A few input channels of a large model's activations are 10-100x larger than the rest
(Dettmers et al. 2022), so one int8 scale per token or per tensor wastes most codes
on them. SmoothQuant (Xiao et al. 2023, Eq. 4) divides input channel ``j`` by
``s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)`` and multiplies the weight's column
``j`` by it: ``Y = (X diag(s)^-1)(diag(s) W^T)`` is the same product, but the
activations' range shrinks and the weights' grows, both to about
``sqrt(max|X_j| max|W_j|)`` at ``alpha = 0.5``. The division is folded offline into
the previous operation (a norm's gain, or the previous linear's output rows), so
inference runs a plain int8 GEMM: activations quantized per token (or per tensor)
and weights per output channel, ``Y = diag(s_X) (X_q W_q^T) diag(s_W)``. Notation:
``X`` ``(N, in)``, ``W`` ``(out, in)`` as ``nn.Linear`` stores it; ``max|W_j|`` is
over the column ``j`` of every layer that reads ``X``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiinfra.infer.quant.rtn import check_float_tensor, dequantize, quantize

ACT_GRANULARITIES = ("token", "tensor")


def check_weights(name: str, x: Tensor, weights: Tensor | list[Tensor]) -> list[Tensor]:
    """The weight(s) that read ``x``, as a list, once checked against ``x``.

    Args:
        name: ``x``'s name in the caller, for the messages.
        x: a floating tensor ``(..., in)``.
        weights: one ``(out, in)`` floating tensor or several.

    Raises:
        TypeError: ``x`` or a weight is not a floating tensor.
        ValueError: no weight, or one that is not ``(out, in)``.
    """
    check_float_tensor(name, x)
    ws = [weights] if isinstance(weights, Tensor) else list(weights)
    if not ws:
        raise ValueError("weights must hold at least one (out, in) tensor")
    for w in ws:
        check_float_tensor("weights", w)
        if w.dim() != 2 or w.shape[1] != x.shape[-1]:
            raise ValueError(
                f"weights must be (out, in) with in = {x.shape[-1]}, the last "
                f"dimension of {name}, got {tuple(w.shape)}"
            )
    return ws


def check_scales(s: Tensor, weight: Tensor) -> None:
    """Check per-input-channel scales ``s`` of a weight ``(out, in)``.

    Raises:
        TypeError: ``s`` is not a floating tensor.
        ValueError: ``s`` is not ``(in,)``, or a scale is not > 0.
    """
    check_float_tensor("s", s)
    if weight.dim() != 2 or s.shape != (weight.shape[1],):
        raise ValueError(
            f"s must be (in,) for a weight (out, in), got s {tuple(s.shape)}, "
            f"weight {tuple(weight.shape)}"
        )
    if (s <= 0).any():
        raise ValueError("s must be > 0 in every channel")


def smoothing_scales(
    act_absmax: Tensor, weights: Tensor | list[Tensor], alpha: float = 0.5
) -> Tensor:
    """SmoothQuant's per-input-channel scales ``s_j`` (Xiao et al. 2023, Eq. 4).

    Args:
        act_absmax: ``max|X_j|`` over the calibration tokens, shape ``(in,)``.
        weights: the ``(out, in)`` weight(s) of the layer(s) that read ``X``; for
            several (query, key, value) the column maximum is taken over all.
        alpha: migration strength in ``[0, 1]``; 0.5 in the paper for most models.

    Returns:
        ``s`` of shape ``(in,)``; channels with a zero maximum get ``s_j = 1``.

    Raises:
        TypeError: if an argument is not a floating tensor.
        ValueError: for mismatched shapes, negative maxima or ``alpha`` outside
            ``[0, 1]``.
    """
    ws = check_weights("act_absmax", act_absmax, weights)
    if act_absmax.dim() != 1 or (act_absmax < 0).any():
        raise ValueError("act_absmax must be a 1-D tensor of maxima >= 0")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}")
    w_absmax = torch.cat([w.detach().abs() for w in ws]).amax(dim=0)  # (in,)
    s = act_absmax.double().pow(alpha) / w_absmax.double().pow(1 - alpha)  # (in,)
    ok = (act_absmax > 0) & (w_absmax > 0)
    return torch.where(ok, s, torch.ones_like(s)).to(act_absmax.dtype)


def smooth(x: Tensor, weight: Tensor, s: Tensor) -> tuple[Tensor, Tensor]:
    """``X diag(s)^-1`` and ``W diag(s)``: the same product, moved difficulty.

    Args:
        x: activations ``(..., in)``.
        weight: ``(out, in)``.
        s: scales ``(in,)``, all > 0.

    Returns:
        The smoothed activations and weight, shapes unchanged.

    Raises:
        TypeError: if an argument is not a floating tensor.
        ValueError: for mismatched shapes or a scale <= 0.
    """
    check_float_tensor("x", x)
    check_float_tensor("weight", weight)
    check_scales(s, weight)
    if x.shape[-1] != s.shape[0]:
        raise ValueError(f"x must be (..., {s.shape[0]}), got {tuple(x.shape)}")
    return x / s, weight * s  # (..., in), (out, in)


def fold_into_norm(norm_weight: Tensor, linears: list[nn.Linear], s: Tensor) -> None:
    """Fold ``diag(s)^-1`` into a norm's gain and ``diag(s)`` into the linears.

    In place. After it the norm emits ``X diag(s)^-1`` and each linear holds
    ``W diag(s)``: the same function (up to rounding), with smoothed inputs.

    Args:
        norm_weight: the gain ``(in,)`` of the norm that feeds the linears.
        linears: the layers that read the norm's output (query, key, value).
        s: scales ``(in,)``, all > 0.

    Raises:
        TypeError: if ``s`` is not a floating tensor.
        ValueError: for mismatched shapes or a scale <= 0.
    """
    for lin in linears:
        check_scales(s, lin.weight)
    with torch.no_grad():
        for lin in linears:
            lin.weight.mul_(s)  # (out, in): W diag(s)
        norm_weight.div_(s)  # (in,): the norm now emits X diag(s)^-1


def quantize_activation(x: Tensor, granularity: str = "token") -> Tensor:
    """Round-to-nearest int8 of activations, dequantized (fake quantization).

    Args:
        x: ``(..., in)``.
        granularity: ``'token'`` (one scale per row, dynamic) or ``'tensor'``.

    Raises:
        ValueError: for an unknown ``granularity``.
    """
    if granularity not in ACT_GRANULARITIES:
        raise ValueError(
            f"granularity must be one of {ACT_GRANULARITIES}, got {granularity!r}"
        )
    x2 = x.reshape(-1, x.shape[-1])  # (N, in): one row per token
    gran = "channel" if granularity == "token" else "tensor"
    return dequantize(quantize(x2, 8, "absmax", gran)).reshape(x.shape)


class W8A8Linear(nn.Module):
    """A linear layer with int8 weights (per output channel) and int8 activations.

    The int8 GEMM is simulated: codes times scales in float, which equals the
    int32-accumulated product rescaled. With smoothing scales ``s`` the input is
    divided by ``s`` first, which is what the folded previous operation produces.

    Args:
        linear: the float layer.
        s: smoothing scales ``(in,)``, or None for plain W8A8.
        act_granularity: ``'token'`` or ``'tensor'`` activation scales.

    Raises:
        ValueError: as :func:`smooth` and :func:`quantize_activation`.
    """

    def __init__(
        self, linear: nn.Linear, s: Tensor | None = None, act_granularity: str = "token"
    ) -> None:
        super().__init__()
        if act_granularity not in ACT_GRANULARITIES:
            raise ValueError(
                f"act_granularity must be one of {ACT_GRANULARITIES}, got "
                f"{act_granularity!r}"
            )
        w = linear.weight.detach()  # (out, in)
        if s is not None:
            check_scales(s, w)
            w = w * s  # (out, in): W diag(s)
        self.act_granularity = act_granularity
        self.register_buffer("s", None if s is None else s.detach().clone())
        w_hat = dequantize(quantize(w, 8, "absmax", "channel"))  # (out, in)
        self.register_buffer("weight", w_hat)
        b = linear.bias
        self.register_buffer("bias", None if b is None else b.detach().clone())

    def forward(self, x: Tensor) -> Tensor:
        """``x (..., in) -> (..., out)``."""
        if self.s is not None:
            x = x / self.s  # (..., in): what the folded norm emits
        x_hat = quantize_activation(x, self.act_granularity)
        return F.linear(x_hat, self.weight.to(x.dtype), self.bias)
