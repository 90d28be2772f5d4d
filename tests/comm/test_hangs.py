"""Reproducible hangs: each ends in an error within a bound, and the culprit is named.

The diagnosis is checked on hand-written logs, then on real runs: two spawns of 2
gloo ranks (the three scenarios of one group, then the rank that dies) and one more
through the ``aiinfra comm hangs`` command. On the real runs the evidence of our
flight recorder is checked against PyTorch's own: its flight recorder (the op and
sequence number each rank last entered) and the fingerprints that
``TORCH_DISTRIBUTED_DEBUG=DETAIL`` prints.
"""

import functools
import json
import time

import pytest
from aiinfra import cli, results
from aiinfra.comm.flight_recorder import (
    Entry,
    FlightRecorder,
    RankLog,
    diagnose,
    read_log,
)
from aiinfra.comm.hangs import SCENARIOS, detail_ops, run_hangs, shorten

TIMEOUT = 1.0  # the process group's timeout in the spawned runs, seconds
SLACK = 3.0  # seconds a loaded 2-core machine (shared with others) may add


def entry(seq, op="all_reduce", start=0.0, end=0.01, error=None, shape=(4,)):
    return Entry(seq, op, (shape,), "float32", start, end, error)


def log(rank, *entries, exited=True):
    return RankLog(rank, tuple(entries), exited)


def test_diagnose_names_the_minority_op_on_three_ranks():
    ok = entry(1)
    logs = [
        log(0, ok, entry(2, start=0.1, end=1.1, error="timeout")),
        log(1, ok, entry(2, start=0.1, end=1.1, error="timeout")),
        log(2, ok, entry(2, "broadcast", start=0.1, end=1.1, error="timeout")),
    ]
    d = diagnose(logs)
    assert d.culprits == (2,)
    assert "rank 2 broadcast" in d.line and "#2" in d.line


def test_diagnose_names_a_shape_mismatch_and_both_ranks_of_a_tie():
    three = [
        log(r, entry(1, shape=(5,) if r == 1 else (4,), error="t")) for r in (0, 1, 2)
    ]
    assert diagnose(three).culprits == (1,)
    two = [
        log(r, entry(1, "broadcast" if r else "all_reduce", error="t")) for r in (0, 1)
    ]
    d = diagnose(two)
    assert d.culprits == (0, 1) and "no majority" in d.line


def test_diagnose_blames_the_rank_that_entered_late():
    logs = [
        log(0, entry(1), entry(2, start=0.1, end=1.1, error="timeout")),
        log(1, entry(1), entry(2, start=0.1, end=1.1, error="timeout")),
        log(2, entry(1), entry(2, start=2.0, end=2.0, error="closed")),
    ]
    d = diagnose(logs)
    assert d.culprits == (2,) and "stalled" in d.line


def test_diagnose_blames_a_rank_without_an_exit_line():
    logs = [log(0, entry(1), entry(2, error="closed")), log(1, entry(1), exited=False)]
    d = diagnose(logs)
    assert d.culprits == (1,) and "died" in d.line


def test_diagnose_blames_a_rank_that_died_before_any_collective():
    d = diagnose([log(0), log(1, exited=False)])
    assert d.culprits == (1,) and "#0" in d.line


def test_diagnose_without_a_failure_blames_nobody():
    assert diagnose([log(0, entry(1)), log(1, entry(1))]).culprits == ()


def test_diagnose_rejects_a_rank_given_twice():
    with pytest.raises(ValueError, match="logs must hold each rank once"):
        diagnose([log(0), log(0)])


def test_flight_recorder_round_trips_through_its_file(tmp_path):
    import torch

    rec = FlightRecorder(tmp_path / "r.jsonl", 3)
    assert (
        rec.call("copy", torch.Tensor.copy_, torch.zeros(2, 3), torch.ones(2, 3)).sum()
        == 6
    )
    with pytest.raises(RuntimeError):
        rec.call("bad", torch.Tensor.view, torch.zeros(5), 2, 3)
    before = read_log(tmp_path / "r.jsonl", 3)
    assert not before.exited  # no exit line yet: it reads as a dead rank
    rec.close()
    after = read_log(tmp_path / "r.jsonl", 3)
    assert after.exited and [e.seq for e in after.entries] == [1, 2]
    assert (
        after.entries[0].shapes == ((2, 3), (2, 3)) and after.entries[0].error is None
    )
    assert after.entries[1].error.startswith("RuntimeError: shape '[2, 3]'")
    with pytest.raises(ValueError, match="rank must be an int >= 0"):
        FlightRecorder(tmp_path / "x", -1)


