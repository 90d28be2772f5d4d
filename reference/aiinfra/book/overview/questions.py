"""The worked questions of ``docs/overview/questions.rst``."""

from __future__ import annotations

from aiinfra.hardware import budget

from .budget import BUDGET_GPU, BUDGET_MFU, budget_mfu_pct, llama3_implied_mfu_pct

QUESTION_GPUS = 8_192  # Llama 3's smaller cluster (Dubey et al. 2024, Table 4)


def llama70b_tokens_t() -> float:
    """Llama 3.1 70B's training tokens, trillions (the model card's "~15T")."""
    return next(r for r in budget.RUNS if r.name == "Llama 3.1 70B").tokens / 1e12


def llama70b_flops_e24() -> float:
    """``6ND`` of Llama 3.1 70B on 15T tokens, in 10^24 FLOPs."""
    run = next(r for r in budget.RUNS if r.name == "Llama 3.1 70B")
    return budget.training_flops(run.params, run.tokens) / 1e24


def llama70b_wall_days() -> float:
    """Days of that budget on 8,192 H100s at the worked example's MFU."""
    flops = llama70b_flops_e24() * 1e24
    return budget.wall_days(flops, BUDGET_GPU, QUESTION_GPUS, BUDGET_MFU)


def question_gpus() -> int:
    """The number of H100s of the first question."""
    return QUESTION_GPUS


def llama3_lost_pct() -> float:
    """Percent of the 405B's GPU-hours not spent training at the example's MFU."""
    return 100 * (1 - llama3_implied_mfu_pct() / budget_mfu_pct())
