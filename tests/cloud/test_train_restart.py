"""aiinfra.cloud.train under torchrun: a worker dies, the group restarts and resumes.

Three torchrun runs of two gloo workers on this machine (~30 s on two cores):
one in which rank 1 dies before step 5 (checkpoints at 2 and 4), one that never
fails (the ground truth: a resumed run must end bit for bit where it ends), and one
left on the agent's shared store, which the entry point must refuse.
"""

import json
import os
import subprocess
import sys

import pytest
from aiinfra.cloud.train import (
    TrainConfig,
    check_config,
    elastic_env,
    main,
)
from aiinfra.storage import committed_checkpoints

STEPS, EVERY, FAIL_AT, FAIL_RANK = 8, 2, 5, 1
RESUME_AT = (FAIL_AT - 1) // EVERY * EVERY  # 4: the last commit before the fault
TORCHRUN_TIMEOUT = 120  # seconds for one torchrun; a hang fails instead of blocking
# The one opt-out that makes restarts work (see aiinfra.cloud.train).
FRESH_STORE = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


def torchrun(root, *extra: str, env: dict[str, str] = FRESH_STORE):
    """Run the entry point as the book does: torchrun, 2 workers, 1 restart."""
    (root / "tmp").mkdir(parents=True)
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",  # a rendezvous on a free port: tests may run in parallel
        "--nproc-per-node",
        "2",
        "--max-restarts",
        "1",
        "--monitor-interval",
        "0.5",  # the agent notices a dead worker within half a second
        "-m",
        "aiinfra.cloud.train",
        "--steps",
        str(STEPS),
        "--every",
        str(EVERY),
        "--ckpt-dir",
        str(root / "ckpt"),
        *extra,
    ]
    clean = {k: v for k, v in os.environ.items() if k not in FRESH_STORE}
    environ = {**clean, "OMP_NUM_THREADS": "1", "TMPDIR": str(root / "tmp"), **env}
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=TORCHRUN_TIMEOUT, env=environ
    )


def records(root) -> dict[tuple[int, int], dict]:
    """The progress records, keyed by (attempt, rank)."""
    found = {}
    for path in (root / "ckpt" / "progress").glob("attempt*_rank*.json"):
        r = json.loads(path.read_text())
        found[r["attempt"], r["rank"]] = r
    return found


@pytest.fixture(scope="module")
def restarted(tmp_path_factory):
    root = tmp_path_factory.mktemp("restarted")
    out = torchrun(root, "--fail-at-step", str(FAIL_AT), "--fail-rank", str(FAIL_RANK))
    return root, out


