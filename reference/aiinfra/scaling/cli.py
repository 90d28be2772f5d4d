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
import json
import sys
from pathlib import Path

from aiinfra import results
from aiinfra.clikit import Command, positive_float

from .report import allocation_table, run_table
from .stamp import KIND, fitted_law, refit


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``scaling`` command's flags to ``parser``."""
    add = parser.add_argument
    add("--flops", type=positive_float, help="training budget C, FLOPs (e.g. 3.8e25)")
    add("--json", action="store_true", help="print JSON, not text")
    add(
        "--fit",
        type=Path,
        help="this package's fit (written by --refit; default: the book's stamped "
        "result); skipped if absent",
    )
    add("--refit", action="store_true", help="refit to the published runs, store it")
    add("--out", type=Path, help="with --refit: write here (default: the book's file)")


def run(args: argparse.Namespace) -> int:
    """Print the allocations, or refit and write the JSON.

    Args:
        args: flags added by :func:`add_arguments`.

    Returns:
        0 (bad input raises ``ValueError``, which ``aiinfra`` turns into exit
        status 2 naming the flag).

    Raises:
        ValueError: neither ``--flops`` nor ``--refit`` is given.
    """
    if args.refit:
        path = results.write(KIND, refit(), backend="cpu", world_size=1, path=args.out)
        print(f"wrote {path}", file=sys.stderr)
        return 0
    if args.flops is None:
        raise ValueError("--flops must be given (a budget in FLOPs), or --refit")
    fit = args.fit or results.results_path(KIND, "cpu")
    fitted = fitted_law(results.load(KIND, "cpu", fit)) if fit.is_file() else None
    tables = {
        "compute_optimal": allocation_table(args.flops, fitted),
        "llama3_405b": run_table(fitted=fitted),
    }
    if args.json:
        print(json.dumps({k: json.loads(t.to_json()) for k, t in tables.items()}))
    else:
        print("\n\n".join(t.to_text() for t in tables.values()))
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
