"""Scaling laws as code: Kaplan's L(N), Chinchilla's L(N, D) and its optimum.

A language model of N parameters trained on D tokens costs C = 6ND FLOPs
(Kaplan et al. 2020, Sec. 2.1). Kaplan et al. fit the loss of a model trained to
convergence, L(N) = (N_c / N)^alpha_N, and found that a growing compute budget is
best spent mostly on parameters, N_opt ~ C^0.73 (their Fig. 14). Hoffmann et al.
2022 (Chinchilla, Approach 3, Eq. 2) fit the loss of every run,

    L(N, D) = E + A / N^alpha + B / D^beta,

and minimising it along C = 6ND gives the compute-optimal allocation in closed form
(:meth:`ChinchillaLaw.compute_optimal`): N_opt ~ C^a with a = beta / (alpha + beta).
N and D are the papers' letters; the rest of the book writes Psi for parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiinfra import checks

if TYPE_CHECKING:  # the laws take numbers or tensors; numbers need no torch
    import torch

FLOPS_PER_PARAMETER_TOKEN = 6  # forward 2 + backward 4 FLOPs per parameter, token
PF_DAY = 1e15 * 24 * 3600  # FLOPs in one petaflop/s-day, Kaplan's compute unit

# Kaplan et al. 2020: L(N) = (N_c / N)^alpha_N (Eq. 1.1; N without embeddings),
# and the compute-efficient size N = 1.3e9 (C / PF-day)^0.73 (Fig. 14).
KAPLAN_ALPHA_N = 0.076
KAPLAN_N_C = 8.8e13
KAPLAN_N_OPT_COEFFICIENT = 1.3e9
KAPLAN_N_OPT_EXPONENT = 0.73


def _check_positive(name: str, value: float | torch.Tensor) -> None:
    """Raise ValueError unless every element of ``value`` is finite and > 0."""
    if checks.is_number(value):
        checks.positive(name, value)
        return
    import torch

    v = torch.as_tensor(value, dtype=torch.float64)
    if not bool(torch.all(torch.isfinite(v) & (v > 0))):
        raise ValueError(f"{name} must be finite numbers > 0, got {value!r}")


def training_flops(n: float, d: float) -> float:
    """C = 6ND, the FLOPs of training N parameters on D tokens.

    Args:
        n: parameters N.
        d: training tokens D.

    Raises:
        ValueError: ``n`` or ``d`` is not > 0.
    """
    _check_positive("n", n)
    _check_positive("d", d)
    return FLOPS_PER_PARAMETER_TOKEN * n * d


def kaplan_loss(n: float | torch.Tensor) -> float | torch.Tensor:
    """Kaplan's L(N) = (N_c / N)^alpha_N, nats per token (WebText2).

    Args:
        n: non-embedding parameters N, a number or a tensor.

    Raises:
        ValueError: ``n`` is not > 0.
    """
    _check_positive("n", n)
    return (KAPLAN_N_C / n) ** KAPLAN_ALPHA_N


def kaplan_compute_optimal(c: float) -> tuple[float, float]:
    """Kaplan's compute-efficient (N, D) for a budget of ``c`` FLOPs.

    N = 1.3e9 (C / PF-day)^0.73 (Kaplan et al. 2020, Fig. 14) and D = C / (6N).

    Args:
        c: training FLOPs C.

    Returns:
        ``(n, d)``: parameters and tokens.

    Raises:
        ValueError: ``c`` is not > 0.
    """
    _check_positive("c", c)
    n = KAPLAN_N_OPT_COEFFICIENT * (c / PF_DAY) ** KAPLAN_N_OPT_EXPONENT
    return n, c / (FLOPS_PER_PARAMETER_TOKEN * n)


@dataclass(frozen=True)
class ChinchillaLaw:
    """L(N, D) = E + A / N^alpha + B / D^beta, one set of fitted parameters.

    Args:
        E: the irreducible loss, nats per token.
        A: the coefficient of the parameter term.
        B: the coefficient of the data term.
        alpha: the exponent of N.
        beta: the exponent of D.
        source: who fitted it, for tables and the command line.

    Raises:
        ValueError: a parameter is not finite and > 0.
    """

    E: float  # noqa: N815 - the papers' letters
    A: float  # noqa: N815
    B: float  # noqa: N815
    alpha: float
    beta: float
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("E", "A", "B", "alpha", "beta"):
            _check_positive(name, getattr(self, name))

    def loss(
        self, n: float | torch.Tensor, d: float | torch.Tensor
    ) -> float | torch.Tensor:
        """The predicted loss of N parameters trained on D tokens.

        Raises:
            ValueError: ``n`` or ``d`` is not > 0.
        """
        _check_positive("n", n)
        _check_positive("d", d)
        return self.E + self.A / n**self.alpha + self.B / d**self.beta

    def iso_flop_loss(self, c: float, n: float | torch.Tensor) -> float | torch.Tensor:
        """The loss along N at a fixed budget C, with D = C / (6N).

        Raises:
            ValueError: ``c`` or ``n`` is not > 0.
        """
        _check_positive("c", c)
        _check_positive("n", n)
        return self.loss(n, c / (FLOPS_PER_PARAMETER_TOKEN * n))

    @property
    def exponents(self) -> tuple[float, float]:
        """(a, b) with N_opt ~ C^a and D_opt ~ C^b: beta/(alpha+beta), alpha/(...)."""
        s = self.alpha + self.beta
        return self.beta / s, self.alpha / s

    @property
    def G(self) -> float:  # noqa: N802 - Hoffmann et al.'s letter
        """G = (alpha A / (beta B))^(1 / (alpha + beta)) (Hoffmann et al., Eq. 4)."""
        return (self.alpha * self.A / (self.beta * self.B)) ** (
            1 / (self.alpha + self.beta)
        )

    def compute_optimal(self, c: float) -> tuple[float, float]:
        """The (N, D) minimising L(N, D) subject to 6ND = C.

        N_opt = G (C/6)^a and D_opt = G^-1 (C/6)^b with a = beta/(alpha+beta),
        b = alpha/(alpha+beta); derived on the book's scaling-laws page.

        Args:
            c: training FLOPs C.

        Returns:
            ``(n, d)``: parameters and tokens, ``6 n d == c``.

        Raises:
            ValueError: ``c`` is not > 0.
        """
        _check_positive("c", c)
        a, b = self.exponents
        x = c / FLOPS_PER_PARAMETER_TOKEN
        return self.G * x**a, x**b / self.G

    def optimal_loss(self, c: float) -> float:
        """The loss at the compute-optimal (N, D) of budget C.

        Both terms fall as the same power of C: L_opt = E + K (C/6)^(-gamma) with
        gamma = alpha beta / (alpha + beta) and K = A G^-alpha + B G^beta.

        Raises:
            ValueError: ``c`` is not > 0.
        """
        _check_positive("c", c)
        x = c / FLOPS_PER_PARAMETER_TOKEN
        return self.E + self._k * x ** (-self._gamma)

    def compute_for_loss(self, target: float) -> float:
        """The budget C whose compute-optimal model reaches the loss ``target``.

        Raises:
            ValueError: ``target`` is not above E, which no budget reaches.
        """
        if not target > self.E:
            raise ValueError(f"target must be > E = {self.E}, got {target!r}")
        x = ((target - self.E) / self._k) ** (-1 / self._gamma)
        return FLOPS_PER_PARAMETER_TOKEN * x

    @property
    def _gamma(self) -> float:
        return self.alpha * self.beta / (self.alpha + self.beta)

    @property
    def _k(self) -> float:
        return self.A * self.G**-self.alpha + self.B * self.G**self.beta

    def tokens_to_match(self, n: float, target: float) -> float:
        """The tokens D at which N parameters reach the loss ``target``.

        Raises:
            ValueError: ``n`` is not > 0, or no D reaches ``target`` (it is at or
                below E + A / N^alpha, the loss of N parameters on infinite data).
        """
        _check_positive("n", n)
        gap = target - self.E - self.A / n**self.alpha
        if not gap > 0:
            raise ValueError(
                f"target must be > E + A/N^alpha = {target - gap:.4f} for n={n:.3g}, "
                f"got {target!r}"
            )
        return (self.B / gap) ** (1 / self.beta)


@dataclass(frozen=True)
class TrainingRun:
    """A published training run: its parameters, tokens and reported FLOPs.

    Args:
        name: the model.
        n: parameters N.
        d: training tokens D.
        reported_flops: the training FLOPs its paper reports.
    """

    name: str
    n: float
    d: float
    reported_flops: float

    @property
    def tokens_per_parameter(self) -> float:
        """D / N."""
        return self.d / self.n


# Hoffmann et al. 2022, Sec. 4.1: 70B parameters on 1.4T tokens, Gopher's budget.
CHINCHILLA_70B = TrainingRun("Chinchilla 70B", 70e9, 1.4e12, 5.76e23)
# Dubey et al. 2024, Sec. 3.2.1 and 3.1: 405B parameters, 15.6T text tokens,
# 3.8e25 FLOPs.
LLAMA3_405B = TrainingRun("Llama 3 405B", 405e9, 15.6e12, 3.8e25)
# Hoffmann et al. 2022: "about 20" tokens per parameter at the compute optimum
# (their Table 3, from Approach 1).
CHINCHILLA_TOKENS_PER_PARAMETER = 20

# Hoffmann et al. 2022, Table 2: Approach 3's a, from unrounded parameters.
CHINCHILLA_REPORTED_A = 0.46

# Hoffmann et al. 2022, Sec. 3.3 (Eq. 10): Approach 3's fit, as printed (2 digits).
CHINCHILLA = ChinchillaLaw(
    E=1.69,
    A=406.4,
    B=410.7,
    alpha=0.34,
    beta=0.28,
    source="Hoffmann et al. 2022, printed",
)
# The same fit with the exponents unrounded, alpha = 0.33917 and beta = 0.28491
# (quoted by Besiroglu et al. 2024, v2): they give the paper's own a = 0.46 (Table
# 2) and its 40B for Approach 3 at Gopher's budget (Table 3), which the rounded
# exponents (32B) do not.
CHINCHILLA_UNROUNDED = ChinchillaLaw(
    E=1.69,
    A=406.4,
    B=410.7,
    alpha=0.33917,
    beta=0.28491,
    source="Hoffmann et al. 2022, unrounded exponents",
)
# Hoffmann et al. 2022, Table 3: Approach 3's N_opt at Gopher's budget, 40B.
CHINCHILLA_APPROACH3_GOPHER_N = 40e9
# Dubey et al. 2024, Sec. 3.2.1: their own iso-FLOP law's optimum at 3.8e25 FLOPs,
# 402B parameters on 16.55T tokens (their fitted (alpha, A) = (0.53, 0.29), as
# printed, do not reproduce it: rounding; the book quotes the optimum).
LLAMA3_OWN_OPTIMUM = TrainingRun("Llama 3's own law", 402e9, 16.55e12, 3.8e25)
# Besiroglu et al. 2024, Table 1: their refit on the points of Hoffmann et al.'s
# Fig. 4 (all but the 5 of highest loss); E, alpha, beta to 4 digits as their
# notebook prints them (epoch-research/analyzing-chinchilla, commit 9225883).
BESIROGLU = ChinchillaLaw(
    E=1.8169,
    A=482.01,
    B=2085.43,
    alpha=0.3478,
    beta=0.3658,
    source="Besiroglu et al. 2024",
)
# Their bootstrap standard errors (same table), in the order E, A, B, alpha, beta.
BESIROGLU_STANDARD_ERRORS = (0.0257, 124.52, 1293.28, 0.0154, 0.0206)
