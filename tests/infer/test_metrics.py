"""Serving metrics against hand computations and numpy; the phase cost model against
hand-counted Llama 3 8B sizes and the published ridge points (FACTS.md); the fused
step's FLOPs and bytes against the matmuls the model runs and the cache it reads."""

import json
import math
import random

import numpy as np
import pytest
import torch
from aiinfra import results
from aiinfra.accelerators import GPUS
from aiinfra.infer import phase_bench as pb
from aiinfra.infer.metrics import (
    RequestRecord,
    Slo,
    colocated_steady_state,
    goodput,
    percentile,
    run_duration,
    slo_attainment,
    summarize,
    throughput,
)
from aiinfra.infer.step_cost import fused_step
from aiinfra.models.config import TransformerConfig
from aiinfra.models.params import count_parameters
from aiinfra.models.presets import preset
from aiinfra.models.transformer import Transformer
from torch.overrides import TorchFunctionMode

# Llama 3 8B counted by hand from its config.json (h 4096, 32 layers, 32 query and
# 8 KV heads of 128, d_ff 14336, V 128256): q and o 4096^2, k and v 4096 x 1024,
# three MLP matrices 4096 x 14336 per layer, and the 128256 x 4096 head.
LLAMA_LAYER = 2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336
LLAMA_WEIGHTS = 32 * LLAMA_LAYER + 128256 * 4096  # embedding table left out
LLAMA_KV_BYTES_PER_TOKEN = 2 * 8 * 128 * 32 * 2  # K and V, 8 heads, 32 layers, bf16


def test_hand_counted_llama_weights_match_the_published_8b():
    # With the embedding and the 65 RMSNorm gains: 8.03e9, as the checkpoint has.
    total_params = LLAMA_WEIGHTS + 128256 * 4096 + 65 * 4096
    assert total_params == count_parameters(preset("llama-3-8b")).total
    assert round(total_params / 1e9, 2) == 8.03


def test_ttft_tpot_latency_by_hand():
    r = RequestRecord(1.0, [1.5, 1.7, 2.0, 2.1])
    assert r.ttft == pytest.approx(0.5)
    assert r.tpot == pytest.approx(0.6 / 3)  # three gaps after the first token
    assert r.latency == pytest.approx(1.1)
    assert r.inter_token_latencies == pytest.approx((0.2, 0.3, 0.1))
    assert r.output_tokens == 4 and isinstance(r.token_times, tuple)


def test_one_token_answer_has_no_tpot_and_meets_any_tpot_bound():
    r = RequestRecord(0.0, [0.3])
    assert r.tpot is None
    assert Slo(ttft=0.3, tpot=1e-9).met_by(r)
    assert not Slo(ttft=0.29, tpot=1.0).met_by(r)


@pytest.mark.parametrize("n", [1, 2, 7, 100])
def test_percentile_equals_numpy(n):
    rng = random.Random(n)
    xs = [rng.expovariate(1.0) for _ in range(n)]
    for q in (0, 1, 50, 90, 99, 99.9, 100):
        assert percentile(xs, q) == pytest.approx(np.percentile(xs, q), rel=1e-12)


THREE = (
    RequestRecord(0.0, [0.2, 0.3, 0.4]),  # TTFT 0.2, TPOT 0.1
    RequestRecord(0.5, [1.0, 1.5]),  # TTFT 0.5, TPOT 0.5
    RequestRecord(1.0, [1.1]),  # TTFT 0.1, no TPOT
)


def test_run_summary_by_hand():
    rs = THREE
    m = summarize(rs, qs=(50, 100))
    assert run_duration(rs) == pytest.approx(1.5)  # 0.0 to 1.5
    assert m.output_tokens == 6 and m.requests == 3
    assert m.throughput == pytest.approx(4.0) == throughput(rs)  # 6 tokens / 1.5 s
    assert m.request_rate == pytest.approx(2.0)
    assert m.ttft[50] == pytest.approx(0.2) and m.ttft[100] == pytest.approx(0.5)
    assert m.tpot[50] == pytest.approx(0.3)  # midway between 0.1 and 0.5
    assert m.latency[100] == pytest.approx(1.0)


