"""The compute budget of a training run, and the GPU time it buys.

A dense Transformer with ``N`` parameters spends about ``6N`` FLOPs per training
token: ``2N`` in the forward pass and ``4N`` in the backward (Kaplan et al. 2020),
so a run over ``D`` tokens costs ``C = 6ND``. A GPU delivers a fraction of its
dense peak, the model FLOPs utilisation (MFU: model FLOP/s over peak FLOP/s, PaLM's
Appendix B), so the run takes ``C / (peak x MFU)`` GPU-seconds, and ``n`` GPUs
share them. Read backwards, a published GPU-hour count gives the MFU the run
achieved on average over the whole job, with its restarts and its stalls.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiinfra import checks
from aiinfra.accelerators import GPUS
from aiinfra.report import Table

SECONDS_PER_DAY = 86_400
#: The BF16 MFU Meta measured while Llama 3 405B trained on 8,192 and 16,384 H100s
#: (Dubey et al. 2024, Table 4): lowest and highest.
LLAMA3_STEADY_MFU = (0.38, 0.43)
FLOPS_PER_PARAM_TOKEN = 6  # 2 forward + 4 backward (Kaplan et al. 2020)


@dataclass(frozen=True)
class PublishedRun:
    """A pre-training run whose size and GPU time are published.

    Args:
        name: the model.
        params: parameters used per token (the activated ones of a mixture of
            experts).
        tokens: training tokens.
        gpu: the accelerator, a key of :data:`~aiinfra.accelerators.GPUS` whose
            dense BF16 peak it has.
        gpu_hours: the GPU-hours the authors report.
        source: where the numbers are printed.
        gemm_format: the number format its matmuls ran in, a format of
            :data:`~aiinfra.accelerators.FORMATS` (``"fp8"`` for DeepSeek-V3).
    """

    name: str
    params: float
    tokens: float
    gpu: str
    gpu_hours: float
    source: str
    gemm_format: str = "bf16"


#: Runs that publish their GPU-hours. Llama 2: Touvron et al. 2023, Table 2 (A100
#: 80GB, 2.0T tokens). Llama 3.1: the model card of meta-llama/llama-models (H100
#: 80GB; "~15 trillion tokens"; 405B: 15.6T in Dubey et al. 2024, Sec. 3.1).
#: DeepSeek-V3: DeepSeek-AI 2024, Table 1 (pre-training only, 2,664K H800 hours;
#: 37B activated parameters, 14.8T tokens); the H800 has the H100 SXM's dense
#: BF16 peak (its NVLink is cut to 400 GB/s), so it is priced as an H100. Its
#: GEMMs ran in FP8 (DeepSeek-AI 2024, Sec. 3.3), so its MFU is also given against
#: the FP8 peak, twice the BF16 one.
RUNS = (
    PublishedRun("Llama 2 7B", 7e9, 2.0e12, "A100", 184_320, "Touvron et al. 2023"),
    PublishedRun("Llama 2 70B", 70e9, 2.0e12, "A100", 1_720_320, "Touvron et al. 2023"),
    PublishedRun("Llama 3.1 8B", 8e9, 15e12, "H100", 1.46e6, "Llama 3.1 model card"),
    PublishedRun("Llama 3.1 70B", 70e9, 15e12, "H100", 7.0e6, "Llama 3.1 model card"),
    PublishedRun(
        "Llama 3.1 405B", 405e9, 15.6e12, "H100", 30.84e6, "Llama 3.1 model card"
    ),
    PublishedRun(
        "DeepSeek-V3", 37e9, 14.8e12, "H100", 2.664e6, "DeepSeek-AI 2024", "fp8"
    ),
)


def _gpu_peak(gpu: str, fmt: str = "bf16") -> float:
    if gpu not in GPUS:
        raise ValueError(f"gpu must be one of {sorted(GPUS)}, got {gpu!r}")
    return GPUS[gpu].peak(fmt)


def training_flops(params: float, tokens: float) -> float:
    """``C = 6ND``: the FLOPs of training ``params`` parameters on ``tokens`` tokens.

    Raises:
        ValueError: ``params`` or ``tokens`` is not positive.
    """
    checks.positive("params", params)
    checks.positive("tokens", tokens)
    return FLOPS_PER_PARAM_TOKEN * params * tokens


def gpu_days(flops: float, gpu: str, mfu: float) -> float:
    """GPU-days to compute ``flops`` on one ``gpu`` at a model FLOPs utilisation.

    Args:
        flops: the budget ``C``.
        gpu: a key of :data:`~aiinfra.accelerators.GPUS`; its dense BF16 peak.
        mfu: the fraction of that peak the run achieves, in (0, 1].

    Raises:
        ValueError: a non-positive budget, an unknown GPU, or ``mfu`` outside
            (0, 1].
    """
    checks.positive("flops", flops)
    if not 0 < mfu <= 1:
        raise ValueError(f"mfu must be in (0, 1], got {mfu!r}")
    return flops / (_gpu_peak(gpu) * mfu) / SECONDS_PER_DAY


def wall_days(flops: float, gpu: str, n_gpus: int, mfu: float) -> float:
    """Days of wall-clock time for ``n_gpus`` GPUs sharing the budget evenly.

    Raises:
        ValueError: as :func:`gpu_days`, or ``n_gpus`` is not a positive integer.
    """
    checks.positive_int("n_gpus", n_gpus)
    return gpu_days(flops, gpu, mfu) / n_gpus


def implied_mfu(run: PublishedRun, fmt: str = "bf16") -> float:
    """The MFU a run's published GPU-hours imply: ``6ND / (hours x 3600 x peak)``.

    Args:
        run: the published run.
        fmt: whose dense peak is the denominator: ``"bf16"`` (the usual MFU) or
            ``"gemms"``, the format its matmuls ran in (FP8 for DeepSeek-V3: half
            the BF16 figure).

    Raises:
        ValueError: ``fmt`` not one of the two, or no GPU-hours.
    """
    checks.positive("gpu_hours", run.gpu_hours)
    if fmt not in ("bf16", "gemms"):
        raise ValueError(f"fmt must be 'bf16' or 'gemms', got {fmt!r}")
    peak = _gpu_peak(run.gpu, run.gemm_format if fmt == "gemms" else "bf16")
    return training_flops(run.params, run.tokens) / (run.gpu_hours * 3600 * peak)


def budget_table(
    params: float, tokens: float, gpu: str, n_gpus: int, mfus: tuple[float, ...]
) -> Table:
    """A run's budget, its GPU-days and its wall-clock days at each MFU.

    Raises:
        ValueError: as :func:`wall_days`, or ``mfus`` is empty.
    """
    if not mfus:
        raise ValueError("mfus must name at least one utilisation")
    flops = training_flops(params, tokens)
    rows = [
        [
            f"{100 * m:.0f}",
            f"{gpu_days(flops, gpu, m):,.0f}",
            f"{wall_days(flops, gpu, n_gpus, m):,.1f}",
        ]
        for m in mfus
    ]
    return Table(
        ["MFU (%)", "GPU-days", "days"],
        rows,
        note="C = 6ND (Kaplan et al. 2020); time = C / (GPUs x dense BF16 peak x "
        "MFU); days: wall-clock time with every GPU busy.",
        stamp=f"C = {flops:.3g} FLOPs on {n_gpus:,} {GPUS[gpu].name}",
    )


def published_runs_table() -> Table:
    """Each published run's budget, its GPU-hours and the MFU they imply."""
    rows = [
        [
            run.name,
            f"{run.params / 1e9:g}",
            f"{run.tokens / 1e12:g}",
            f"{training_flops(run.params, run.tokens):.2e}",
            GPUS[run.gpu].name,
            f"{run.gpu_hours / 1e6:.2f}",
            f"{100 * implied_mfu(run):.0f}",
            run.gemm_format.upper(),
            f"{100 * implied_mfu(run, 'gemms'):.0f}",
        ]
        for run in RUNS
    ]
    return Table(
        [
            "run",
            "N (B)",
            "D (T)",
            "C = 6ND",
            "GPU",
            "GPU-hours (M)",
            "MFU, BF16 peak (%)",
            "GEMMs in",
            "MFU, their peak (%)",
        ],
        rows,
        note="N: parameters per token (activated ones for DeepSeek-V3); GPU-hours as "
        "published (Touvron et al. 2023; Llama 3.1 model card; DeepSeek-AI 2024, "
        "pre-training); MFU = 6ND / (GPU-hours x dense peak), against the BF16 peak "
        "and against the peak of the format the run's GEMMs used (FP8 for "
        "DeepSeek-V3, whose few BF16 GEMMs put its true figure a little above); the "
        "H800 at the H100's peaks.",
    )
