"""The inference chapter's timed commands: ``bench decode`` and ``bench engine``.

It also holds what every ``bench`` command of the chapter shares. Each command times
a loop on this machine, stamps the result into ``docs/_data/bench/`` (``--out``
elsewhere, ``--no-write`` nowhere) and prints its table.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from aiinfra import results
from aiinfra.clikit import int_at_least, int_list
from aiinfra.infer.engine import bench as engine_bench
from aiinfra.infer.kv import decode_bench
from aiinfra.report import Table


def add_bench_decode(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench decode``."""
    add = parser.add_argument
    d = decode_bench.DecodeBenchConfig()
    add("--d-model", type=int_at_least(1), default=d.d_model, help="hidden width h")
    add(
        "--layers",
        dest="n_layers",
        type=int_at_least(1),
        default=d.n_layers,
        help="layers L",
    )
    add(
        "--heads",
        dest="n_heads",
        type=int_at_least(1),
        default=d.n_heads,
        help="query heads H",
    )
    add(
        "--kv-heads",
        dest="n_kv_heads",
        type=int_at_least(1),
        default=d.n_kv_heads,
        help="KV heads G",
    )
    add("--prompt-len", type=int_at_least(1), default=d.prompt_len, help="prompt T_0")
    add(
        "--new-tokens",
        type=int_at_least(1),
        default=d.new_tokens,
        help="tokens to generate",
    )
    add("--batch", type=int_at_least(1), default=d.batch, help="sequences B")
    add("--repeats", type=int_at_least(1), default=d.repeats, help="timed runs")
    add("--threads", type=int_at_least(1), default=d.threads, help="torch threads")
    add("--out", help="write the stamped JSON here (default: the book's file)")
    add("--no-write", action="store_true", help="print only, write no file")
    add("--json", action="store_true", help="print JSON, not text")


def check_bench_decode(args: argparse.Namespace) -> decode_bench.DecodeBenchConfig:
    """The run's config; its ValueError names the flag (exit status 2)."""
    report_at = tuple(n for n in (32, 64, 128, 256, 512) if n < args.new_tokens)
    return decode_bench.DecodeBenchConfig(
        d_model=args.d_model,
        n_layers=args.n_layers,
        n_heads=args.n_heads,
        n_kv_heads=args.n_kv_heads,
        prompt_len=args.prompt_len,
        new_tokens=args.new_tokens,
        batch=args.batch,
        repeats=args.repeats,
        threads=args.threads,
        report_at=(*report_at, args.new_tokens),
    )


def run_bench_decode(args: argparse.Namespace) -> int:
    """Time both loops; print a table and stamp the file."""
    cfg = check_bench_decode(args)
    res = decode_bench.run_bench(cfg)
    return _stamp_and_show(args, res, decode_bench, decode_bench.decode_bench_table)


def _stamp_and_show(
    args: argparse.Namespace,
    res: dict[str, Any],
    bench: ModuleType,
    table: Callable[[dict[str, Any]], Table],
) -> int:
    """Stamp ``res`` into ``bench``'s file (unless ``--no-write``), print its table."""
    if not args.no_write:
        path = bench.write(res, args.out)
        print(f"wrote {path}", file=sys.stderr)
        res = bench.load(path)
    else:
        res = {"stamp": results.machine_stamp(1, "cpu"), **res}
    shown = table(res)
    print(shown.to_json() if args.json else shown.to_text())
    return 0


def add_bench_engine(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench engine``; the defaults are a smoke run (seconds).

    ``nox -s bench`` passes the book's sizes (:data:`aiinfra.results.KINDS`).
    """
    add = parser.add_argument
    d = engine_bench.EngineBenchConfig()
    add("--requests", type=int_at_least(1), default=8, help="requests")
    add(
        "--batch-sizes",
        type=int_list,
        default=(1, 4),
        help="max_num_seqs of the sweep, increasing, e.g. 1,4,16",
    )
    add(
        "--static-batch",
        type=int_at_least(1),
        default=4,
        help="group size of static batching (and of its continuous twin)",
    )
    add("--prompt-max", type=int_at_least(1), default=32)
    add("--output-max", type=int_at_least(1), default=16)
    add("--threads", type=int_at_least(1), default=d.threads, help="torch threads")
    add("--out", help="write the stamped JSON here (default: the book's file)")
    add("--no-write", action="store_true", help="print only, write no file")
    add("--json", action="store_true", help="print JSON, not text")
    add(
        "--against",
        choices=("transformers",),
        help="compare with transformers on one checkpoint instead (offline paths "
        "and servers); writes a file only with --out",
    )
    add(
        "--full",
        action="store_true",
        help="with --against: the book's sizes (batches 1,8,32, 64 tokens, 96 "
        "requests, best of 3; minutes) instead of a smoke run (seconds)",
    )
    add(
        "--no-servers",
        action="store_true",
        help="with --against: the offline paths only",
    )


def run_bench_against(args: argparse.Namespace) -> int:
    """The engine against transformers: print every table, write only with --out."""
    from aiinfra.infer.engine.compare import config, run, tables

    cfg = config.CompareConfig(
        **(config.FULL if args.full else {}),
        threads=args.threads,
        servers=not args.no_servers,
    )
    tty = sys.stderr.isatty()
    print(
        "aiinfra bench engine --against transformers: "
        f"{'full' if args.full else 'smoke'} run, batches {list(cfg.batches)}, "
        f"best of {cfg.repeats}"
        f"{'' if cfg.servers else ', no servers'} (about "
        f"{'15 minutes' if args.full else 'a minute'})",
        file=sys.stderr,
    )

    def progress(message: str) -> None:
        if tty:
            print(f"  {message}", file=sys.stderr)

    body = run.run_compare(cfg, progress)
    stamp = {"transformers": body["versions"]["transformers"]}
    if args.out:
        path = results.write(
            config.KIND,
            body,
            backend="cpu",
            world_size=1,
            path=args.out,
            extra_stamp=stamp,
        )
        print(f"wrote {path}", file=sys.stderr)
    res = {"stamp": results.machine_stamp(1, "cpu") | stamp, **body}
    shown = [
        tables.offline_table(res),
        tables.server_table(res),
        tables.profile_table(res),
    ]
    skipped = res["servers"].get("skipped")
    if args.json:
        print(json.dumps([json.loads(t.to_json()) for t in shown]))
    else:
        print("\n\n".join(t.to_text() for t in shown))
        if skipped:
            print(f"\n(transformers serve not run: {skipped})")
    return 0 if res["same_tokens"] else 1


def run_bench_engine(args: argparse.Namespace) -> int:
    """Serve the sweep, static and continuous, and prefix caching; print, stamp."""
    if args.against:
        return run_bench_against(args)
    cfg = engine_bench.EngineBenchConfig(
        requests=args.requests,
        batch_sizes=args.batch_sizes,
        static_batch=args.static_batch,
        prompt_max=args.prompt_max,
        prompt_min=min(engine_bench.EngineBenchConfig.prompt_min, args.prompt_max),
        output_max=args.output_max,
        output_min=min(engine_bench.EngineBenchConfig.output_min, args.output_max),
        threads=args.threads,
    )
    res = engine_bench.run_bench(cfg)
    return _stamp_and_show(args, res, engine_bench, engine_bench.engine_table)
