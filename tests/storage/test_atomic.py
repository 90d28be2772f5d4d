import re

import pytest
import torch
from aiinfra.storage import (
    atomic_save,
    committed_checkpoints,
    latest_checkpoint,
    load_latest,
    step_dir,
)

from tests.storage.spawned import reference_state
from tests.storage.test_sharded import assert_matches


@pytest.mark.slow
def test_crash_run_fails_with_the_dead_rank(crashed):
    # The parent sees rank 1 exit, or rank 0 fail first in a collective with it.
    assert re.match(r"rank (1 died with exit code 1|0 of 2 failed)", crashed)


@pytest.mark.slow
def test_partial_save_is_never_reported_as_a_checkpoint(root, crashed):
    atomic = root / "atomic"
    partial = atomic / ".tmp-step_00000002"
    shard = partial / "__1_0.distcp"
    assert shard.stat().st_size > 0  # rank 1 died having written half its shard ...
    assert not (partial / ".metadata").exists()  # ... so rank 0 never finished
    assert not step_dir(atomic, 2).exists()
    assert committed_checkpoints(atomic) == [step_dir(atomic, 1)]
    assert latest_checkpoint(atomic) == step_dir(atomic, 1)
    assert (atomic / "latest").read_text() == "step_00000001\n"


@pytest.mark.slow
def test_restart_loads_the_previous_checkpoint(loaded2):
    step, state = loaded2["atomic"]
    assert step == 1
    assert_matches(state, reference_state(1))
    after_2 = reference_state(2)["model.0.weight"]
    assert not torch.allclose(state["model.0.weight"], after_2)


def test_bad_input_raises_before_any_collective(tmp_path):
    # No process group exists here: each error must come before the first barrier.
    with pytest.raises(ValueError, match="step"):
        atomic_save({}, tmp_path, -1)
    step_dir(tmp_path, 3).mkdir()
    with pytest.raises(FileExistsError, match="step 3"):
        atomic_save({}, tmp_path, 3)
    with pytest.raises(FileNotFoundError, match="root"):
        committed_checkpoints(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="root"):
        latest_checkpoint(tmp_path / "missing")
    assert latest_checkpoint(tmp_path) is None  # no pointer yet
    with pytest.raises(FileNotFoundError, match="no committed checkpoint"):
        load_latest({"x": torch.zeros(1)}, tmp_path)
    (tmp_path / "latest").write_text("step_00000003\n")  # a folder without metadata
    with pytest.raises(FileNotFoundError, match="checkpoint_dir"):
        latest_checkpoint(tmp_path)
    assert committed_checkpoints(tmp_path) == []
