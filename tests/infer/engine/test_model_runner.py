"""The packed, paged forward pass equals the model's own contiguous forward pass.

Ground truth: ``Transformer.forward`` over each sequence's whole prefix (no cache),
for Llama-style (RoPE, GQA), GPT-style (learned positions, LayerNorm, biases),
sliding-window and mixture-of-experts models; and the engine's tokens with prefix
caching equal ``generate_greedy`` on each request alone.
"""

import pytest
import torch
from aiinfra import results
from aiinfra.infer.engine import bench as engine_bench
from aiinfra.infer.engine.core import Engine, SamplingParams
from aiinfra.infer.engine.layout import Chunk, StepLayout
from aiinfra.infer.engine.model_runner import PagedModelRunner
from aiinfra.infer.paged.block_allocator import BlockAllocator
from aiinfra.models.config import TransformerConfig
from aiinfra.models.layers import RotaryEmbedding
from aiinfra.models.transformer import Transformer, generate_greedy

BASE = {"vocab_size": 64, "d_model": 32, "n_layers": 2, "n_heads": 4, "d_ff": 48}
CONFIGS = {
    "llama-gqa": {"n_kv_heads": 2},
    "gpt": {"norm": "layernorm", "mlp": "gelu", "position": "learned", "bias": True},
    "sliding-window": {"n_kv_heads": 1, "sliding_window": 5},
    "moe": {"n_experts": 4, "top_k": 2, "d_expert": 16, "n_kv_heads": 2},
}


def make_model(extra, seed=0):
    torch.manual_seed(seed)
    model = Transformer(TransformerConfig(**BASE, **extra)).double().eval()
    with torch.no_grad():
        for p in model.parameters():  # larger than GPT-2's init: varied tokens
            p.normal_(0, 0.5 / p.shape[-1] ** 0.5)
    return model


@pytest.mark.parametrize("name", CONFIGS)
def test_packed_iterations_equal_the_contiguous_forward(name):
    model = make_model(CONFIGS[name])
    block, g = 4, torch.Generator().manual_seed(1)
    runner = PagedModelRunner(model, num_blocks=40, block_size=block)
    alloc = BlockAllocator(40, block, enable_prefix_caching=False)
    seqs = [torch.randint(64, (n,), generator=g).tolist() for n in (13, 1, 7, 22)]
    done = [0] * len(seqs)
    # Iterations mix chunk sizes: whole prompts, pieces of 3 and 5, single decodes.
    for size in (5, 3, 1, 6, 1, 9):
        chunks, ids = [], []
        for i, tokens in enumerate(seqs):
            n = min(size, len(tokens) - done[i])
            if n == 0:
                continue
            if done[i] == 0:
                alloc.allocate(i, tokens[:n])
            else:
                for t in tokens[done[i] : done[i] + n]:
                    alloc.append(i, t)
            chunks.append(
                Chunk(tokens[done[i] : done[i] + n], done[i], alloc.block_tables[i])
            )
            ids.append(i)
            done[i] += n
        logits = runner.forward(chunks)
        for row, i in zip(logits, ids, strict=True):
            reference = model(torch.tensor([seqs[i][: done[i]]]))[0, -1]
            torch.testing.assert_close(row, reference, rtol=0, atol=1e-6)
    assert done == [len(s) for s in seqs]


def test_layout_of_a_mixed_step():
    # Blocks of 2. A decodes its 4th token (table [3, 1]), B runs a 3-token prompt
    # chunk (table [0, 2]), C decodes its 2nd token (table [5]). The decodes A and C
    # attend together; B's chunk on its own.
    lay = StepLayout(
        [Chunk([9], 3, [3, 1]), Chunk([4, 5, 6], 0, [0, 2]), Chunk([7], 1, [5])],
        2,
        6,
        torch.device("cpu"),
    )
    assert lay.positions.tolist() == [3, 0, 1, 2, 1]
    assert lay.write_slots.tolist() == [3, 0, 1, 4, 11]  # 1*2+1, 0, 1, 2*2+0, 5*2+1
    assert lay.last.tolist() == [0, 3, 4]
    decodes, chunk = lay.groups
    assert decodes.rows.tolist() == [0, 4] and chunk.rows.tolist() == [1, 2, 3]
    # Whole blocks are read; C's table is padded with block 0, which its mask hides.
    assert decodes.block_table.tolist() == [[3, 1], [5, 0]]
    assert decodes.key_slots.tolist() == [[6, 7, 2, 3], [10, 11, 0, 1]]
    assert decodes.visible().int().tolist() == [[[1, 1, 1, 1]], [[1, 1, 0, 0]]]
    assert chunk.key_slots.tolist() == [[0, 1, 4, 5]]
    seen = chunk.visible()[0].int().tolist()
    assert seen == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0]]
    assert chunk.visible(window=2)[0, 2].int().tolist() == [0, 1, 1, 0]
    assert lay.visible_of(1).shape == (3, 3)


def test_prefix_caching_skips_shared_blocks_and_keeps_tokens():
    model = make_model(CONFIGS["llama-gqa"])
    system = list(range(10, 22))  # 12 tokens: 3 blocks of 4
    prompts = [system + [1, 2], system + [3], system, system[:5]]
    eng = Engine(model, num_blocks=40, block_size=4, max_num_batched_tokens=64)
    params = SamplingParams(max_tokens=4)
    first = eng.add_request(prompts[0], params)
    eng.step()  # the first request fills the cache
    rest = [eng.add_request(p, params) for p in prompts[1:]]
    while eng.has_unfinished():
        eng.step()
    # 12 shared tokens; the bare system prompt reuses 2 blocks (its last token is
    # recomputed for its logits); 5 tokens share one whole block.
    assert [s.num_cached for s in rest] == [12, 8, 4]
    assert eng.scheduler.num_cached_tokens == 24
    for p, s in zip(prompts, [first, *rest], strict=True):
        expect = generate_greedy(model, torch.tensor([p]), 4)[0, len(p) :].tolist()
        assert s.output == expect
    off = Engine(model, num_blocks=40, block_size=4, enable_prefix_caching=False)
    assert off.generate(prompts, params) == [s.output for s in [first, *rest]]
    assert off.scheduler.num_cached_tokens == 0


