"""Tensor-parallel decode at batch 1 on the decoding page, against a hand computation.

Ground truth: Llama 3 8B's 8,030,261,248 parameters (Meta's model card), less its
untied input embedding of 128,256 x 4,096, are the 7,504,924,672 weights a decode
step reads (in bf16), plus one embedding row; its cache is 2 (K, V) x 32 layers x
8 heads x 128 x 2 bytes = 131,072 bytes per token, 1,025 tokens read or written at
1,024 cached. The H100 reads HBM at 3.35 TB/s (datasheet). The ring all-reduce of
n bytes on p ranks costs 2 (p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma
(Thakur et al. 2005) with the book's NVLink: alpha = 1 us, beta = 1 / 450 GB/s,
gamma = 1 ps/B; two per layer.
"""

import pytest
from aiinfra.book.models import decoding

WEIGHTS = 2 * (8_030_261_248 - 128_256 * 4096) + 2 * 4096  # bytes, with one row
KV = 2 * 32 * 8 * 128 * 2  # bytes per token
HBM = 3.35e12


def ring(n: float, p: int) -> float:
    return 2 * (p - 1) * 1e-6 + 2 * (p - 1) / p * n / 450e9 + (p - 1) / p * n * 1e-12


@pytest.mark.parametrize("p", [1, 2, 4, 8, 16])
def test_llama_8b_step_equals_the_hand_computation(p):
    memory = (WEIGHTS / p + 1024 * KV / min(p, 8) + KV / p) / HBM
    comm = 2 * 32 * ring(4096 * 2, p) if p > 1 else 0
    assert decoding.tp_step_ms("llama-3-8b", p) == pytest.approx(
        1e3 * (memory + comm), rel=1e-9
    )
    assert decoding.tp_comm_ms("llama-3-8b", p) == pytest.approx(1e3 * comm)


def test_all_reduce_at_batch_1_is_latency_bound():
    # Llama 3 70B: d_model = 8192, 16 KiB of bf16 per all-reduce on 8 GPUs
    assert decoding.tp_all_reduce_us(8) == pytest.approx(1e6 * ring(16384, 8))
    assert decoding.tp_alpha_share(8) == pytest.approx(14e-6 / ring(16384, 8))
    assert decoding.tp_alpha_share(8) > 0.99


def test_tp_stops_paying_where_the_latency_term_meets_the_reads():
    # t(p) ~ A / p + 4 L alpha (p - 1): the best p is near sqrt(A / (4 L alpha)),
    # 6.1 for 8B (A = 4.52 ms, L = 32) and 11.4 for 70B (A = 41.6 ms, L = 80);
    # among powers of two, 8 and 16.
    assert decoding.tp_best_group("llama-3-8b") == 8
    assert decoding.tp_best_group("llama-3-70b") == 16
    for name in decoding.TP_MODELS:
        steps = [decoding.tp_step_ms(name, p) for p in decoding.TP_GROUPS]
        best = steps.index(min(steps))
        assert steps[: best + 1] == sorted(steps[: best + 1], reverse=True)
        assert steps[best:] == sorted(steps[best:])  # one minimum


def test_the_figure_draws_each_model_from_where_its_weights_fit():
    lines = decoding.tp_decode_figure().axes[0].get_lines()
    steps = [list(line.get_xdata()) for line in lines if line.get_marker() == "o"]
    comms = [list(line.get_xdata()) for line in lines if line.get_marker() == "s"]
    assert steps == [[1, 2, 4, 8, 16, 32, 64], [2, 4, 8, 16, 32, 64]]  # 70B: 141 GB
    assert comms == [[2, 4, 8, 16, 32, 64]] * 2
