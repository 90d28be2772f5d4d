"""Step time and MFU against hand-derived counts.

Ground truths, derived here from the architecture and the published formulas, not
from the package: training FLOPs 6 N + 12 L H d T per token (Kaplan et al. 2020;
PaLM App. B) with N counted by hand from Llama 3 8B's shapes; the 1F1B bubble
(p - 1) / m of the compute (Narayanan et al. 2021); Megatron's 4 all-reduces of
b T h values per layer (Shoeybi et al. 2019) as ring all-reduces,
2 (p - 1) alpha + 2 (p - 1) / p n beta + (p - 1) / p n gamma (Thakur et al.
2005), on NVLink 4 at 450 GB/s per direction (half of 900 GB/s, FACTS.md) with
the book's 1 us latency and 1 ps/B reduction cost.
"""

from __future__ import annotations

import pytest
from aiinfra.comm.cost import LINKS
from aiinfra.models.params import count_parameters
from aiinfra.models.presets import preset
from aiinfra.parallel.context.cost import AttentionShape, ring_bytes
from aiinfra.plan.cost import step_time
from aiinfra.plan.job import Job, Layout

H100_BF16 = 989e12  # dense, FACTS.md


def _llama8b_matmul_params() -> int:
    h, L, d, G, f, V = 4096, 32, 128, 8, 14336, 128256
    layer = h * (h + 2 * G * d) + h * h + 3 * h * f  # q k v, o, SwiGLU
    return L * layer + V * h  # and the output head


def test_compute_term_is_six_n_plus_attention_at_the_stated_efficiency():
    job = Job(preset("llama-3-8b"), "H100", 8, 2**20, 8192, efficiency=0.5)
    t = step_time(job, Layout(dp=8, tp=1, pp=1, cp=1, zero=1, micro_batch=1))
    per_token = 6 * _llama8b_matmul_params() + 12 * 32 * 32 * 128 * 8192
    assert t.compute == pytest.approx(per_token * 2**20 / 8 / (0.5 * H100_BF16))
    assert t.bubble == t.tp == t.cp == t.pp == 0
    assert t.model_flops == per_token * 2**20
    assert t.mfu == pytest.approx(t.model_flops / (t.step * 8 * H100_BF16))


def test_bubble_is_p_minus_1_over_m_of_compute_and_interleaving_divides_it():
    job = Job(preset("llama-3-8b"), "H100", 16, 2**20, 8192)  # 128 sequences
    one = step_time(job, Layout(dp=2, tp=2, pp=4, cp=1, zero=1, micro_batch=4))
    assert one.bubble == pytest.approx(one.compute * 3 / 16)  # m = 128 / (2 * 4)
    two = step_time(job, Layout(dp=2, tp=2, pp=4, cp=1, zero=1, micro_batch=4, v=2))
    assert two.bubble == pytest.approx(one.bubble / 2)


def test_tp_term_is_four_ring_all_reduces_per_layer_and_micro_batch():
    job = Job(preset("llama-3-8b"), "H100", 8, 2**20, 8192)  # 128 sequences
    t = step_time(job, Layout(dp=2, tp=4, pp=1, cp=1, zero=1, micro_batch=2))
    n = 2 * 8192 * 4096 * 2  # b T h bf16 bytes
    ring = 2 * 3 * 1e-6 + 2 * 3 / 4 * n / 450e9 + 3 / 4 * n * 1e-12  # + n gamma
    assert t.tp == pytest.approx(32 * 32 * 4 * ring)  # L layers, m = 32
    full = step_time(
        job, Layout(dp=2, tp=4, pp=1, cp=1, zero=1, micro_batch=2, recompute="full")
    )
    assert full.tp == pytest.approx(t.tp * 6 / 4)  # the second forward's two


def test_pipeline_sends_cross_nodes_on_the_network():
    job = Job(preset("llama-3-8b"), "H100", 16, 2**20, 8192)
    t = step_time(job, Layout(dp=1, tp=8, pp=2, cp=1, zero=0, micro_batch=1))
    n = 8192 * 4096 * 2 / 8  # one sequence's activations, sharded by SP
    assert t.pp == pytest.approx(2 * (5e-6 + n / 50e9))  # ib400, fill and drain


