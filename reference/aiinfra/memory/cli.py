"""``aiinfra memory``: the training-memory calculator on the command line.

Prints where the memory of one training rank goes (parameters, gradients, optimizer
states, activations) for a named real model or any Hugging Face ``config.json``,
under tensor and sequence parallelism, activation recomputation and ZeRO. The table
is the same :class:`aiinfra.report.Table` the book renders, as text or JSON::

    aiinfra memory --model llama-3-8b --seq 8192 --tp 2 --sp --zero 1 --dp 8 \
        --attention flash --grad-dtype fp32

Both sources go through :meth:`TransformerConfig.from_hf_config`: ``--model`` names
an entry of :data:`aiinfra.models.presets.PRESETS`, ``--config`` a file. A
mixture-of-experts config is refused, since the calculator would count its experts
as one dense MLP. Bad input (a missing config field, a negative size, a TP degree
that does not divide the heads) ends with a one-line error on stderr and exit
status 2, as for every ``aiinfra`` command.
"""

from __future__ import annotations

import argparse
import os

from aiinfra.clikit import Command, int_at_least
from aiinfra.memory.activations import ATTENTION, RECOMPUTE
from aiinfra.memory.calculator import memory_report
from aiinfra.memory.model_states import GRADIENT_LAYOUTS
from aiinfra.models.config import TransformerConfig
from aiinfra.models.hf.config import read_json_object
from aiinfra.models.presets import DENSE_PRESETS, is_moe, preset


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``memory`` subcommand's options to ``parser``.

    Args:
        parser: the subcommand's parser.
    """
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--model",
        type=str.lower,
        choices=sorted(DENSE_PRESETS),
        help="a named real model",
    )
    source.add_argument("--config", help="path to a Hugging Face config.json")
    parser.add_argument(
        "--seq", type=int_at_least(1), default=4096, help="sequence length s"
    )
    parser.add_argument(
        "--micro-batch",
        type=int_at_least(1),
        default=1,
        help="sequences per micro-batch b",
    )
    parser.add_argument(
        "--tp", type=int_at_least(1), default=1, help="tensor-parallel ranks t"
    )
    parser.add_argument(
        "--sp", action="store_true", help="sequence parallelism (with --tp)"
    )
    parser.add_argument(
        "--recompute", choices=RECOMPUTE, default="none", help="activation recompute"
    )
    parser.add_argument(
        "--attention",
        choices=ATTENTION,
        default="materialised",
        help="materialised softmax + dropout (Korthikanti et al.) or a fused kernel",
    )
    parser.add_argument(
        "--grad-dtype",
        choices=tuple(GRADIENT_LAYOUTS),
        default="bf16",
        help="gradient layout: 16, 18 or 20 bytes of model states per parameter",
    )
    parser.add_argument(
        "--zero", type=int, choices=(0, 1, 2, 3), default=0, help="ZeRO stage"
    )
    parser.add_argument(
        "--dp", type=int_at_least(1), default=1, help="data-parallel ranks N_d"
    )
    parser.add_argument("--json", action="store_true", help="print JSON, not text")


def read_dense_config(path: str | os.PathLike) -> TransformerConfig:
    """Read a ``config.json`` file, refusing mixture-of-experts models.

    Args:
        path: the file.

    Returns:
        ``TransformerConfig.from_hf_config`` of its fields.

    Raises:
        ValueError: the file is not a JSON object, the config has routed experts,
            or a field is missing or wrong.
        OSError: the file cannot be read.
    """
    fields = read_json_object(path)
    if is_moe(fields):
        raise ValueError(
            f"config {os.fspath(path)!r} describes a mixture-of-experts model; the "
            "memory calculator models dense MLPs only"
        )
    return TransformerConfig.from_hf_config(fields)


def run(args: argparse.Namespace) -> int:
    """Print the memory breakdown for the parsed options.

    Args:
        args: options added by :func:`add_arguments`.

    Returns:
        0 (bad input raises ``ValueError``, which ``aiinfra`` turns into exit
        status 2 with the message).

    Raises:
        ValueError: a config file that cannot be read or describes no dense
            decoder, or options the calculator rejects (a TP degree that does not
            divide the heads).
    """
    if args.model:  # argparse offers the dense presets only
        name, cfg = args.model, preset(args.model)
    else:
        try:
            name, cfg = args.config, read_dense_config(args.config)
        except OSError as err:
            raise ValueError(f"--config cannot be read: {err}") from err
    table = memory_report(
        cfg,
        name,
        seq=args.seq,
        micro_batch=args.micro_batch,
        tp=args.tp,
        sp=args.sp,
        recompute=args.recompute,
        zero=args.zero,
        dp=args.dp,
        attention=args.attention,
        grad_dtype=args.grad_dtype,
    )
    print(table.to_json() if args.json else table.to_text())
    return 0


COMMANDS = (
    Command(
        "memory",
        None,
        "training memory of one rank: parameters, gradients, optimizer, activations",
        add_arguments,
        run,
    ),
)
