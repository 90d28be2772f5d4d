"""Ring attention and Ulysses against full attention in one process.

Ground truth: ``torch.nn.functional.scaled_dot_product_attention`` (``enable_gqa``) on
the full ``q, k, v`` in float64, forward and backward under a random upstream
gradient; every rank builds the same full tensors from one seed and takes its shard.
Ground truth for the traffic: the closed forms of
:mod:`aiinfra.parallel.context.cost` (ring: ``p - 1`` hops of ``2 B G (T/p)
d`` elements forward, the same plus ``p`` hops of ``dK, dV`` backward, Liu et al.
2023; Ulysses: four all-to-alls each way, ``(p - 1)/p`` of each buffer, Jacobs et al.
2023, Sec. 3.2), against the bytes each rank logged per message. The rank side,
:func:`context_parallel_checks`, runs inside :mod:`spawned`'s shared 4-rank spawn:
p = 4 (the world) and p = 2 (the pairs [0, 2], [1, 3]). Load balance is checked by
brute force over the causal mask, independently of the ring's block rule.
"""

from __future__ import annotations

import functools
import time

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from aiinfra.distributed import rank_device
from aiinfra.parallel.context.cost import (
    AttentionShape,
    overlap_shard,
    rank_work,
    ring_bytes,
    ring_efficiency,
    ring_timeline,
    step_times,
    ulysses_bytes,
)
from aiinfra.parallel.context.ring_attention import check_ring_inputs, ring_attention
from aiinfra.parallel.context.ulysses import check_ulysses_inputs, ulysses_attention
from aiinfra.parallel.context.zigzag import chunk_ids, shard_sequence, unshard_sequence

from tests.parallel.spawned import gloo_results
from tests.parallel.spawned import value_error as _error

B, T, D = 1, 16, 4  # T divisible by 2p for p = 2 and 4
RING_CASES = {  # name: (H, G, causal, layout)
    "zigzag/causal/gqa": (4, 2, True, "zigzag"),
    "zigzag/full/gqa": (4, 2, False, "zigzag"),
    "contiguous/causal/gqa": (4, 2, True, "contiguous"),
    "zigzag/causal/mha": (4, 4, True, "zigzag"),
}
# H = 8; G = 1 (one K/V head, as in multi-query attention) is repeated p times,
# so each of p ranks receives one (DeepSpeed ALST's kv_replication_factor).
ULYSSES_CASES = {"causal": (True, 4), "full": (False, 4), "causal, G = 1": (True, 1)}
GROUPS = {"world": 4, "pair": 2}
ATOL = 1e-12  # float64, sums in another order


def _full(H: int, G: int, seed: int, device) -> list[torch.Tensor]:
    """Full q, k, v and an upstream gradient, the same on every rank."""
    g = torch.Generator().manual_seed(seed)
    shapes = [(B, H, T, D), (B, G, T, D), (B, G, T, D), (B, H, T, D)]
    return [torch.randn(s, generator=g, dtype=torch.float64).to(device) for s in shapes]


def _reference(q, k, v, do, causal):
    """SDPA on the full sequence: output and the gradients of q, k, v."""
    q, k, v = (x.clone().requires_grad_() for x in (q, k, v))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    o.backward(do)
    return o.detach(), q.grad, k.grad, v.grad


def _run(attend, shards):
    """Forward and backward on this rank's shards: output and gradients."""
    q, k, v, do = shards
    q, k, v = (x.clone().requires_grad_() for x in (q, k, v))
    o = attend(q, k, v)
    o.backward(do)
    return o.detach(), q.grad, k.grad, v.grad


def _diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def _gather(x: torch.Tensor, group) -> list[torch.Tensor]:
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, x.contiguous(), group=group)
    return parts


def _ring_checks(group, device) -> dict:
    r, p = dist.get_rank(group), dist.get_world_size(group)
    out = {}
    for seed, (name, (H, G, causal, layout)) in enumerate(RING_CASES.items()):
        full = _full(H, G, seed, device)
        ref = _reference(*full, causal)
        log: list = []
        shards = [shard_sequence(x, r, p, layout) for x in full]
        attend = functools.partial(
            ring_attention, group=group, causal=causal, layout=layout, log=log
        )
        ours = _run(attend, shards)
        diffs = {
            key: _diff(a, shard_sequence(b, r, p, layout))
            for key, a, b in zip(("o", "dq", "dk", "dv"), ours, ref, strict=True)
        }
        diffs["o gathered"] = _diff(
            unshard_sequence(_gather(ours[0], group), layout), ref[0]
        )
        out[name] = {"diffs": diffs, "log": log}
    return out


