"""The ring collectives over NCCL, one GPU per rank, against NCCL's own.

The rank side is ``test_ring``'s :func:`ring_checks`, run on min(2, GPUs) NCCL ranks
on the world group: only the device differs from the gloo test. With one GPU the
group has one rank and the ring sends no message, but every input, scratch buffer
and result must still be a CUDA tensor, since NCCL's reference collectives accept
no other.
"""

import pytest
import torch
from aiinfra.distributed import rank_device, run_distributed

from tests.comm.test_ring import ring_checks

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def _ring_over_nccl() -> tuple[str, list[str]]:
    return str(rank_device()), ring_checks([("world", None)])


def test_ring_collectives_match_nccl_on_the_gpus_present():
    world_size = min(2, torch.cuda.device_count())
    results = run_distributed(_ring_over_nccl, world_size, backend="nccl", timeout=300)
    for rank, (device, failures) in enumerate(results):
        assert device == f"cuda:{rank}"
        assert failures == [], f"rank {rank}: {failures[:5]}"
