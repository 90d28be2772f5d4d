"""The inference chapter's timed commands: ``bench decode|engine|phases|speculative``.

Each times a loop on this machine and prints every table it computes; ``--stamp``
stores the stamped result as the book's data (:mod:`aiinfra.results`), ``--out``
elsewhere. Every flag is a field of the benchmark's config dataclass
(:func:`aiinfra.clikit.add_config_flags`).
"""

from __future__ import annotations

import argparse
import sys

from aiinfra.clikit import add_config_flags, add_output_flags, config_from, save, show

#: Flags whose field comment is only the book's symbol: a word for ``--help``.
MODEL_HELP = {
    "d_model": "hidden width h",
    "n_layers": "layers L",
    "n_heads": "query heads H",
    "n_kv_heads": "KV heads G",
    "vocab_size": "vocabulary V",
    "repeats": "timed runs",
}


def add_bench_decode(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench decode``."""
    from aiinfra.infer.kv import decode_bench

    add_config_flags(
        parser,
        decode_bench.DecodeBenchConfig,
        skip=("report_at",),
        helps=MODEL_HELP
        | {"prompt_len": "prompt T_0", "new_tokens": "tokens to generate"}
        | {"batch": "sequences B"},
    )
    add_output_flags(parser, measures=True)


def run_bench_decode(args: argparse.Namespace) -> int:
    """Time both loops; print the table, store it if asked."""
    from aiinfra.infer.kv import decode_bench

    report_at = tuple(n for n in (32, 64, 128, 256, 512) if n < args.new_tokens)
    cfg = config_from(
        args, decode_bench.DecodeBenchConfig, report_at=(*report_at, args.new_tokens)
    )
    res = save(args, "decode", decode_bench.run_bench(cfg), backend="cpu", world_size=1)
    title = "Decoding with and without the KV cache"
    show(args, {title: decode_bench.decode_bench_table(res)}, res)
    return 0


def add_bench_engine(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench engine``."""
    from aiinfra.infer.engine import bench as engine_bench

    add_config_flags(
        parser,
        engine_bench.EngineBenchConfig,
        helps=MODEL_HELP
        | {"requests": "requests served in each run"}
        | {"static_batch": "group size of static batching (and its continuous twin)"}
        | {"block_size": "tokens per KV block B"},
    )
    add_output_flags(parser, measures=True)
    add = parser.add_argument
    add(
        "--against",
        choices=("transformers",),
        help="compare with transformers on one checkpoint instead (offline paths "
        "and servers); the sweep flags above do not apply",
    )
    add(
        "--full",
        action="store_true",
        help="with --against: the book's sizes (batches 1,8,32, 64 tokens, 96 "
        "requests, best of 3; about 15 minutes) instead of a smoke run (a minute)",
    )
    add(
        "--no-servers",
        action="store_true",
        help="with --against: the offline paths only",
    )


def run_bench_against(args: argparse.Namespace) -> int:
    """The engine against transformers: print every table, store if asked.

    Returns 1 when the two systems' greedy tokens differ (the comparison is void).
    """
    from aiinfra.clikit import progress_wanted
    from aiinfra.infer.engine.compare import config, run, tables

    cfg = config.CompareConfig(
        **(config.FULL if args.full else {}),
        threads=args.threads,
        servers=not args.no_servers,
    )
    if not args.quiet:
        print(
            "aiinfra bench engine --against transformers: "
            f"{'full' if args.full else 'smoke'} run, batches {list(cfg.batches)}, "
            f"best of {cfg.repeats}{'' if cfg.servers else ', no servers'} "
            f"(about {'15 minutes' if args.full else 'a minute'})",
            file=sys.stderr,
        )
    wanted = progress_wanted(args)

    def progress(message: str) -> None:
        if wanted:
            print(f"  {message}", file=sys.stderr)

    body = run.run_compare(cfg, progress)
    stamp = {"transformers": body["versions"]["transformers"]}
    res = save(args, config.KIND, body, backend="cpu", world_size=1, extra_stamp=stamp)
    shown = {
        "Offline: the engine against generate_batch and padded generate": (
            tables.offline_table(res)
        ),
        "Servers under a streamed load": tables.server_table(res),
        "The engine's decode step, profiled": tables.profile_table(res),
    }
    show(args, shown, res)
    skipped = res["servers"].get("skipped")
    if skipped and not args.json:
        print(f"\n(transformers serve not run: {skipped})")
    return 0 if res["same_tokens"] else 1


def run_bench_engine(args: argparse.Namespace) -> int:
    """Serve the sweep, static and continuous, and prefix caching; print all three."""
    from aiinfra.infer.engine import bench as engine_bench

    if args.against:
        return run_bench_against(args)
    if args.full or args.no_servers:
        raise ValueError("--full and --no-servers go with --against transformers")
    cfg = config_from(
        args,
        engine_bench.EngineBenchConfig,
        prompt_min=min(args.prompt_min, args.prompt_max),
        output_min=min(args.output_min, args.output_max),
    )
    res = save(args, "engine", engine_bench.run_bench(cfg), backend="cpu", world_size=1)
    tables = {
        "Batch sweep: the same requests at each max_num_seqs": (
            engine_bench.sweep_table(res)
        ),
        "Static against continuous batching": engine_bench.engine_table(res),
        "Prefix caching: a shared system prompt": engine_bench.prefix_table(res),
    }
    show(args, tables, res)
    return 0


def add_bench_phases(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench phases`` (each a field of the config)."""
    from aiinfra.infer import phase_bench

    add_config_flags(
        parser,
        phase_bench.PhaseBenchConfig,
        helps=MODEL_HELP | {"d_ff": "MLP width", "context": "cached tokens"},
    )
    add_output_flags(parser, measures=True)


def run_bench_phases(args: argparse.Namespace) -> int:
    """Time prefill and decode steps and the CPU's roofs; print, store if asked."""
    from aiinfra.infer import phase_bench

    cfg = config_from(args, phase_bench.PhaseBenchConfig)
    body = phase_bench.run_phase_bench(cfg, device="cpu")
    res = save(args, "phases", body, backend="cpu", world_size=1)
    title = "Prefill and decode steps against the CPU's roofs"
    show(args, {title: phase_bench.phase_bench_table(res)}, res)
    return 0


def add_bench_speculative(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench speculative``."""
    from aiinfra.infer.speculative import bench as speculative_bench

    add_config_flags(parser, speculative_bench.SpeculativeBenchConfig)
    add_output_flags(parser, measures=True)


def run_bench_speculative(args: argparse.Namespace) -> int:
    """Train a target and a draft, time speculative decoding per k; print, store."""
    from aiinfra.infer.speculative import bench as speculative_bench
    from aiinfra.report import Table

    cfg = config_from(args, speculative_bench.SpeculativeBenchConfig)
    body = speculative_bench.run_speculative_bench(cfg)
    threads = {"threads": body["config"]["threads"]}
    res = save(
        args, "speculative", body, backend="cpu", world_size=1, extra_stamp=threads
    )
    base = res["baseline"]["seconds"]
    columns = ["k", "calls", "drafted", "accepted", "emitted", "seconds", "alpha"]
    table = Table(
        [*columns, "speed-up"],
        [[r[c] for c in columns] + [base / r["seconds"]] for r in res["rows"]],
        note=f"Plain decoding took {base:.3g} s for the same tokens; calls: target "
        "calls; alpha: the measured acceptance rate; speed-up: plain time / "
        "speculative time.",
    )
    forward = Table(
        ["pass", "ms"],
        [[k, round(v, 3)] for k, v in res["forward_ms"].items()],
        note="One cached forward pass of the draft or the target, fastest of 20.",
    )
    show(
        args,
        {"Speculative decoding per drafted tokens k": table, "Forward passes": forward},
        res,
    )
    return 0
