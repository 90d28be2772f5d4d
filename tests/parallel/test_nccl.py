"""NaiveDDP, BucketedDDP and ZeRO 1-3 over NCCL, one GPU per rank, against one process.

The rank side is the gloo tests' own (:func:`spawned.ddp_checks`,
:func:`spawned.zero_checks`), run on min(2, GPUs) NCCL ranks: only the device that
``rank_device`` returns differs. One GPU gives a one-rank NCCL group; its collectives
still go through NCCL, which accepts only CUDA tensors, so a buffer left on the CPU
fails the run, and the device checks below fail if any state lives elsewhere.
Tolerance: one process runs on the same GPU in fp32 (PyTorch keeps TF32 off for
fp32 matmuls by default); splitting the batch over two GPUs sums the gradient in
another order, as on CPU, but cuBLAS may also pick other kernels for half the rows,
so we allow 1e-5 rather than the CPU tests' 1e-6 (parameters of size ~0.3).
"""

import pytest
import torch

from tests.parallel.spawned import nccl_results

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
ATOL = 1e-5
PSI = 7 * 16 + 17 * 16 + 17 * 3  # DDP's model, (6, 16, 16, 3): 435 parameters


@pytest.fixture(scope="module")
def results():
    return nccl_results(min(2, torch.cuda.device_count()))


def test_ddp_over_nccl_equals_one_process_and_torch_ddp(results):
    for r in results:
        ddp = r["world"]["ddp"]
        assert len(ddp["to_one_process"]) == 14
        for key in ddp["to_one_process"]:
            assert ddp["to_one_process"][key] < ATOL, key
            assert ddp["to_torch"][key] < ATOL, key
        assert all(d == 0.0 for d in ddp["between_ranks"].values())
        assert ddp["sent"] == {"NaiveDDP": 2 * PSI, "BucketedDDP": 2 * PSI}


def test_ddp_over_nccl_keeps_parameters_gradients_and_buckets_on_the_gpu(results):
    for rank, r in enumerate(results):
        devices = set(map(tuple, r["world"]["ddp"]["devices"].values()))
        assert devices == {(f"cuda:{rank}",)}


def test_zero_over_nccl_equals_single_process_adamw(results):
    for r in results:
        diffs = r["world"]["zero"]["to_one_process"]
        assert set(diffs) == {"1", "2", "3", "2+accumulation", "3+accumulation"}
        for key, diff in diffs.items():
            assert diff < ATOL, key


def test_zero_over_nccl_keeps_every_state_on_the_gpu(results):
    for rank, r in enumerate(results):
        devices = set(map(tuple, r["world"]["zero"]["devices"].values()))
        assert devices == {(f"cuda:{rank}",)}


def test_zero_over_nccl_sends_2_psi_for_stages_1_2_and_3_psi_for_stage_3(results):
    # Rajbhandari et al. 2020, Sec. 7: the counts do not depend on the backend.
    n = len(results)
    for m in results[0]["world"]["zero"]["memory"]:
        assert (m["backend"], m["world_size"]) == ("nccl", n)
        times = 3 if m["stage"] == 3 else 2
        assert m["paper_elements"] == times * m["psi_padded"]
        # Fig. 1 at Psi_pad with K = 12: the optimizer states are split N ways.
        assert m["bytes"]["optimizer"] == 12 * m["psi_padded"] // n


@pytest.mark.parametrize("plan", ["tp", "tp+sp", "torch tp", "torch tp+sp"])
def test_tensor_parallel_transformer_over_nccl_equals_the_full_model(results, plan):
    # float64 on the GPU, the same weights as the one-process model on that GPU.
    for r in results:
        found = r["world"]["tpm"][plan]
        assert found["loss"] < 1e-10
        worst = max(found["grads"], key=found["grads"].get)
        assert found["grads"][worst] < 1e-10, worst


@pytest.mark.parametrize("name", ["GPipe", "1F1B", "interleaved 1F1B", "ZB-H1"])
def test_pipeline_schedules_over_nccl_equal_the_unsplit_model(results, name):
    for r in results:
        check = r["world"]["pp"][name]
        assert check["grad"] < 1e-10
        assert check["loss"] is None or check["loss"] < 1e-10
        assert check["peak"] == check["simulated_peak"]


def test_ring_attention_and_ulysses_over_nccl_equal_full_attention(results):
    for r in results:
        cp = r["world"]["cp"]
        for method in ("ring", "ulysses"):
            for case, found in cp[method].items():
                for key, diff in found["diffs"].items():
                    assert diff < 1e-10, (method, case, key)


def test_expert_parallel_over_nccl_equals_the_single_process_layer(results):
    # Uneven all_to_all_single on NCCL: the same dispatch and combine as on gloo.
    for r in results:
        ep = r["world"]["ep"]
        layers = {k: v for k, v in ep.items() if isinstance(v, dict) and "output" in v}
        assert layers, "no expert-parallel layer was checked"
        for spec, found in layers.items():
            assert found["output"] < 1e-10 and found["input grad"] < 1e-10, spec
            worst = max(found["grads"], key=found["grads"].get)
            assert found["grads"][worst] < 1e-10, (spec, worst)