def test_goodput_counts_only_requests_within_the_slo():
    rs = THREE
    slo = Slo(ttft=0.3, tpot=0.2)  # the first and the third meet it
    assert slo_attainment(rs, slo) == pytest.approx(2 / 3)
    assert goodput(rs, slo) == pytest.approx(2 / 1.5)
    assert goodput(rs, Slo(ttft=1.0, tpot=1.0)) == pytest.approx(3 / 1.5)


@pytest.mark.parametrize(
    ("arrival", "times", "error"),
    [
        (0.0, [], ValueError),
        (0.0, [0.2, 0.1], ValueError),
        (0.5, [0.4], ValueError),
        (-1.0, [0.1], ValueError),
        (0.0, [float("nan")], ValueError),
        (0.0, [float("inf")], ValueError),
        (0.0, ["0.1"], TypeError),
        (True, [0.1], TypeError),
        (0.0, 0.1, TypeError),
    ],
)
def test_bad_request_record_is_refused(arrival, times, error):
    with pytest.raises(error, match="arrival|token_times"):
        RequestRecord(arrival, times)


def test_bad_input_to_run_metrics_is_refused():
    with pytest.raises(ValueError, match="q must"):
        percentile([1.0], 101)
    with pytest.raises(ValueError, match="values must"):
        percentile([], 50)
    with pytest.raises(ValueError, match="tpot must be > 0"):
        Slo(ttft=1.0, tpot=0.0)
    with pytest.raises(ValueError, match="ttft must"):
        Slo(ttft=-1.0, tpot=1.0)
    with pytest.raises(ValueError, match="at least one request"):
        throughput([])
    with pytest.raises(TypeError, match="records must"):
        goodput(RequestRecord(0.0, [1.0]), Slo(1.0, 1.0))
    with pytest.raises(TypeError, match=r"records\[1\]"):
        slo_attainment([RequestRecord(0.0, [1.0]), (0.0, [1.0])], Slo(1.0, 1.0))
    with pytest.raises(ValueError, match="span 0 s"):
        run_duration([RequestRecord(0.0, [0.0])])
    with pytest.raises(ValueError, match="TPOT"):
        summarize([RequestRecord(0.0, [1.0])])


def _simulate(batch: int, output_len: int, t_p: float, t_d: float, steps: int):
    """Brute force of the colocated policy: slots, decode steps, prefills."""
    left = [1 + i % (output_len - 1) for i in range(batch)]  # staggered slots
    times: list[list[float]] = [[] for _ in range(batch)]
    arrivals, records, t = [0.0] * batch, [], 0.0
    for _ in range(steps):
        start, t = t, t + t_d  # one decode step: every slot emits a token
        for i in range(batch):
            times[i].append(t)
            left[i] -= 1
        for i in range(batch):
            if left[i] == 0:  # done: a request that arrived as the step began
                if len(times[i]) == output_len:  # only whole ones are recorded
                    records.append(RequestRecord(arrivals[i], times[i]))
                t += t_p  # its prefill emits its first token
                arrivals[i], times[i], left[i] = start, [t], output_len - 1
    return records


def test_colocated_model_equals_a_brute_force_schedule():
    B, n_out, t_p, t_d = 6, 4, 0.05, 0.01  # m = 2 prefills per decode step
    point = colocated_steady_state(B, n_out, t_p, t_d)
    records = _simulate(B, n_out, t_p, t_d, steps=60)
    assert point.tpot == pytest.approx(t_d + 2 * t_p)
    for r in records:  # decode tokens come one cycle apart; the first gap is shorter
        assert r.inter_token_latencies[1:] == pytest.approx([point.tpot] * (n_out - 2))
    mean_tpot = sum(r.tpot for r in records) / len(records)  # 2 m + 1 = 3 half-gaps
    assert mean_tpot == pytest.approx(point.tpot - 3 * t_p / (2 * (n_out - 1)))
    assert max(r.ttft for r in records) == pytest.approx(point.ttft)
    ends = sorted({round(r.token_times[-1], 9) for r in records})  # cycle ends
    assert np.diff(ends) == pytest.approx([point.tpot] * (len(ends) - 1))
    assert len(records) / len(ends) / point.tpot == pytest.approx(point.request_rate)
    assert point.throughput == pytest.approx(point.request_rate * n_out)
    assert point.goodput(Slo(1.0, point.tpot)) == point.request_rate
    assert point.goodput(Slo(1.0, 0.99 * point.tpot)) == 0.0


