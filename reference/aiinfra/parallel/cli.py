"""The training chapter's benchmarks: ``aiinfra bench ddp`` and ``aiinfra bench zero``.

``bench ddp`` times our data parallelism against ``DistributedDataParallel`` on
spawned gloo ranks or one GPU per rank (NCCL); ``bench zero`` compares our ZeRO
stages with DeepSpeed's and FSDP2's losses and stores DeepSpeed's memory estimates
(it needs DeepSpeed: ``pip install 'aiinfra[parallel]'``). Both print their tables;
``--stamp`` stores the result as the book's data, ``--out`` elsewhere
(:mod:`aiinfra.results`).
"""

from __future__ import annotations

import argparse

from aiinfra.clikit import (
    Command,
    add_config_flags,
    add_output_flags,
    config_from,
    int_at_least,
    require,
    save,
    show,
)


def add_bench_ddp(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench ddp`` (each a field of the config)."""
    from aiinfra.parallel.data import bench

    add_config_flags(
        parser, bench.DDPBenchConfig, choices={"backend": ("gloo", "nccl")}
    )
    add_output_flags(parser, measures=True)


def run_bench_ddp(args: argparse.Namespace) -> int:
    """Run ``aiinfra bench ddp``; returns the exit status."""
    import torch

    from aiinfra import progress
    from aiinfra.parallel.data import bench
    from aiinfra.report import Table

    cfg = config_from(args, bench.DDPBenchConfig)
    if cfg.backend == "nccl" and torch.cuda.device_count() < cfg.world_size:
        raise ValueError(
            f"--backend nccl needs one CUDA GPU per rank (--world-size "
            f"{cfg.world_size}), found {torch.cuda.device_count()}"
        )
    with progress.waiting(f"{cfg.world_size} {cfg.backend} ranks", 60):
        body = bench.run_bench(cfg)
    res = save(args, "ddp", body, backend=cfg.backend, world_size=cfg.world_size)
    table = Table(
        ["implementation", "bucket (MiB)", "step (ms)"],
        [[r["impl"], r["bucket_mib"], 1e3 * r["step_s"]] for r in body["rows"]],
        note="Median of the repeats, rank 0's clock.",
        stamp="{n} parameters",
        fields={"n": f"{body['config']['n_params']:,}"},
    )
    show(args, {"One training step per data-parallel implementation": table}, res)
    return 0


def add_bench_zero(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench zero``."""
    add = parser.add_argument
    add("--world-size", type=int_at_least(1), default=2, help="gloo ranks")
    add("--backend", choices=("gloo",), default="gloo", help="gloo only")
    add("--steps", type=int_at_least(1), default=6, help="AdamW steps")
    add_output_flags(parser, measures=True)


def run_bench_zero(args: argparse.Namespace) -> int:
    """Run ``aiinfra bench zero``; returns the exit status."""
    from aiinfra import progress
    from aiinfra.parallel.zero import results as zero_results
    from aiinfra.report import Table

    if zero_results.BATCH % args.world_size:
        raise ValueError(
            f"--world-size must divide the batch of {zero_results.BATCH}, got "
            f"{args.world_size}"
        )
    deepspeed = require("deepspeed", "parallel")  # before any rank starts
    with progress.waiting(f"ZeRO stages on {args.world_size} ranks", 90):
        body = zero_results.collect_zero_results(args.world_size, args.steps)
    res = save(
        args,
        "zero",
        body,
        backend=args.backend,
        world_size=args.world_size,
        extra_stamp={"deepspeed": deepspeed.__version__},
    )
    losses = Table(
        ["implementation", *(f"step {i + 1}" for i in range(args.steps))],
        [[name, *values] for name, values in body["losses"].items()],
        note="The training loss of each step: every implementation should agree "
        "with one process.",
    )
    memory = Table(
        ["stage", "ranks", "parameters (B)", "gradients (B)", "optimizer (B)"],
        [
            [m["stage"], m["world_size"], *(m["bytes"][k] for k in PARTS)]
            for m in body["memory"]
        ],
        note="Bytes each ZeRO stage holds on rank 0, measured.",
    )
    model = body["estimates"]["model"]
    estimates = Table(
        ["stage", "per GPU (GB)", "per node, CPU (GB)"],
        [
            [stage, e["gpu"] / 1e9, e["cpu"] / 1e9]
            for stage, e in body["estimates"]["deepspeed"].items()
        ],
        note="DeepSpeed's own estimator for a model of "
        f"{model['n_params']:.3g} parameters on {model['num_nodes']} nodes of "
        f"{model['num_gpus_per_node']} GPUs.",
    )
    show(
        args,
        {
            "Losses of each ZeRO implementation": losses,
            "Memory of each stage, measured": memory,
            "DeepSpeed's memory estimates": estimates,
        },
        res,
    )
    return 0


PARTS = ("params", "grads", "optimizer")  # the model states, as measured

COMMANDS = (
    Command(
        "bench",
        "ddp",
        "step time of our DDP against DistributedDataParallel",
        add_bench_ddp,
        run_bench_ddp,
        runs="each DDP variant and bucket size, 11 repeats, on 2 spawned gloo ranks; "
        "about a minute",
    ),
    Command(
        "bench",
        "zero",
        "our ZeRO stages against DeepSpeed and FSDP2: losses and memory",
        add_bench_zero,
        run_bench_zero,
        runs="our ZeRO stages, DeepSpeed's and FSDP2 trained 6 steps on 2 spawned "
        "gloo ranks, then memory on 4; about 2 minutes",
    ),
)
