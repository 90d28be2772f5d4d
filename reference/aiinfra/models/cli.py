r"""The models chapter's commands: ``aiinfra bench attention`` and ``bench moe``.

Times standard, tiled (PyTorch), Triton and SDPA attention over sequence lengths
(:mod:`aiinfra.models.flash.bench`); with ``--out`` the rows are stored as a stamped
results file (:mod:`aiinfra.results`, kind ``attention``)::

    aiinfra bench attention --device cuda --causal --head-dim 128 \\
        --passes forward,forward+backward --impl triton sdpa --out attention.json

``aiinfra bench moe`` times the token loop, the masked per-expert loop and the
grouped expert computation of a MoE layer (:mod:`aiinfra.models.moe.bench`) and
stamps them into ``docs/_data/bench/moe-cpu.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import sys

from aiinfra import results
from aiinfra.clikit import Command, int_at_least, names
from aiinfra.models.flash import bench
from aiinfra.models.moe import bench as moe_bench


def add_bench_attention(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench attention`` (defaults depend on the device)."""
    add = parser.add_argument
    add(
        "--impl",
        nargs="+",
        choices=bench.IMPLEMENTATIONS,
        help="implementations (default: all that run on the device)",
    )
    add(
        "--seq-lens",
        type=int_at_least(1),
        nargs="+",
        metavar="T",
        help="sequence lengths (default 128 256 512 on the CPU, 1024 .. 16384 on a "
        "GPU)",
    )
    add("--batch", type=int_at_least(1), default=1, help="batch size B")
    add("--heads", type=int_at_least(1), help="heads H (default 2 CPU, 16 GPU)")
    add("--head-dim", type=int_at_least(1), default=64, help="head dimension d")
    add(
        "--dtype",
        choices=sorted(bench.DTYPES),
        help="element type (default float32 CPU, bfloat16 GPU)",
    )
    add("--causal", action="store_true", help="causal mask")
    add(
        "--passes",
        type=names(bench.PASSES),
        default=("forward",),
        help="forward, forward+backward or all (default forward)",
    )
    add("--block", type=int_at_least(1), default=64, help="tiled PyTorch block size")
    add("--device", choices=("auto", "cpu", "cuda"), default="auto")
    add("--repeats", type=int_at_least(1), default=3, help="timed runs per point")
    add("--out", help="write the stamped results JSON here")
    add("--json", action="store_true", help="print JSON, not text")


def run_bench_attention(args: argparse.Namespace) -> int:
    """Run the benchmark; print a table (or JSON) and optionally store it."""
    cfg = bench.AttentionBenchConfig(
        device=args.device,
        impls=tuple(args.impl) if args.impl else None,
        seq_lens=tuple(args.seq_lens) if args.seq_lens else None,
        batch=args.batch,
        heads=args.heads,
        head_dim=args.head_dim,
        dtype=args.dtype,
        causal=args.causal,
        passes=tuple(args.passes),
        block=args.block,
        repeats=args.repeats,
    )
    body = bench.run_bench(cfg)
    if args.out:
        backend = "cuda" if cfg.device == "cuda" else "cpu"
        path = results.write(
            "attention", body, backend=backend, world_size=1, path=args.out
        )
        print(f"wrote {path}", file=sys.stderr)
    table = bench.attention_table(body)
    print(table.to_json() if args.json else table.to_text())
    return 0


def add_bench_moe(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench moe``."""
    add = parser.add_argument
    d = moe_bench.MoEBenchConfig()
    add("--tokens", type=int_at_least(1), nargs="+", metavar="T", help="batch sizes")
    add("--d-model", type=int_at_least(1), default=d.d_model, help="hidden width h")
    add("--experts", type=int_at_least(1), default=d.n_experts, help="experts E")
    add("--top-k", type=int_at_least(1), default=d.top_k, help="experts per token K")
    add("--d-expert", type=int_at_least(1), default=d.d_expert, help="expert width")
    add("--repeats", type=int_at_least(1), default=d.repeats, help="timed runs")
    add("--threads", type=int_at_least(1), default=d.threads, help="torch threads")
    add("--out", help="write the stamped JSON here (default: the book's file)")
    add("--no-write", action="store_true", help="print only, write no file")
    add("--json", action="store_true", help="print JSON, not text")


def run_bench_moe(args: argparse.Namespace) -> int:
    """Time the three expert computations; print a table and stamp the file."""
    default = moe_bench.MoEBenchConfig()
    cfg = moe_bench.MoEBenchConfig(
        tokens=tuple(args.tokens) if args.tokens else default.tokens,
        d_model=args.d_model,
        n_experts=args.experts,
        top_k=args.top_k,
        d_expert=args.d_expert,
        repeats=args.repeats,
        threads=args.threads,
    )
    res = moe_bench.run_bench(cfg)
    if not args.no_write:
        path = results.write("moe", res, backend="cpu", world_size=1, path=args.out)
        print(f"wrote {path}", file=sys.stderr)
        res = results.load("moe", "cpu", path)
    else:
        res = {"stamp": results.machine_stamp(1, "cpu"), **res}
    table = moe_bench.moe_bench_table(res)
    print(table.to_json() if args.json else table.to_text())
    return 0


COMMANDS = (
    Command(
        "bench",
        "attention",
        "time and memory of naive, tiled, Triton and SDPA attention",
        add_bench_attention,
        run_bench_attention,
    ),
    Command(
        "bench",
        "moe",
        "token loop, masked per-expert loop and grouped MoE experts on the CPU",
        add_bench_moe,
        run_bench_moe,
    ),
)