def _ulysses_checks(group, device) -> dict:
    r, p = dist.get_rank(group), dist.get_world_size(group)
    out = {}
    for seed, (name, (causal, G)) in enumerate(ULYSSES_CASES.items()):
        full = _full(8, G, 10 + seed, device)
        ref = _reference(*full, causal)
        log: list = []
        shards = [x.chunk(p, dim=2)[r] for x in full]  # contiguous shards
        attend = functools.partial(
            ulysses_attention, group=group, causal=causal, log=log
        )
        ours = _run(attend, shards)
        diffs = {
            key: _diff(a, b.chunk(p, dim=2)[r])
            for key, a, b in zip(("o", "dq", "dk", "dv"), ours, ref, strict=True)
        }
        out[name] = {"diffs": diffs, "log": log}
    return out


def _error_checks(group, device) -> dict:
    """Shapes that cannot work: each raises on every rank before any message."""
    log: list = []
    x = torch.ones(B, 4, 3, D, dtype=torch.float64, device=device)  # odd shard length
    y = torch.ones(B, 6, 2, D, dtype=torch.float64, device=device)  # H = 6
    z = torch.ones(B, 3, 2, D, dtype=torch.float64, device=device)  # G = 3
    w = torch.ones(B, 2, 2, D + 1, dtype=torch.float64, device=device)
    errors = {
        "ring odd shard": _error(lambda: ring_attention(x, x, x, group, log=log)),
        "ring head dim": _error(lambda: ring_attention(y, w, w, group, log=log)),
        "ulysses heads": _error(lambda: ulysses_attention(y, z, z, group, log=log)),
    }
    return {"errors": errors, "log": log}


def context_parallel_checks(group: dist.ProcessGroup | None) -> dict:
    """Every context-parallel check on ``group``, run on its ranks; plain results."""
    device = rank_device(group)
    dist.barrier(group=group)  # time our checks, not the wait for slower ranks
    start = time.perf_counter()
    out = {
        "ring": _ring_checks(group, device),
        "ulysses": _ulysses_checks(group, device),
        "bad": _error_checks(group, device),
    }
    out["seconds"] = time.perf_counter() - start
    return out


@pytest.fixture(scope="module")
def results():
    return gloo_results()


def _phase_bytes(log: list, phase: str) -> int:
    return sum(n for ph, n in log if ph == phase)


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("case", RING_CASES)
def test_ring_attention_equals_sdpa_forward_and_backward(results, group, case):
    for r in results:
        diffs = r[group]["cp"]["ring"][case]["diffs"]
        assert set(diffs) == {"o", "dq", "dk", "dv", "o gathered"}
        for key, diff in diffs.items():
            assert diff < ATOL, (case, key)


