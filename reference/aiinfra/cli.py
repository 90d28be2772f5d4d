"""The ``aiinfra`` command: the book's tables and measurements from a terminal.

Commands are two words, a chapter's group and a verb (``aiinfra bench collectives``,
``aiinfra comm cost``). Each is one entry of :data:`COMMANDS`: its words, a help line,
a function that adds its flags to an ``argparse`` parser and one that runs it and
returns the exit status. A chapter adds its commands by adding entries. Flags are
checked before any work starts; bad input exits with status 2 and a message that names
the flag, as ``argparse`` does.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from collections.abc import Callable, Sequence

import torch

from aiinfra.comm import bench, cost, results
from aiinfra.memory import cli as memory_cli
from aiinfra.models import bench as attention_bench
from aiinfra.parallel import bench as ddp_bench
from aiinfra.parallel import zero_results


def parse_size(text: str) -> int:
    """A byte count: an integer with an optional binary suffix, ``16M`` = 16 * 2^20.

    K, M and G are powers of 1024 (KiB, MiB, GiB), as in nccl-tests' ``-b``/``-e``.
    """
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*", text, flags=re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size: an integer with an optional binary suffix "
            "K, M or G (1K = 1024 bytes)"
        )
    return int(m[1]) * 1024 ** " KMG".index(m[2].upper() or " ")


def _int_at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low:
            raise argparse.ArgumentTypeError(f"must be an int >= {low}, got {text!r}")
        return value

    return parse


def _names(choices: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    """A comma-separated list of names from ``choices``; ``all`` means every one."""

    def parse(text: str) -> tuple[str, ...]:
        names = tuple(n.strip() for n in text.split(",") if n.strip())
        if names == ("all",):
            return tuple(choices)
        unknown = [n for n in names if n not in choices]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"unknown {unknown or text!r}; choose from {', '.join(choices)} or all"
            )
        return names

    return parse


# aiinfra bench collectives


def add_bench_collectives(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench collectives`` (nccl-tests' names where it has one)."""
    algorithms = sorted({a for algs in bench.ALGORITHMS.values() for a in algs})
    add = parser.add_argument
    add("--world-size", type=_int_at_least(1), default=4, help="ranks (default 4)")
    add("--backend", choices=("gloo", "nccl"), default="gloo")
    add("--min-bytes", type=parse_size, default=1024, help="smallest S (default 1K)")
    add("--max-bytes", type=parse_size, default=16 * 2**20, help="largest S (16M)")
    add(
        "--collectives",
        type=_names(list(bench.ALGORITHMS)),
        default=tuple(bench.ALGORITHMS),
        help="comma-separated, or all (the default)",
    )
    add(
        "--algorithms",
        type=_names(algorithms),
        default=(),
        help="comma-separated, e.g. ring,torch (default: all)",
    )
    add("--dtype", choices=bench.DTYPES, default="float32")
    add("--warmup", type=_int_at_least(0), default=5, help="untimed calls per size")
    add("--iters", type=_int_at_least(1), default=20, help="timed calls per size")
    add(
        "--local-size",
        type=_int_at_least(0),
        default=0,
        help="ranks per node of the hierarchical all-reduce (0: half)",
    )
    add("--timeout", type=_int_at_least(1), default=1800, help="seconds in all")
    add("--json", action="store_true", help="print JSON instead of a table")
    add("--out", help="also write a results file (JSON with a machine stamp)")


