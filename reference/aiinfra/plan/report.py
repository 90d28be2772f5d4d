"""The planner's answer as a table: one row per layout, best first.

The same :class:`aiinfra.report.Table` is the book's table and what ``aiinfra plan``
prints, as text or JSON. Each row gives a layout (dp, tp, pp, cp, ZeRO stage,
micro-batch b and the m micro-batches it makes, v chunks per pipeline rank,
recomputation), the memory of its busiest stage, the estimated step time with its
exposed terms, the achieved model TFLOP/s per GPU and the MFU.
"""

from __future__ import annotations

from aiinfra.plan.job import Job
from aiinfra.plan.search import Plan
from aiinfra.report import Table

COLUMNS = [
    "#",
    "dp",
    "tp",
    "pp",
    "cp",
    "ZeRO",
    "b",
    "k",
    "v",
    "recompute",
    "GB/GPU",
    "step (s)",
    "bubble (s)",
    "TP (s)",
    "CP (s)",
    "PP (s)",
    "DP (s)",
    "TFLOP/s",
    "MFU (%)",
]
NOTE = (
    "Cost model, not a measurement. GB = 1e9 bytes of the busiest pipeline stage "
    "(the memory calculator); step: compute at the stated fraction of dense BF16 "
    "peak plus the pipeline bubble and the exposed communication of each "
    "parallelism (alpha-beta model: NVLink inside a node, one 400 Gb/s NIC per GPU "
    "between nodes); TFLOP/s: model FLOPs per GPU per second; MFU against dense "
    "BF16 peak."
)


def plan_row(rank: int, p: Plan, job: Job) -> list:
    """One table row: the layout, its memory and its step time's terms."""
    lay, t = p.layout, p.time
    return [
        rank,
        lay.dp,
        lay.tp,
        lay.pp,
        lay.cp,
        lay.zero,
        lay.micro_batch,
        lay.micro_batches(job),
        lay.v,
        lay.recompute,
        round(p.memory.total / 1e9, 1),
        round(t.step, 3),
        round(t.bubble, 3),
        round(t.tp, 3),
        round(t.cp, 3),
        round(t.pp, 4),
        round(t.dp, 3),
        round(t.model_flops / job.gpus / t.step / 1e12),
        round(100 * t.mfu, 1),
    ]


def job_stamp(job: Job, name: str) -> tuple[str, dict[str, object]]:
    """The job and the assumptions, for the table's stamp.

    Returns:
        A template and its fields (:class:`~aiinfra.report.Table`).
    """
    template = (
        "{model} on {gpus} {gpu} ({per_node} per node), global batch {batch} tokens "
        "= {sequences} x {seq}; compute at {efficiency} of peak, {exposed} of DP "
        "traffic exposed, HBM limit {memory}, {attention} attention"
    )
    return template, {
        "model": name,
        "gpus": job.gpus,
        "gpu": job.gpu,
        "per_node": job.gpus_per_node,
        "batch": f"{job.global_batch:,}",
        "sequences": f"{job.sequences:,}",
        "seq": f"{job.seq:,}",
        "efficiency": f"{job.efficiency:.0%}"
        + ("" if job.matmul == "constant" else " (attention core; GEMMs by shape)"),
        "exposed": f"{job.exposed:.0%}",
        "memory": f"{job.memory_fraction:.0%}",
        "attention": job.attention,
    }


def plan_table(plans: list[Plan], job: Job, name: str) -> Table:
    """The plans as a table, in the order given.

    Args:
        plans: from :func:`aiinfra.plan.search.plan`, best first.
        job: the job they were planned for.
        name: the model's label (a preset name or a path).

    Returns:
        One row per plan, numbered from 1.
    """
    rows = [plan_row(i, p, job) for i, p in enumerate(plans, 1)]
    stamp, fields = job_stamp(job, name)
    words = (COLUMNS.index("recompute"),)  # none, selective, full: translated
    return Table(list(COLUMNS), rows, NOTE, stamp, words=words, fields=fields)
