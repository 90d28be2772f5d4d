"""Decoding with the KV cache equals recomputation and transformers' ``generate``;
the step FLOPs and bytes of the cost model match what is counted on a real model."""

import json

import pytest
import torch
from aiinfra import results
from aiinfra.infer.kv import decode_bench
from aiinfra.infer.kv.decode import (
    decode_bound_tokens_per_s,
    generate_recompute,
    step_flops,
)
from aiinfra.infer.step_cost import decode_step_bytes
from aiinfra.models.config import TransformerConfig
from aiinfra.models.hf.checkpoint_check import tiny_hf_model
from aiinfra.models.presets import preset
from aiinfra.models.transformer import Transformer, generate_greedy
from torch.utils.flop_counter import FlopCounterMode

TINY = TransformerConfig(
    vocab_size=64,
    d_model=32,
    n_layers=2,
    n_heads=4,
    n_kv_heads=2,
    d_ff=64,
    max_seq_len=48,
)


def _model(config: TransformerConfig = TINY, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(config).eval()


def test_cache_recompute_and_transformers_generate_give_the_same_tokens(tmp_path):
    hf_model = tiny_hf_model("LlamaForCausalLM", num_key_value_heads=2)
    hf_model.save_pretrained(tmp_path)
    model = Transformer.from_pretrained(tmp_path)
    prompt = torch.randint(128, (2, 5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = hf_model.generate(prompt, do_sample=False, max_new_tokens=20)
    cached = generate_greedy(model, prompt, 20)
    assert torch.equal(cached, expected)
    assert torch.equal(generate_recompute(model, prompt, 20), expected)
    # Not a constant continuation: the comparison sees varied tokens.
    assert len(set(expected[0, 5:].tolist())) > 3


def _counted(fn) -> int:
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        fn()
    return counter.get_total_flops()


# From one cached key up (with a single key the weighted sum is an outer product,
# which the counter does not count as a matmul).
@pytest.mark.parametrize("prefix", [1, 7, 30])
def test_step_flops_match_the_flops_counted_on_the_model(prefix):
    model = _model()
    tokens = torch.randint(64, (1, prefix + 1), generator=torch.Generator())
    caches = model.new_caches(1, 48)
    with torch.no_grad():
        if prefix:
            model(tokens[:, :prefix], caches)
    cached = _counted(lambda: model(tokens[:, prefix:], caches))
    recompute = _counted(lambda: model(tokens))
    assert cached == step_flops(TINY, prefix, cached=True)
    # The model computes the full T x T scores and masks them; the formula counts
    # the causal half, as a kernel that skips masked tiles does.
    full = step_flops(TINY, prefix, cached=False)
    n = prefix + 1
    per_pair = 4 * TINY.n_layers * TINY.n_heads * TINY.head_dim
    causal_saving = per_pair * (n * n - n * (n + 1) / 2)
    assert recompute == full + causal_saving


def test_llama_3_8b_decodes_at_most_bandwidth_over_its_weights():
    # 7.50e9 bf16 matmul weights (the 8.03e9 total less all but one row of the
    # 128256 x 4096 input table) on a 3.35 TB/s H100 SXM: about 223 tokens/s at
    # batch 1 and no context; the cache of a long context lowers it further.
    llama = preset("llama-3-8b")
    short = decode_bound_tokens_per_s(llama, 3.35e12, 1, 0)
    assert short == pytest.approx(3.35e12 / (2 * (8.03e9 - 128255 * 4096)), rel=0.01)
    assert decode_bound_tokens_per_s(llama, 3.35e12, 1, 8192) < short
    # 128 KiB of bf16 cache per token (32 layers, 8 KV heads of 128): 32 sequences
    # of 8192 tokens hold 32 GiB, four times the weights' 16 GB.
    assert (
        decode_step_bytes(llama, 32, 8192)
        - decode_step_bytes(llama, 1, 0)
        - 31 * (128 * 1024 + 2 * 4096)  # the new tokens' K, V and embedding rows
        == 32 * 8192 * 128 * 1024
    )


@pytest.mark.parametrize(
    "prompt, n, error, match",
    [
        (torch.zeros(1, 0, dtype=torch.long), 4, ValueError, "empty prompt"),
        (torch.zeros(3, dtype=torch.long), 4, ValueError, r"shape \(B, T\)"),
        (torch.zeros(1, 3), 4, TypeError, "token ids"),
        (torch.full((1, 3), 64), 4, ValueError, r"outside \[0, 64\)"),
        (torch.full((1, 3), -1), 4, ValueError, "outside"),
        (torch.zeros(1, 3, dtype=torch.long), 0, ValueError, "max_new_tokens must"),
        (torch.zeros(1, 3, dtype=torch.long), 2.0, TypeError, "max_new_tokens must"),
        (torch.zeros(1, 40, dtype=torch.long), 9, ValueError, "49 > max_seq_len 48"),
    ],
)
def test_bad_prompts_and_lengths_are_refused_by_name(prompt, n, error, match):
    with pytest.raises(error, match=match):
        generate_recompute(_model(), prompt, n)


def test_bad_cost_model_inputs_are_refused_by_name():
    with pytest.raises(ValueError, match="prefix must be >= 0"):
        step_flops(TINY, -1, cached=True)
    with pytest.raises(ValueError, match="batch must be an integer >= 1"):
        decode_step_bytes(TINY, 0, 5)
    with pytest.raises(ValueError, match="bandwidth must be > 0"):
        decode_bound_tokens_per_s(TINY, 0.0, 1, 5)


def test_the_benchmark_times_every_token_of_both_loops(tmp_path):
    cfg = decode_bench.DecodeBenchConfig(
        d_model=32,
        n_layers=1,
        n_heads=2,
        n_kv_heads=1,
        vocab_size=64,
        prompt_len=4,
        new_tokens=6,
        repeats=1,
        report_at=(3, 6),
    )
    res = decode_bench.run_bench(cfg)
    assert res["same_tokens"] is True
    assert len(res["cached_s"]) == len(res["recompute_s"]) == 6
    assert all(s > 0 for s in res["cached_s"] + res["recompute_s"])
    path = results.write(
        "decode", res, backend="cpu", world_size=1, path=tmp_path / "decode.json"
    )
    loaded = results.load("decode", "cpu", path)
    assert loaded["stamp"]["backend"] == "cpu" and json.loads(path.read_text())
    table = decode_bench.decode_bench_table(loaded)
    assert [row[0] for row in table.rows] == [3, 6]
    with pytest.raises(ValueError, match=r"n must be in 1..6"):
        decode_bench.speedup(res, 7)
    with pytest.raises(FileNotFoundError, match="aiinfra bench decode"):
        results.load("decode", "cpu", tmp_path / "none.json")


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("new_tokens", 0, "new_tokens must be an int >= 1"),
        ("repeats", 1.5, "repeats must be an int"),
        ("report_at", (0,), "report_at must be token counts in 1..new_tokens"),
        ("report_at", (), "report_at must be"),
    ],
)
def test_bad_benchmark_configs_are_refused_by_name(field, value, match):
    with pytest.raises(ValueError, match=match):
        decode_bench.DecodeBenchConfig(**{field: value})


def test_the_books_timings_show_the_cache_ten_times_faster_at_512_tokens():
    res = results.load("decode", "cpu")
    assert res["same_tokens"] is True
    assert res["config"]["new_tokens"] >= 512
    assert decode_bench.speedup(res, 512) >= 10
