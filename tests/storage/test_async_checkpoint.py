import pytest
import torch
from aiinfra.parallel.toy import regression_batches
from aiinfra.storage import checkpoint_overhead

from tests.storage.spawned import ASYNC_STEPS, EVERY, WIDTHS, reference_state
from tests.storage.test_sharded import assert_matches

SAVED_STEPS = range(EVERY, ASYNC_STEPS + 1, EVERY)


@pytest.mark.slow
@pytest.mark.parametrize("step", SAVED_STEPS)
def test_async_checkpoint_loads_equal_to_the_sync_one(loaded2, step):
    sync, asynchronous = loaded2[f"sync/{step}"], loaded2[f"async/{step}"]
    assert sorted(sync) == sorted(asynchronous)
    for k in sync:
        assert torch.equal(sync[k], asynchronous[k]), k
    # The state of step `step`, not of a later step that ran during the write.
    assert_matches(asynchronous, reference_state(step))


@pytest.mark.slow
def test_timings_are_measured_on_every_rank(saved):
    for rank in saved:
        timings = rank["timings"]
        assert timings["none"].saves == 0 and timings["none"].blocked_seconds == 0
        assert timings["none"].seconds > 0
        for mode in ("sync", "async"):
            t = timings[mode]
            assert (t.mode, t.steps, t.saves) == (mode, ASYNC_STEPS, 2)
            assert t.seconds > 0 and t.blocked_seconds > 0
            assert t.seconds >= t.blocked_seconds
            assert t.step_seconds > 0 and t.overhead_per_step > 0


def test_checkpoint_overhead_rejects_bad_input_before_spawning(tmp_path):
    batches = regression_batches(2, 12, WIDTHS[0], WIDTHS[-1])
    for kwargs, name in [
        ({"world_size": 0}, "world_size"),
        ({"every": 0}, "every"),
        ({"batches": []}, "batches"),
        ({"world_size": 5}, "world_size = 5 must divide"),
    ]:
        args = {"world_size": 2, "widths": WIDTHS, "batches": batches} | kwargs
        with pytest.raises(ValueError, match=name):
            checkpoint_overhead(str(tmp_path), **args)
