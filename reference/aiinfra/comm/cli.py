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
import dataclasses
import json
import os
import sys

import torch

from aiinfra import results
from aiinfra.clikit import Command, int_at_least, names, positive_float, size
from aiinfra.comm import bench, cost, hangs
from aiinfra.comm.results import rows_table


def add_bench_collectives(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench collectives`` (nccl-tests' names where it has one)."""
    algorithms = sorted({a for algs in bench.ALGORITHMS.values() for a in algs})
    add = parser.add_argument
    add("--world-size", type=int_at_least(1), default=4, help="ranks (default 4)")
    add("--backend", choices=("gloo", "nccl"), default="gloo")
    add("--min-bytes", type=size, default=1024, help="smallest size (default 1K)")
    add("--max-bytes", type=size, default=16 * 2**20, help="largest size (16M)")
    add(
        "--collectives",
        type=names(list(bench.ALGORITHMS)),
        default=tuple(bench.ALGORITHMS),
        help="comma-separated, or all (the default)",
    )
    add(
        "--algorithms",
        type=names(algorithms),
        default=(),
        help="comma-separated, e.g. ring,torch (default: all)",
    )
    add("--dtype", choices=bench.DTYPES, default="float32")
    add("--warmup", type=int_at_least(0), default=5, help="untimed calls per size")
    add("--iters", type=int_at_least(1), default=20, help="timed calls per size")
    add(
        "--local-size",
        type=int_at_least(0),
        default=0,
        help="ranks per node of the hierarchical all-reduce (0: half)",
    )
    add(
        "--repeats",
        type=int_at_least(1),
        default=1,
        help="timings per size, algorithms in turn; the row keeps the median",
    )
    add("--timeout", type=int_at_least(1), default=1800, help="seconds in all")
    add("--json", action="store_true", help="print JSON instead of a table")
    add("--out", help="also write a results file (JSON with a machine stamp)")


def run_bench_collectives(args: argparse.Namespace) -> int:
    """Check the flags together, run the benchmark, print and optionally save it.

    Under torchrun the job's ranks run the sweep (``--world-size`` is the job's) and
    rank 0 reports.
    """
    ws = bench.torchrun_world_size() or args.world_size
    if args.max_bytes < args.min_bytes:
        raise ValueError(
            f"--max-bytes must be >= --min-bytes {args.min_bytes}, got {args.max_bytes}"
        )
    known = {a for c in args.collectives for a in bench.ALGORITHMS[c]}
    if set(args.algorithms) - known:
        raise ValueError(
            f"--algorithms must be some of {sorted(known)} for --collectives "
            f"{','.join(args.collectives)}, got {sorted(set(args.algorithms))}"
        )
    local = int(os.environ.get("LOCAL_WORLD_SIZE", ws))  # ranks on this machine
    if args.backend == "nccl" and torch.cuda.device_count() < local:
        raise ValueError(
            f"--backend nccl needs one CUDA GPU per rank (--world-size {local}), "
            f"found {torch.cuda.device_count()}"
        )
    if args.local_size and ws % args.local_size:
        raise ValueError(
            f"--local-size must divide --world-size {ws}, got {args.local_size}"
        )
    config = bench.BenchConfig(
        **{f.name: getattr(args, f.name) for f in dataclasses.fields(bench.BenchConfig)}
    )
    rows = bench.run_bench(config, ws, args.backend, args.timeout)
    if os.environ.get("RANK", "0") != "0":
        return 0  # under torchrun, rank 0 reports
    body = {"config": dataclasses.asdict(config), "rows": rows}
    if args.out:
        path = results.write(
            "collectives", body, backend=args.backend, world_size=ws, path=args.out
        )
        print(f"wrote {path}", file=sys.stderr)
    if args.json:
        print(json.dumps({"stamp": results.machine_stamp(ws, args.backend), **body}))
    else:
        stamp, fields = (
            "{backend}, {ranks} ranks",
            {"backend": args.backend, "ranks": ws},
        )
        print(rows_table(rows, stamp, fields).to_text())
    return 0


def add_comm_cost(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra comm cost``."""
    parser.add_argument("--p", type=int_at_least(1), default=8, help="ranks")
    parser.add_argument(
        "--size",
        type=size,
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


def add_comm_hangs(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra comm hangs``."""
    add = parser.add_argument
    add(
        "--scenarios",
        type=names(list(hangs.SCENARIOS)),
        default=hangs.SCENARIOS,
        help="comma-separated, or all (the default)",
    )
    add("--world-size", type=int_at_least(2), default=3, help="ranks (default 3)")
    add(
        "--timeout",
        type=positive_float,
        default=2.0,
        help="process-group timeout, seconds (default 2)",
    )
    add("--json", action="store_true", help="print JSON instead of a table")
    add("--out", help="also write a results file (JSON with a machine stamp)")


def run_comm_hangs(args: argparse.Namespace) -> int:
    """Run the scenarios, print each rank's error and the diagnosis, save them."""
    records = hangs.run_hangs(args.scenarios, args.world_size, args.timeout)
    config = {
        "scenarios": list(args.scenarios),
        "world_size": args.world_size,
        "timeout_s": args.timeout,
    }
    body = {"config": config, "rows": hangs.records_json(records)}
    if args.out:
        path = results.write(
            "hangs", body, backend="gloo", world_size=args.world_size, path=args.out
        )
        print(f"wrote {path}", file=sys.stderr)
    if args.json:
        stamp = results.machine_stamp(args.world_size, "gloo")
        print(json.dumps({"stamp": stamp, **body}))
        return 0
    for r in records:
        print(f"== {r.scenario}: culprit {r.culprits}: {r.diagnosis}")
        for rank, (error, seconds) in enumerate(
            zip(r.errors, r.elapsed_s, strict=True)
        ):
            took = "" if seconds is None else f" after {seconds:.2f} s"
            print(f"  rank {rank}{took}: {error or 'no error (died or returned)'}")
        if r.launcher:
            print(f"  launcher: {r.launcher}")
    return 0


COMMANDS = (
    Command(
        "bench",
        "collectives",
        "time collectives, nccl-tests style",
        add_bench_collectives,
        run_bench_collectives,
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
    ),
)