@pytest.mark.slow
@pytest.mark.parametrize(("group", "p"), GROUPS.items())
@pytest.mark.parametrize("case", RING_CASES)
def test_ring_sends_the_closed_form_bytes(results, group, p, case):
    H, G, _, _ = RING_CASES[case]
    kv_message = 2 * B * G * (T // p) * D * 8  # K and V shards, float64
    expected = ring_bytes(AttentionShape(B, H, G, D), T, p, elem_bytes=8, acc_bytes=8)
    for r in results:
        log = r[group]["cp"]["ring"][case]["log"]
        assert [ph for ph, _ in log].count("forward") == p - 1
        assert all(n == kv_message for _, n in log)  # one K/V block per message
        assert _phase_bytes(log, "forward") == expected["forward"]
        assert _phase_bytes(log, "backward") == expected["backward"]


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("case", ULYSSES_CASES)
def test_ulysses_equals_sdpa_forward_and_backward(results, group, case):
    for r in results:
        diffs = r[group]["cp"]["ulysses"][case]["diffs"]
        assert set(diffs) == {"o", "dq", "dk", "dv"}
        for key, diff in diffs.items():
            assert diff < ATOL, (case, key)


@pytest.mark.slow
@pytest.mark.parametrize(("group", "p"), GROUPS.items())
def test_ulysses_sends_four_all_to_alls_each_way(results, group, p):
    expected = ulysses_bytes(AttentionShape(B, 8, 4, D), T, p, elem_bytes=8)
    for r in results:
        log = r[group]["cp"]["ulysses"]["causal"]["log"]
        assert [ph for ph, _ in log] == ["forward"] * 4 + ["backward"] * 4
        assert _phase_bytes(log, "forward") == expected["forward"]
        assert _phase_bytes(log, "backward") == expected["backward"]


@pytest.mark.slow
@pytest.mark.parametrize(("group", "p"), GROUPS.items())
def test_ulysses_repeats_a_single_kv_head_p_times(results, group, p):
    # Hand count, float64: each all-to-all sends (p-1)/p of its buffer of
    # B (T/p) d elements per head; q and o have H = 8 heads, k and v the one
    # K/V head repeated p times (p heads each): (p-1)/p x (2 x 8 + 2 p) heads.
    shard = B * (T // p) * D * 8
    hand = (p - 1) * (2 * 8 + 2 * p) * shard // p
    for r in results:
        log = r[group]["cp"]["ulysses"]["causal, G = 1"]["log"]
        assert [ph for ph, _ in log] == ["forward"] * 4 + ["backward"] * 4
        assert _phase_bytes(log, "forward") == _phase_bytes(log, "backward") == hand
        kv = [b for ph, b in log[1:3]]  # the k and v all-to-alls, forward
        assert kv == [(p - 1) * p * shard // p] * 2  # p times one head's bytes
    assert ulysses_bytes(AttentionShape(B, 8, 1, D), T, p, 8)["forward"] == hand


@pytest.mark.slow
@pytest.mark.parametrize(("group", "p"), GROUPS.items())
def test_bad_shapes_raise_before_any_message(results, group, p):
    for r in results:
        bad = r[group]["cp"]["bad"]
        assert bad["log"] == []
        errors = bad["errors"]
        assert "shard length T/p = 3 must be even" in errors["ring odd shard"]
        assert (
            "k and v must be (B, G, T/p, d) = (1, G, 2, 4)" in errors["ring head dim"]
        )
        assert (
            f"p = {p} must divide the H = 6 query heads, and divide the G = 3 "
            "key/value heads or be a multiple of them" in errors["ulysses heads"]
        )


@pytest.mark.slow
def test_checks_are_quick(results):
    for r in results:
        for group in GROUPS:
            assert r[group]["cp"]["seconds"] < 2.0


# ---- In this process: layouts, validation, the cost model --------------------------


@pytest.mark.parametrize("p", [1, 2, 3, 4])
@pytest.mark.parametrize("layout", ["zigzag", "contiguous"])
def test_unshard_inverts_shard(p, layout):
    x = torch.arange(2 * 6 * p * 3, dtype=torch.float64).view(1, 2, 6 * p, 3)
    shards = [shard_sequence(x, r, p, layout) for r in range(p)]
    assert all(s.shape == (1, 2, 6, 3) for s in shards)
    assert torch.equal(unshard_sequence(shards, layout), x)


def test_zigzag_gives_rank_i_chunks_i_and_2p_minus_1_minus_i():
    # Llama 3 (Dubey et al. 2024, Sec. 3.3.2): "The i-th CP rank received both the
    # i-th and the (2 x CP - 1 - i)-th chunks."
    assert [chunk_ids(r, 4) for r in range(4)] == [(0, 7), (1, 6), (2, 5), (3, 4)]
    assert [chunk_ids(r, 4, "contiguous") for r in range(4)] == [
        (0, 1),
        (2, 3),
        (4, 5),
        (6, 7),
    ]


def _brute_force_work(p: int, layout: str, c: int) -> list[list[int]]:
    """Count (query, key) pairs with key <= query, rank by rank and step by step."""
    pos = torch.arange(2 * p * c).view(1, 1, -1, 1)
    held = [shard_sequence(pos, r, p, layout).flatten() for r in range(p)]
    return [
        [int((held[(r - t) % p][None, :] <= held[r][:, None]).sum()) for t in range(p)]
        for r in range(p)
    ]


@pytest.mark.parametrize("p", [2, 3, 4, 8])
@pytest.mark.parametrize("layout", ["zigzag", "contiguous"])
def test_rank_work_counts_the_causal_mask(p, layout):
    assert rank_work(p, layout, chunk=3) == _brute_force_work(p, layout, 3)


@pytest.mark.parametrize("p", [2, 4, 8])
def test_zigzag_balances_every_step_and_contiguous_does_not(p):
    zig, cont = rank_work(p, "zigzag"), rank_work(p, "contiguous")
    # Zig-zag: every rank does the same work at every step, so nobody waits.
    assert all(zig[r][t] == 2.0 for r in range(p) for t in range(p))
    assert ring_efficiency(p, "zigzag") == 1.0
    # Contiguous: rank 0 meets only later keys after step 0; the last rank works on
    # every step. Total work T^2 / 2 over p steps that each take a full block.
    assert cont[0][1:] == [0.0] * (p - 1)
    assert cont[p - 1] == [2.0] + [4.0] * (p - 1)
    assert ring_efficiency(p, "contiguous") == pytest.approx(
        2 * p**2 / (p * (4 * p - 2))
    )


def test_timeline_hides_the_transfer_only_when_compute_is_longer():
    fast = ring_timeline(compute=2.0, transfer=1.0, p=4)
    assert fast[-1][1] == 8.0  # p steps of compute, back to back
    slow = ring_timeline(compute=1.0, transfer=3.0, p=4)
    assert slow[-1][1] == 3 * 3.0 + 1.0  # each step waits for its block


def test_overlap_shard_is_where_compute_meets_transfer():
    llama = AttentionShape(batch=1, heads=32, kv_heads=8, head_dim=128)
    for link in ("nvlink", "nic400"):
        s = overlap_shard(llama, link)
        compute, transfer = step_times(llama, s, link)
        assert compute == pytest.approx(transfer, rel=1e-12)
        below, above = (
            step_times(llama, 0.9 * s, link),
            step_times(llama, 1.1 * s, link),
        )
        assert below[0] < below[1] and above[0] > above[1]


def test_ring_bytes_on_one_rank_are_zero_and_ulysses_needs_p_to_divide_heads():
    shape = AttentionShape(1, 32, 8, 128)
    assert ring_bytes(shape, 1024, 1) == {"forward": 0, "backward": 0}
    with pytest.raises(ValueError, match="p = 64 must divide the H = 32 query"):
        ulysses_bytes(shape, 1024, 64)
    with pytest.raises(ValueError, match="p = 12 must divide the H = 24 query heads"):
        ulysses_bytes(AttentionShape(1, 24, 8, 128), 1200, 12)  # 8, 12: neither
    # p = 16 > G = 8: each K/V head sent twice, (15/16) x 2 (32 + 16) shards.
    shard = 1024 // 16 * 128 * 2
    assert ulysses_bytes(shape, 1024, 16)["forward"] == 15 * 2 * (32 + 16) * shard // 16
    with pytest.raises(ValueError, match="seq 1000 must be divisible by 2p = 16"):
        ring_bytes(shape, 1000, 8)


def _t(*shape: int, dtype=torch.float64) -> torch.Tensor:
    return torch.zeros(shape, dtype=dtype)


@pytest.mark.parametrize(
    ("q", "kv", "message"),
    [
        (_t(1, 4, 5, 8), _t(1, 2, 5, 8), "shard length T/p = 5 must be even"),
        (_t(1, 4, 6, 8), _t(1, 3, 6, 8), "G = 3 key/value heads must divide H = 4"),
        (_t(1, 4, 6, 8), _t(1, 2, 4, 8), r"k and v must be \(B, G, T/p, d\)"),
        (_t(4, 6, 8), _t(1, 2, 6, 8), "q, k, v must be 4-d"),
        (_t(1, 4, 6, 8), _t(1, 2, 6, 8, dtype=torch.float32), "share a float dtype"),
    ],
)
def test_ring_rejects_bad_shards(q, kv, message):
    with pytest.raises(ValueError, match=message):
        check_ring_inputs(q, kv, kv, 4)


@pytest.mark.parametrize(
    ("heads", "kv_heads", "p", "message"),
    [
        (6, 6, 4, "p = 4 must divide the H = 6 query heads, and divide the G = 6"),
        (12, 3, 2, "p = 2 must divide the H = 12 query heads, and divide the G = 3"),
        (8, 3, 1, "G = 3 key/value heads must divide H = 8"),
    ],
)
def test_ulysses_rejects_heads_the_ranks_do_not_divide(heads, kv_heads, p, message):
    q, kv = _t(1, heads, 4, 8), _t(1, kv_heads, 4, 8)
    with pytest.raises(ValueError, match=message):
        check_ulysses_inputs(q, kv, kv, p)


@pytest.fixture(scope="module")
def one_rank():
    """A one-rank gloo world in this process, torn down after the module."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("causal", [True, False])
def test_one_rank_ring_and_ulysses_equal_sdpa_and_send_nothing(one_rank, causal):
    full = _full(4, 2, 20, "cpu")
    ref = _reference(*full, causal)
    log: list = []
    ring = _run(lambda q, k, v: ring_attention(q, k, v, causal=causal, log=log), full)
    ulysses = _run(lambda q, k, v: ulysses_attention(q, k, v, causal=causal), full)
    for ours in (ring, ulysses):
        assert max(_diff(a, b) for a, b in zip(ours, ref, strict=True)) < ATOL
    assert log == []