def test_zero3_moves_more_than_zero1_and_exposure_has_a_floor():
    job = Job(preset("llama-3-8b"), "H100", 64, 2**20, 8192)
    t1 = step_time(job, Layout(dp=64, tp=1, pp=1, cp=1, zero=1, micro_batch=1))
    t3 = step_time(job, Layout(dp=64, tp=1, pp=1, cp=1, zero=3, micro_batch=1))
    assert t3.dp > t1.dp > 0
    lazy = Job(preset("llama-3-8b"), "H100", 64, 2**20, 8192, exposed=1.0)
    assert step_time(lazy, Layout(64, 1, 1, 1, 1, 1)).dp == pytest.approx(t1.dp * 5)


def test_ring_attention_is_exposed_only_beyond_the_attention_compute():
    # Llama 3 8B, one sequence per micro-batch, cp = 16 over two nodes: the
    # K and V blocks of 512 tokens x 8 KV heads x 128 travel 15 times on the
    # network (5 us, 50 GB/s) forward; backward again, plus dK, dV as fp32
    # accumulators 16 hops. One layer's causal attention is half of 12 H d T
    # FLOPs per token.
    job = Job(preset("llama-3-8b"), "H100", 16, 2**20, 8192)  # 128 sequences
    t = step_time(job, Layout(dp=1, tp=1, pp=1, cp=16, zero=1, micro_batch=1))
    kv = 2 * 512 * 8 * 128
    forward = 15 * (5e-6 + kv * 2 / 50e9)
    backward = forward + 16 * (5e-6 + kv * 4 / 50e9)
    attention = 12 * 32 * 128 * 8192 * 512 / 2 / (0.6 * H100_BF16)  # F + B, causal
    per_layer = (forward - attention / 3) + (backward - 2 * attention / 3)
    assert t.cp == pytest.approx(32 * 128 * per_layer)  # L layers, m = 128
    # The bytes are the context-parallel page's ring_bytes (3.3x forward at 8).
    bytes_ = ring_bytes(AttentionShape(1, 32, 8, 128), 8192, 16)
    assert bytes_["forward"] == 15 * kv * 2
    assert bytes_["backward"] == 15 * kv * 2 + 16 * kv * 4
    # Inside one node (cp = 8 on NVLink) the blocks hide behind attention.
    inside = Job(preset("llama-3-8b"), "H100", 8, 2**20, 8192)
    assert step_time(inside, Layout(1, 1, 1, 8, 1, 1)).cp == 0


def test_fp32_gradients_are_reduced_at_four_bytes():
    # Llama 3 (Dubey et al. 2024, Sec. 3.3.2) accumulates gradients and
    # reduce-scatters them in FP32 across data-parallel workers. Hand count, 64
    # GPUs on 8 nodes, ZeRO-2: Psi / (pp tp) gradients reduce-scattered after
    # each of m micro-batches over the 64 ranks (network), bf16 parameters
    # gathered once; only the reduce-scatters double with fp32.
    cfg = preset("llama-3-8b")
    layout = Layout(dp=64, tp=1, pp=1, cp=1, zero=2, micro_batch=1)
    times = {}
    for dtype in ("bf16", "fp32"):
        job = Job(cfg, "H100", 64, 2**20, 8192, exposed=1.0, grad_dtype=dtype)
        times[dtype] = step_time(job, layout).dp
    psi = count_parameters(cfg).total
    m = 2**20 // 8192 // 64
    link = LINKS["ib400"]
    scatter = {  # each of the 63 steps sends and reduces 1/64 of the gradients
        w: 63 * (link.alpha + psi * w / 64 * (link.beta + link.gamma)) for w in (2, 4)
    }
    gather = 63 * (link.alpha + psi * 2 / 64 * link.beta)
    assert times["bf16"] == pytest.approx(m * scatter[2] + gather, rel=1e-6)
    assert times["fp32"] == pytest.approx(m * scatter[4] + gather, rel=1e-6)


