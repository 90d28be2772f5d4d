"""The storage chapter's command: ``aiinfra bench storage``.

It runs :func:`aiinfra.storage.bench.run_bench` (sharded, asynchronous and atomic
checkpoints, a token loader against a training step), stamps the result into
``docs/_data/bench/storage-gloo.json`` (``--out`` elsewhere, ``--no-write``
nowhere) and prints its table::

    aiinfra bench storage --steps 20 --every 5
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from aiinfra import results
from aiinfra.clikit import Command, int_at_least
from aiinfra.report import Table
from aiinfra.storage.bench import SAVE_RANKS, StorageBenchConfig, run_bench


def storage_table(res: dict[str, Any]) -> Table:
    """The measured numbers of a stamped run, one per row."""
    loads, ck = res["reshard"]["loads"], res["checkpointing"]
    rows = [
        [f"max abs(loaded - saved), {n} ranks", v["max_abs_diff"]]
        for n, v in loads.items()
    ]
    rows += [["checkpoint files (4 ranks)", res["reshard"]["files"]]]
    for m, t in ck["modes"].items():
        rows += [[f"{m}: ms per step", t["step_ms"]]]
        rows += [[f"{m}: ms blocked per step", t["blocked_ms_per_step"]]]
    rows += [["async: fraction of the sync stall hidden", ck["hidden_fraction"]]]
    rows += [["after the kill, latest is", res["atomic"]["latest"]]]
    rows += [["the restart loaded step", res["atomic"]["restarted_at_step"]]]
    for r in res["loader"]["rows"]:
        rows += [
            [f"loader, {r['num_workers']} workers: tokens/s", r["loader_tokens_per_s"]]
        ]
    rows += [["one training step needs tokens/s", r["needed_tokens_per_s"]]]
    st = res["stamp"]
    return Table(
        ["measurement", "value"],
        rows,
        stamp=results.measured_on(st)[0],
        fields=results.measured_on(st)[1],
    )


def add_bench_storage(parser: argparse.ArgumentParser) -> None:
    """Flags of ``aiinfra bench storage``."""
    add = parser.add_argument
    d = StorageBenchConfig()
    for name, help_ in [
        ("width", "w of the sync/async MLP (w -> 4w -> w)"),
        ("steps", "training steps of each sync/async run"),
        ("every", "steps between saves"),
        ("batch", "rows per step of those runs, a multiple of 2"),
        ("seq-len", "tokens per sequence T"),
        ("loader-batch", "sequences per batch B"),
        ("loader-batches", "batches timed per loader"),
        ("vocab-size", "V of the token file and the model"),
        ("d-model", "width of the model whose step sets the needed rate"),
        ("layers", "its layers"),
    ]:
        dest = "n_layers" if name == "layers" else name.replace("-", "_")
        add(
            f"--{name}",
            dest=dest,
            type=int_at_least(1),
            default=getattr(d, dest),
            help=help_,
        )
    add("--out", help="write the stamped JSON here (default: the book's file)")
    add("--no-write", action="store_true", help="print only, write no file")
    add("--json", action="store_true", help="print JSON, not text")


def run_bench_storage(args: argparse.Namespace) -> int:
    """Check the flags together, measure, stamp the file, print the table."""
    names = StorageBenchConfig.__dataclass_fields__
    cfg = StorageBenchConfig(**{k: getattr(args, k) for k in names})
    res = run_bench(cfg)
    if args.no_write:
        res = {"stamp": results.machine_stamp(SAVE_RANKS, "gloo"), **res}
    else:
        path = results.write(
            "storage", res, backend="gloo", world_size=SAVE_RANKS, path=args.out
        )
        print(f"wrote {path}", file=sys.stderr)
        res = results.load("storage", "gloo", path)
    shown = storage_table(res)
    print(shown.to_json() if args.json else shown.to_text())
    return 0


COMMANDS = (
    Command(
        "bench",
        "storage",
        "time sharded, asynchronous and atomic checkpoints and a token loader",
        add_bench_storage,
        run_bench_storage,
    ),
)
