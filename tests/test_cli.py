"""The ``aiinfra`` command: sizes, the cost table, a tiny benchmark, bad flags."""

import argparse
import json

import pytest
import torch
from aiinfra import cli
from aiinfra.distributed import free_port


@pytest.mark.parametrize(
    ("text", "expected"),
    [("512", 512), ("1K", 1024), ("16M", 16 * 2**20), ("1G", 2**30), ("4kib", 4096)],
)
def test_parse_size_reads_binary_suffixes(text, expected):
    assert cli.parse_size(text) == expected


@pytest.mark.parametrize("text", ["3X", "-1", "1.5M", "", "M"])
def test_parse_size_rejects_what_is_not_a_size(text):
    with pytest.raises(argparse.ArgumentTypeError, match="not a size"):
        cli.parse_size(text)


def test_comm_cost_prints_every_algorithm_and_the_crossovers(capsys):
    assert cli.main(["comm", "cost", "--p", "8", "--size", "16M"]) == 0
    out = capsys.readouterr().out
    assert "rabenseifner_all_reduce" in out and "recursive doubling vs ring" in out
    assert cli.main(["comm", "cost", "--p", "16", "--link", "ib100", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["crossovers"]["rows"][0][0] == 16


def test_bench_collectives_runs_and_writes_a_stamped_results_file(tmp_path, capsys):
    out = tmp_path / "bench.json"
    argv = [
        "bench",
        "collectives",
        "--world-size",
        "2",
        "--min-bytes",
        "1K",
        "--max-bytes",
        "1K",
        "--collectives",
        "all_reduce",
        "--algorithms",
        "ring,torch",
        "--warmup",
        "0",
        "--iters",
        "1",
        "--json",
        "--out",
        str(out),
    ]
    assert cli.main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [r["algorithm"] for r in printed["rows"]] == ["ring", "torch"]
    assert all(r["wrong"] == 0 for r in printed["rows"])
    saved = json.loads(out.read_text())
    assert saved["stamp"]["world_size"] == 2 and saved["stamp"]["backend"] == "gloo"
    assert saved["config"]["iters"] == 1


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["bench", "collectives", "--world-size", "0"], "--world-size"),
        (
            ["bench", "collectives", "--min-bytes", "2K", "--max-bytes", "1K"],
            "--max-bytes",
        ),
        (["bench", "collectives", "--min-bytes", "3X"], "--min-bytes"),
        (["bench", "collectives", "--collectives", "allreduce"], "--collectives"),
        (
            [
                "bench",
                "collectives",
                "--collectives",
                "broadcast",
                "--algorithms",
                "ring",
            ],
            "--algorithms",
        ),
        (
            ["bench", "collectives", "--world-size", "4", "--local-size", "3"],
            "--local-size",
        ),
        (["bench", "collectives", "--iters", "0"], "--iters"),
        (["bench", "collectives", "--dtype", "float8"], "--dtype"),
        (["bench", "collectives", "--backend", "mpi"], "--backend"),
        (["comm", "cost", "--p", "0"], "--p"),
        (["comm", "cost", "--size", "big"], "--size"),
        (["comm", "cost", "--link", "wifi"], "--link"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(argv, flag, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    assert flag in capsys.readouterr().err


def test_nccl_without_gpus_exits_2_before_any_process_starts(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bench", "collectives", "--backend", "nccl", "--world-size", "2"])
    assert exit_.value.code == 2
    assert "--backend nccl needs one CUDA GPU per rank" in capsys.readouterr().err


def test_a_missing_command_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bench"])
    assert exit_.value.code == 2


def test_memory_is_a_one_word_command_of_aiinfra(capsys):
    assert (
        cli.main(["memory", "--model", "llama-3-8b", "--zero", "3", "--dp", "8"]) == 0
    )
    out = capsys.readouterr().out
    assert "zero=3, dp=8" in out and "GiB" in out


def test_memory_bad_dp_exits_2(capsys):
    assert cli.main(["memory", "--model", "llama-3-8b", "--dp", "0"]) == 2
    assert "dp" in capsys.readouterr().err


def test_bench_collectives_joins_a_torchrun_job_instead_of_spawning():
    """The README's multi-node command, on one machine: torchrun starts the ranks."""
    import subprocess
    import sys

    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-port",
        str(free_port()),
        "-m",
        "aiinfra.cli",
        "bench",
        "collectives",
        "--backend",
        "gloo",
        "--collectives",
        "all_reduce",
        "--algorithms",
        "ring,torch",
        "--min-bytes",
        "1K",
        "--max-bytes",
        "1K",
        "--iters",
        "1",
        "--json",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    start = out.stdout.index("{")  # only rank 0 prints
    rows = json.loads(out.stdout[start:])["rows"]
    assert {r["algorithm"] for r in rows} == {"ring", "torch"}
    assert all(r["wrong"] == 0 for r in rows)
    assert json.loads(out.stdout[start:])["stamp"]["world_size"] == 2
