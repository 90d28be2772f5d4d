"""The DDP step-time benchmark: its configuration checks, a smoke run, the results.

The committed results (``docs/_data/bench/ddp-gloo.json``) carry the book's bar
(:data:`aiinfra.parallel.data.bench.BAR`): our bucketed DDP within 1.25x of
``DistributedDataParallel``'s step time on 2 gloo ranks.
"""

import json

import pytest
from aiinfra import cli, results
from aiinfra.parallel.data import bench


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"world_size": 0}, "world_size must be >= 1"),
        ({"batch": 63}, r"batch must be divisible by world_size \(2\), got 63"),
        ({"repeats": 0}, "repeats must be >= 1"),
        ({"bucket_mib": (1.0, 0.0)}, "bucket_mib must be sizes > 0"),
        ({"backend": "mpi"}, "backend must be gloo or nccl"),
    ],
)
def test_bench_config_rejects_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bench.DDPBenchConfig(**kwargs)


def test_bench_cli_exits_2_naming_the_flag(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bench", "ddp", "--batch", "3"])
    assert exit_.value.code == 2
    assert "--batch must be divisible by world_size (2), got 3" in (
        capsys.readouterr().err
    )


@pytest.mark.slow
def test_bench_smoke_run_times_every_variant_and_stores_them(tmp_path, capsys):
    out = tmp_path / "ddp.json"
    argv = ["bench", "ddp", "--batch", "8", "--steps", "1", "--repeats", "2"]
    argv += ["--bucket-mib", "0.0005", "1", "--out", str(out), "--json"]
    assert cli.main(argv) == 0
    doc = json.loads(out.read_text())
    rows = doc["rows"]
    assert {(r["impl"], r["bucket_mib"]) for r in rows} == {
        ("compute only", 1.0),
        ("ours naive", 1.0),
        ("ours bucketed", 1.0),
        ("torch DDP", 1.0),
        ("ours bucketed", 0.0005),
        ("torch DDP", 0.0005),
    }
    assert all(len(r["repeats_s"]) == 2 and r["step_s"] > 0 for r in rows)
    assert doc["stamp"]["world_size"] == 2 and doc["stamp"]["backend"] == "gloo"
    assert json.loads(capsys.readouterr().out)["rows"] == rows


def test_committed_results_meet_the_bar_and_render():
    assert bench.bucketed_over_ddp() <= bench.BAR
    table = bench.results_table()
    assert table.rows[0][0] == "compute only" and "gloo, 2 ranks" in table.stamp_text
    ddp_row = [r for r in table.rows if r[0] == "torch DDP" and r[1] == 25.0]
    assert ddp_row[0][3] == 1.0  # DDP at 25 MiB is the column's unit
    fig = bench.ddp_step_time_figure()
    assert len(fig.axes) == 2
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == [
        "torch DDP",
        "ours bucketed",
        "ours naive",
        "compute only",
    ]


def test_an_unmeasured_variant_is_named():
    with pytest.raises(ValueError, match="measured pair .*got \\('ours ring', 25"):
        bench.step_time_ms("ours ring")
    with pytest.raises(ValueError, match="got \\('torch DDP', 3.0\\)"):
        bench.step_time_ms("torch DDP", 3.0)


def test_missing_results_name_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv(results.DATA_ENV, str(tmp_path))
    command = "aiinfra bench ddp --backend gloo --world-size 2"
    with pytest.raises(FileNotFoundError, match=command):
        bench.results_table()
