"""The launcher: results in rank order, a failing rank named at once, hangs timed out.

Every test here that starts ranks is ``slow``; the argument checks run before
anything is started. Ranks fork from a fork server that imported torch once: each
rank still sees the caller's environment and folder of the moment, not the server's.
"""

import os
import re
import sys
import time

import pytest
import torch
import torch.distributed as dist
from aiinfra.distributed import backend_devices, rank_device, run_distributed

# A failing run must end this soon after the failure. The old launcher waited up to
# 5 s per rank still blocked in a collective before killing it.
FAILURE_TO_RETURN_S = 3.0


def _rank_and_sum():
    t = torch.tensor([dist.get_rank() + 1.0])
    dist.all_reduce(t)
    return dist.get_rank(), dist.get_world_size(), t.item(), str(rank_device())


def _rank_one_fails_while_the_others_wait_in_all_reduce():
    dist.barrier()  # everyone is up
    if dist.get_rank() == 1:
        time.sleep(1.0)  # the others are inside all_reduce by now
        raise ValueError(f"boom on rank one at {time.time()!r}")
    dist.all_reduce(torch.ones(1))  # never completes: rank 1 never joins
    return dist.get_rank()


def _environment():
    return os.environ.get("AIINFRA_TEST_MARK"), os.getcwd(), "torch" in sys.modules


def _deadlock():
    # Both ranks wait to receive and nobody sends.
    t = torch.zeros(1)
    dist.recv(t, src=1 - dist.get_rank())
    return dist.get_rank()


@pytest.mark.slow
@pytest.mark.parametrize("world_size", [1, 3])
def test_run_distributed_returns_results_in_rank_order(world_size):
    out = run_distributed(_rank_and_sum, world_size, timeout=60)
    total = world_size * (world_size + 1) / 2  # 1 + 2 + ... + N, summed by gloo
    assert out == [(r, world_size, total, "cpu") for r in range(world_size)]


@pytest.mark.slow
def test_a_failing_rank_is_named_and_its_blocked_peers_killed_at_once():
    with pytest.raises(RuntimeError) as info:
        run_distributed(
            _rank_one_fails_while_the_others_wait_in_all_reduce, 3, timeout=60
        )
    returned = time.time()
    message = str(info.value)
    assert message.startswith("rank 1 of 3 failed:"), message[:200]
    failed = float(re.search(r"boom on rank one at ([0-9.]+)", message).group(1))
    assert 0 <= returned - failed < FAILURE_TO_RETURN_S


@pytest.mark.slow
@pytest.mark.slow
def test_ranks_see_the_callers_environment_and_folder_of_the_moment(
    monkeypatch, tmp_path
):
    run_distributed(_rank_and_sum, 1, timeout=60)  # the fork server is up before
    monkeypatch.setenv("AIINFRA_TEST_MARK", "set after the server started")
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    out = run_distributed(_environment, 2, timeout=60)
    assert out == [("set after the server started", str(tmp_path), True)] * 2
    # Forked from a server that imported torch: no rank imports it again (a
    # spawned rank takes seconds of CPU for that alone).
    assert time.monotonic() - started < 3.0


@pytest.mark.slow  # spawns 2 ranks and waits out a 5 s timeout
def test_run_distributed_turns_a_hang_into_timeout_error():
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"ranks \[0, 1\] of 2 still running"):
        run_distributed(_deadlock, 2, timeout=5)
    assert time.monotonic() - start < 5 + FAILURE_TO_RETURN_S


def test_backend_devices_reads_a_real_gloo_group():
    # torch.distributed's backend table: gloo communicates CPU and CUDA tensors.
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert backend_devices() == {"cpu": "gloo", "cuda": "gloo"}
        assert rank_device() == torch.device("cpu")
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize(
    ("config", "devices"),
    [
        ("cuda:nccl", {"cuda": "nccl"}),  # init_process_group("nccl")
        ("cpu:gloo,cuda:nccl", {"cpu": "gloo", "cuda": "nccl"}),  # no backend given
        ("nccl", {"cuda": "nccl"}),  # a bare name: torch's capability table
    ],
)
def test_backend_devices_parses_every_form_of_backend_config(
    monkeypatch, config, devices
):
    # The configs NCCL groups report, which this CPU machine cannot create.
    monkeypatch.setattr(dist, "get_backend_config", lambda group=None: config)
    assert backend_devices() == devices


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


# --- the device and backend chooser -------------------------------------------------

_REGISTER_NPU = """
import torch
import torch.distributed as dist
from aiinfra.distributed import BACKENDS
# What torch_npu does on import: name the PrivateUse1 device "npu", then register its
# backend for it (torch_npu/__init__.py: register_backend("hccl", ...,
# devices=["npu"])); a stand-in constructor, since no NPU library is installed here.
torch.utils.rename_privateuse1_backend("npu")
dist.Backend.register_backend("hccl", lambda *a: None, devices=["npu"])
assert dist.get_default_backend_for_device("npu") == BACKENDS["npu"] == "hccl"
print("ok")
"""


def test_backend_table_is_torchs_own_and_torch_npus():
    import subprocess
    import sys

    import torch.distributed as dist
    from aiinfra.distributed import BACKENDS, choose_backend

    # torch's defaults for the device types it knows.
    for device in ("cuda", "xpu", "cpu"):
        assert dist.get_default_backend_for_device(device) == BACKENDS[device]
        assert choose_backend(device) == (device, BACKENDS[device])
    # npu -> hccl is what torch_npu's registration makes torch answer (in a child:
    # registering a backend changes torch's tables for the whole process).
    out = subprocess.run(
        [sys.executable, "-c", _REGISTER_NPU],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "ok"
    with pytest.raises(ValueError, match="device_type"):
        choose_backend("mps")


def test_accelerator_type_asks_torch_accelerator(monkeypatch):
    import torch
    from aiinfra.distributed import accelerator_type, choose_backend

    class FakeNpu:
        type = "npu"

    monkeypatch.setattr(
        torch.accelerator, "current_accelerator", lambda check_available=False: FakeNpu
    )
    assert accelerator_type() == "npu"
    assert choose_backend() == ("npu", "hccl")
    monkeypatch.setattr(
        torch.accelerator, "current_accelerator", lambda check_available=False: None
    )
    assert choose_backend() == ("cpu", "gloo")
