"""Failures and checkpoints: the interval, the goodput, the cluster's MTBF.

A synchronous training job stops when any of its GPUs fails, so its mean time between
failures is the per-GPU one divided by the GPU count. It saves a checkpoint every
``tau`` seconds of work, at cost ``C``; a failure loses the work since the last one
and costs a restart ``R``. Young (1974) found the interval that wastes least,
``tau = sqrt(2 C M)``; Daly (2006) added the higher-order terms and the exact expected
wall time under exponential failures, from which the goodput (useful fraction of wall
time) follows. Notation: ``tau`` interval, ``C`` checkpoint cost, ``R`` restart cost,
``M`` MTBF (one time unit throughout), ``lambda = 1/M``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from aiinfra import checks


def young_interval(checkpoint_cost: float, mtbf: float) -> float:
    """Young's first-order optimum interval, ``sqrt(2 C M)``.

    Young, "A first order approximation to the optimum checkpoint interval", CACM
    17(9), 1974: valid for ``C << M``.

    Args:
        checkpoint_cost: ``C``, time to write a checkpoint, > 0.
        mtbf: ``M``, mean time between failures, > 0 (same unit).

    Returns:
        ``tau``, work between checkpoints, in the unit of the arguments.

    Raises:
        ValueError: a cost or MTBF <= 0.
    """
    checks.positive("checkpoint_cost", checkpoint_cost)
    checks.positive("mtbf", mtbf)
    return math.sqrt(2 * checkpoint_cost * mtbf)


def daly_interval(checkpoint_cost: float, mtbf: float) -> float:
    """Daly's higher-order optimum interval.

    Daly, "A higher order estimate of the optimum checkpoint interval for restart
    dumps", Future Generation Computer Systems 22(3), 2006:
    ``tau = sqrt(2 C M) [1 + sqrt(xi)/3 + xi/9] - C`` with ``xi = C / (2 M)`` while
    ``C < 2 M``, else ``tau = M``. It minimises the wall time of
    :func:`goodput`'s model to within a fraction of a percent (his Fig. 2).

    Args:
        checkpoint_cost: ``C``, time to write a checkpoint, > 0.
        mtbf: ``M``, mean time between failures, > 0 (same unit).

    Returns:
        ``tau``, work between checkpoints, in the unit of the arguments.

    Raises:
        ValueError: a cost or MTBF <= 0.
    """
    checks.positive("checkpoint_cost", checkpoint_cost)
    checks.positive("mtbf", mtbf)
    if checkpoint_cost >= 2 * mtbf:
        return mtbf
    xi = checkpoint_cost / (2 * mtbf)
    return (
        young_interval(checkpoint_cost, mtbf) * (1 + math.sqrt(xi) / 3 + xi / 9)
        - checkpoint_cost
    )


def goodput(
    interval: float, checkpoint_cost: float, restart_cost: float, mtbf: float
) -> float:
    """Expected useful fraction of wall time under exponential failures.

    A segment of ``tau + C`` (work, then checkpoint) must run without a failure to
    count; each failure costs ``R``, during which failures strike too. The expected
    wall time of one segment is ``M e^(R/M) (e^((tau + C)/M) - 1)`` (Daly 2006's
    complete cost function), of which ``tau`` is useful.

    Args:
        interval: ``tau``, work between checkpoints, > 0.
        checkpoint_cost: ``C``, >= 0.
        restart_cost: ``R``, time from a failure to work resuming, >= 0.
        mtbf: ``M``, > 0 (same unit throughout).

    Returns:
        Goodput in (0, 1].

    Raises:
        ValueError: ``interval`` or ``mtbf`` <= 0, or a cost < 0.
    """
    checks.positive("interval", interval)
    checks.non_negative("checkpoint_cost", checkpoint_cost)
    checks.non_negative("restart_cost", restart_cost)
    checks.positive("mtbf", mtbf)
    segment = math.exp(restart_cost / mtbf) * mtbf
    segment *= math.expm1((interval + checkpoint_cost) / mtbf)
    return interval / segment


def simulate_goodput(
    interval: float,
    checkpoint_cost: float,
    restart_cost: float,
    mtbf: float,
    failures: int,
    rng: np.random.Generator,
) -> float:
    """Goodput of a simulated run, failure by failure (Monte Carlo).

    Failures arrive as a Poisson process of rate ``1/M``: the gaps between them are
    drawn from the exponential distribution. In each gap the job restarts (``R``, not
    before the first), then completes whole segments of ``tau + C``; the segment cut
    by the next failure, or a restart cut short, is lost.

    Args:
        interval: ``tau``, work between checkpoints, > 0.
        checkpoint_cost: ``C``, >= 0.
        restart_cost: ``R``, >= 0.
        mtbf: ``M``, > 0 (same unit throughout).
        failures: failures to simulate, >= 1; the standard error of the estimate
            shrinks as ``1/sqrt(failures)``.
        rng: the random generator (``np.random.default_rng(seed)``).

    Returns:
        Useful work over wall time of the simulated run.

    Raises:
        ValueError: as :func:`goodput`, or ``failures`` < 1.
    """
    goodput(interval, checkpoint_cost, restart_cost, mtbf)  # validates the arguments
    checks.positive_int("failures", failures)
    # region simulate
    gaps = rng.exponential(mtbf, size=failures)  # (failures,)
    restart = np.full(failures, float(restart_cost))
    restart[0] = 0.0  # the run starts fresh
    working = np.maximum(gaps - restart, 0.0)
    segments = np.floor(working / (interval + checkpoint_cost))  # completed per gap
    goodput_run = interval * segments.sum() / gaps.sum()  # useful over wall time
    # endregion
    return float(goodput_run)


def cluster_mtbf(gpu_failure_rate: float, gpus: int) -> float:
    """MTBF of a job that stops when any of its ``gpus`` fails.

    With independent exponential failures at rate ``lambda`` per GPU, the first of
    ``N`` comes at rate ``N lambda``: ``M = 1 / (N lambda)``.

    Args:
        gpu_failure_rate: failures per GPU per unit time (per hour: hours out), > 0.
        gpus: ``N``, >= 1.

    Returns:
        The job's mean time between failures, in the inverse unit of the rate.

    Raises:
        ValueError: a rate <= 0 or ``gpus`` < 1.
    """
    checks.positive("gpu_failure_rate", gpu_failure_rate)
    checks.positive_int("gpus", gpus)
    return 1 / (gpus * gpu_failure_rate)


@dataclass(frozen=True)
class Interruptions:
    """Interruptions a training run reported.

    Args:
        source: the citation.
        interruptions: all job interruptions in the period.
        unexpected: those not planned (failures, as opposed to maintenance).
        days: length of the period.
        gpus: GPUs of the job.
    """

    source: str
    interruptions: int
    unexpected: int
    days: float
    gpus: int


#: Dubey et al., "The Llama 3 Herd of Models", 2024, Sec. 3.3.4: a 54-day snapshot
#: of the 405B pre-training on 16,384 H100s, 47 of the interruptions planned (checked
#: against the paper's text).
LLAMA3_405B = Interruptions(
    source="Dubey et al. 2024, Sec. 3.3.4",
    interruptions=466,
    unexpected=419,
    days=54,
    gpus=16_384,
)


#: Dubey et al. 2024, Table 5: root causes of the 419 unexpected interruptions, as
#: ``(component, category, interruptions, percent as printed)``. The paper's
#: percentages are not all ``count / 419`` (148 is printed as 30.1 %); its text's
#: "GPU issues ... 58.7 %" is the sum of the printed GPU rows.
LLAMA3_405B_CAUSES: tuple[tuple[str, str, int, float], ...] = (
    ("Faulty GPU", "GPU", 148, 30.1),
    ("GPU HBM3 memory", "GPU", 72, 17.2),
    ("Software bug", "Dependency", 54, 12.9),
    ("Network switch/cable", "Network", 35, 8.4),
    ("Host maintenance", "Unplanned maintenance", 32, 7.6),
    ("GPU SRAM memory", "GPU", 19, 4.5),
    ("GPU system processor", "GPU", 17, 4.1),
    ("NIC", "Host", 7, 1.7),
    ("NCCL watchdog timeouts", "Unknown", 7, 1.7),
    ("Silent data corruption", "GPU", 6, 1.4),
    ("GPU thermal interface and sensor", "GPU", 6, 1.4),
    ("SSD", "Host", 3, 0.7),
    ("Power supply", "Host", 3, 0.7),
    ("Server chassis", "Host", 2, 0.5),
    ("IO expansion board", "Host", 2, 0.5),
    ("Dependency", "Dependency", 2, 0.5),
    ("CPU", "Host", 2, 0.5),
    ("System memory", "Host", 2, 0.5),
)


@dataclass(frozen=True)
class InterruptionRates:
    """Rates implied by an :class:`Interruptions` report.

    Attributes:
        per_day: all interruptions per day.
        unexpected_per_day: unexpected interruptions per day.
        job_mtbf_hours: hours between unexpected interruptions of the job.
        gpu_mtbf_hours: the per-GPU MTBF that gives ``job_mtbf_hours`` at the job's
            size, were every unexpected interruption one GPU's failure (a lower
            bound: not every interruption is a GPU's).
    """

    per_day: float
    unexpected_per_day: float
    job_mtbf_hours: float
    gpu_mtbf_hours: float


def interruption_rates(report: Interruptions = LLAMA3_405B) -> InterruptionRates:
    """Interruptions per day and the job's MTBF implied by a report.

    The defaults are Llama 3's numbers (:data:`LLAMA3_405B`, Dubey et al. 2024,
    Sec. 3.3.4).

    Args:
        report: the counts, the period and the job's size.

    Returns:
        The rates of :class:`InterruptionRates`.

    Raises:
        ValueError: ``days`` <= 0, ``gpus`` < 1, or ``unexpected`` not in
            ``[1, interruptions]``.
    """
    checks.positive("report.days", report.days)
    if report.gpus < 1:
        raise ValueError(f"report.gpus must be >= 1, got {report.gpus}")
    if not 1 <= report.unexpected <= report.interruptions:
        raise ValueError(
            "report.unexpected must be in [1, report.interruptions], got "
            f"{report.unexpected} of {report.interruptions}"
        )
    job_mtbf_hours = report.days * 24 / report.unexpected
    return InterruptionRates(
        per_day=report.interruptions / report.days,
        unexpected_per_day=report.unexpected / report.days,
        job_mtbf_hours=job_mtbf_hours,
        gpu_mtbf_hours=job_mtbf_hours * report.gpus,
    )
