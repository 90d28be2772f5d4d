"""The engine against transformers on one checkpoint (``bench engine --against``).

``aiinfra bench engine --against transformers`` builds a random-weight Llama
checkpoint (a ``transformers`` ``LlamaForCausalLM`` saved with a byte tokenizer: token
``i`` is byte ``i``, as the server's tokenizer), loads it into both, and runs the same
prompts through:

- three offline paths: the engine (:class:`~aiinfra.infer.engine.core.Engine`),
  transformers' continuous batching (``generate_batch``'s manager, given the same
  KV pool, block size and token budget as the engine) and transformers' padded
  ``generate`` (left-padded batches, each run to its longest request);
- two servers, each in its own process: ``aiinfra serve`` and, where the installed
  transformers has it and its server's packages (FastAPI, uvicorn) are there,
  ``transformers serve --continuous-batching``; a load of streamed completions at a
  fixed number of concurrent clients, timed from the client (TTFT, time per token).

Two regimes: *equal* output lengths (every request generates ``output_len`` tokens,
no EOS), at each batch size, and *varying* lengths (drawn uniformly from
``vary_min .. vary_max``) with more requests than batch slots, which is what
continuous batching is for: a static batch runs until its longest request ends, the
engine refills a slot as soon as one frees. Greedy decoding: every path must give
every request the same tokens, which the result records. Timing: one intra-op thread,
the systems alternated within each repeat, the best of ``repeats`` (this is a
shared machine: its load average is recorded with every run). A profile of the
engine's decode step at the largest batch says where the time goes.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from aiinfra.infer.engine.core import Engine, SamplingParams
from aiinfra.infer.engine.load import percentile, run_load
from aiinfra.models.transformer import Transformer
from aiinfra.report import Table

KIND = "engine_hf"  # the results kind: docs/_data/bench/engine_hf-cpu.json
SYSTEMS = ("engine", "generate_batch", "generate")  # offline paths, in run order
SERVERS = ("aiinfra serve", "transformers serve")
_POSITIVE = (
    *("d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "output_len"),
    *("prompt_min", "prompt_max", "vary_min", "vary_max", "vary_requests"),
    *("block_size", "token_budget", "repeats", "threads", "server_requests"),
    *("concurrency", "server_max_tokens", "profile_steps"),
)


@dataclass(frozen=True)
class CompareConfig:
    """The checkpoint and the runs; the defaults are a smoke size (seconds).

    ``nox -s bench`` passes the full sizes (:data:`FULL`).

    Raises:
        ValueError: a size that is not an int >= 1, a minimum above its maximum,
            batch sizes not increasing, or heads that do not divide.
    """

    d_model: int = 256  # h
    n_layers: int = 4  # L
    n_heads: int = 8  # H
    n_kv_heads: int = 2  # G
    d_ff: int = 688  # Llama's 8h/3 rounded up to 16
    batches: tuple[int, ...] = (1, 4)  # equal-length regime: requests = slots
    prompt_min: int = 38  # prompt lengths, uniform, printable ASCII bytes
    prompt_max: int = 121
    output_len: int = 16  # equal-length regime
    vary_min: int = 8  # varying regime: output lengths uniform in [min, max]
    vary_max: int = 32
    vary_requests: int = 8  # at the largest batch
    block_size: int = 16  # B
    token_budget: int = 2048  # max_num_batched_tokens (transformers' max_batch_tokens)
    repeats: int = 1
    threads: int = 1  # intra-op threads of every system
    servers: bool = True  # run the two servers
    server_requests: int = 8
    concurrency: int = 4  # clients at once
    server_max_tokens: int = 16
    profile_steps: int = 8  # decode steps profiled at the largest batch
    seed: int = 0

    def __post_init__(self) -> None:
        for name in _POSITIVE:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        for low, high in (("prompt_min", "prompt_max"), ("vary_min", "vary_max")):
            if getattr(self, low) > getattr(self, high):
                raise ValueError(
                    f"{low} ({getattr(self, low)}) must be <= {high} "
                    f"({getattr(self, high)})"
                )
        b = self.batches
        if not b or not all(isinstance(s, int) and s >= 1 for s in b):
            raise ValueError(f"batches must be ints >= 1, got {b!r}")
        if list(b) != sorted(set(b)):
            raise ValueError(f"batches must be increasing, got {b!r}")
        if self.n_heads % self.n_kv_heads or self.d_model % self.n_heads:
            raise ValueError(
                f"n_heads ({self.n_heads}) must divide d_model ({self.d_model}) and "
                f"be a multiple of n_kv_heads ({self.n_kv_heads})"
            )

    @property
    def max_seq_len(self) -> int:
        """Room for the longest prompt and the longest output."""
        longest = max(self.output_len, self.vary_max, self.server_max_tokens)
        return self.prompt_max + longest


# The sizes `nox -s bench` measures (the workload: batches 1, 8, 32 of 64
# tokens; 96 requests of 8-256 tokens at 32 slots; 96 streamed requests from 32
# clients).
FULL = {
    "batches": (1, 8, 32),
    "output_len": 64,
    "vary_min": 8,
    "vary_max": 256,
    "vary_requests": 96,
    "repeats": 3,
    "server_requests": 96,
    "concurrency": 32,
    "server_max_tokens": 64,
    "profile_steps": 16,
}


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's map of the 256 bytes to printable characters (byte-level BPE)."""
    keep = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def build_checkpoint(cfg: CompareConfig, directory: str | Path) -> Path:
    """Save a random ``LlamaForCausalLM`` and a byte tokenizer into ``directory``.

    Matrices are drawn from ``N(0, 0.25 / n)`` (``n`` their last dimension, so that
    greedy tokens vary), norm gains from ``1 + N(0, 0.01)``, by a generator seeded
    with ``cfg.seed``. No BOS, no EOS: every request runs to its ``max_tokens``.
    """
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    out = Path(directory)
    config = transformers.LlamaConfig(
        vocab_size=256,
        hidden_size=cfg.d_model,
        num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads,
        num_key_value_heads=cfg.n_kv_heads,
        intermediate_size=cfg.d_ff,
        max_position_embeddings=cfg.max_seq_len,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    g = torch.Generator().manual_seed(cfg.seed)
    with torch.no_grad():
        for p in model.parameters():
            z = torch.randn(p.shape, generator=g)
            p.copy_(z * 0.5 / math.sqrt(p.shape[-1]) if p.dim() > 1 else 1 + 0.1 * z)
    model.save_pretrained(out)
    chars = _bytes_to_unicode()
    tok = Tokenizer(models.BPE(vocab={chars[b]: b for b in range(256)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(
        add_prefix_space=False, use_regex=False
    )
    tok.decoder = decoders.ByteLevel()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok).save_pretrained(out)
    return out


def workload(cfg: CompareConfig) -> dict[str, Any]:
    """The prompts (printable ASCII bytes) and output lengths of both regimes."""
    g = torch.Generator().manual_seed(cfg.seed + 1)

    def prompts(n: int) -> list[list[int]]:
        lens = torch.randint(cfg.prompt_min, cfg.prompt_max + 1, (n,), generator=g)
        return [torch.randint(32, 127, (int(t),), generator=g).tolist() for t in lens]

    vary = torch.randint(
        cfg.vary_min, cfg.vary_max + 1, (cfg.vary_requests,), generator=g
    )
    return {
        "equal": prompts(max(cfg.batches)),
        "vary": prompts(cfg.vary_requests),
        "vary_lengths": vary.tolist(),
        "server": prompts(cfg.server_requests),
    }


class _Timer:
    """Wall and process CPU seconds of a block."""

    def __enter__(self) -> _Timer:
        self.load = os.getloadavg()[0]
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._wall
        self.cpu = time.process_time() - self._cpu


def run_engine(
    model: Transformer,
    cfg: CompareConfig,
    prompts: Sequence[list[int]],
    lengths: Sequence[int],
    slots: int,
) -> list[list[int]]:
    """The engine, ``slots`` sequences at once, every request queued at the start."""
    blocks = -(-cfg.max_seq_len // cfg.block_size) * slots
    engine = Engine(
        model,
        num_blocks=blocks,
        block_size=cfg.block_size,
        max_num_seqs=slots,
        max_num_batched_tokens=cfg.token_budget,
        enable_prefix_caching=False,
    )
    seqs = [
        engine.add_request(p, SamplingParams(max_tokens=n))
        for p, n in zip(prompts, lengths, strict=True)
    ]
    while engine.has_unfinished():
        engine.step()
    return [s.output for s in seqs]


def run_generate(
    hf: Any, prompts: Sequence[list[int]], lengths: Sequence[int], slots: int
) -> list[list[int]]:
    """Padded ``generate``: batches of ``slots`` in order, each to its longest."""
    out = []
    for i in range(0, len(prompts), slots):
        batch, want = prompts[i : i + slots], lengths[i : i + slots]
        T = max(len(p) for p in batch)
        ids = torch.tensor([[0] * (T - len(p)) + p for p in batch])
        mask = torch.tensor([[0] * (T - len(p)) + [1] * len(p) for p in batch])
        n = max(want)
        with torch.no_grad():
            gen = hf.generate(
                ids,
                attention_mask=mask,
                do_sample=False,
                max_new_tokens=n,
                min_new_tokens=n,
                pad_token_id=0,
            )
        out += [row[T : T + k] for row, k in zip(gen.tolist(), want, strict=True)]
    return out


def run_generate_batch(
    hf: Any,
    cfg: CompareConfig,
    prompts: Sequence[list[int]],
    lengths: Sequence[int],
    slots: int,
) -> list[list[int]]:
    """Continuous batching of transformers, with the engine's pool and budget.

    Its defaults on a CPU size the KV pool badly (about 100 tokens/s at 32
    sequences here); given the engine's pool it runs several times faster.
    """
    import transformers

    gen = transformers.GenerationConfig(
        do_sample=False, max_new_tokens=max(lengths), eos_token_id=-1
    )
    cb = transformers.ContinuousBatchingConfig(
        page_size=cfg.block_size,
        num_blocks=-(-cfg.max_seq_len // cfg.block_size) * slots,
        max_batch_tokens=cfg.token_budget,
        max_requests_per_batch=slots,
    )
    with hf.continuous_batching_context_manager(
        generation_config=gen, continuous_batching_config=cb, warmup=False
    ) as manager:
        ids = [
            manager.add_request(p, max_new_tokens=n, eos_token_id=-1)
            for p, n in zip(prompts, lengths, strict=True)
        ]
        results: dict[str, list[int]] = {}
        deadline = time.monotonic() + 3600
        while len(results) < len(ids) and time.monotonic() < deadline:
            r = manager.get_result(timeout=1)
            if r is not None and r.is_finished():
                results[r.request_id] = list(r.generated_tokens)
    return [results.get(i, []) for i in ids]


def _offline(
    cfg: CompareConfig,
    model: Transformer,
    hf: Any,
    prompts: Sequence[list[int]],
    lengths: Sequence[int],
    slots: int,
    progress: Callable[[str], None],
    label: str,
) -> dict[str, Any]:
    """Each system ``repeats`` times, alternated; best wall time, tokens compared."""
    runs = {
        "engine": lambda: run_engine(model, cfg, prompts, lengths, slots),
        "generate_batch": lambda: run_generate_batch(hf, cfg, prompts, lengths, slots),
        "generate": lambda: run_generate(hf, prompts, lengths, slots),
    }
    times: dict[str, list[dict[str, float]]] = {k: [] for k in runs}
    outputs: dict[str, list[list[int]]] = {}
    for r in range(cfg.repeats):
        for name, fn in runs.items():
            progress(f"{label}: {name}, repeat {r + 1}/{cfg.repeats}")
            with _Timer() as t:
                outputs[name] = fn()
            times[name].append({"wall_s": t.wall, "cpu_s": t.cpu, "load": t.load})
    tokens = sum(lengths)
    row: dict[str, Any] = {"slots": slots, "requests": len(prompts), "tokens": tokens}
    for name in runs:
        best = min(times[name], key=lambda x: x["wall_s"])
        row[name] = {
            "tokens_per_s": tokens / best["wall_s"],
            "cpu_tokens_per_s": tokens / min(x["cpu_s"] for x in times[name]),
            "runs": times[name],
            "same_tokens": outputs[name] == outputs["engine"],
        }
    return row


def profile_engine(
    model: Transformer, cfg: CompareConfig, prompts: Sequence[list[int]], slots: int
) -> dict[str, float]:
    """Where a decode step of ``slots`` sequences spends its time, ms per step.

    The engine is brought to ``slots`` decoding sequences; then ``profile_steps``
    steps are timed with a clock around the scheduler, the packing of the step's
    index tensors (``StepLayout``), the model's forward pass and the batched
    sampling, and as many again under the torch profiler, whose operators' own CPU
    time splits the forward pass (less the packing) into matmuls, the paged gather
    and write (``index_select``, ``index_copy_``), the attention kernel (SDPA), the
    other operators (norms, RoPE, SiLU, residuals) and the Python and dispatch
    between them, in proportion.
    """
    from torch.profiler import ProfilerActivity, profile, record_function

    from aiinfra.infer.engine import model_runner

    n = cfg.profile_steps
    engine = Engine(
        model,
        num_blocks=-(-cfg.max_seq_len // cfg.block_size) * slots,
        block_size=cfg.block_size,
        max_num_seqs=slots,
        max_num_batched_tokens=max(cfg.token_budget, sum(map(len, prompts[:slots]))),
        enable_prefix_caching=False,
    )
    for p in prompts[:slots]:
        engine.add_request(p, SamplingParams(max_tokens=2 * n + 4))
    for _ in range(3):  # the prefill, then decodes
        engine.step()
    spent: dict[str, float] = {}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kw: Any) -> Any:
            start = time.perf_counter()
            with record_function(name):
                out = fn(*args, **kw)
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - start
            return out

        return wrapped

    layout = model_runner.StepLayout
    engine.scheduler.schedule = timed("schedule", engine.scheduler.schedule)
    engine.runner.forward = timed("forward", engine.runner.forward)
    engine._sample = timed("sample", engine._sample)
    model_runner.StepLayout = timed("pack", layout)  # type: ignore[misc]
    try:
        with _Timer() as plain:
            for _ in range(n):
                engine.step()
        ms = {k: 1e3 * v / n for k, v in spent.items()}
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(n):
                engine.step()
    finally:
        model_runner.StepLayout = layout  # type: ignore[misc]
    groups = {
        "matmuls": ("aten::mm", "aten::addmm", "aten::bmm"),
        "paged gather and write": ("aten::index_select", "aten::index_copy_"),
        "attention kernel (SDPA)": (
            "aten::_scaled_dot_product_flash_attention_for_cpu",
        ),
    }
    own = dict.fromkeys([*groups, "other operators"], 0.0)
    region: dict[str, float] = {}
    for ev in prof.key_averages():
        if ev.key in spent:
            region[ev.key] = ev.cpu_time_total
        elif ev.key.startswith("aten::"):
            group = next((g for g, k in groups.items() if ev.key in k), None)
            own[group or "other operators"] += ev.self_cpu_time_total
    step = 1e3 * plain.wall / n
    model = ms["forward"] - ms["pack"]  # the forward pass less the packing
    profiled = max(region["forward"] - region.get("pack", 0.0), 1e-9)
    out = {"schedule": ms["schedule"], "pack": ms["pack"]}
    for g, t in own.items():
        out[g] = model * min(t / profiled, 1.0)
    out["Python and dispatch"] = max(0.0, model - sum(out[g] for g in own))
    out["sample"] = ms["sample"]
    out["engine bookkeeping"] = max(
        0.0, step - ms["schedule"] - ms["forward"] - ms["sample"]
    )
    out["step"] = step
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hf_server_missing() -> str | None:
    """Why ``transformers serve`` cannot run here, or ``None`` if it can."""
    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        return (
            f"transformers serve needs {' and '.join(missing)}, not installed: pip "
            "install 'transformers[serving]'"
        )
    if shutil.which("transformers", path=str(Path(sys.executable).parent)) is None:
        return "the transformers command is not installed next to this Python"
    return None


@contextlib.contextmanager
def _server(
    which: str, ckpt: Path, cfg: CompareConfig, log: Path
) -> Iterator[tuple[int, str]]:
    """Start one server in its own process; yield its port and model name."""
    port = _free_port()
    env = os.environ | {"OMP_NUM_THREADS": str(cfg.threads), "HF_HUB_OFFLINE": "1"}
    slots = cfg.concurrency
    blocks = -(-cfg.max_seq_len // cfg.block_size) * slots
    if which == "aiinfra serve":
        cmd = [
            *(sys.executable, "-m", "aiinfra.cli", "serve", "--model", str(ckpt)),
            *("--port", str(port), "--max-num-seqs", str(slots)),
            *("--num-blocks", str(blocks), "--block-size", str(cfg.block_size)),
            *("--max-num-batched-tokens", str(cfg.token_budget)),
            "--no-prefix-caching",
        ]
        health = f"http://127.0.0.1:{port}/v1/models"
    else:
        exe = shutil.which("transformers", path=str(Path(sys.executable).parent))
        cmd = [
            *(str(exe), "serve", "--continuous-batching", "--device", "cpu"),
            *("--host", "127.0.0.1", "--port", str(port)),
            *("--cb-block-size", str(cfg.block_size), "--cb-num-blocks", str(blocks)),
            *("--cb-max-batch-tokens", str(cfg.token_budget), str(ckpt)),
        ]
        health = f"http://127.0.0.1:{port}/health"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{which} exited with {proc.returncode}: {log.read_text()[-500:]}"
                )
            try:
                with urllib.request.urlopen(health, timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{which} did not start within 180 s")
            time.sleep(0.5)
        yield port, str(ckpt)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _serve_runs(
    cfg: CompareConfig,
    ckpt: Path,
    prompts: Sequence[list[int]],
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Both servers, alternated ``repeats`` times; the best run of each."""
    missing = hf_server_missing()
    names = [s for s in SERVERS if s == "aiinfra serve" or missing is None]
    best: dict[str, dict[str, Any]] = {}
    texts: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(cfg.repeats):
            for which in names:
                progress(f"server: {which}, repeat {r + 1}/{cfg.repeats}")
                with _server(which, ckpt, cfg, Path(tmp) / "server.log") as (port, m):
                    bodies = [
                        {
                            "model": m,
                            "prompt": bytes(p).decode("ascii"),
                            "max_tokens": cfg.server_max_tokens,
                            "temperature": 0,
                        }
                        for p in prompts
                    ]
                    warm = bodies[: min(4, len(bodies))]
                    run_load("127.0.0.1", port, warm, (len(warm),), deadline_s=300)
                    load = os.getloadavg()[0]
                    records, seconds = run_load(
                        "127.0.0.1",
                        port,
                        bodies,
                        (cfg.concurrency,),
                        deadline_s=1800,
                    )
                done = [x for x in records if x is not None]
                ok = [x for x in done if x.ok]
                ttft = [x.ttft_s for x in ok if x.ttft_s is not None]
                tpot = [
                    (x.latency_s - x.ttft_s) / (x.tokens - 1)
                    for x in ok
                    if x.ttft_s is not None and x.tokens > 1
                ]
                tokens = sum(x.tokens for x in ok)
                run = {
                    "requests": len(bodies),
                    "failed": len(bodies) - len(ok),
                    "seconds": seconds,
                    "tokens": tokens,
                    "tokens_per_s": tokens / seconds,
                    "ttft_p50_s": percentile(ttft, 50) if ttft else None,
                    "ttft_p99_s": percentile(ttft, 99) if ttft else None,
                    "tpot_mean_s": sum(tpot) / len(tpot) if tpot else None,
                    "load": load,
                }
                if (
                    which not in best
                    or run["tokens_per_s"] > best[which]["tokens_per_s"]
                ):
                    best[which] = run
                texts[which] = [x.text if x is not None else "" for x in records]
    out: dict[str, Any] = {"skipped": missing, "runs": best}
    if len(texts) == 2:
        out["same_text"] = texts["aiinfra serve"] == texts["transformers serve"]
    out["texts"] = texts.get("aiinfra serve", [])
    return out


def run_compare(
    cfg: CompareConfig, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Build the checkpoint, run every path and server; the results body.

    Returns:
        ``config``; ``equal``: per batch size, each system's best tokens/s (wall
        and CPU), its runs and whether its tokens equal the engine's; ``vary``: the
        same for the varying regime; ``servers``: per server its best run
        (failures, tokens/s, TTFT p50/p99, mean time per token) and whether the two
        servers streamed the same text; ``same_tokens``: all of it agreed;
        ``profile``: the engine's decode step, ms per category; ``versions``.
    """
    import transformers

    say = progress or (lambda message: None)
    w = workload(cfg)
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            say("building the checkpoint")
            ckpt = build_checkpoint(cfg, Path(tmp) / "checkpoint")
            model = Transformer.from_pretrained(ckpt).eval()
            hf = transformers.LlamaForCausalLM.from_pretrained(ckpt).eval()
            run_engine(model, cfg, w["equal"][:2], [4, 4], 2)  # warm-up
            run_generate(hf, w["equal"][:2], [4, 4], 2)
            equal = {}
            for b in cfg.batches:
                equal[str(b)] = _offline(
                    cfg,
                    model,
                    hf,
                    w["equal"][:b],
                    [cfg.output_len] * b,
                    b,
                    say,
                    f"equal lengths, batch {b}",
                )
            top = max(cfg.batches)
            vary = _offline(
                cfg,
                model,
                hf,
                w["vary"],
                w["vary_lengths"],
                top,
                say,
                "varying lengths",
            )
            say(f"profiling the engine's decode step at {top} sequences")
            prof = profile_engine(model, cfg, w["equal"], top)
            servers = (
                _serve_runs(cfg, ckpt, w["server"], say)
                if cfg.servers
                else {"skipped": "not asked (servers off)", "runs": {}}
            )
            if cfg.servers:
                alone = run_engine(
                    model,
                    cfg,
                    w["server"],
                    [cfg.server_max_tokens] * len(w["server"]),
                    cfg.concurrency,
                )
                decoded = [bytes(t).decode("utf-8", "replace") for t in alone]
                servers["same_as_offline"] = servers.pop("texts") == decoded
            else:
                servers.pop("texts", None)
    finally:
        torch.set_num_threads(threads)
    offline_same = all(
        row[s]["same_tokens"] for row in [*equal.values(), vary] for s in SYSTEMS
    )
    return {
        "config": asdict(cfg) | {"dtype": "float32", "max_seq_len": cfg.max_seq_len},
        "equal": equal,
        "vary": vary,
        "servers": servers,
        "same_tokens": offline_same
        and servers.get("same_text", True)
        and servers.get("same_as_offline", True),
        "profile": prof,
        "versions": _versions(),
    }


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("transformers", "fastapi", "uvicorn", "openai"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def speedups(res: dict[str, Any]) -> dict[str, float]:
    """The engine's throughput over each system's, per regime and batch.

    Keys ``"generate@8"``, ``"generate_batch@vary"``, ...
    """
    out = {}
    rows = [*((b, r) for b, r in res["equal"].items()), ("vary", res["vary"])]
    for key, row in rows:
        for s in SYSTEMS[1:]:
            out[f"{s}@{key}"] = row["engine"]["tokens_per_s"] / row[s]["tokens_per_s"]
    return out


def _stamp(res: dict[str, Any]) -> str:
    st, c = res["stamp"], res["config"]
    return (
        f"Llama h = {c['d_model']}, L = {c['n_layers']}, H = {c['n_heads']}, "
        f"G = {c['n_kv_heads']}, d_ff = {c['d_ff']}, V = 256, fp32; prompts "
        f"{c['prompt_min']}-{c['prompt_max']} tokens; best of {c['repeats']}, "
        f"{c['threads']} thread(s) on {st['cpu']} ({st['cpu_count']} cores, load "
        f"{st['load_1min']}); transformers {res['versions']['transformers']}, torch "
        f"{st['torch']}; {st['date']}"
    )


def offline_table(res: dict[str, Any]) -> Table:
    """Generated tokens/s of the three offline paths, per regime and batch."""
    c, rows = res["config"], []
    for key, row in [*res["equal"].items(), ("vary", res["vary"])]:
        label = (
            f"{c['output_len']} tokens each, batch {key}"
            if key != "vary"
            else f"{row['requests']} requests of {c['vary_min']}-{c['vary_max']} "
            f"tokens, {row['slots']} slots"
        )
        rows.append(
            [
                label,
                *(round(row[s]["tokens_per_s"]) for s in SYSTEMS),
                round(
                    row["engine"]["tokens_per_s"] / row["generate"]["tokens_per_s"], 2
                ),
                "yes" if all(row[s]["same_tokens"] for s in SYSTEMS) else "no",
            ]
        )
    note = (
        "Generated tokens per second, greedy, no EOS; the engine and transformers' "
        "continuous batching share the KV pool, block size and token budget; padded "
        "generate runs batches of the slot count, each to its longest request. Same "
        "tokens: every path gave every request the engine's tokens."
    )
    return Table(
        [
            "workload",
            "engine",
            "generate_batch",
            "padded generate",
            "engine / generate",
            "same tokens",
        ],
        rows,
        note,
        _stamp(res),
        words=(),
    )


def server_table(res: dict[str, Any]) -> Table:
    """The two servers under the same streamed load, from the client."""
    c, rows = res["config"], []
    for name in SERVERS:
        run = res["servers"]["runs"].get(name)
        if run is None:
            continue
        rows.append(
            [
                name,
                f"{run['failed']} / {run['requests']}",
                round(run["tokens_per_s"]),
                round(1e3 * run["ttft_p50_s"]),
                round(1e3 * run["ttft_p99_s"]),
                round(1e3 * run["tpot_mean_s"], 1),
            ]
        )
    note = (
        "Streamed /v1/completions, greedy, each server in its own process with one "
        "thread; TTFT and time per output token measured by the client."
    )
    stamp = (
        f"{c['server_requests']} requests of {c['server_max_tokens']} tokens from "
        f"{c['concurrency']} concurrent clients; " + _stamp(res)
    )
    return Table(
        [
            "server",
            "failed",
            "tokens/s",
            "TTFT p50 (ms)",
            "TTFT p99 (ms)",
            "ms per token",
        ],
        rows,
        note,
        stamp,
        words=(),
    )


PROFILE_PARTS = (
    "schedule",
    "pack",
    "matmuls",
    "paged gather and write",
    "attention kernel (SDPA)",
    "other operators",
    "Python and dispatch",
    "sample",
    "engine bookkeeping",
)


def profile_table(res: dict[str, Any]) -> Table:
    """Where the engine's decode step goes at the largest batch, ms per step."""
    p, c = res["profile"], res["config"]
    rows = [[k, round(p[k], 2), round(100 * p[k] / p["step"])] for k in PROFILE_PARTS]
    note = (
        "One decode step of the engine: the scheduler, the packing of the step's "
        "index tensors, the sampling and the rest of the step timed by a clock; the "
        "forward pass split by the torch profiler's operator times."
    )
    stamp = (
        f"{max(c['batches'])} sequences, {c['profile_steps']} steps, "
        f"{p['step']:.2f} ms a step; " + _stamp(res)
    )
    return Table(["part", "ms per step", "% of the step"], rows, note, stamp)


def summary(res: dict[str, Any]) -> str:
    """One line per target: the engine's speed-ups."""
    s = speedups(res)
    return json.dumps({k: round(v, 2) for k, v in s.items()})
