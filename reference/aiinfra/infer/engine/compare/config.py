"""The comparison's sizes, its checkpoint and its prompts.

:class:`CompareConfig` holds every size (a smoke run by default, :data:`FULL` for the
book); :func:`build_checkpoint` saves a random-weight ``LlamaForCausalLM`` with a byte
tokenizer (token ``i`` is byte ``i``, the server's tokenizer) that both libraries load;
:func:`workload` draws the prompts, printable ASCII so that a server reads the same
token ids from their text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

KIND = "engine_hf"  # the results kind: docs/_data/bench/engine_hf-cpu.json
SYSTEMS = ("engine", "generate_batch", "generate")  # offline paths, in run order
SERVERS = ("aiinfra serve", "transformers serve")
# The engine's speed-ups (tokens/s, wall time) it was asked to reach here: over padded
# generate with equal output lengths at every batch, over it with varying lengths,
# and over transformers' continuous batching at every batch.
TARGETS = {"generate": 1.0, "generate@vary": 1.5, "generate_batch": 1.5}
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
