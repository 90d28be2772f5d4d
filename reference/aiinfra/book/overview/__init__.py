"""Every value, table and figure of the overview chapter (``docs/overview``).

One module per page (``docs/overview/<page>.rst``); the pages name the values as
``aiinfra.book.overview:<name>``, re-exported here.
"""

from .budget import (
    BUDGET_GPU,
    BUDGET_GPUS,
    BUDGET_MFU,
    BUDGET_MFUS,
    budget_gpus,
    budget_mfu_pct,
    h100_peak_tflops,
    implied_mfu_figure,
    llama3_budget_table,
    llama3_flops_e25,
    llama3_gpu_days,
    llama3_gpu_hours_m,
    llama3_gpu_years,
    llama3_implied_mfu_pct,
    llama3_reported_flops_e25,
    llama3_steady_mfu_pct,
    llama3_tokens_t,
    llama3_wall_days,
    published_runs_table,
    wall_days_figure,
)
from .questions import (
    QUESTION_GPUS,
    llama3_lost_pct,
    llama70b_flops_e24,
    llama70b_tokens_t,
    llama70b_wall_days,
    question_gpus,
)
from .running import (
    LAUNCHES,
    launch_figure,
)
from .stack import (
    CHAPTERS,
    PATHS,
    STACK,
    reading_paths_figure,
    stack_figure,
)

__all__ = [
    "BUDGET_GPU",
    "BUDGET_GPUS",
    "BUDGET_MFU",
    "BUDGET_MFUS",
    "CHAPTERS",
    "LAUNCHES",
    "PATHS",
    "QUESTION_GPUS",
    "STACK",
    "budget_gpus",
    "budget_mfu_pct",
    "h100_peak_tflops",
    "implied_mfu_figure",
    "launch_figure",
    "llama3_budget_table",
    "llama3_flops_e25",
    "llama3_gpu_days",
    "llama3_gpu_hours_m",
    "llama3_gpu_years",
    "llama3_implied_mfu_pct",
    "llama3_lost_pct",
    "llama3_reported_flops_e25",
    "llama3_steady_mfu_pct",
    "llama3_tokens_t",
    "llama3_wall_days",
    "llama70b_flops_e24",
    "llama70b_tokens_t",
    "llama70b_wall_days",
    "published_runs_table",
    "question_gpus",
    "reading_paths_figure",
    "stack_figure",
    "wall_days_figure",
]