def run_bench_collectives(args: argparse.Namespace) -> int:
    """Check the flags together, run the benchmark, print and optionally save it.

    Under torchrun the job's ranks run the sweep (``--world-size`` is the job's) and
    rank 0 reports.
    """
    error = args.command_parser.error
    ws = bench.torchrun_world_size() or args.world_size
    if args.max_bytes < args.min_bytes:
        error(f"--max-bytes {args.max_bytes} is below --min-bytes {args.min_bytes}")
    known = {a for c in args.collectives for a in bench.ALGORITHMS[c]}
    if set(args.algorithms) - known:
        error(
            f"--algorithms {sorted(set(args.algorithms) - known)} do not apply to "
            f"--collectives {','.join(args.collectives)}; choose from {sorted(known)}"
        )
    local = int(os.environ.get("LOCAL_WORLD_SIZE", ws))  # ranks on this machine
    if args.backend == "nccl" and torch.cuda.device_count() < local:
        error(
            f"--backend nccl needs one CUDA GPU per rank (--world-size {local}), "
            f"found {torch.cuda.device_count()}"
        )
    if args.local_size and ws % args.local_size:
        error(f"--local-size {args.local_size} must divide --world-size {ws}")
    config = bench.BenchConfig(
        **{f.name: getattr(args, f.name) for f in dataclasses.fields(bench.BenchConfig)}
    )
    rows = bench.run_bench(config, ws, args.backend, args.timeout)
    if os.environ.get("RANK", "0") != "0":
        return 0  # under torchrun, rank 0 reports
    stamp = results.machine_stamp(ws, args.backend)
    if args.out:
        path = results.write_results(args.out, rows, stamp, dataclasses.asdict(config))
        print(f"wrote {path}", file=sys.stderr)
    if args.json:
        print(json.dumps({"stamp": stamp, "rows": rows}, indent=1))
    else:
        print(results.rows_table(rows, f"{args.backend}, {ws} ranks").to_text())
    return 0


# aiinfra comm cost


def add_comm_cost(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra comm cost``."""
    parser.add_argument("--p", type=_int_at_least(1), default=8, help="ranks")
    parser.add_argument(
        "--size",
        type=parse_size,
        default=16 * 2**20,
        help="message size n, e.g. 16M (binary suffixes)",
    )
    parser.add_argument(
        "--link",
        choices=sorted(cost.LINKS),
        default="nvlink",
        help="link preset (illustrative round numbers)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def run_comm_cost(args: argparse.Namespace) -> int:
    """Print the cost of every algorithm at (p, n, link) and the crossovers at p."""
    costs = cost.cost_formula_table(args.p, args.size, args.link)
    crossovers = cost.crossover_table((args.p,), args.link)
    if args.json:
        docs = {"costs": costs.to_json(), "crossovers": crossovers.to_json()}
        print(json.dumps({k: json.loads(v) for k, v in docs.items()}, indent=2))
    else:
        print(costs.to_text(), crossovers.to_text(), sep="\n\n")
    return 0


# (group, command or None for a one-word command, help, add_arguments, run)
Command = tuple[str, str | None, str, Callable[..., None], Callable[..., int]]
COMMANDS: list[Command] = [
    (
        "bench",
        "collectives",
        "time collectives, nccl-tests style",
        add_bench_collectives,
        run_bench_collectives,
    ),
    (
        "comm",
        "cost",
        "alpha-beta-gamma cost of collective algorithms",
        add_comm_cost,
        run_comm_cost,
    ),
    (
        "bench",
        "attention",
        "time and memory of naive, tiled, Triton and SDPA attention",
        attention_bench.add_arguments,
        attention_bench.run,
    ),
    (
        "bench",
        "ddp",
        "step time of our DDP against DistributedDataParallel",
        ddp_bench.add_arguments,
        ddp_bench.run,
    ),
    (
        "bench",
        "zero",
        "our ZeRO stages against DeepSpeed and FSDP2: losses and memory",
        zero_results.add_arguments,
        zero_results.run,
    ),
    (
        "memory",
        None,
        "where the memory of a training step goes",
        memory_cli.add_arguments,
        memory_cli.run,
    ),
]


def build_parser() -> argparse.ArgumentParser:
    """The ``aiinfra`` parser: one sub-parser per group, one per command within it."""
    parser = argparse.ArgumentParser(
        prog="aiinfra", description=__doc__.split("\n")[0].replace("``", "")
    )
    groups = parser.add_subparsers(dest="group", required=True, metavar="GROUP")
    verbs: dict[str, argparse._SubParsersAction] = {}
    for group, name, help_, add_arguments, run in COMMANDS:
        if name is None:  # a one-word command: aiinfra memory ...
            command = groups.add_parser(group, help=help_, description=help_)
            add_arguments(command)
            command.set_defaults(run=run, command_parser=command)
            continue
        if group not in verbs:
            sub = groups.add_parser(group, help=f"{group} commands")
            verbs[group] = sub.add_subparsers(
                dest="command", required=True, metavar="COMMAND"
            )
        command = verbs[group].add_parser(name, help=help_, description=help_)
        add_arguments(command)
        command.set_defaults(run=run, command_parser=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``aiinfra`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":  # python -m aiinfra.cli, as torchrun -m needs
    sys.exit(main())
