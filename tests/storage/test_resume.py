"""An exact resume: a run stopped, saved with DCP and resumed equals the run that
never stopped, bit for bit: its losses, its weights and the order it read the data.

The ground truth is the uninterrupted run itself, computed in the same process with
the same seeds; the control shows that weights and optimizer alone do not suffice.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
import torch.distributed.checkpoint as dcp
from aiinfra.storage.resume import (
    ResumableSampler,
    restore_resume_state,
    resume_state,
)
from aiinfra.storage.sharded import training_state
from torch import nn
from torch.distributed.checkpoint.state_dict import set_state_dict

N, BATCH, STEPS, STOP = 24, 4, 15, 8  # 6 batches an epoch: the stop is mid-epoch


def _seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


def _setup():
    _seed_everything(0)
    x, y = torch.randn(N, 6), torch.randn(N, 1)
    model = nn.Sequential(
        nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 1)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    sampler = ResumableSampler(N, seed=7)
    return (x, y), model, opt, sched, sampler


def _train(data, model, opt, sched, sampler, steps):
    x, y = data
    it, losses, seen = iter(sampler), [], []
    for _ in range(steps):
        idx = [next(it) for _ in range(BATCH)]
        noise = 0.01 * (np.random.randn() + random.random())  # user code's RNGs
        loss = ((model(x[idx]) - y[idx]) ** 2).mean() + noise
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        seen.extend(idx)
    return losses, seen


def _resumed(tmp_path, with_extras: bool):
    data, model, opt, sched, sampler = _setup()
    first, seen_first = _train(data, model, opt, sched, sampler, STOP)
    state = training_state(model, opt)
    state["resume"] = resume_state(sampler, sched)
    dcp.save(state, checkpoint_id=tmp_path)
    # a new job: everything built again, the generators elsewhere
    data, model, opt, sched, sampler = _setup()
    _seed_everything(123)
    state = training_state(model, opt)  # the optimizer's moments to load into
    state["resume"] = resume_state(sampler, sched)
    dcp.load(state, checkpoint_id=tmp_path)
    set_state_dict(
        model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"]
    )
    if with_extras:
        restore_resume_state(state["resume"], sampler, sched)
    rest, seen_rest = _train(data, model, opt, sched, sampler, STEPS - STOP)
    return first + rest, seen_first + seen_rest, model


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_resumed_run_equals_the_uninterrupted_one_bit_for_bit(tmp_path):
    data, model, opt, sched, sampler = _setup()
    losses, seen = _train(data, model, opt, sched, sampler, STEPS)
    r_losses, r_seen, r_model = _resumed(tmp_path, with_extras=True)
    assert r_seen == seen  # the same samples in the same order, across the epoch
    assert r_losses == losses  # bit for bit, not approximately
    for a, b in zip(
        model.state_dict().values(), r_model.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b)


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_weights_and_optimizer_alone_do_not_resume_the_same_run(tmp_path):
    data, model, opt, sched, sampler = _setup()
    losses, seen = _train(data, model, opt, sched, sampler, STEPS)
    r_losses, r_seen, _ = _resumed(tmp_path, with_extras=False)
    assert r_seen[: STOP * BATCH] == seen[: STOP * BATCH]
    assert r_seen != seen  # the loader starts its first epoch again
    assert r_losses != losses


def test_sampler_order_is_a_seeded_permutation_per_epoch():
    s = ResumableSampler(5, seed=3)
    it = iter(s)
    got = [next(it) for _ in range(10)]
    assert sorted(got[:5]) == sorted(got[5:]) == list(range(5))
    g = torch.Generator().manual_seed(3)
    assert got[:5] == torch.randperm(5, generator=g).tolist()
    assert s.state_dict() == {"seed": 3, "epoch": 1, "index": 5}


@pytest.mark.parametrize(
    ("call", "error", "name"),
    [
        (lambda: ResumableSampler(0), ValueError, "n"),
        (lambda: ResumableSampler(4, seed=1.5), TypeError, "seed"),
        (
            lambda: ResumableSampler(4, 1).load_state_dict(
                {"seed": 2, "epoch": 0, "index": 0}
            ),
            ValueError,
            "seed",
        ),
        (
            lambda: ResumableSampler(4, 1).load_state_dict(
                {"seed": 1, "epoch": 0, "index": 5}
            ),
            ValueError,
            "index",
        ),
    ],
)
def test_bad_arguments_name_themselves(call, error, name):
    with pytest.raises(error, match=name):
        call()
