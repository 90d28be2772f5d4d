import pytest
import torch
import torch.distributed as dist
from aiinfra.distributed import run_distributed


def _rank_and_sum():
    t = torch.tensor([dist.get_rank() + 1.0])
    dist.all_reduce(t)
    return dist.get_rank(), dist.get_world_size(), t.item()


def _raise_on_rank_one():
    if dist.get_rank() == 1:
        raise ValueError("boom on rank one")
    return dist.get_rank()


def _hang_on_rank_zero():
    # Both ranks wait to receive and nobody sends: a deadlock.
    t = torch.zeros(1)
    dist.recv(t, src=1 - dist.get_rank())
    return dist.get_rank()


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_run_distributed_returns_results_in_rank_order(world_size):
    out = run_distributed(_rank_and_sum, world_size, timeout=60)
    total = world_size * (world_size + 1) / 2
    assert out == [(r, world_size, total) for r in range(world_size)]


def test_run_distributed_reports_the_failing_rank():
    with pytest.raises(
        RuntimeError, match=r"rank 1 of 2 failed:(.|\n)*boom on rank one"
    ):
        run_distributed(_raise_on_rank_one, 2, timeout=60)


def test_run_distributed_turns_a_hang_into_timeout_error():
    with pytest.raises(TimeoutError, match=r"ranks \[0, 1\] of 2 still running"):
        run_distributed(_hang_on_rank_zero, 2, timeout=5)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"world_size": 0}, "world_size must be an int >= 1"),
        ({"world_size": 2, "timeout": 0}, "timeout must be > 0"),
        ({"world_size": 2, "backend": "mpi"}, "backend must be 'gloo' or 'nccl'"),
    ],
)
def test_run_distributed_rejects_bad_arguments(kwargs, match):
    ws = kwargs.pop("world_size")
    with pytest.raises(ValueError, match=match):
        run_distributed(_rank_and_sum, ws, **kwargs)
