"""Our data parallelism against DistributedDataParallel and one process, whole batch.

Tolerance: the data-parallel gradient sums the batch in a different order (a mean
over each rank's rows, then a sum over ranks) than one process does, so float32
gradients differ by a few ulps (~1e-7 relative); five SGD or AdamW steps on
parameters of size ~0.3 keep it below ``ATOL`` = 1e-6 (measured: < 1e-7). Replicas
of one run must agree bit for bit: they apply the same averaged gradient (Li et al.
2020, "PyTorch Distributed", Sec. 3). The rank side lives in :mod:`spawned`: one
spawn of 4 gloo ranks, shared with ``test_zero``, runs every check on the world
(N = 4) and on the pairs [0, 2] and [1, 3] (N = 2).
"""

import pytest
import torch
import torch.distributed as dist
from aiinfra.parallel.data.bucketed import BucketedDDP, assign_buckets
from aiinfra.parallel.data.naive import NaiveDDP, parameter_device
from aiinfra.parallel.data.token_loss import (
    global_token_count,
    token_mean_loss,
    token_weights,
)
from aiinfra.parallel.toy import mlp
from torch import nn

from tests.parallel.spawned import WIDTHS, gloo_results

ATOL = 1e-6
# WIDTHS = (6, 16, 16, 3): (6 + 1) 16 + (16 + 1) 16 + (16 + 1) 3 parameters.
PSI = 7 * 16 + 17 * 16 + 17 * 3  # 435
GROUPS = {"world": 4, "pair": 2}  # group name -> N


@pytest.fixture(scope="module")
def results():
    return gloo_results()


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_ddp_variants_equal_one_process_with_the_whole_batch(results, group):
    for r in results:
        diffs = r[group]["ddp"]["to_one_process"]
        assert len(diffs) == 14  # 5 kinds + 2 with no_sync, 2 optimizers
        for key, diff in diffs.items():
            assert diff < ATOL, key


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_ddp_variants_equal_torch_distributed_data_parallel(results, group):
    for r in results:
        for key, diff in r[group]["ddp"]["to_torch"].items():
            assert diff < ATOL, key


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_ddp_replicas_stay_bitwise_identical(results, group):
    for r in results:
        assert all(d == 0.0 for d in r[group]["ddp"]["between_ranks"].values())


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_ddp_keeps_every_buffer_on_the_parameters_device(results, group):
    for r in results:
        assert set(map(tuple, r[group]["ddp"]["devices"].values())) == {("cpu",)}


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_ddp_sends_2_psi_per_step_like_an_all_reduce(results, group):
    # ZeRO paper (Rajbhandari et al. 2020), Sec. 7.1: an all-reduce of Psi gradients
    # moves 2 Psi elements per rank.
    for r in results:
        # Under no_sync only the last of k = 3 micro-batches sends: still 2 Psi.
        assert r[group]["ddp"]["sent"] == {
            "NaiveDDP": 2 * PSI,
            "BucketedDDP": 2 * PSI,
            "BucketedDDP, k=3": 2 * PSI,
        }


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_global_token_count_gives_the_per_token_mean_of_one_process(results, group):
    # Unequal token counts per rank and micro-batch (spawned._token_mask): ours and
    # DistributedDataParallel, with 1 or 3 micro-batches, normalised by the global
    # count, equal one process's mean over every token; averaging per-micro-batch
    # means, the k-and-N_d division, does not.
    for r in results:
        diffs = r[group]["ddp"]["tokens"]
        assert len(diffs) == 5
        for key, diff in diffs.items():
            if key != "mean of means":
                assert diff < ATOL, key
        assert diffs["mean of means"] > 1e-3


@pytest.mark.slow
def test_ddp_rejects_a_rank_outside_the_group_and_mismatched_replicas(results):
    errors = [r["errors"] for r in results]
    assert errors[0]["not_a_member"] is None  # rank 0 trains alone: fine
    for rank in (1, 2, 3):
        assert f"rank {rank} is not a member" in errors[rank]["not_a_member"]
    for e in errors:  # every rank raises, not only the one that differs
        for cls in ("NaiveDDP", "BucketedDDP"):
            assert "replicas in group differ" in e[f"mismatch/{cls}"]


def test_assign_buckets_fills_reverse_order_up_to_the_cap():
    model = mlp(WIDTHS)  # parameter bytes: 384 64 1024 64 192 12
    params = list(model.parameters())
    buckets = assign_buckets(params, bucket_bytes=600)
    assert [len(b) for b in buckets] == [3, 1, 2]  # 12+192+64, 1024, 64+384
    assert [p for b in buckets for p in b] == params[::-1]
    assert len(assign_buckets(params, bucket_bytes=10**9)) == 1


