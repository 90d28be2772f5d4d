"""The communication chapter's commands: ``bench collectives``, ``comm cost|hangs``.

``bench collectives`` is nccl-tests for the algorithms of :mod:`aiinfra.comm` and
torch.distributed's own, on spawned gloo ranks, on one GPU per rank over NCCL, or
inside a ``torchrun`` job (it then joins the job's ranks). ``comm cost`` prints the
alpha-beta-gamma cost of every algorithm at one size and the crossovers. ``comm
hangs`` reproduces the hangs of :mod:`aiinfra.comm.hangs` on gloo ranks and prints
what each rank raised and who the flight recorder blames.
"""

from __future__ import annotations

import argparse
import os

from aiinfra.clikit import (
    Command,
    add_config_flags,
    add_output_flags,
    config_from,
    int_at_least,
    name_of,
    names,
    positive_float,
    save,
    show,
    size,
)


def add_bench_collectives(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench collectives`` (nccl-tests' names where it has one)."""
    from aiinfra.comm import bench

    algorithms = sorted({a for algs in bench.ALGORITHMS.values() for a in algs})
    add = parser.add_argument
    add("--world-size", type=int_at_least(1), default=4, help="ranks")
    add("--backend", choices=("gloo", "nccl"), default="gloo", help="transport")
    add_config_flags(
        parser,
        bench.BenchConfig,
        parse={
            "min_bytes": size,
            "max_bytes": size,
            "collectives": names(list(bench.ALGORITHMS)),
            "algorithms": names(algorithms),
        },
        helps={
            "collectives": "collectives, comma-separated, or all",
            "algorithms": "algorithms to keep, e.g. ring,torch (default: all)",
            "min_bytes": "smallest size (K, M, G: powers of 1024); sizes double",
            "max_bytes": "largest size",
        },
        choices={"dtype": bench.DTYPES},
    )
    add("--timeout", type=int_at_least(1), default=1800, help="seconds in all")
    add_output_flags(parser, measures=True)


def run_bench_collectives(args: argparse.Namespace) -> int:
    """Check the flags together, run the benchmark, print and optionally save it.

    Under torchrun the job's ranks run the sweep (``--world-size`` is the job's) and
    rank 0 reports.
    """
    import dataclasses

    import torch

    from aiinfra import progress
    from aiinfra.comm import bench
    from aiinfra.comm.results import rows_table

    ws = bench.torchrun_world_size() or args.world_size
    config = config_from(args, bench.BenchConfig)
    known = {a for c in config.collectives for a in bench.ALGORITHMS[c]}
    if set(config.algorithms) - known:
        raise ValueError(
            f"--algorithms must be some of {sorted(known)} for --collectives "
            f"{','.join(config.collectives)}, got {sorted(set(config.algorithms))}"
        )
    local = int(os.environ.get("LOCAL_WORLD_SIZE", ws))  # ranks on this machine
    if args.backend == "nccl" and torch.cuda.device_count() < local:
        raise ValueError(
            f"--backend nccl needs one CUDA GPU per rank (--world-size {local}), "
            f"found {torch.cuda.device_count()}"
        )
    if config.local_size and ws % config.local_size:
        raise ValueError(
            f"--local-size must divide --world-size {ws}, got {config.local_size}"
        )
    with progress.waiting(f"{ws} {args.backend} ranks", 45 * config.repeats):
        rows = bench.run_bench(config, ws, args.backend, args.timeout)
    if os.environ.get("RANK", "0") != "0":
        return 0  # under torchrun, rank 0 reports
    body = {"config": dataclasses.asdict(config), "rows": rows}
    res = save(args, "collectives", body, backend=args.backend, world_size=ws)
    stamp, fields = "{backend}, {ranks} ranks", {"backend": args.backend, "ranks": ws}
    table = rows_table(rows, stamp, fields)
    show(args, {"Time and bandwidth per collective and size": table}, res)
    return 0


def add_comm_cost(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra comm cost``."""
    from aiinfra.comm.cost import LINKS

    add = parser.add_argument
    add("--p", type=int_at_least(1), default=8, help="ranks p")
    add("--size", type=size, default=16 * 2**20, help="message size n (16M: MiB)")
    add(
        "--link",
        type=name_of(LINKS),
        default="nvlink",
        help=f"link preset, illustrative round numbers: {', '.join(sorted(LINKS))}",
    )
    add_output_flags(parser)


def run_comm_cost(args: argparse.Namespace) -> int:
    """Print the cost of every algorithm at (p, n, link) and the crossovers at p."""
    from aiinfra.comm import cost

    n = cost.format_bytes(args.size)
    costs = cost.cost_formula_table(args.p, args.size, args.link)
    crossovers = cost.crossover_table((args.p,), args.link)
    show(
        args,
        {
            f"Cost of each algorithm, p = {args.p}, n = {n}, link {args.link}": costs,
            f"Message sizes where the algorithms cross, p = {args.p}": crossovers,
        },
    )
    return 0


def add_comm_hangs(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra comm hangs``."""
    from aiinfra.comm.hangs import SCENARIOS

    add = parser.add_argument
    add(
        "--scenarios",
        type=names(list(SCENARIOS)),
        default=SCENARIOS,
        help="comma-separated, or all",
    )
    add("--world-size", type=int_at_least(2), default=3, help="ranks")
    add(
        "--timeout",
        type=positive_float,
        default=2.0,
        help="process-group timeout, seconds",
    )
    add_output_flags(parser, measures=True)


def run_comm_hangs(args: argparse.Namespace) -> int:
    """Run the scenarios, print each rank's error and the diagnosis, save them."""
    from aiinfra import progress
    from aiinfra.comm import hangs
    from aiinfra.report import Table

    expected = 4 * len(args.scenarios) * max(args.timeout, 1.0)
    with progress.waiting(f"hangs on {args.world_size} gloo ranks", expected):
        records = hangs.run_hangs(args.scenarios, args.world_size, args.timeout)
    config = {
        "scenarios": list(args.scenarios),
        "world_size": args.world_size,
        "timeout_s": args.timeout,
    }
    body = {"config": config, "rows": hangs.records_json(records)}
    res = save(args, "hangs", body, backend="gloo", world_size=args.world_size)
    diagnosis = Table(
        ["scenario", "culprit ranks", "diagnosis", "launcher"],
        [[r.scenario, r.culprits, r.diagnosis, r.launcher or ""] for r in records],
        note="The flight recorder's diagnosis of each hang; the launcher column is "
        "what the process launcher saw.",
    )
    raised = Table(
        ["scenario", "rank", "failed after (s)", "what the rank raised"],
        [
            [r.scenario, rank, "" if s is None else round(s, 2), e or "nothing"]
            for r in records
            for rank, (e, s) in enumerate(zip(r.errors, r.elapsed_s, strict=True))
        ],
        note="'nothing': the rank returned, or died before it could raise.",
    )
    show(args, {"Who hung and why": diagnosis, "What each rank saw": raised}, res)
    return 0


COMMANDS = (
    Command(
        "bench",
        "collectives",
        "time collectives, nccl-tests style",
        add_bench_collectives,
        run_bench_collectives,
        runs="every algorithm of every collective, 1 KiB to 16 MiB, on 4 spawned "
        "gloo ranks; about a minute",
    ),
    Command(
        "comm",
        "cost",
        "alpha-beta-gamma cost of collective algorithms",
        add_comm_cost,
        run_comm_cost,
    ),
    Command(
        "comm",
        "hangs",
        "reproduce hangs on gloo and name the culprit rank",
        add_comm_hangs,
        run_comm_hangs,
        runs="each hang scenario on 3 spawned gloo ranks with a 2 s timeout; about "
        "15 s",
    ),
)
