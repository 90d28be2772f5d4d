"""The data-parallel overlap bound and bucket sizing, against the cost model.

Ground truths: the H100 SXM datasheet (989 TFLOP/s dense BF16; NVLink 4 at 900 GB/s
both directions; FACTS: one 400 Gb/s NIC per GPU), backward = 4 Psi FLOPs per token
(twice forward's 2 Psi, Kaplan et al. 2020), and the ring all-reduce time of the
communication chapter's cost model (Thakur et al. 2005), which the bound must equal
at T* for any Psi.
"""

import pytest
from aiinfra.comm.cost import LinkModel, ring_all_reduce_time
from aiinfra.parallel.data.overlap import (
    H100_LINKS,
    comm_over_backward,
    latency_share,
    min_bucket_bytes,
    overlap_bound_figure,
    overlap_tokens,
    overlap_tokens_per_step,
)

PSI = 8_030_261_248  # Llama 3 8B; the bound does not depend on it


def test_bound_by_hand_for_h100_over_nvlink_and_one_400g_nic():
    # (N_d - 1)/N_d x F / W with N_d = 8: 7/8 x 989e12 / 450e9 and / 50e9.
    assert overlap_tokens(H100_LINKS["nvlink"], 8) == pytest.approx(
        7 / 8 * 989e12 / 450e9
    )
    assert overlap_tokens(H100_LINKS["nic400"], 8) == pytest.approx(17307.5)
    assert overlap_tokens(H100_LINKS["nic400"], 8, grad_bytes=4) == pytest.approx(
        2 * 17307.5
    )


def test_with_no_sync_only_the_last_micro_batch_hides_the_all_reduce():
    # k = 8 micro-batches under no_sync(): the all-reduce starts in the last
    # backward, which must last as long as it: tau* tokens in that micro-batch,
    # 8 tau* per step. A step of tau* tokens would leave 7/8 of it exposed.
    link, k = H100_LINKS["nic400"], 8
    step = overlap_tokens_per_step(link, 8, k)
    assert step == pytest.approx(k * 17307.5)
    model = LinkModel(alpha=0.0, beta=1 / link.bandwidth, gamma=0.0)
    all_reduce = ring_all_reduce_time(2 * PSI, 8, model)
    assert 4 * PSI * (step / k) / link.flops == pytest.approx(all_reduce)
    short = 4 * PSI * (overlap_tokens(link, 8) / k) / link.flops
    assert all_reduce - short == pytest.approx(all_reduce * 7 / 8)
    with pytest.raises(ValueError, match="micro_batches"):
        overlap_tokens_per_step(link, 8, 0)


@pytest.mark.parametrize("key", list(H100_LINKS))
@pytest.mark.parametrize("n_ranks", [2, 8, 64])
def test_at_the_bound_backward_time_equals_the_ring_all_reduce_time(key, n_ranks):
    link = H100_LINKS[key]
    tokens = overlap_tokens(link, n_ranks)
    backward = 4 * PSI * tokens / link.flops
    model = LinkModel(alpha=0.0, beta=1 / link.bandwidth, gamma=0.0)
    all_reduce = ring_all_reduce_time(2 * PSI, n_ranks, model)  # bf16 gradients
    assert backward == pytest.approx(all_reduce)
    assert comm_over_backward(2 * tokens, link, n_ranks) == pytest.approx(0.5)


@pytest.mark.parametrize("key", list(H100_LINKS))
def test_min_bucket_spends_exactly_the_latency_share(key):
    link = H100_LINKS[key]
    for f in (0.05, 0.1, 0.5):
        n = min_bucket_bytes(link, 8, f)
        assert latency_share(n, link, 8) == pytest.approx(f)
        assert latency_share(2 * n, link, 8) < f < latency_share(n / 2, link, 8)


def test_figure_plots_both_links_and_the_break_even_line():
    left, right = overlap_bound_figure().axes
    assert len(left.get_lines()) == 3 and len(right.get_lines()) == 3
    nvlink = left.get_lines()[0]
    at_2048 = list(nvlink.get_xdata()).index(2048)
    assert nvlink.get_ydata()[at_2048] == pytest.approx(7 / 8 * 989e12 / 450e9 / 2048)


def test_bad_input_is_rejected():
    link = H100_LINKS["nvlink"]
    with pytest.raises(ValueError, match="n_ranks must be an int >= 2"):
        overlap_tokens(link, 1)
    with pytest.raises(ValueError, match="grad_bytes must be a finite number > 0"):
        overlap_tokens(link, 8, grad_bytes=0)
    with pytest.raises(ValueError, match="tokens must be a finite number > 0"):
        comm_over_backward(0, link, 8)
    with pytest.raises(ValueError, match="latency_share must be in"):
        min_bucket_bytes(link, 8, 1.0)
    with pytest.raises(ValueError, match="n_ranks"):
        min_bucket_bytes(link, 1)
