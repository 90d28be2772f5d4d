"""The DDP step-time benchmark: its configuration checks, a smoke run, the results.

The committed results (``docs/_data/bench/ddp-gloo.json``) carry the book's bar: our
bucketed DDP within 1.25x of ``DistributedDataParallel``'s step time on 2 gloo ranks.
"""

import argparse
import json
import pathlib

import matplotlib.figure
import pytest
from aiinfra.parallel import bench

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "_data" / "bench" / "ddp-gloo.json"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"world_size": 0}, "world_size must be >= 1"),
        ({"batch": 63}, "batch=63 is not divisible"),
        ({"repeats": 0}, "repeats must be >= 1"),
        ({"bucket_mib": (1.0, 0.0)}, "bucket_mib must be sizes > 0"),
    ],
)
def test_bench_config_rejects_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bench.DDPBenchConfig(**kwargs)


def test_bench_cli_returns_2_on_bad_flags(capsys):
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    assert bench.run(parser.parse_args(["--batch", "3"])) == 2
    assert "not divisible" in capsys.readouterr().err


def test_bench_smoke_run_times_every_variant(tmp_path):
    cfg = bench.DDPBenchConfig(
        widths=(8, 16, 4), batch=8, steps=1, repeats=2, bucket_mib=(0.0005, 1.0)
    )
    path = bench.write_ddp_results(tmp_path / "ddp.json", cfg)
    rows = json.loads(path.read_text())["rows"]
    assert {(r["impl"], r["bucket_mib"]) for r in rows} == {
        ("compute only", 1.0), ("ours naive", 1.0), ("ours bucketed", 1.0),
        ("torch DDP", 1.0), ("ours bucketed", 0.0005), ("torch DDP", 0.0005),
    }  # fmt: skip
    assert all(len(r["repeats_s"]) == 2 and r["step_s"] > 0 for r in rows)
    assert bench.bucketed_over_ddp(path) > 0


def test_committed_results_meet_the_bar_and_render():
    assert bench.bucketed_over_ddp(RESULTS) <= 1.25
    table = bench.results_table(RESULTS)
    assert table.rows[0][0] == "compute only" and "gloo, 2 ranks" in table.note
    fig = bench.ddp_step_time_figure(RESULTS)
    assert isinstance(fig, matplotlib.figure.Figure) and len(fig.axes) == 2


def test_missing_results_name_the_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="aiinfra bench ddp"):
        bench.results_table(tmp_path / "none.json")