@pytest.mark.parametrize("bucket_bytes", [0, -1, 0.0])
def test_bucketed_ddp_rejects_bucket_bytes_not_positive(bucket_bytes):
    with pytest.raises(ValueError, match="bucket_bytes must be > 0"):
        BucketedDDP(mlp(WIDTHS), bucket_bytes=bucket_bytes)


@pytest.mark.parametrize("cls", [NaiveDDP, BucketedDDP])
def test_ddp_rejects_a_model_without_trainable_parameters(cls):
    model = mlp(WIDTHS).requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        cls(model)
    with pytest.raises(ValueError, match="no trainable parameters"):
        cls(nn.Tanh())


@pytest.fixture
def one_rank_gloo():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_parameters_on_a_device_the_backend_cannot_send_are_rejected(one_rank_gloo):
    # gloo communicates CPU and CUDA tensors only (torch.distributed docs); the
    # "meta" device stands for any other, and for a model split across devices.
    params = list(nn.Linear(2, 2).parameters())
    assert parameter_device(params, None) == torch.device("cpu")
    meta = list(nn.Linear(2, 2, device="meta").parameters())
    with pytest.raises(ValueError, match=r"on meta, but group's backend"):
        parameter_device(meta, None)
    with pytest.raises(ValueError, match=r"on \['cpu', 'meta'\]; data parallelism"):
        parameter_device(params[:1] + meta[1:], None)
    for cls in (NaiveDDP, BucketedDDP):
        with pytest.raises(ValueError, match="on meta, but group's backend"):
            cls(nn.Linear(2, 2, device="meta"))


@pytest.mark.parametrize("cls", [NaiveDDP, BucketedDDP])
def test_cpu_parameters_under_nccl_are_rejected_before_any_collective(
    one_rank_gloo, monkeypatch, cls
):
    # What an NCCL group reports (torch.distributed: NCCL communicates CUDA tensors
    # only); a real one needs a GPU, so the config is stood in for.
    monkeypatch.setattr(dist, "get_backend_config", lambda group=None: "cuda:nccl")
    with pytest.raises(ValueError, match=r"on cpu, but group's backend \(cuda:nccl\)"):
        cls(mlp(WIDTHS))


def test_global_token_count_is_one_scalar_all_reduce_and_checks_input(one_rank_gloo):
    assert global_token_count(7) == 7
    for bad, match in ((-1, ">= 0"), (2.5, "must be an int"), (True, "must be an int")):
        with pytest.raises(ValueError, match=match):
            global_token_count(bad)
    with pytest.raises(ValueError, match="no tokens on any rank"):
        global_token_count(0)


def test_token_mean_loss_and_token_weights_against_hand_computation():
    # Two ranks, micro-batches of (100, 300) and (2000, 100) tokens: T = 2500, and
    # averaging means gives a token of micro-batch n the weight T / (N_d k n) =
    # 2500 / (4 n): 6.25, 2.083.., 0.3125, 6.25 times its share 1 / T.
    assert token_weights([[100, 300], [2000, 100]]) == [
        [2500 / 400, 2500 / 1200],
        [2500 / 8000, 2500 / 400],
    ]
    assert token_weights([[5, 5], [5, 5]]) == [[1.0, 1.0], [1.0, 1.0]]
    loss = token_mean_loss(torch.tensor(30.0), global_tokens=12, n_ranks=4)
    assert loss.item() == 10.0  # 30 * 4 / 12
    with pytest.raises(ValueError, match="global_tokens must be an int >= 1"):
        token_mean_loss(torch.tensor(1.0), 0, 2)
    with pytest.raises(ValueError, match="n_ranks must be an int >= 1"):
        token_mean_loss(torch.tensor(1.0), 3, 0)
    for bad in ([], [[1, 2], [3]], [[0, 1]]):
        with pytest.raises(ValueError, match="counts must be"):
            token_weights(bad)


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_torch_ddp_rebuilds_buckets_in_arrival_order_with_a_1_mib_first_bucket(
    results, group
):
    # torch/nn/parallel/distributed.py (2.13): without find_unused_parameters the
    # first iteration runs with one bucket; the reducer then rebuilds the buckets in
    # the order gradients arrived, capped at _DEFAULT_FIRST_BUCKET_BYTES (1 MiB) for
    # the first bucket and bucket_cap_mb (25 MiB) for the others. A bucket closes
    # once it reaches its cap: six Linear(512, 512) layers (1 MiB + 2 KiB of fp32
    # each) give a first bucket of the last layer's bias and weight, the first
    # gradients to arrive, and a second of the other five layers.
    assert dist._DEFAULT_FIRST_BUCKET_BYTES == 2**20
    for r in results:
        rebuild = r[group]["ddp"]["rebuild"]
        assert rebuild["constructed"] == [12]
        assert rebuild["rebuilt"] == [2, 10]
        assert rebuild["first"] == ["5.bias", "5.weight"]
