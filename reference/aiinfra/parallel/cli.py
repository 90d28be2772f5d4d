"""The training chapter's benchmarks: ``aiinfra bench ddp`` and ``aiinfra bench zero``.

``bench ddp`` times our data parallelism against ``DistributedDataParallel`` on
spawned gloo ranks or one GPU per rank (NCCL); ``bench zero`` compares our ZeRO
stages with DeepSpeed's and FSDP2's losses and stores DeepSpeed's memory estimates
(it needs DeepSpeed: ``pip install 'aiinfra[parallel]'``). Both write a stamped
results file with ``--out`` (:mod:`aiinfra.results`).
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from aiinfra import results
from aiinfra.clikit import Command, int_at_least, positive_float, require
from aiinfra.parallel.data import bench
from aiinfra.parallel.zero import results as zero_results


def add_bench_ddp(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench ddp`` (defaults: :class:`~.bench.DDPBenchConfig`)."""
    d = bench.DDPBenchConfig()
    add = parser.add_argument
    add("--world-size", type=int_at_least(1), default=d.world_size, help="ranks (2)")
    add("--backend", choices=("gloo", "nccl"), default=d.backend)
    add("--steps", type=int_at_least(1), default=d.steps, help="steps per repeat (3)")
    add("--repeats", type=int_at_least(1), default=d.repeats, help="repeats (11)")
    add("--batch", type=int_at_least(1), default=d.batch, help="global batch (64)")
    add(
        "--bucket-mib",
        type=positive_float,
        nargs="+",
        default=list(d.bucket_mib),
        help="bucket sizes of the sweep, MiB (0.25 1 4 25)",
    )
    add("--out", help="write the stamped results JSON here")
    add("--json", action="store_true", help="print JSON, not a table")


def run_bench_ddp(args: argparse.Namespace) -> int:
    """Run ``aiinfra bench ddp``; returns the exit status."""
    if args.backend == "nccl" and torch.cuda.device_count() < args.world_size:
        raise ValueError(
            f"--backend nccl needs one CUDA GPU per rank (--world-size "
            f"{args.world_size}), found {torch.cuda.device_count()}"
        )
    cfg = bench.DDPBenchConfig(
        world_size=args.world_size,
        batch=args.batch,
        steps=args.steps,
        repeats=args.repeats,
        bucket_mib=tuple(args.bucket_mib),
        backend=args.backend,
    )
    body = bench.run_bench(cfg)
    if args.out:
        path = results.write(
            "ddp",
            body,
            backend=args.backend,
            world_size=args.world_size,
            path=args.out,
        )
        print(f"wrote {path}", file=sys.stderr)
    if args.json:
        print(json.dumps(body, indent=1))
    else:
        for r in body["rows"]:
            ms = 1e3 * r["step_s"]
            print(f"{r['impl']:>14} {r['bucket_mib']:>6g} MiB {ms:8.1f} ms")
    return 0


def add_bench_zero(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench zero``."""
    add = parser.add_argument
    add("--world-size", type=int_at_least(1), default=2, help="gloo ranks (2)")
    add("--backend", choices=("gloo",), default="gloo", help="gloo only")
    add("--steps", type=int_at_least(1), default=6, help="AdamW steps (6)")
    add("--out", help="write the stamped results JSON here")
    add("--json", action="store_true", help="print JSON, not tables")


def run_bench_zero(args: argparse.Namespace) -> int:
    """Run ``aiinfra bench zero``; returns the exit status."""
    if zero_results.BATCH % args.world_size:
        raise ValueError(
            f"--world-size must divide the batch of {zero_results.BATCH}, got "
            f"{args.world_size}"
        )
    deepspeed = require("deepspeed", "parallel")  # before any rank starts
    body = zero_results.collect_zero_results(args.world_size, args.steps)
    if args.out:
        path = results.write(
            "zero",
            body,
            backend=args.backend,
            world_size=args.world_size,
            path=args.out,
            extra_stamp={"deepspeed": deepspeed.__version__},
        )
        print(f"wrote {path}", file=sys.stderr)
    if args.json:
        print(json.dumps(body, indent=1))
    else:
        for name, losses in body["losses"].items():
            print(f"{name:>20}  " + " ".join(f"{v:.6f}" for v in losses))
    return 0


COMMANDS = (
    Command(
        "bench",
        "ddp",
        "step time of our DDP against DistributedDataParallel",
        add_bench_ddp,
        run_bench_ddp,
    ),
    Command(
        "bench",
        "zero",
        "our ZeRO stages against DeepSpeed and FSDP2: losses and memory",
        add_bench_zero,
        run_bench_zero,
    ),
)
