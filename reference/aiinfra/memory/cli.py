"""``aiinfra memory``: the training-memory calculator on the command line.

Prints where the memory of one training rank goes (parameters, gradients, optimizer
states, activations) for a named real model or any Hugging Face ``config.json``,
under tensor and sequence parallelism, activation recomputation and ZeRO. The table
is the same :class:`aiinfra.report.Table` the book renders, as text or JSON::

    aiinfra memory --model llama-3-8b --seq 8192 --tp 2 --sp --zero 1 --dp 8

Bad input (a missing config field, a negative size, a TP degree that does not divide
the heads) ends with a one-line error on stderr and exit status 2, as argparse does.
"""

from __future__ import annotations

import argparse
import sys

from aiinfra.memory.activations import RECOMPUTE
from aiinfra.memory.calculator import memory_report
from aiinfra.memory.config import load_config
from aiinfra.memory.presets import PRESETS, preset


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``memory`` subcommand's options to ``parser``.

    Args:
        parser: the subcommand's parser.
    """
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--model", type=str.lower, choices=sorted(PRESETS), help="a named real model"
    )
    source.add_argument("--config", help="path to a Hugging Face config.json")
    parser.add_argument("--seq", type=int, default=4096, help="sequence length s")
    parser.add_argument(
        "--micro-batch", type=int, default=1, help="sequences per micro-batch b"
    )
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks t")
    parser.add_argument(
        "--sp", action="store_true", help="sequence parallelism (with --tp)"
    )
    parser.add_argument(
        "--recompute", choices=RECOMPUTE, default="none", help="activation recompute"
    )
    parser.add_argument(
        "--zero", type=int, choices=(0, 1, 2, 3), default=0, help="ZeRO stage"
    )
    parser.add_argument("--dp", type=int, default=1, help="data-parallel ranks N_d")
    parser.add_argument("--json", action="store_true", help="print JSON, not text")


def run(args: argparse.Namespace) -> int:
    """Print the memory breakdown for the parsed options.

    Args:
        args: options added by :func:`add_arguments`.

    Returns:
        0 on success, 2 on bad input (after a message on stderr).
    """
    try:
        for flag in ("seq", "micro_batch", "tp", "dp"):
            value = getattr(args, flag)
            if value < 1:
                raise ValueError(
                    f"--{flag.replace('_', '-')} must be >= 1, got {value}"
                )
        cfg = preset(args.model) if args.model else load_config(args.config)
        table = memory_report(
            cfg,
            seq=args.seq,
            micro_batch=args.micro_batch,
            tp=args.tp,
            sp=args.sp,
            recompute=args.recompute,
            zero=args.zero,
            dp=args.dp,
        )
    except (ValueError, TypeError, OSError) as err:  # JSON errors are ValueErrors
        print(f"aiinfra memory: error: {err}", file=sys.stderr)
        return 2
    print(table.to_json() if args.json else table.to_text())
    return 0
