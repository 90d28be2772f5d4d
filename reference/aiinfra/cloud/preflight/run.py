"""Run the pre-flight checks on spawned ranks and judge every rank.

:func:`preflight_rank` is what each rank runs (under ``torchrun`` as under
:func:`aiinfra.distributed.run_distributed`); the judges are plain functions of the
gathered numbers, so every rank reaches the same verdict: a rank whose GEMM result
differs from the other ranks' or from its own first one (silent data corruption), a
rank slower than ``straggler_ratio`` times the median (a straggler), an all-reduce
whose sum is not exact or whose bus bandwidth is under the floor.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import asdict
from typing import Any

from aiinfra.cloud.preflight.config import PreflightConfig
from aiinfra.comm.results import busbw

FP32_BYTES = 4


# region judges
def sdc_ranks(checksums: list[list[int]]) -> list[int]:
    """Ranks whose results disagree with the majority or with their own first one.

    Args:
        checksums: per rank, the checksum of each iteration's result.

    Returns:
        The flagged ranks, ascending. Where no value holds a strict majority of the
        ranks at an iteration, every rank that differs from another is flagged: two
        ranks cannot tell which of them is wrong.
    """
    ranks = len(checksums)
    flagged = set()
    for i in range(len(checksums[0])):
        column = [checksums[r][i] for r in range(ranks)]
        value, count = Counter(column).most_common(1)[0]
        if 2 * count > ranks:
            flagged |= {r for r in range(ranks) if column[r] != value}
        elif len(set(column)) > 1:
            flagged |= set(range(ranks))
        flagged |= {r for r in range(ranks) if column[r] != checksums[r][0]}
    return sorted(flagged)


def straggler_ranks(seconds: list[float], ratio: float) -> list[int]:
    """Ranks whose time is above ``ratio`` times the ranks' median."""
    median = statistics.median(seconds)
    return [r for r, s in enumerate(seconds) if s > ratio * median]


# endregion


def preflight_rank(cfg: PreflightConfig) -> dict[str, Any]:
    """Every check on this rank; the gathered numbers and the verdicts."""
    import torch.distributed as dist

    from aiinfra.cloud.preflight import checks

    faults, rank = cfg.faults(), dist.get_rank()
    sdc, slow = faults.get("sdc") == rank, faults.get("slow") == rank
    ar = checks.all_reduce_smoke(cfg.numel, cfg.repeats)
    gemm = checks.gemm_burn_in(cfg.size, cfg.iters, sdc=sdc, slow=slow)
    replicas = checks.sgd_step_replicas(cfg.size, sdc=sdc)
    ar["busbw"] = busbw(
        "all_reduce", cfg.numel * FP32_BYTES, max(ar["seconds"]), cfg.ranks
    )
    ar["passed"] = all(ar["exact"]) and ar["busbw"] >= cfg.min_busbw
    gemm["median"] = statistics.median(gemm["seconds"])
    gemm["sdc_ranks"] = sdc_ranks(gemm["checksums"])
    gemm["stragglers"] = straggler_ranks(gemm["seconds"], cfg.straggler_ratio)
    disagree = sdc_ranks([[c] for c in replicas])
    return {
        "all_reduce": ar,
        "gemm": gemm,
        "replicas": {"checksums": replicas, "disagree": disagree},
        "healthy": ar["passed"]
        and not gemm["sdc_ranks"]
        and not gemm["stragglers"]
        and not disagree,
    }


def run_preflight(cfg: PreflightConfig) -> dict[str, Any]:
    """Spawn ``cfg.ranks`` ranks, run every check; rank 0's verdict and the config.

    Raises:
        RuntimeError: a rank failed; TimeoutError: the ranks hung.
    """
    from aiinfra.distributed import run_distributed

    per_rank = run_distributed(
        preflight_rank,
        cfg.ranks,
        cfg,
        backend=cfg.backend,
        timeout=cfg.timeout,
        threads=1,
    )
    # Every rank judged the same gathered numbers: they agree on the verdict.
    verdicts = {(str(v["gemm"]["sdc_ranks"]), v["healthy"]) for v in per_rank}
    if len(verdicts) != 1:
        raise RuntimeError(f"the ranks reached different verdicts: {verdicts}")
    return {"config": asdict(cfg), "faults": cfg.faults(), **per_rank[0]}
