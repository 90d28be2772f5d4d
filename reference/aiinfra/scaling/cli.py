"""``aiinfra scaling``: the compute-optimal model for a budget, under each law.

For a training budget C (FLOPs), prints the compute-optimal parameters N and
tokens D under Kaplan's law, Chinchilla's Approach 3 as published, Besiroglu et
al.'s refit and this package's fit to the published runs (read from its JSON file,
when there is one), then Llama 3 405B's own choice in the same terms::

    aiinfra scaling --flops 3.8e25 [--json]

``--refit`` refits the law to the runs (the paper's 4,500 starts and 1,000
bootstrap resamples: minutes on a CPU) and stores it as the stamped result
``scaling-fit`` that the book reads (:mod:`aiinfra.results`; ``--out`` elsewhere).
A bad flag ends with a one-line error naming it and exit status 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from aiinfra.clikit import Command, add_output_flags, positive_float, save, show


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``scaling`` command's flags to ``parser``."""
    add = parser.add_argument
    add("--flops", type=positive_float, help="training budget C, FLOPs (e.g. 3.8e25)")
    add(
        "--fit",
        type=Path,
        help="this package's fit (written by --refit; default: the book's stamped "
        "result); skipped if absent",
    )
    add(
        "--refit",
        action="store_true",
        help="refit the law to the published runs (minutes); print it, and store "
        "it with --stamp or --out",
    )
    add_output_flags(parser, measures=True)


def run(args: argparse.Namespace) -> int:
    """Print the allocations, or refit (and store) the law.

    Args:
        args: flags added by :func:`add_arguments`.

    Returns:
        0 (bad input raises ``ValueError``, which ``aiinfra`` turns into exit
        status 2 naming the flag).

    Raises:
        ValueError: neither ``--flops`` nor ``--refit`` is given.
    """
    from aiinfra import results

    from .report import allocation_table, fit_table, run_table
    from .stamp import KIND, fitted_law, refit

    if args.refit:
        res = save(args, KIND, refit(), backend="cpu", world_size=1)
        show(args, {"The law refitted to the published runs": fit_table(res)}, res)
        return 0
    if args.flops is None:
        raise ValueError("--flops must be given (a budget in FLOPs), or --refit")
    fit = args.fit or results.results_path(KIND, "cpu")
    fitted = fitted_law(results.load(KIND, "cpu", fit)) if fit.is_file() else None
    show(
        args,
        {
            f"Compute-optimal N and D for C = {args.flops:.3g} FLOPs": allocation_table(
                args.flops, fitted
            ),
            "Llama 3 405B's choice in each law's terms": run_table(fitted=fitted),
        },
    )
    return 0


COMMANDS = (
    Command(
        "scaling",
        None,
        "compute-optimal parameters and tokens for a FLOP budget under each scaling "
        "law, and Llama 3 405B's choice in those terms",
        add_arguments,
        run,
    ),
)
