"""The per-token building blocks of a decoder: RMSNorm, RoPE, SwiGLU, a GELU MLP.

RMSNorm (Zhang & Sennrich 2019, Eq. 4) rescales a vector by its root mean square,
``x / sqrt(mean(x^2) + eps) * g``: LayerNorm without the mean subtraction and bias.
Rotary position embedding (Su et al. 2021, "RoFormer", Eq. 34) rotates each pair
``(x_{2i}, x_{2i+1})`` of a query or key by the angle ``m theta_i`` with
``theta_i = base^(-2i/d)``, so that the dot product of a query at position ``m`` and
a key at position ``m'`` depends only on ``m - m'``. SwiGLU (Shazeer 2020, Eq. 6)
is the gated MLP ``W_2 (SiLU(W_1 x) * W_3 x)`` of the Llama family; GPT-2 and GPT-3
use the plain ``W_2 GELU(W_1 x + b_1) + b_2`` (Hendrycks & Gimpel 2016, in the tanh
form of GPT-2's code). Notation (the book's): ``T`` positions, ``d`` the rotated
(head) width, ``h`` the model width, ``d_ff`` the MLP width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class RMSNorm(nn.Module):
    """Root-mean-square normalization with a learned gain ``g`` (no bias).

    Args:
        dim: size of the last dimension ``h``.
        eps: added to the mean square, for stability.
    """

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))  # g, (h,)

    def forward(self, x: Tensor) -> Tensor:
        """Normalize ``x`` of shape ``(..., h)``; the statistic is taken in >= fp32."""
        x32 = x.to(torch.promote_types(x.dtype, torch.float32))
        rms_inv = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., 1)
        return (x32 * rms_inv).type_as(x) * self.weight


class RotaryEmbedding(nn.Module):
    """Rotate consecutive pairs of features by position-dependent angles (RoPE).

    The cosines and sines of ``m theta_i`` are tabulated once for positions
    ``0 .. max_seq_len - 1`` in float64, then stored in float32.

    Args:
        dim: rotated width ``d`` (even), the head dimension.
        max_seq_len: number of positions in the table.
        theta: the base of the frequencies (10000 in RoFormer, 500000 in Llama 3).

    Raises:
        ValueError: ``dim`` is odd or not positive, or ``max_seq_len`` < 1.
    """

    def __init__(self, dim: int, max_seq_len: int, theta: float = 10000.0) -> None:
        super().__init__()
        if dim <= 0 or dim % 2:
            raise ValueError(f"RoPE dim must be even and positive, got {dim}")
        if max_seq_len < 1:
            raise ValueError(f"max_seq_len must be >= 1, got {max_seq_len}")
        self.dim, self.max_seq_len = dim, max_seq_len
        i = torch.arange(0, dim, 2, dtype=torch.float64)  # 2i, (d/2,)
        theta_i = theta ** (-i / dim)  # (d/2,)
        m = torch.arange(max_seq_len, dtype=torch.float64)  # (T_max,)
        angles = torch.outer(m, theta_i)  # m theta_i, (T_max, D/2)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(
        self, x: Tensor, start_pos: int = 0, positions: Tensor | None = None
    ) -> Tensor:
        """Rotate ``x`` whose positions are ``start_pos .. start_pos + T - 1``.

        Args:
            x: queries or keys, shape ``(..., T, d)``.
            start_pos: position of the first row (the KV cache length in decoding).
            positions: instead of ``start_pos``, each row's own position, shape
                ``(T,)`` (a batch of sequences packed into one row, as a serving
                engine runs them).

        Returns:
            The rotated tensor, same shape and dtype as ``x``.

        Raises:
            ValueError: the last dimension is not ``d``, or the positions run past
                the table (``start_pos + T > max_seq_len``) or ``positions`` is not
                ``T`` positions inside it.
        """
        T, D, dtype = x.shape[-2], x.shape[-1], x.dtype
        if D != self.dim:
            raise ValueError(f"x has last dimension {D}, RoPE was built for {self.dim}")
        if positions is not None:
            if positions.shape != (T,) or not (
                T == 0
                or 0 <= int(positions.min()) <= int(positions.max()) < self.max_seq_len
            ):
                raise ValueError(
                    f"positions must be ({T},) ints in [0, {self.max_seq_len}), got "
                    f"shape {tuple(positions.shape)}"
                )
            rows: slice | Tensor = positions
        elif start_pos < 0 or start_pos + T > self.max_seq_len:
            raise ValueError(
                f"positions {start_pos}..{start_pos + T - 1} exceed the RoPE table "
                f"(max_seq_len={self.max_seq_len})"
            )
        else:
            rows = slice(start_pos, start_pos + T)
        # region rotate (the shape and the positions are checked above)
        cos = self.cos[rows]  # (T, D/2)
        sin = self.sin[rows]  # (T, D/2)
        x = x.to(torch.promote_types(x.dtype, torch.float32))  # rotate in fp32 or wider
        x1, x2 = x.unflatten(-1, (D // 2, 2)).unbind(-1)  # (..., T, d/2) each
        rotated = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
        return rotated.flatten(-2).to(dtype)  # (..., T, d)


class SwiGLU(nn.Module):
    """The gated MLP of PaLM and Llama: ``W_2 (SiLU(W_1 x) * W_3 x)``.

    Args:
        d_model: input and output width ``h``.
        d_ff: hidden width; three matrices of ``h x d_ff`` parameters.
        bias: whether each of the three projections adds a bias.
    """

    def __init__(self, d_model: int, d_ff: int, bias: bool = False) -> None:
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=bias)  # gate
        self.w3 = nn.Linear(d_model, d_ff, bias=bias)  # up
        self.w2 = nn.Linear(d_ff, d_model, bias=bias)  # down

    def forward(self, x: Tensor) -> Tensor:
        """Apply the MLP to ``x`` of shape ``(..., h)``; returns ``(..., h)``."""
        return self.w2(F.silu(self.w1(x)) * self.w3(x))  # (..., d_ff) -> (..., h)


class GeluMLP(nn.Module):
    """The MLP of GPT-2 and GPT-3: ``W_2 GELU(W_1 x + b_1) + b_2``.

    GELU is taken in the tanh approximation of GPT-2's code,
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``.

    Args:
        d_model: input and output width ``h``.
        d_ff: hidden width (``4 h`` in GPT-2); two matrices of ``h x d_ff``.
        bias: whether both projections add a bias (they do in GPT-2 and GPT-3).
    """

    def __init__(self, d_model: int, d_ff: int, bias: bool = True) -> None:
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=bias)  # up
        self.w2 = nn.Linear(d_ff, d_model, bias=bias)  # down

    def forward(self, x: Tensor) -> Tensor:
        """Apply the MLP to ``x`` of shape ``(..., h)``; returns ``(..., h)``."""
        h = F.gelu(self.w1(x), approximate="tanh")  # (..., d_ff)
        return self.w2(h)  # (..., h)
