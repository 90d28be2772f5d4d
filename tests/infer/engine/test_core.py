"""The engine: continuous batching, chunked prefill and preemption leave outputs exact.

Ground truth: the models chapter's ``generate_greedy`` (one request alone, whole
prompt, contiguous cache), a hand-written recompute-and-sample loop for seeded
sampling, and step counts traced by hand in the comments.
"""

import pytest
import torch
from aiinfra.infer.engine.core import Engine, RequestError, SamplingParams
from aiinfra.infer.engine.scheduler import Scheduler
from aiinfra.infer.paged.block_allocator import BlockAllocator
from aiinfra.infer.sampling import next_token
from aiinfra.infer.serve_cli import tiny_model
from aiinfra.models.transformer import generate_greedy
from torch import nn


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    # a 32-wide model: threads only add synchronisation (10x slower on a busy CPU)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def model():
    return tiny_model(0, torch.float64)


def greedy_reference(model, prompt, n):
    return generate_greedy(model, torch.tensor([prompt]), n)[0, len(prompt) :].tolist()


PROMPTS = [list(range(40, 51)), [5, 6], [100, 101, 102, 103, 104], [7, 8, 9, 10]]


def test_staggered_requests_equal_greedy_alone(model):
    eng = Engine(model, num_blocks=32, block_size=4, max_num_batched_tokens=6)
    params = SamplingParams(max_tokens=5)
    seqs = []
    for prompt in PROMPTS:  # a new request arrives every iteration
        seqs.append(eng.add_request(prompt, params))
        eng.step()
    while eng.has_unfinished():
        eng.step()
    for prompt, seq in zip(PROMPTS, seqs, strict=True):
        assert seq.output == greedy_reference(model, prompt, 5)
        assert seq.finish_reason == "length"
    assert max(eng.batch_tokens) <= 6  # the 11-token prompt went in chunks
    assert eng.scheduler.allocator.num_free_blocks == 32  # every block came back


def test_chunked_prefill_counts_and_timestamps(model):
    # 9 prompt tokens at 2 per iteration: chunks 2,2,2,2,1, so the first token comes
    # out of iteration index 4, then one token per iteration (indices 5, 6).
    eng = Engine(model, max_num_batched_tokens=2, clock=lambda: eng.num_steps)
    seq = eng.add_request(PROMPTS[0][:9], SamplingParams(max_tokens=3))
    produced = [len(eng.step()) for _ in range(7)]
    assert produced == [0, 0, 0, 0, 1, 1, 1]
    assert eng.batch_tokens == [2, 2, 2, 2, 1, 1, 1]
    assert seq.output == greedy_reference(model, PROMPTS[0][:9], 3)
    assert (seq.ttft, seq.tpot) == (4, 1.0)
    whole = Engine(model, max_num_batched_tokens=64, chunked_prefill=False)
    assert whole.generate([PROMPTS[0][:9]], SamplingParams(max_tokens=3)) == [
        seq.output
    ]
    assert whole.batch_tokens[0] == 9


def test_preemption_by_recomputation(model):
    # Blocks of 2, a pool of 6. A and B (3 tokens each) take 2 blocks each; each
    # feeds tokens 4..8 back. Token 5 takes a block each (pool empty); token 7 of A
    # finds none, so B (admitted last) is preempted once. A ends at iteration 6, B
    # prefills its 3 + 4 tokens again at 7 and ends at 8.
    # With prefix caching, B's first two blocks (freed last, so evicted last) still
    # hold its first 4 tokens when it comes back: it recomputes only 3 of its 7.
    for caching, recomputed in ((False, 7), (True, 3)):
        eng = Engine(model, num_blocks=6, block_size=2, enable_prefix_caching=caching)
        params = SamplingParams(max_tokens=6)
        a = eng.add_request([1, 2, 3], params)
        b = eng.add_request([4, 5, 6], params)
        while eng.has_unfinished():
            eng.step()
        assert (
            eng.scheduler.num_preemptions,
            a.num_preemptions,
            b.num_preemptions,
        ) == (1, 0, 1)
        assert eng.num_steps == 8
        assert eng.batch_tokens[6] == recomputed  # B's prompt + 4 outputs, less hits
        assert eng.scheduler.num_cached_tokens == 7 - recomputed
        assert a.output == greedy_reference(model, [1, 2, 3], 6)
        assert b.output == greedy_reference(model, [4, 5, 6], 6)
        assert eng.scheduler.allocator.num_free_blocks == 6


