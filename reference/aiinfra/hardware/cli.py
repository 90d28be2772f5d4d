"""The hardware chapter's commands: ``aiinfra bench roofline`` and ``aiinfra budget``.

``aiinfra budget`` prints a training run's compute budget and the GPU time it takes
(:mod:`aiinfra.hardware.budget_cli`).

It measures this machine's roofline (:mod:`aiinfra.hardware.roofline_bench`): the
peak FLOP/s of a matmul sweep, the bandwidth of streaming kernels, and the book's
kernels placed on it, then stamps the result into
``docs/_data/bench/roofline-cpu.json`` (or ``--out``)::

    aiinfra bench roofline --repeats 5
"""

from __future__ import annotations

import argparse
import sys

import torch

from aiinfra import results
from aiinfra.clikit import Command, int_at_least, int_list, names
from aiinfra.hardware import budget_cli
from aiinfra.hardware import roofline_bench as rb


def add_bench_roofline(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench roofline`` (each a field of the config)."""
    add = parser.add_argument
    d = rb.RooflineBenchConfig()
    add("--square", type=int_list, default=d.square, help="n of n x n x n matmuls")
    add("--skinny", type=int_list, default=d.skinny, help="m of m x n x n matmuls")
    add("--dtypes", type=names(list(rb.DTYPES)), default=d.dtypes)
    add("--stream-mib", type=int_at_least(1), default=d.stream_mib)
    add("--d-model", type=int_at_least(1), default=d.d_model, help="GEMM width d")
    add("--d-ff", type=int_at_least(1), default=d.d_ff, help="GEMM output width")
    add("--batch", type=int_at_least(1), default=d.batch, help="decode GEMM rows")
    add("--prefill-tokens", type=int_at_least(1), default=d.prefill_tokens)
    add("--heads", type=int_at_least(1), default=d.heads)
    add("--head-dim", type=int_at_least(1), default=d.head_dim)
    add("--seq-len", type=int_at_least(1), default=d.seq_len, help="attention T")
    add("--context", type=int_at_least(1), default=d.context, help="decode cache")
    add("--repeats", type=int_at_least(1), default=d.repeats, help="timed runs")
    add("--threads", type=int_at_least(1), default=d.threads, help="torch threads")
    add("--device", choices=("cpu", "cuda"), default="cpu")
    add("--smoke", action="store_true", help="tiny shapes, about a second")
    add("--out", help="write the stamped JSON here (default: the book's file)")
    add("--no-write", action="store_true", help="print only, write no file")
    add("--json", action="store_true", help="print JSON, not text")


def run_bench_roofline(args: argparse.Namespace) -> int:
    """Measure the roofs, place the kernels, print the table and stamp the file."""
    fields = rb.RooflineBenchConfig.__dataclass_fields__
    cfg = rb.RooflineBenchConfig(**{k: getattr(args, k) for k in fields})
    if args.smoke:
        cfg = rb.SMOKE
    if args.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda needs a CUDA GPU; none is present")
    body = rb.run_roofline_bench(cfg, device=args.device)
    if args.no_write:
        res = {"stamp": results.machine_stamp(1, args.device), **body}
    else:
        path = results.write(
            "roofline", body, backend=args.device, world_size=1, path=args.out
        )
        print(f"wrote {path}", file=sys.stderr)
        res = results.load("roofline", args.device, path)
    table = rb.roofline_bench_table(res)
    print(table.to_json() if args.json else table.to_text())
    return 0


COMMANDS = (
    Command(
        "bench",
        "roofline",
        "this machine's roofline: matmul peak, streaming bandwidth, the book's kernels",
        add_bench_roofline,
        run_bench_roofline,
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