def test_shorten_drops_the_build_path_and_tensor_options():
    raw = (
        "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
        "unbound_buffer.cc:78] Timed out waiting 1000ms for recv operation"
    )
    assert shorten(raw) == (
        "RuntimeError: [third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
        "Timed out waiting 1000ms for recv operation"
    )
    fp = (
        "CollectiveFingerPrint(SequenceNumber=1, OpType=ALLREDUCE, TensorShape=[4], "
        "TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), "
        "device=cpu, memory_format=(nullopt)))"
    )
    assert shorten(fp) == (
        "CollectiveFingerPrint(SequenceNumber=1, OpType=ALLREDUCE, TensorShape=[4], "
        "TensorDtypes=Float)"
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"scenarios": ("deadlock",)}, "scenarios must be some of"),
        ({"scenarios": ("stall", "stall")}, "must not repeat"),
        ({"world_size": 1}, "world_size must be an int >= 2"),
        ({"timeout": 0}, r"timeout must be in \(0, 60\]"),
    ],
)
def test_run_hangs_rejects_bad_arguments_before_spawning(kwargs, match):
    with pytest.raises(ValueError, match=match):
        run_hangs(**kwargs)


@functools.cache
def spawned() -> tuple[dict, float]:
    """The four scenarios on 2 ranks (two spawns), by name, and their wall time."""
    start = time.monotonic()
    records = run_hangs(SCENARIOS, world_size=2, timeout=TIMEOUT)
    return {r.scenario: r for r in records}, time.monotonic() - start


@pytest.mark.slow
def test_a_mismatch_times_out_on_every_rank_and_torch_agrees_on_the_ops():
    r = spawned()[0]["mismatch"]
    for error, seconds in zip(r.errors, r.elapsed_s, strict=True):
        assert "Timed out waiting 1000ms" in error, r
        assert TIMEOUT * 0.9 <= seconds < TIMEOUT + SLACK, r
    assert r.culprits == [0, 1] and "rank 1 broadcast" in r.diagnosis, r
    # Torch's flight recorder saw the same collective #2 on each rank.
    assert [(f["seq"], f["op"]) for f in r.torch_fr] == [
        (2, "gloo:all_reduce"),
        (2, "gloo:broadcast"),
    ], r


@pytest.mark.slow
def test_detail_reports_the_mismatch_at_once_naming_the_same_ops():
    r = spawned()[0]["mismatch_detail"]
    for error, seconds in zip(r.errors, r.elapsed_s, strict=True):
        assert error.startswith("RuntimeError: Detected mismatch between collectives")
        assert seconds < TIMEOUT / 2  # before any timeout
    assert detail_ops(r.errors) == {0: "ALLREDUCE", 1: "BROADCAST"}
    assert "rank 0 all_reduce" in r.diagnosis and "rank 1 broadcast" in r.diagnosis


@pytest.mark.slow
def test_a_stalled_rank_is_blamed_from_the_time_it_entered():
    r = spawned()[0]["stall"]
    assert "Timed out waiting 1000ms" in r.errors[0]
    assert TIMEOUT * 0.9 <= r.elapsed_s[0] < TIMEOUT + SLACK
    late = r.timeline[1][1]  # rank 1's collective #2: [seq, op, start, end, failed]
    assert late[0] == 2 and late[2] >= 2 * TIMEOUT * 0.9
    assert r.culprits == [1] and "stalled" in r.diagnosis
    # Torch's recorder: rank 1 created collective #2 two timeouts after rank 0.
    fr0, fr1 = r.torch_fr
    assert fr0["seq"] == fr1["seq"] == 2
    assert fr1["created"] - fr0["created"] >= 2 * TIMEOUT * 0.9


@pytest.mark.slow
def test_a_dead_rank_is_named_by_the_launcher_and_by_its_missing_exit():
    r = spawned()[0]["die"]
    assert (
        r.launcher
        == "RuntimeError: rank 1 died with exit code 1 before returning a result"
    )
    assert "Connection" in r.errors[0] and "by peer" in r.errors[0]
    assert r.elapsed_s[0] < TIMEOUT  # gloo sees the closed socket: no timeout
    assert r.errors[1] is None and r.torch_fr[1] is None  # the dead dump nothing
    assert r.culprits == [1] and "died" in r.diagnosis


@pytest.mark.slow
def test_all_hangs_end_within_a_bound():
    # Two spawns; the slowest scenario (the stall) waits 2 timeouts.
    assert spawned()[1] < 4 * TIMEOUT + 4 * SLACK + 2


@pytest.mark.slow
def test_comm_hangs_command_writes_stamped_results(tmp_path, capsys):
    out = tmp_path / "hangs-gloo.json"
    argv = ["comm", "hangs", "--scenarios", "mismatch_detail", "--world-size", "2"]
    assert cli.main([*argv, "--timeout", "1", "--out", str(out)]) == 0
    data = results.load("hangs", "gloo", path=out)
    assert data["stamp"]["backend"] == "gloo" and data["stamp"]["world_size"] == 2
    (row,) = data["rows"]
    assert row["scenario"] == "mismatch_detail" and row["culprits"] == [0, 1]
    printed = capsys.readouterr().out
    assert "Who hung and why" in printed and "What each rank saw" in printed
    assert any(
        line.split()[:3] == ["mismatch_detail", "[0,", "1]"]
        for line in printed.splitlines()
    )
    assert json.loads(out.read_text())["config"]["timeout_s"] == 1.0


def test_comm_hangs_rejects_one_rank():
    with pytest.raises(SystemExit) as exc:
        cli.main(["comm", "hangs", "--world-size", "1"])
    assert exc.value.code == 2