@pytest.mark.parametrize(
    "args",
    [(0, 4, 1.0, 1.0), (2, 1, 1.0, 1.0), (2, 4, 0.0, 1.0), (2, 4, 1.0, -1.0)],
)
def test_colocated_model_refuses_bad_input(args):
    with pytest.raises(ValueError, match="batch|output_len|prefill_s|decode_step_s"):
        colocated_steady_state(*args)


def test_decode_step_reads_the_weights_and_the_cache_once():
    c, ctx = preset("llama-3-8b"), 1000
    step = pb.total(pb.decode_kernels(c, 1, ctx))
    want = 2 * LLAMA_WEIGHTS + ctx * LLAMA_KV_BYTES_PER_TOKEN
    assert step.bytes == pytest.approx(want, rel=1e-3)
    # FACTS.md: decode is bounded by HBM bandwidth / bytes read per step.
    seconds = pb.step_time(pb.decode_kernels(c, 1, ctx), GPUS["H100"])
    assert seconds == pytest.approx(step.bytes / 3.35e12, rel=1e-3)


def test_prefill_flops_by_hand_and_compute_bound():
    c, T = preset("llama-3-8b"), 2048
    layers = 2 * T * 32 * LLAMA_LAYER + 4 * T * T * 128 * 32 * 32  # matmuls, attn
    step = pb.total(pb.prefill_kernels(c, T))
    assert step.flops == layers + 2 * 4096 * 128256  # logits of the last token
    # the layers at the compute roof; the last token's logits read the 1 GB head
    expected = layers / 989e12 + 4096 * 128256 * 2 / 3.35e12
    seconds = pb.step_time(pb.prefill_kernels(c, T), GPUS["H100"])
    assert seconds == pytest.approx(expected, rel=1e-3)


def test_ridge_points_and_the_batch_that_reaches_them():
    ridge = {"A100": 312 / 2.04, "H100": 989 / 3.35, "H200": 989 / 4.8}  # FACTS.md
    for name, value in ridge.items():
        assert GPUS[name].ridge == pytest.approx(value, rel=1e-3)
    assert round(GPUS["H100"].ridge) == 295
    c, h100 = preset("llama-3-8b"), GPUS["H100"]
    # B rows against weights of k x n: intensity B W / (W + B sum(k + n)), one
    # token of cache adding 2 KV bytes per element of (k + n); solved for the ridge.
    s = 32 * (2 * 8192 + 2 * 5120 + 3 * 18432) + 4096 + 128256 + 65536
    r = h100.ridge
    ridge_batch = math.ceil(r * LLAMA_WEIGHTS / (LLAMA_WEIGHTS - r * s))  # 333
    assert pb.total(pb.decode_kernels(c, ridge_batch, 1)).intensity >= r
    assert pb.total(pb.decode_kernels(c, ridge_batch - 1, 1)).intensity < r
    # With 8K tokens cached the caches cap the intensity near 18 FLOP/byte.
    limit = pb.total(pb.decode_kernels(c, 1 << 20, 8192)).intensity
    assert limit == pytest.approx(
        (2 * LLAMA_WEIGHTS + 4 * 32 * 128 * 8192 * 32)
        / (8192 * LLAMA_KV_BYTES_PER_TOKEN),
        rel=0.02,
    )
    assert limit < min(g.ridge for g in GPUS.values())


def test_phase_kernels_refuse_models_they_do_not_count():
    with pytest.raises(ValueError, match="dense model"):
        pb.decode_kernels(preset("deepseek-v2"), 1, 16)
    with pytest.raises(ValueError, match="batch|m must"):
        pb.decode_kernels(preset("llama-3-8b"), 0, 16)
    with pytest.raises(ValueError, match="prompt_len|m must|seq_len"):
        pb.prefill_kernels(preset("llama-3-8b"), 0)


class MatmulFlops(TorchFunctionMode):
    """2 FLOPs per multiply-add of each linear and einsum (FlopCounterMode: slow)."""

    flops = 0  # per instance once counted

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.nn.functional.linear:
            self.flops += 2 * args[0].numel() * args[1].shape[0]  # 2 k n per row
        elif func is torch.einsum:  # every index of the equation once: 2 prod
            inputs = args[0].replace(" ", "").split("->")[0].split(",")
            sizes = {}
            for letters, t in zip(inputs, args[1:], strict=True):
                sizes |= dict(zip(letters, t.shape, strict=True))
            self.flops += 2 * math.prod(sizes.values())
        return func(*args, **(kwargs or {}))