# The GEMM-shape pricing. Llama 3 8B, one rank (tp = cp = 1), b = 1: m = 8192
# tokens, h = 4096, (H + 2G) d = 6144, d_ff = 14336, V = 128256. Each weight's
# forward (m, n, k), dX (m, k, n) and dW (k, n, m), their 128 x 256 tiles and waves
# of 132 SMs, by hand: the fraction of the last wave's slots in use.
_8B_WAVES = {  # weight: [(tiles, waves) of forward, dX, dW], count per step
    "qkv": ([(64 * 24, 12), (64 * 16, 8), (32 * 24, 6)], 32),
    "o": ([(64 * 16, 8), (64 * 16, 8), (32 * 16, 4)], 32),
    "up": ([(64 * 112, 55), (64 * 16, 8), (32 * 112, 28)], 32),
    "down": ([(64 * 16, 8), (64 * 56, 28), (112 * 16, 14)], 32),
    "head": ([(64 * 501, 243), (64 * 16, 8), (32 * 501, 122)], 1),
}
_8B_PARAMS = {  # weights of each matrix (n k), hand-counted
    "qkv": 4096 * 6144,
    "o": 4096 * 4096,
    "up": 4096 * 2 * 14336,
    "down": 14336 * 4096,
    "head": 128256 * 4096,
}


def test_shape_gemms_are_the_models_matmul_weights():
    from aiinfra.plan.cost import layer_gemms

    job = Job(preset("llama-3-8b"), "H100", 8, 2**20, 8192, matmul="shape")
    for tp, cp, b in [(1, 1, 1), (4, 2, 2)]:
        gemms = layer_gemms(
            job, Layout(dp=8 // (tp * cp), tp=tp, pp=1, cp=cp, zero=1, micro_batch=b)
        )
        assert {m for m, _, _, _ in gemms} == {b * 8192 // cp}
        assert sum(n * k * c for _, n, k, c in gemms) * tp == _llama8b_matmul_params()


def test_shape_pricing_is_the_flop_weighted_harmonic_mean_of_hand_waves():
    from aiinfra.plan.gemm import ceiling

    job = Job(
        preset("llama-3-8b"), "H100", 8, 2**20, 8192, efficiency=0.5, matmul="shape"
    )
    layout = Layout(dp=8, tp=1, pp=1, cp=1, zero=1, micro_batch=1)
    full = ceiling("H100")
    time = work = 0.0  # per token, in units of peak FLOP/s
    for name, (shapes, count) in _8B_WAVES.items():
        flops = 2 * _8B_PARAMS[name] * count
        for tiles, w in shapes:  # every one math-bound: k >= 4096
            time += flops / (full * tiles / (w * 132))
            work += flops
    attention = 12 * 32 * 32 * 128 * 8192
    rho = (work + attention) / (time + attention / 0.5)
    t = step_time(job, layout)
    per_token = 6 * _llama8b_matmul_params() + attention
    assert t.compute == pytest.approx(per_token * 2**20 / 8 / (rho * H100_BF16))
    assert 0.5 < rho < full  # the attention core at 0.5 pulls it down


def test_matmul_pricing_is_checked():
    with pytest.raises(ValueError, match="^matmul must"):
        Job(preset("llama-3-8b"), "H100", 8, 2**20, 8192, matmul="fast")
    with pytest.raises(ValueError, match="^matmul must"):
        Job(preset("mixtral-8x7b"), "H100", 8, 2**20, 8192, matmul="shape")


def test_compute_is_the_busiest_stage_of_stage_profile_head_included():
    from aiinfra.plan.stage_profile import stage_profile

    # Llama 3 8B: 32 layers on 4 stages of 8; the last adds the head, 6 V h per
    # token, in units of one layer's training FLOPs per token (hand-counted)
    job = Job(preset("llama-3-8b"), "H100", 32, 2**20, 8192, efficiency=0.5)
    layout = Layout(dp=8, tp=1, pp=4, cp=1, zero=1, micro_batch=1)
    head = 6 * 128256 * 4096
    per_layer = (6 * _llama8b_matmul_params() + 12 * 32 * 32 * 128 * 8192 - head) / 32
    loads = stage_profile(job, layout)
    assert [load.work for load in loads][:3] == [8, 8, 8]
    assert loads[-1].work == pytest.approx(8 + head / per_layer)
    busiest = max(load.work for load in loads) * per_layer  # FLOPs per token
    t = step_time(job, layout)  # each stage's 8 GPUs share all 2^20 tokens
    assert t.compute == pytest.approx(busiest * 2**20 / 8 / (0.5 * H100_BF16))
