"""The server under load: 1 to 256 concurrent streams, no request fails.

Ground truth: every streamed answer equals the same request's answer sent alone
(greedy), the count of requests sent, and the process's resident memory read from
``/proc``. Bounded: 2,000 requests and a deadline, on 127.0.0.1 only.
"""

import gc

import pytest
import torch
from aiinfra.infer.engine.core import Engine
from aiinfra.infer.engine.load import (
    RAMP,
    RAMP_REQUESTS,
    percentile,
    rss_bytes,
    run_load,
)
from aiinfra.infer.engine.server import InferenceServer
from aiinfra.infer.serve_cli import tiny_model
from aiinfra.models.transformer import generate_greedy

STAGES, REQUESTS = RAMP, RAMP_REQUESTS
WARM_UP, DEADLINE_S, MAX_TOKENS = 300, 300.0, 6


def bodies(n, seed):
    g = torch.Generator().manual_seed(seed)
    words = ["load", "test", "serve", "token", "queue", "tail"]
    out = []
    for _ in range(n):
        k = torch.randint(1, 5, (1,), generator=g).item()
        picks = torch.randint(len(words), (k,), generator=g).tolist()
        prompt = " ".join(words[i] for i in picks)
        out.append(
            {"model": "tiny", "prompt": prompt, "max_tokens": MAX_TOKENS}
            | {"temperature": 0}
        )
    return out


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ramp_to_256_streams_fails_no_request_and_keeps_memory_flat():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    model = tiny_model(0)
    srv = InferenceServer(
        Engine(model, num_blocks=256, max_num_seqs=32, max_num_batched_tokens=128),
        model_name="tiny",
        quiet=True,
    )
    srv.start()
    try:
        host, port = "127.0.0.1", srv.port
        run_load(host, port, bodies(WARM_UP, 1), (64,), deadline_s=DEADLINE_S)
        gc.collect()
        before = rss_bytes()
        records, seconds = run_load(
            host, port, bodies(REQUESTS, 2), STAGES, deadline_s=DEADLINE_S
        )
        gc.collect()
        after = rss_bytes()
    finally:
        srv.stop()
        torch.set_num_threads(threads)
    sent = [r for r in records if r is not None]
    failed = [r for r in sent if not r.ok]
    assert len(sent) == REQUESTS, f"the deadline cut the ramp at {len(sent)}"
    assert failed == [], failed[:3]
    assert srv.num_refused == 0
    assert not srv.loop.engine.has_unfinished() and not srv.loop._out
    # Greedy: each answer is what the model says to the prompt alone.
    for body, rec in list(zip(bodies(REQUESTS, 2), records, strict=True))[
        :: REQUESTS // 20
    ]:
        ids = list(body["prompt"].encode())
        out = generate_greedy(model, torch.tensor([ids]), MAX_TOKENS)[0, len(ids) :]
        assert rec.text == bytes(out.tolist()).decode("utf-8", "replace")
    ttft = [r.ttft_s for r in sent if r.ttft_s is not None]
    p50, p99 = percentile(ttft, 50), percentile(ttft, 99)
    growth = (after - before) / 2**20
    print(
        f"\n{len(sent)} requests, ramp {STAGES[0]}-{STAGES[-1]} streams, "
        f"{seconds:.1f} s: 0 failed, TTFT p50 {1e3 * p50:.0f} ms, p99 "
        f"{1e3 * p99:.0f} ms; resident memory {before / 2**20:.0f} -> "
        f"{after / 2**20:.0f} MiB"
    )
    assert growth < 64, f"resident memory grew by {growth:.0f} MiB"