def test_bad_inputs():
    mla = Transformer(TransformerConfig(**BASE, kv_lora_rank=8, rope_head_dim=4))
    with pytest.raises(ValueError, match="multi-head latent attention"):
        PagedModelRunner(mla, 4, 4)
    with pytest.raises(ValueError, match="multi-head latent attention"):
        Engine(mla)
    with pytest.raises(TypeError, match="aiinfra Transformer"):
        PagedModelRunner(torch.nn.Linear(2, 2), 4, 4)
    runner = PagedModelRunner(make_model(CONFIGS["llama-gqa"]), 4, 4)
    with pytest.raises(ValueError, match="at least one chunk"):
        runner.forward([])
    with pytest.raises(ValueError, match=r"chunks\[0\] must have >= 1 token"):
        runner.forward([Chunk([], 0, [0])])
    with pytest.raises(ValueError, match=r"need 2 blocks in \[0, 4\)"):
        runner.forward([Chunk([1] * 5, 0, [0])])
    with pytest.raises(ValueError, match=r"in \[0, 4\)"):
        runner.forward([Chunk([1], 0, [7])])
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 64\)"):
        runner.forward([Chunk([64], 0, [0])])
    rope = RotaryEmbedding(4, 8)
    with pytest.raises(ValueError, match=r"positions must be \(2,\) ints in \[0, 8\)"):
        rope(torch.zeros(2, 4), positions=torch.tensor([0, 8]))
    x = torch.randn(3, 4)
    torch.testing.assert_close(rope(x, positions=torch.tensor([2, 3, 4])), rope(x, 2))


SMALL = {
    "d_model": 32,
    "n_layers": 1,
    "n_heads": 2,
    "n_kv_heads": 1,
    "vocab_size": 64,
    "requests": 6,
    "prompt_min": 2,
    "prompt_max": 12,
    "output_min": 1,
    "output_max": 12,
    "batch_sizes": (1, 3),
    "static_batch": 3,
    "system_len": 12,
    "suffix_len": 3,
    "prefix_requests": 3,
    "prefix_output": 2,
    "block_size": 4,
    "token_budget": 16,
}


def test_the_engine_benchmark_runs_every_mode_to_the_same_tokens(tmp_path):
    res = engine_bench.run_bench(engine_bench.EngineBenchConfig(**SMALL))
    assert res["same_tokens"] is True
    generated = res["generated_tokens"]
    one, three = res["sweep"]["1"], res["sweep"]["3"]
    assert one["steps"] >= generated  # one sequence at a time: a token per step
    assert three["steps"] < one["steps"]
    assert res["continuous"]["steps"] <= res["static"]["steps"]
    on, off = res["prefix"]["on"], res["prefix"]["off"]
    # 3 blocks of 4 shared: the 2nd and 3rd requests skip 12 tokens each
    assert off["computed_prompt_tokens"] - on["computed_prompt_tokens"] == 24
    path = results.write(
        "engine", res, backend="cpu", world_size=1, path=tmp_path / "engine.json"
    )
    loaded = results.load("engine", "cpu", path)
    assert [r[0] for r in engine_bench.engine_table(loaded).rows] == [
        "static",
        "continuous",
    ]
    assert [r[1] for r in engine_bench.prefix_table(loaded).rows] == [
        off["computed_prompt_tokens"],
        on["computed_prompt_tokens"],
    ]
    a, b = engine_bench.step_time_fit(loaded)
    assert a + b > 0
    with pytest.raises(FileNotFoundError, match="aiinfra bench engine"):
        results.load("engine", "cpu", tmp_path / "none.json")


@pytest.mark.parametrize(
    "field, value, match",
    [
        ("requests", 0, "requests must be an int >= 1"),
        ("prompt_min", 20, r"prompt_min \(20\) must be <= prompt_max"),
        ("batch_sizes", (4, 2), "batch_sizes must be increasing"),
        ("batch_sizes", (), "batch_sizes must be increasing"),
        ("threads", True, "threads must be an int"),
    ],
)
def test_bad_engine_benchmark_configs_are_refused_by_name(field, value, match):
    with pytest.raises(ValueError, match=match):
        engine_bench.EngineBenchConfig(**(SMALL | {field: value}))


def test_the_books_engine_timings():
    res = results.load("engine", "cpu")
    assert res["same_tokens"] is True
    sweep = res["sweep"]
    largest = max(sweep, key=int)
    # batching pays on the CPU too: the fixed cost of a step is shared
    assert sweep[largest]["tokens_per_s"] >= 2 * sweep["1"]["tokens_per_s"]
    assert res["continuous"]["steps"] < res["static"]["steps"]
    assert res["continuous"]["mean_latency_s"] < res["static"]["mean_latency_s"]
    on, off = res["prefix"]["on"], res["prefix"]["off"]
    assert on["computed_prompt_tokens"] < off["computed_prompt_tokens"]
    assert sum(on["ttft_s"][1:]) < sum(off["ttft_s"][1:])