def test_continuous_batching_short_request_overtakes(model):
    eng = Engine(model, clock=lambda: eng.num_steps)
    long = eng.add_request([1, 2], SamplingParams(max_tokens=10))
    eng.step()
    eng.step()
    short = eng.add_request([3, 4], SamplingParams(max_tokens=2))
    while eng.has_unfinished():
        eng.step()
    # static batching would start the short one after the long one's 10 tokens
    assert short.finish_time == 3 < long.finish_time == 9
    assert short.output == greedy_reference(model, [3, 4], 2)
    assert long.output == greedy_reference(model, [1, 2], 10)


def test_max_num_seqs_limits_the_batch(model):
    eng = Engine(model, max_num_seqs=1)
    seqs = [eng.add_request(p, SamplingParams(max_tokens=2)) for p in PROMPTS[1:3]]
    while eng.has_unfinished():
        eng.step()
        assert len(eng.scheduler.running) <= 1
    assert eng.num_steps == 4  # one after the other: 2 + 2 iterations
    assert [s.output for s in seqs] == [
        greedy_reference(model, p, 2) for p in PROMPTS[1:3]
    ]


def test_seeded_sampling_and_stop_tokens(model):
    prompt, params = [9, 8, 7], SamplingParams(max_tokens=4, temperature=1.0, seed=7)
    g, tokens = torch.Generator().manual_seed(7), list(prompt)
    for _ in range(4):  # reference: recompute the prefix, draw with the same law
        logits = model(torch.tensor([tokens]))[:, -1]
        tokens.append(int(next_token(logits, g, temperature=1.0)[0]))
    eng = Engine(model)
    a, b = eng.add_request(prompt, params), eng.add_request(prompt, params)
    while eng.has_unfinished():
        eng.step()
    assert a.output == b.output == tokens[3:]  # one generator per request
    greedy = greedy_reference(model, prompt, 4)
    stop = eng.add_request(
        prompt, SamplingParams(max_tokens=4, stop_token_ids=(greedy[1],))
    )
    while eng.has_unfinished():
        eng.step()
    assert (stop.output, stop.finish_reason) == (
        greedy[: greedy.index(greedy[1]) + 1],
        "stop",
    )


def test_abort_frees_blocks(model):
    eng = Engine(model, num_blocks=4, block_size=4)
    seq = eng.add_request([1, 2, 3, 4, 5], SamplingParams(max_tokens=3))
    eng.step()
    assert eng.scheduler.allocator.num_free_blocks == 2
    eng.abort(seq.request_id)
    assert (eng.has_unfinished(), seq.finish_reason) == (False, "abort")
    assert eng.scheduler.allocator.num_free_blocks == 4


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"temperature": -0.5}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": 0}, "top_k"),
        ({"stop_token_ids": (-1,)}, "stop_token_ids"),
    ],
)
def test_bad_sampling_params(kwargs, param):
    with pytest.raises(RequestError, match=param) as err:
        SamplingParams(**kwargs)
    assert err.value.param == param
    with pytest.raises(TypeError, match="temperature must be a number"):
        SamplingParams(temperature="0.5")


@pytest.mark.parametrize(
    ("prompt", "max_tokens", "param", "match"),
    [
        ([], 1, "prompt", "at least one token"),
        ([1, 256], 1, "prompt", r"\[0, 256\)"),
        ([1] * 256, 1, "prompt", "max_seq_len 256"),
        ([1] * 250, 10, "max_tokens", "260 > max_seq_len"),
        ([1] * 20, 20, "max_tokens", "needs 10 KV blocks, the pool has 8"),
        ([1] * 17, 1, "prompt", "chunked prefill is off"),
    ],
)
def test_bad_requests(model, prompt, max_tokens, param, match):
    eng = Engine(
        model,
        num_blocks=8,
        block_size=4,
        max_num_batched_tokens=16,
        chunked_prefill=False,
    )
    with pytest.raises(RequestError, match=match) as err:
        eng.add_request(prompt, SamplingParams(max_tokens=max_tokens))
    assert err.value.param == param
    assert not eng.has_unfinished()


def test_bad_engine_arguments(model):
    with pytest.raises(TypeError, match="model must be an aiinfra Transformer"):
        Engine(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="num_blocks must be an int >= 1"):
        Engine(model, num_blocks=0)
    with pytest.raises(ValueError, match="max_num_batched_tokens must be an int >= 1"):
        Engine(model, max_num_batched_tokens=0)
    with pytest.raises(ValueError, match="max_num_seqs must be an int >= 1"):
        Scheduler(BlockAllocator(4, 4), 0, 8)
    eng = Engine(model)
    eng.add_request([1], SamplingParams(), request_id="x")
    with pytest.raises(RequestError, match="already queued"):
        eng.add_request([1], SamplingParams(), request_id="x")
    with pytest.raises(TypeError, match="params must be SamplingParams"):
        eng.add_request([1], {"max_tokens": 2})
