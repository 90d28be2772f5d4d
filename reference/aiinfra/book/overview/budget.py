"""The compute budget of ``docs/overview/budget.rst``.

6ND, GPU-days and MFU of real runs, from :mod:`aiinfra.hardware.budget` and
the datasheet peaks of :data:`aiinfra.accelerators.GPUS`.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra.accelerators import GPUS
from aiinfra.hardware import budget
from aiinfra.report import Table
from aiinfra.scaling.laws import LLAMA3_405B

BUDGET_GPU = "H100"  # the accelerator of the budget examples
BUDGET_GPUS = 16_384  # Llama 3 405B's cluster (Dubey et al. 2024, Table 4)
BUDGET_MFU = 0.4  # the MFU of the worked example; Llama 3 reports 38-43 %
BUDGET_MFUS = (0.3, 0.4, 0.5)


def _llama3_flops() -> float:
    """``6ND`` of Llama 3 405B: 405B parameters on 15.6T tokens."""
    return budget.training_flops(LLAMA3_405B.n, LLAMA3_405B.d)


def llama3_tokens_t() -> float:
    """Llama 3 405B's training tokens, trillions."""
    return LLAMA3_405B.d / 1e12


def llama3_steady_mfu_pct(end: int) -> float:
    """The lowest (``end=0``) or highest (``1``) MFU Llama 3 measured, percent."""
    return 100 * budget.LLAMA3_STEADY_MFU[end]


def llama3_flops_e25() -> float:
    """The same, in units of 10^25 FLOPs."""
    return _llama3_flops() / 1e25


def llama3_reported_flops_e25() -> float:
    """The budget the Llama 3 paper reports for its 405B model, in 10^25 FLOPs."""
    return LLAMA3_405B.reported_flops / 1e25


def llama3_gpu_days() -> float:
    """GPU-days of Llama 3 405B's ``6ND`` on H100s at the example's MFU."""
    return budget.gpu_days(_llama3_flops(), BUDGET_GPU, BUDGET_MFU)


def llama3_gpu_years() -> float:
    """The same, in GPU-years."""
    return llama3_gpu_days() / 365


def llama3_wall_days() -> float:
    """Wall-clock days of that budget on Llama 3's 16,384 H100s at the MFU."""
    return budget.wall_days(_llama3_flops(), BUDGET_GPU, BUDGET_GPUS, BUDGET_MFU)


def h100_peak_tflops() -> float:
    """The H100 SXM's dense BF16 peak, TFLOP/s."""
    return GPUS[BUDGET_GPU].bf16_flops / 1e12


def budget_mfu_pct() -> float:
    """The worked example's MFU, percent."""
    return 100 * BUDGET_MFU


def budget_gpus() -> int:
    """The worked example's number of GPUs."""
    return BUDGET_GPUS


def llama3_budget_table() -> Table:
    """Llama 3 405B's budget on 16,384 H100s at 30, 40 and 50 % MFU."""
    return budget.budget_table(
        LLAMA3_405B.n, LLAMA3_405B.d, BUDGET_GPU, BUDGET_GPUS, BUDGET_MFUS
    )


def wall_days_figure() -> Figure:
    """Days to train Llama 3 405B against the number of GPUs, per GPU and MFU."""
    fig = Figure(figsize=(8, 4.6))
    ax = fig.add_subplot()
    gpus = [2**k for k in range(10, 18)]
    flops = _llama3_flops()
    for gpu, colour in (("A100", "#9ecae1"), ("H100", "#08519c")):
        for mfu, style in ((0.3, ":"), (0.5, "-")):
            days = [budget.wall_days(flops, gpu, n, mfu) for n in gpus]
            ax.plot(
                gpus,
                days,
                style,
                color=colour,
                label=f"{GPUS[gpu].name}, MFU {100 * mfu:.0f}%",
            )
    ax.axvline(BUDGET_GPUS, color="#888888", lw=0.8)
    ax.annotate(
        "Llama 3 405B's cluster",
        (BUDGET_GPUS, 2000),
        rotation=90,
        ha="right",
        va="top",
        fontsize=9,
        color="#555555",
    )
    ax.set_xscale("log", base=2)
    ax.set_xticks(gpus, [f"{n:,}" for n in gpus])
    ax.set_yscale("log")
    ax.set_xlabel("GPUs")
    ax.set_ylabel("days of training")
    ax.set_title("Wall-clock days of one budget, by cluster size")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=9)
    fig.tight_layout()
    return fig


def published_runs_table() -> Table:
    """Published runs: budget, GPU-hours and the MFU those imply."""
    return budget.published_runs_table()


def implied_mfu_figure() -> Figure:
    """The whole-job MFU each published run's GPU-hours imply."""
    fig = Figure(figsize=(8, 3.8))
    ax = fig.add_subplot()
    names = [run.name for run in budget.RUNS]
    mfu = [100 * budget.implied_mfu(run) for run in budget.RUNS]
    own = [100 * budget.implied_mfu(run, "gemms") for run in budget.RUNS]
    ax.barh(names, mfu, color="#6baed6", label="against the BF16 peak")
    low = [(i, v) for i, v in enumerate(own) if v != mfu[i]]  # GEMMs not in BF16
    ax.barh(
        [names[i] for i, _ in low],
        [v for _, v in low],
        color="#08519c",
        label="against the peak of the GEMMs' format (FP8)",
    )
    for row, value in enumerate(mfu):
        ax.text(value + 0.5, row, f"{value:.0f}%", va="center", fontsize=10)
    for row, value in low:
        ax.text(
            value - 0.5,
            row,
            f"{value:.0f}%",
            va="center",
            ha="right",
            fontsize=10,
            color="white",
        )
    ax.invert_yaxis()
    ax.set_xlim(0, 60)
    ax.legend(loc="lower right", fontsize=9)
    ax.set_xlabel("MFU implied by the published GPU-hours (%)")
    ax.set_title("Whole-job utilisation of published runs")
    fig.tight_layout()
    return fig


def llama3_implied_mfu_pct() -> float:
    """The whole-job MFU Llama 3.1 405B's 30.84M H100-hours imply, percent."""
    run = next(r for r in budget.RUNS if r.name == "Llama 3.1 405B")
    return 100 * budget.implied_mfu(run)


def deepseek_v3_mfu_pct(fmt: str) -> float:
    """DeepSeek-V3's whole-job MFU, percent: ``"bf16"`` or ``"gemms"`` (FP8) peak."""
    run = next(r for r in budget.RUNS if r.name == "DeepSeek-V3")
    return 100 * budget.implied_mfu(run, fmt)


def llama3_gpu_hours_m() -> float:
    """Llama 3.1 405B's published H100-hours, millions."""
    run = next(r for r in budget.RUNS if r.name == "Llama 3.1 405B")
    return run.gpu_hours / 1e6
