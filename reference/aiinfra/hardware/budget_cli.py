"""``aiinfra budget``: a training run's FLOPs and the GPU time they take.

For ``N`` parameters trained on ``D`` tokens, prints ``C = 6ND``, the GPU-days at
each model FLOPs utilisation and the wall-clock days on a number of GPUs, then the
published runs and the MFU their GPU-hours imply (:mod:`aiinfra.hardware.budget`)::

    aiinfra budget --params 405e9 --tokens 15.6e12 --gpu H100 --gpus 16384

The defaults are Llama 3.1 405B's run (the first line of the output echoes every
input). A bad flag ends with a one-line error naming it and exit status 2.
"""

from __future__ import annotations

import argparse

from aiinfra.accelerators import GPUS
from aiinfra.clikit import add_output_flags, int_at_least, name_of, positive_float, show


def _fraction(text: str) -> float:
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``budget`` command's flags to ``parser`` (defaults: Llama 3.1 405B)."""
    add = parser.add_argument
    add("--params", type=positive_float, default=405e9, help="parameters N")
    add("--tokens", type=positive_float, default=15.6e12, help="training tokens D")
    add(
        "--gpu",
        type=name_of(GPUS),
        default="H100",
        help=f"accelerator, any case: {', '.join(GPUS)}",
    )
    add("--gpus", type=int_at_least(1), default=16_384, help="number of GPUs")
    add(
        "--mfu",
        type=_fraction,
        nargs="+",
        default=[0.3, 0.4, 0.5],
        help="model FLOPs utilisations, in (0, 1]",
    )
    add_output_flags(parser)


def run(args: argparse.Namespace) -> int:
    """Print the run's budget at each MFU, then the published runs."""
    from .budget import budget_table, published_runs_table

    table = budget_table(args.params, args.tokens, args.gpu, args.gpus, tuple(args.mfu))
    show(
        args,
        {
            f"Budget of N = {args.params:.3g} parameters on D = {args.tokens:.3g} "
            f"tokens, {args.gpus} {args.gpu}": table,
            "Published runs and the MFU their GPU-hours imply": published_runs_table(),
        },
    )
    return 0
