"""``aiinfra plan``: the parallel layouts of a training job, fastest first.

For a model (a preset name, a ``config.json`` or a checkpoint directory), a GPU
kind, a number of GPUs and a global batch, prints the feasible (dp, tp, pp, cp,
ZeRO stage, micro-batch, recompute, v) layouts with their memory per GPU and
estimated step time and MFU (:mod:`aiinfra.plan.search`), as text or JSON::

    aiinfra plan --model llama-3-70b --gpu h100 --gpus 64 --global-batch 4M \
        --seq 8192 --top 10

Bad input (an unknown model or GPU, GPUs that are not whole nodes, a batch that is
not whole sequences, a job that nothing fits) ends with a one-line error naming
the flag and exit status 2, as for every ``aiinfra`` command.
"""

from __future__ import annotations

import argparse
import re

from aiinfra.accelerators import GPUS
from aiinfra.clikit import (
    Command,
    add_output_flags,
    int_at_least,
    name_of,
    positive_float,
    show,
)

#: What the layout columns of the plan table mean, printed under it.
LEGEND = (
    ("dp, tp, pp, cp", "data-, tensor-, pipeline- and context-parallel degrees"),
    ("ZeRO", "ZeRO stage of the data-parallel ranks (0: none)"),
    ("b", "micro-batch: sequences per forward and backward pass"),
    ("k", "micro-batches per optimizer step on each data-parallel rank"),
    ("v", "model chunks per pipeline rank (interleaved 1F1B when > 1)"),
    ("recompute", "activations recomputed in the backward pass"),
    ("GB/GPU", "memory of the busiest pipeline stage, 1e9 bytes"),
    ("bubble .. DP (s)", "pipeline bubble and exposed communication per step"),
)


def tokens(text: str) -> int:
    """An argparse type: a token count with an optional binary suffix, ``16M``.

    ``K``, ``M`` and ``G`` are powers of 1024, as batch sizes are quoted ("16M
    tokens" = 2^24); a plain integer is taken as it is.
    """
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)\s*", text, flags=re.IGNORECASE)
    if not m or int(m[1]) < 1:
        raise argparse.ArgumentTypeError(
            f"must be a positive integer with an optional suffix K, M or G "
            f"(1M = 2^20 tokens), got {text!r}"
        )
    return int(m[1]) * 1024 ** " KMG".index(m[2].upper() or " ")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``plan`` command's flags to ``parser``."""
    from aiinfra.memory.activations import ATTENTION
    from aiinfra.models.presets import MODEL_NAMES
    from aiinfra.plan.job import MATMUL

    add = parser.add_argument
    add(
        "--model",
        required=True,
        help=f"a model name, any case ({', '.join(MODEL_NAMES)}; dense ones), a "
        "config.json or a checkpoint directory",
    )
    add(
        "--gpu",
        type=name_of(GPUS),
        required=True,
        help=f"GPU kind, any case: {', '.join(GPUS)}",
    )
    add("--gpus", type=int_at_least(1), required=True, help="GPUs of the job")
    add("--gpus-per-node", type=int_at_least(1), default=8, help="GPUs per NVLink node")
    add(
        "--global-batch",
        type=tokens,
        required=True,
        help="tokens per optimizer step (suffix K, M, G: powers of 1024)",
    )
    add("--seq", type=int_at_least(1), default=8192, help="sequence length T")
    add(
        "--efficiency",
        type=positive_float,
        default=0.6,
        help="fraction of dense BF16 peak the matmuls reach (an assumption); with "
        "--matmul shape, only the attention core's",
    )
    add(
        "--matmul",
        choices=MATMUL,
        default="constant",
        help="price every matmul at --efficiency (constant), or each linear "
        "layer's GEMMs by their per-rank shapes: tiles, waves and a ceiling fitted "
        "to a published H100/A100 measurement (shape; a model, dense models only)",
    )
    add(
        "--exposed",
        type=positive_float,
        default=0.2,
        help="fraction of data-parallel traffic not overlapped (an assumption)",
    )
    add(
        "--memory-fraction",
        type=positive_float,
        default=1.0,
        help="fraction of HBM a layout may fill",
    )
    add("--attention", choices=ATTENTION, default="flash", help="attention kernel")
    add("--top", type=int_at_least(1), default=10, help="layouts to print")
    add_output_flags(parser)


def run(args: argparse.Namespace) -> int:
    """Plan the job and print the best layouts, then what the columns mean.

    Args:
        args: flags added by :func:`add_arguments`.

    Returns:
        0 (bad input raises ``ValueError``, which ``aiinfra`` turns into exit
        status 2 naming the flag).

    Raises:
        ValueError: an unknown model, GPUs that are not whole nodes, a batch that
            is not whole sequences, a fraction outside (0, 1], or no layout that
            is valid or fits.
    """
    from aiinfra.plan.job import Job
    from aiinfra.plan.report import plan_table
    from aiinfra.plan.search import plan
    from aiinfra.plan.source import load_model
    from aiinfra.report import Table

    name, model = load_model(args.model)
    job = Job(
        model,
        args.gpu,
        args.gpus,
        args.global_batch,
        args.seq,
        gpus_per_node=args.gpus_per_node,
        efficiency=args.efficiency,
        exposed=args.exposed,
        memory_fraction=args.memory_fraction,
        attention=args.attention,
        matmul=args.matmul,
    )
    table = plan_table(plan(job, args.top), job, name)
    legend = Table(["column", "meaning"], [list(row) for row in LEGEND])
    show(
        args,
        {f"Layouts of {name} on {args.gpus} {args.gpu}, fastest first": table}
        | {"What the columns mean": legend},
    )
    return 0


COMMANDS = (
    Command(
        "plan",
        None,
        "parallel layouts of a training job, fastest first: memory, step time, MFU",
        add_arguments,
        run,
    ),
)
