"""The hardware chapter's commands: ``aiinfra bench roofline`` and ``aiinfra budget``.

``aiinfra budget`` prints a training run's compute budget and the GPU time it takes
(:mod:`aiinfra.hardware.budget_cli`).

``aiinfra bench roofline`` measures this machine's roofline
(:mod:`aiinfra.hardware.roofline_bench`): the peak FLOP/s of a matmul sweep, the
bandwidth of streaming kernels, and the book's kernels placed on it; ``--stamp``
stores it as the book's ``roofline-cpu.json``, ``--out`` elsewhere::

    aiinfra bench roofline --repeats 5
"""

from __future__ import annotations

import argparse
import dataclasses

from aiinfra.clikit import (
    Command,
    add_config_flags,
    add_output_flags,
    config_from,
    names,
    save,
    show,
)
from aiinfra.hardware import budget_cli


def add_bench_roofline(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench roofline`` (each a field of the config)."""
    from aiinfra.hardware import roofline_bench as rb

    add_config_flags(
        parser,
        rb.RooflineBenchConfig,
        parse={"dtypes": names(list(rb.DTYPES))},
        helps={"d_ff": "GEMM output width", "repeats": "timed runs"},
    )
    add = parser.add_argument
    add("--device", choices=("cpu", "cuda"), default="cpu", help="where to measure")
    add("--smoke", action="store_true", help="tiny shapes, about a second")
    add_output_flags(parser, measures=True)


def run_bench_roofline(args: argparse.Namespace) -> int:
    """Measure the roofs, place the kernels, print the table, store it if asked."""
    import torch

    from aiinfra.hardware import roofline_bench as rb
    from aiinfra.report import Table

    if args.smoke:  # the smoke run's sizes are what the first line echoes
        vars(args).update(dataclasses.asdict(rb.SMOKE))
    cfg = config_from(args, rb.RooflineBenchConfig)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda needs a CUDA GPU; none is present")
    body = rb.run_roofline_bench(cfg, device=args.device)
    res = save(args, "roofline", body, backend=args.device, world_size=1)
    matmuls = Table(
        ["m", "k", "n", "dtype", "GFLOP/s"],
        [
            [
                r["m"],
                r["k"],
                r["n"],
                r["dtype"],
                2 * r["m"] * r["k"] * r["n"] / r["seconds"] / 1e9,
            ]
            for r in res["matmuls"]
        ],
        note="The fastest repeat of each matmul; the peak is the fastest of the first "
        "dtype.",
    )
    streams = Table(
        ["kernel", "GB/s"],
        [[r["kernel"], r["bytes"] / r["seconds"] / 1e9] for r in res["streams"]],
        note="Bytes moved over the fastest repeat; the bandwidth is the fastest.",
    )
    show(
        args,
        {
            "This machine's roofline": rb.roofline_bench_table(res),
            "The matmul sweep (the compute roof)": matmuls,
            "The streaming kernels (the memory roof)": streams,
        },
        res,
    )
    return 0


COMMANDS = (
    Command(
        "bench",
        "roofline",
        "this machine's roofline: matmul peak, streaming bandwidth, the book's kernels",
        add_bench_roofline,
        run_bench_roofline,
        runs="a matmul sweep, streaming kernels and the book's kernels, 5 repeats "
        "each, on one CPU thread; about 30 s (--smoke: a second)",
    ),
    Command(
        "budget",
        None,
        "a training run's compute budget C = 6ND, its GPU-days and wall-clock days "
        "at each MFU, and the MFU published runs imply",
        budget_cli.add_arguments,
        budget_cli.run,
    ),
)
