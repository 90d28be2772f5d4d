"""One results module: the data folder, the stamp, write(kind) and load(kind)."""

import json
import socket

import pytest
from aiinfra import results

STAMP_KEYS = {
    "date",
    "cpu",
    "cpu_count",
    "load_1min",
    "gpu",
    "os",
    "world_size",
    "backend",
    "torch",
    "python",
    "aiinfra",
}


def test_write_then_load_round_trips_with_a_stamp(tmp_path, monkeypatch):
    monkeypatch.setenv(results.DATA_ENV, str(tmp_path))
    body = {"config": {"iters": 1}, "rows": [{"a": 1}]}
    path = results.write("collectives", body, backend="gloo", world_size=4)
    assert path == tmp_path / "collectives-gloo.json"
    doc = results.load("collectives")
    assert doc["config"] == body["config"] and doc["rows"] == body["rows"]
    assert set(doc["stamp"]) == STAMP_KEYS
    assert doc["stamp"]["world_size"] == 4 and doc["stamp"]["backend"] == "gloo"
    assert doc["stamp"]["date"].endswith("+00:00")  # UTC
    assert doc["stamp"]["gpu"] is None  # gloo never records a GPU
    assert not results.results_path("ddp").exists()  # only what was written


def test_the_stamp_never_holds_the_hostname(tmp_path, monkeypatch):
    # A long, unmistakable hostname: the stamp has no field that could carry it.
    monkeypatch.setattr(socket, "gethostname", lambda: "node-7f3a9c-cluster")
    monkeypatch.setattr("platform.node", lambda: "node-7f3a9c-cluster")
    path = results.write(
        "ddp", {"rows": []}, backend="gloo", world_size=2, path=tmp_path / "x.json"
    )
    assert "node-7f3a9c" not in path.read_text()


def test_extra_stamp_entries_and_another_path(tmp_path):
    out = tmp_path / "deep" / "zero.json"
    results.write(
        "zero",
        {"losses": {}},
        backend="gloo",
        world_size=2,
        path=out,
        extra_stamp={"deepspeed": "0.19.8"},
    )
    doc = json.loads(out.read_text())
    assert doc["stamp"]["deepspeed"] == "0.19.8" and doc["losses"] == {}
    assert results.load("zero", path=out) == doc


def test_a_missing_file_names_the_command_that_writes_it(tmp_path, monkeypatch):
    monkeypatch.setenv(results.DATA_ENV, str(tmp_path))
    command = "aiinfra bench collectives --backend nccl --world-size 8 --stamp"
    with pytest.raises(FileNotFoundError, match=f"at {tmp_path}.*{command}"):
        results.load("collectives", "nccl")
    other = tmp_path / "x.json"
    with pytest.raises(FileNotFoundError, match=f"--world-size 8 --out {other}"):
        results.load("collectives", "nccl", other)
    with pytest.raises(FileNotFoundError, match="--device cuda .*nox -s gpu"):
        results.load("attention", "cuda")
    with pytest.raises(FileNotFoundError, match="nox -s bench"):
        results.load("ddp", "gloo")


def test_nox_gets_one_command_per_kind_and_machine():
    cpu = results.commands()
    kinds = [(k, b) for k, spec in results.KINDS.items() for b in spec.backends]
    cpu_kinds = [(k, b) for k, b in kinds if b in results.CPU_BACKENDS]
    assert [k for k, _ in cpu_kinds] == [
        *("collectives", "ring", "ddp", "zero", "attention", "moe", "decode"),
        *("phases", "engine", "speculative", "roofline", "quant-eval", "kv-eviction"),
        *("distillation", "scaling-fit", "hf-checkpoints", "storage", "hangs"),
        *("restart", "preflight", "container"),
        "engine_hf",  # the engine against transformers
    ]
    for (kind, _), command in zip(cpu_kinds, cpu, strict=True):
        assert command[: len(results.KINDS[kind].command)] == [
            *results.KINDS[kind].command
        ]
    # Each writes the book's file of its kind, the one results.load reads.
    assert all(c[-1] == "--stamp" for c in cpu)
    assert "--repeats" in cpu[1]
    gpu = results.commands(results.GPU_RUNS)
    assert [c[2] for c in gpu] == ["attention", "ddp", "roofline"]
    assert "cuda" in gpu[0] and gpu[1][gpu[1].index("--backend") + 1] == "nccl"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: results.load("colectives"), "kind must be one of"),
        (lambda: results.load("zero", "nccl"), "backend must be one of"),
        (
            lambda: results.write("ddp", {"stamp": 1}, backend="gloo", world_size=1),
            "must not have a 'stamp' key",
        ),
    ],
)
def test_bad_kind_backend_or_body_is_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_every_cpu_kind_the_book_renders_is_committed():
    # The book renders these; a missing one would fail its build.
    for kind, backend in (
        *(("collectives", "gloo"), ("ddp", "gloo"), ("zero", "gloo")),
        *(("quant-eval", "cpu"), ("distillation", "cpu"), ("scaling-fit", "cpu")),
        ("kv-eviction", "cpu"),
    ):
        doc = results.load(kind, backend)
        assert {"date", "cpu", "world_size", "torch"} <= set(doc["stamp"])