@pytest.fixture(scope="module")
def control(tmp_path_factory):
    root = tmp_path_factory.mktemp("control")
    return root, torchrun(root)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_killed_worker_is_reported_and_the_restarted_run_succeeds(restarted):
    root, out = restarted
    assert out.returncode == 0, out.stderr[-3000:]
    # The agent saw local rank 1 exit with code 1 and stopped rank 0 to restart.
    assert f"failed (exitcode: 1) local_rank: {FAIL_RANK}" in out.stderr
    assert "closing signal SIGTERM" in out.stderr
    assert f"attempt 1 step {STEPS} loss" in out.stdout


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_attempt_0_died_at_the_fault_and_finished_nothing(restarted):
    found = records(restarted[0])
    assert found[0, FAIL_RANK]["killed_at_step"] == FAIL_AT
    assert found[0, 0].get("killed_at_step") is None  # rank 0 was stopped, not killed
    for rank in (0, 1):
        assert found[0, rank]["resumed_from"] is None  # a fresh start
        assert found[0, rank]["final_step"] is None  # the attempt never finished


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_attempt_1_resumed_from_the_latest_commit_and_reached_the_end(restarted):
    root = restarted[0]
    found = records(root)
    assert sorted(found) == [(0, 0), (0, 1), (1, 0), (1, 1)]  # exactly one restart
    for rank in (0, 1):
        assert found[1, rank]["resumed_from"] == RESUME_AT
        assert found[1, rank]["final_step"] == STEPS
    names = [p.name for p in committed_checkpoints(root / "ckpt")]
    assert names == [f"step_{s:08d}" for s in range(EVERY, STEPS + 1, EVERY)]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_resumed_replicas_equal_each_other_and_an_uninterrupted_run(restarted, control):
    resumed, clean = records(restarted[0]), records(control[0])
    assert control[1].returncode == 0, control[1].stderr[-3000:]
    # Bit-identical weights: the checkpoint restored the model, Adam's moments and
    # the step, so steps 5..8 repeat what the run that never failed computed.
    sums = {resumed[1, r]["checksum"] for r in (0, 1)}
    assert sums == {clean[0, r]["checksum"] for r in (0, 1)}
    assert len(sums) == 1
    assert resumed[1, 0]["final_loss"] == clean[0, 0]["final_loss"]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_without_a_fault_the_run_finishes_in_attempt_0(control):
    root, out = control
    assert out.returncode == 0, out.stderr[-3000:]
    found = records(root)
    assert sorted(found) == [(0, 0), (0, 1)]
    for rank in (0, 1):
        assert found[0, rank]["resumed_from"] is None
        assert found[0, rank]["final_step"] == STEPS
    assert "failed (exitcode" not in out.stderr


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_restarts_on_the_agents_shared_store_are_refused(tmp_path):
    out = torchrun(tmp_path, env={})  # torchrun's default: workers share its store
    assert out.returncode != 0
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1" in out.stderr
    assert not (tmp_path / "ckpt").exists()  # refused before anything was written


def test_without_torchrun_the_module_exits_with_a_clear_error(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK")}
    cmd = [sys.executable, "-m", "aiinfra.cloud.train", "--steps", "2", "--every", "1"]
    out = subprocess.run(
        [*cmd, "--ckpt-dir", str(tmp_path / "ckpt")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode == 1
    assert "must be started by torchrun" in out.stderr
    assert "RANK" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "ckpt").exists()


def test_elastic_env_reads_torchruns_variables():
    ids = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}
    env = elastic_env({**ids, "TORCHELASTIC_RESTART_COUNT": "2"})
    assert (env.rank, env.world_size, env.local_rank, env.attempt) == (3, 4, 1, 2)
    with pytest.raises(RuntimeError, match="RANK"):
        elastic_env({"WORLD_SIZE": "2", "LOCAL_RANK": "0"})
    shared = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}
    shared |= {"TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_MAX_RESTARTS": "1"}
    with pytest.raises(RuntimeError, match="TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"):
        elastic_env(shared)
    assert elastic_env({**shared, "TORCHELASTIC_MAX_RESTARTS": "0"}).attempt == 0


@pytest.mark.parametrize(
    "kwargs, world_size, message",
    [
        ({"steps": 0}, 2, "steps must be >= 1, got 0"),
        ({"every": 0}, 2, "every must be >= 1, got 0"),
        ({"fail_at_step": 2}, 2, r"fail_at_step must be in 3\.\.8"),  # no commit yet
        ({"fail_at_step": 9}, 2, r"fail_at_step must be in 3\.\.8"),
        ({"fail_at_step": 5, "fail_rank": 2}, 2, r"fail_rank must be in 0\.\.1, got 2"),
        ({"fail_rank": -1}, 2, r"fail_rank must be in 0\.\.1, got -1"),
        ({}, 3, "world_size must divide the batch 8, got 3"),
    ],
)
def test_bad_config_is_rejected_naming_the_argument(kwargs, world_size, message):
    config = TrainConfig(**{"steps": 8, "every": 2, "ckpt_dir": "unused", **kwargs})
    with pytest.raises(ValueError, match=message):
        check_config(config, world_size)


def test_bad_argument_exits_before_joining_the_group(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    ckpt = str(tmp_path / "ckpt")
    with pytest.raises(SystemExit, match="every must be >= 1, got 0"):
        main(["--steps", "4", "--every", "0", "--ckpt-dir", ckpt])
    assert not (tmp_path / "ckpt").exists()
