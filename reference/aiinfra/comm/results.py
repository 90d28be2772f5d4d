"""nccl-tests' way of reporting a measured collective: bus bandwidth, results files.

A time t for a collective on size bytes is reported, as nccl-tests does
(``doc/PERFORMANCE.md``), as the algorithm bandwidth algbw = size / t and the bus
bandwidth busbw = algbw x factor, where the factor, 2(p-1)/p for all-reduce on p
ranks, (p-1)/p for reduce-scatter, all-gather and all-to-all, 1 for broadcast and
reduce, scales algbw to the traffic on the busiest link of an optimal algorithm: busbw
is the number to hold against a link's peak bandwidth, whatever the collective and p.
The size is the whole buffer (the all-gather output, the reduce-scatter input). A
run's rows are stored by :mod:`aiinfra.results` (kind ``collectives``) with a stamp of
where and when they were measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from aiinfra import results
from aiinfra.report import Table

# region busbw-factors
# nccl-tests doc/PERFORMANCE.md: busbw = algbw x factor, with size the total size.
BUSBW_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}
# endregion


def busbw_factor(collective: str, n: int) -> float:
    """The factor that turns algbw into busbw for ``collective`` on ``n`` ranks.

    Raises:
        ValueError: unknown ``collective`` or ``n`` < 1.
    """
    if collective not in BUSBW_FACTORS:
        raise ValueError(
            f"collective must be one of {list(BUSBW_FACTORS)}, got {collective!r}"
        )
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    return BUSBW_FACTORS[collective](n)


def algbw(size_bytes: float, seconds: float) -> float:
    """Algorithm bandwidth size / t in GB/s (10^9 bytes per second, as nccl-tests).

    Raises:
        ValueError: ``size_bytes`` < 0 or ``seconds`` <= 0.
    """
    if not 0 <= size_bytes < math.inf:
        raise ValueError(f"size_bytes must be finite and >= 0, got {size_bytes!r}")
    if not 0 < seconds < math.inf:
        raise ValueError(f"seconds must be finite and > 0, got {seconds!r}")
    return size_bytes / seconds / 1e9


def busbw(collective: str, size_bytes: float, seconds: float, n_ranks: int) -> float:
    """Bus bandwidth in GB/s: algbw times :func:`busbw_factor`, comparable to a link.

    Raises:
        ValueError: as :func:`algbw` and :func:`busbw_factor`, naming ``n_ranks``.
    """
    if isinstance(n_ranks, bool) or not isinstance(n_ranks, int) or n_ranks < 1:
        raise ValueError(f"n_ranks must be an int >= 1, got {n_ranks!r}")
    return algbw(size_bytes, seconds) * busbw_factor(collective, n_ranks)


def busbw_factor_table(ns: tuple[int, ...] = (2, 4, 8, 16, 64, 1024)) -> Table:
    """Busbw / algbw per collective (rows) and rank count (columns)."""
    rows = [[c] + [round(busbw_factor(c, n), 4) for n in ns] for c in BUSBW_FACTORS]
    return Table(
        ["collective"] + [f"p = {n}" for n in ns],
        rows,
        note="busbw = algbw x factor (nccl-tests doc/PERFORMANCE.md)",
    )


# Row key -> column header, in nccl-tests' order.
COLUMNS = {
    "collective": "collective",
    "algorithm": "algorithm",
    "size": "size (B)",
    "count": "count",
    "dtype": "dtype",
    "time_us": "time (us)",
    "algbw": "algbw (GB/s)",
    "busbw": "busbw (GB/s)",
    "wrong": "#wrong",
}


def rows_table(
    rows: list[dict[str, Any]], stamp: str = "", fields: dict[str, Any] | None = None
) -> Table:
    """The rows as a :class:`~aiinfra.report.Table`, nccl-tests' columns.

    The stamp is a template of ``fields`` (:class:`~aiinfra.report.Table`).
    """
    cells = [[r[k] for k in COLUMNS] for r in rows]
    note = "Measured by aiinfra bench collectives; the slowest rank's time per call."
    return Table(list(COLUMNS.values()), cells, note, stamp, fields=fields or {})


def results_table(
    collective: str | None = None, min_bytes: int = 0, backend: str = "gloo"
) -> Table:
    """The measured rows as a table whose stamp is the results file's.

    Args:
        collective: keep only this collective's rows (e.g. ``"all_reduce"``).
        min_bytes: keep only sizes of at least this many bytes.
        backend: the results of ``gloo`` (CPU) or ``nccl`` (GPU) runs.
    """
    measured = results.load("collectives", backend)
    st = measured["stamp"]
    on, fields = results.measured_on(st)
    stamp = "{backend}, {ranks} ranks on " + on + "; torch {torch}, aiinfra {aiinfra}"
    fields |= {
        "backend": st["backend"],
        "ranks": st["world_size"],
        "torch": st["torch"],
        "aiinfra": st["aiinfra"],
    }
    rows = [
        r
        for r in measured["rows"]
        if (collective is None or r["collective"] == collective)
        and r["size"] >= min_bytes
    ]
    return rows_table(rows, stamp, fields)


def busbw_ratio(
    collective: str, algorithm: str, reference: str, size: int, backend: str = "gloo"
) -> float:
    """Busbw of ``algorithm`` over that of ``reference`` at ``size`` bytes.

    Raises:
        ValueError: the results have no row for one of the two at that size.
    """
    rows = results.load("collectives", backend)["rows"]
    found = {
        r["algorithm"]: r["busbw"]
        for r in rows
        if r["collective"] == collective and r["size"] == size
    }
    for name in (algorithm, reference):
        if name not in found:
            raise ValueError(
                f"no {collective} row for algorithm {name!r} at size {size} in the "
                f"{backend} results"
            )
    return found[algorithm] / found[reference]
