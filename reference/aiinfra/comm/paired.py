"""Our ring all-reduce against gloo's, run by run: the paired measurement.

Two timings taken minutes apart on a shared machine differ by more than two
implementations do, so the ``ring`` results kind (:data:`aiinfra.results.KINDS`) times
the textbook ring, the pipelined ring and ``torch.distributed.all_reduce`` in turn,
five times, at one size (16 MiB on 4 gloo ranks): run i of each was measured moments
apart, and the ratio of their times is the ratio of their bus bandwidths. The book
reports the median of those ratios.
"""

from __future__ import annotations

import statistics

from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.comm.cost import format_bytes
from aiinfra.comm.results import busbw


def paired_runs(kind: str = "ring", backend: str = "gloo") -> dict[str, list[float]]:
    """Busbw in GB/s of each run of each algorithm of a ``--repeats`` results file.

    Raises:
        ValueError: a row of the file has no ``runs_us`` (it was measured with
            ``--repeats 1``), or the file has no rows.
    """
    measured = results.load(kind, backend)
    p = measured["stamp"]["world_size"]
    out = {}
    for row in measured["rows"]:
        if not row.get("runs_us"):
            raise ValueError(
                f"row {row['algorithm']!r} of the {kind} results on {backend} has no "
                "runs_us: measure with --repeats 2 or more"
            )
        out[row["algorithm"]] = [
            busbw(row["collective"], row["size"], t / 1e6, p) for t in row["runs_us"]
        ]
    if not out:
        raise ValueError(f"the {kind} results on {backend} hold no rows")
    return out


def paired_ratio(
    algorithm: str, reference: str = "torch", kind: str = "ring", backend: str = "gloo"
) -> float:
    """Median over runs of ``algorithm``'s busbw over ``reference``'s in the same run.

    Raises:
        ValueError: either algorithm is missing from the results.
    """
    runs = paired_runs(kind, backend)
    for name in (algorithm, reference):
        if name not in runs:
            raise ValueError(
                f"algorithm must be one of {sorted(runs)}, got {name!r} in the "
                f"{kind} results on {backend}"
            )
    pairs = zip(runs[algorithm], runs[reference], strict=True)
    return statistics.median(a / b for a, b in pairs)


# What the figure's legend calls each algorithm of the results file.
LEGEND = {
    "ring": "textbook ring",
    "ring_pipelined": "pipelined ring",
    "torch": "gloo's own (torch.distributed)",
}


def paired_runs_figure(kind: str = "ring", backend: str = "gloo") -> Figure:
    """Busbw of every run, one line per algorithm across the runs (paired)."""
    runs = paired_runs(kind, backend)
    measured = results.load(kind, backend)
    stamp, size = measured["stamp"], measured["rows"][0]["size"]
    fig = Figure(figsize=(5.5, 2.6), layout="constrained")
    ax = fig.add_subplot()
    styles = {"torch": {"color": "black", "linestyle": "--"}}
    for alg, values in runs.items():
        xs = range(1, len(values) + 1)
        label = LEGEND.get(alg, alg)
        ax.plot(xs, values, marker="o", label=label, **styles.get(alg, {}))
    ax.set_xticks(range(1, len(next(iter(runs.values()))) + 1))
    ax.set_xlabel("run (algorithms in turn)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(
        f"all-reduce, {format_bytes(size)}, {stamp['world_size']} {stamp['backend']} "
        "ranks",
        fontsize=9,
    )
    return fig
