"""What ``docs/communication/nccl_practice.rst`` shows: NCCL's variables, log, topology.

Everything comes from :mod:`aiinfra.comm.nccl_env`: the table of environment
variables with their sources, a real ``NCCL_DEBUG=INFO`` excerpt labelled line by
line by :func:`~aiinfra.comm.nccl_env.label_line`, and what NCCL's topology dump
contains.
"""

from __future__ import annotations

from collections import Counter

from matplotlib.figure import Figure

from aiinfra.comm import nccl_env
from aiinfra.report import Table

_LOG_LINE_CHARS = 72  # a log line is cut to this many characters in the table


def env_table(layer: str) -> Table:
    """The environment variables of ``layer`` (``"NCCL"`` or ``"PyTorch"``)."""
    if layer not in ("NCCL", "PyTorch"):
        raise ValueError(f"layer must be 'NCCL' or 'PyTorch', got {layer!r}")
    # What the source does not confirm goes with what the variable does: that
    # column is words (translated); a variable's other name goes with its name.
    rows = [
        [
            v.what + (f" (unsure: {v.unsure})" if v.unsure else ""),
            ", ".join(filter(None, (v.name, v.alias))),
            v.values,
        ]
        for v in nccl_env.ENV_VARS
        if v.layer == layer
    ]
    source = (
        "NCCL user guide, Environment Variables"
        if layer == "NCCL"
        else ("PyTorch docs and ProcessGroupNCCL.hpp")
    )
    return Table(
        ["what it does", "variable", "typical values"],
        rows,
        note=f"Source: {source}. Marked unsure: not confirmed in the source.",
        words=(0, 2),
    )


def _log() -> list[tuple[str, str]]:
    return nccl_env.nccl_log_excerpt()


def log_table() -> Table:
    """The real NCCL log excerpt, one row per line, with what each line tells."""
    rows = []
    for _, line in _log():
        text = nccl_env.strip_prefix(line)
        if len(text) > _LOG_LINE_CHARS:
            text = text[: _LOG_LINE_CHARS - 1] + "…"
        rows.append([nccl_env.MEANINGS[nccl_env.label_line(line)], text])
    return Table(
        ["what the line tells you", "log line (prefix host:pid:tid [GPU] removed)"],
        rows,
        note="Lines from NVIDIA/nccl issues 1584, 1027 and 1412 on GitHub, hosts "
        "anonymised; labelled by aiinfra.comm.nccl_env.label_line.",
    )


def log_lines() -> int:
    """Lines in the committed NCCL log excerpt."""
    return len(_log())


def log_stage_figure() -> Figure:
    """How many lines of the excerpt report each stage of initialisation."""
    counts = Counter(nccl_env.label_line(line) for _, line in _log())
    labels = [label for label in nccl_env.LABELS if counts[label]]
    fig = Figure(figsize=(6.4, 3.0), layout="constrained")
    ax = fig.add_subplot()
    ax.barh(range(len(labels)), [counts[label] for label in labels], color="C0")
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()  # in the order NCCL initialises
    ax.set_xlabel("lines of the excerpt")
    ax.grid(True, axis="x", alpha=0.3)
    return fig


def topology_table() -> Table:
    """What NCCL's topology dump (``NCCL_TOPO_DUMP_FILE``) contains."""
    return Table(
        ["what it records", "item"],
        [[t.what, t.item] for t in nccl_env.TOPOLOGY],
        note="Element names from NCCL's src/graph/xml.cc, path types from "
        "src/graph/topo.cc (NVIDIA/nccl on GitHub); attributes vary by version.",
    )