def test_fused_step_equals_a_count_of_the_matmuls_run_and_of_the_bytes():
    c = TransformerConfig(vocab_size=32, d_model=32, n_kv_heads=2, d_ff=48)  # L 2, H 4
    model = Transformer(c).eval()
    # by hand: q, o 32 x 32; k, v 32 x 16 (2 KV heads of 8); 3 MLP 32 x 48; head
    weights = 2 * (2 * 32 * 32 + 2 * 32 * 16 + 3 * 32 * 48) + 32 * 32
    T, B, ctx = 8, 3, 5
    with torch.no_grad(), MatmulFlops() as prefill:
        model(torch.zeros(1, T, dtype=torch.long), model.new_caches(1, T))
    weights += 2 * 2 * 32 + 32  # two RMSNorm gains per layer, the final one
    step = fused_step(c, T, T * T, 0, 4, None, 4, 4)  # fp32: the model scores T x T
    rows = 32 * T  # the embedding rows gathered, not the table
    assert (prefill.flops, step.bytes) == (step.flops, 4 * (weights + rows))
    caches = model.new_caches(B, ctx + 1)
    for cache in caches:
        cache.length = ctx
    with torch.no_grad(), MatmulFlops() as decode:
        model(torch.zeros(B, 1, dtype=torch.long), caches)
    kv = sum(x.k[:, :, :ctx].nbytes + x.v[:, :, :ctx].nbytes for x in caches)
    step = fused_step(c, B, B * (ctx + 1), B * ctx, 4, None, 4, 4)  # cache read once
    assert (decode.flops, step.bytes) == (step.flops, 4 * (weights + 32 * B) + kv)


TINY = dict(d_model=32, n_layers=1, n_heads=4, n_kv_heads=2, d_ff=48, vocab_size=32)
TINY |= dict(prompt_lens=(4, 8), batches=(1, 2), context=4, decode_steps=2)
TINY |= dict(repeats=1, matmul_size=16, read_mib=1)


def test_phase_bench_runs_stamps_and_loads(tmp_path):
    body = pb.run_phase_bench(pb.PhaseBenchConfig(**TINY))
    got = [(r["phase"], r["size"]) for r in body["rows"]]
    assert got == [("prefill", 4), ("prefill", 8), ("decode", 1), ("decode", 2)]
    assert all(r["seconds"] > 0 and r["tokens_per_s"] > 0 for r in body["rows"])
    assert body["roofs"]["flops"] > 0 and body["roofs"]["read_bytes_per_s"] > 0
    path = results.write(
        "phases", body, backend="cpu", world_size=1, path=tmp_path / "p.json"
    )
    loaded = results.load("phases", "cpu", path)
    assert loaded == json.loads(path.read_text())
    assert loaded["stamp"]["torch"] == torch.__version__
    table = pb.phase_bench_table(loaded)
    assert [row[:2] for row in table.rows] == [list(g) for g in got]
    with pytest.raises(FileNotFoundError, match="aiinfra bench phases"):
        results.load("phases", "cpu", tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"repeats": 0}, "repeats must be an int >= 1"),
        ({"batches": ()}, "batches must be a non-empty sequence of ints >= 1"),
        ({"prompt_lens": (4, 0)}, "prompt_lens must be a non-empty sequence of ints"),
        ({"d_ff": 1.5}, "d_ff must be an int >= 1"),
    ],
)
def test_phase_bench_config_refuses_bad_sizes(bad, match):
    with pytest.raises(ValueError, match=match):
        pb.PhaseBenchConfig(**(TINY | bad))


def test_weights_alone_put_the_ridge_batch_at_peak_over_bandwidth():
    # Two FLOPs per bf16 weight and sequence over its two bytes: B FLOPs per byte,
    # so the H100 SXM's 989 TFLOP/s over 3.35 TB/s (295.2) asks for 296 sequences.
    # The per-kernel count adds the activations each matmul reads and writes, which
    # grow with B: more sequences (the page once called that count "weights alone").
    from aiinfra.book.inference import metrics as page

    assert page.decode_ridge_batch_weights("H100") == math.ceil(989e12 / 3.35e12)
    assert page.decode_ridge_batch("H100") > page.decode_ridge_batch_weights("H100")
