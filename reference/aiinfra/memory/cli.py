"""``aiinfra memory``: the training-memory calculator on the command line.

Prints where the memory of one training rank goes (parameters, gradients, optimizer
states, activations) for a named real model or any Hugging Face ``config.json``,
under tensor and sequence parallelism, activation recomputation and ZeRO. The table
is the same :class:`aiinfra.report.Table` the book renders, as text or JSON::

    aiinfra memory --model llama-3-8b --seq 8192 --tp 2 --sp --zero 1 --dp 8 \
        --attention flash --grad-dtype fp32

Both sources go through :meth:`TransformerConfig.from_hf_config`: ``--model`` names
an entry of :data:`aiinfra.models.presets.PRESETS`, ``--config`` a file. Multi-head
latent attention and experts (DeepSeek-V2/V3, Mixtral, Qwen-MoE) are counted as the
package's own layers keep them; there is no expert parallelism (every rank is taken
to hold all experts). Bad input (a missing config field, a negative size, a TP degree
that does not divide the heads) ends with a one-line error on stderr and exit
status 2, as for every ``aiinfra`` command.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from aiinfra.clikit import Command, add_output_flags, int_at_least, name_of, show

if TYPE_CHECKING:
    from aiinfra.models.config import TransformerConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``memory`` subcommand's options to ``parser``.

    Args:
        parser: the subcommand's parser.
    """
    from aiinfra.memory.activations import ATTENTION, RECOMPUTE
    from aiinfra.memory.model_states import GRADIENT_LAYOUTS
    from aiinfra.models.presets import MODEL_NAMES

    add = parser.add_argument
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--model",
        type=name_of(MODEL_NAMES),
        help=f"a named model, any case: {', '.join(MODEL_NAMES)}",
    )
    source.add_argument("--config", help="path to a Hugging Face config.json")
    add("--seq", type=int_at_least(1), default=4096, help="sequence length s")
    add("--micro-batch", type=int_at_least(1), default=1, help="sequences b")
    add("--tp", type=int_at_least(1), default=1, help="tensor-parallel ranks t")
    add("--sp", action="store_true", help="sequence parallelism (with --tp)")
    add("--recompute", choices=RECOMPUTE, default="none", help="activation recompute")
    add(
        "--attention",
        choices=ATTENTION,
        default="materialised",
        help="materialised softmax + dropout (Korthikanti et al.) or a fused kernel",
    )
    add(
        "--grad-dtype",
        choices=tuple(GRADIENT_LAYOUTS),
        default="bf16",
        help="gradient layout: 16, 18 or 20 bytes of model states per parameter",
    )
    add("--zero", type=int, choices=(0, 1, 2, 3), default=0, help="ZeRO stage")
    add("--dp", type=int_at_least(1), default=1, help="data-parallel ranks N_d")
    add_output_flags(parser)


def read_config(path: str | os.PathLike) -> TransformerConfig:
    """Read a ``config.json`` file.

    Args:
        path: the file.

    Returns:
        ``TransformerConfig.from_hf_config`` of its fields.

    Raises:
        ValueError: the file is not a JSON object, or a field is missing or wrong.
        OSError: the file cannot be read.
    """
    from aiinfra.models.config import TransformerConfig
    from aiinfra.models.hf.config import read_json_object

    return TransformerConfig.from_hf_config(read_json_object(path))


def run(args: argparse.Namespace) -> int:
    """Print the memory breakdown for the parsed options.

    Args:
        args: options added by :func:`add_arguments`.

    Returns:
        0 (bad input raises ``ValueError``, which ``aiinfra`` turns into exit
        status 2 with the message).

    Raises:
        ValueError: a config file that cannot be read or describes no decoder
            the package models, or options the calculator rejects (a TP degree
            that does not divide the heads or the experts' widths).
    """
    from aiinfra.memory.calculator import memory_report
    from aiinfra.models.config import TransformerConfig
    from aiinfra.models.presets import model_fields

    if args.model:
        name = args.model
        cfg = TransformerConfig.from_hf_config(model_fields(name))
    else:
        try:
            name, cfg = args.config, read_config(args.config)
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
    show(args, {f"Training memory of one rank: {name}": table})
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
