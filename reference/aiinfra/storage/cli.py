"""The storage chapter's command: ``aiinfra bench storage``.

It runs :func:`aiinfra.storage.bench.run_bench` (sharded, asynchronous and atomic
checkpoints, a token loader against a training step) and prints its table;
``--stamp`` stores the result as the book's ``storage-gloo.json``, ``--out``
elsewhere::

    aiinfra bench storage --steps 20 --every 5
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from aiinfra.clikit import (
    Command,
    add_config_flags,
    add_output_flags,
    config_from,
    save,
    show,
)

if TYPE_CHECKING:
    from aiinfra.report import Table


def storage_table(res: dict[str, Any]) -> Table:
    """The measured numbers of a stamped run, one per row."""
    from aiinfra import results
    from aiinfra.report import Table

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
    """Flags of ``aiinfra bench storage`` (each a field of the config)."""
    from aiinfra.storage.bench import StorageBenchConfig

    add_config_flags(parser, StorageBenchConfig)
    add_output_flags(parser, measures=True)


def run_bench_storage(args: argparse.Namespace) -> int:
    """Check the flags together, measure, print the table, store it if asked."""
    from aiinfra import progress
    from aiinfra.storage.bench import SAVE_RANKS, StorageBenchConfig, run_bench

    cfg = config_from(args, StorageBenchConfig)
    with progress.waiting("checkpoints and loaders on spawned ranks", 70):
        body = run_bench(cfg)
    res = save(args, "storage", body, backend="gloo", world_size=SAVE_RANKS)
    show(args, {"Checkpoints and data loading, measured": storage_table(res)}, res)
    return 0


COMMANDS = (
    Command(
        "bench",
        "storage",
        "time sharded, asynchronous and atomic checkpoints and a token loader",
        add_bench_storage,
        run_bench_storage,
        runs="a sharded save and reloads on 1-4 spawned gloo ranks, sync against "
        "async checkpoints, a crash mid-save and the loaders; about 70 s",
    ),
)
