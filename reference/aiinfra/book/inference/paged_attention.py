"""What ``docs/inference/paged_attention.rst`` shows: its values and figures.

The request _stream is the paged-waste model's: prompts and outputs uniform on
``1 .. 1024`` tokens, a contiguous reservation of OPT's 2048-token maximum, blocks of
16 tokens (vLLM's default), OPT-13B's 800 KiB of KV cache per token (vLLM, Sec. 3).
The speed values use Llama 3 8B's attention shape and the H100's datasheet.
"""

from __future__ import annotations

import torch
from matplotlib.figure import Figure

from aiinfra.accelerators import GPUS
from aiinfra.infer.paged import figures as paged_figures
from aiinfra.infer.paged.waste import (
    VLLM_ORCA_MAX,
    VLLM_ORCA_ORACLE,
    WasteReport,
    request_stream_waste,
    time_averaged_used,
)
from aiinfra.models.attention.kv_cache_size import kv_bytes_per_token
from aiinfra.models.config import TransformerConfig
from aiinfra.models.presets import preset

BLOCK = 16  # tokens per block: vLLM's default
MAX_PROMPT = MAX_OUTPUT = 1024  # uniform lengths 1 .. 1024 each
T_MAX = MAX_PROMPT + MAX_OUTPUT  # OPT's longest sequence, the contiguous reservation
REQUESTS = 1000
SEED = 0
SYSTEM_LEN, MAX_USER_LEN = 500, 200  # the shared system prompt, the own question
SAMPLE_PROMPT, SAMPLE_OUTPUT = 200, 100  # parallel sampling: prompt, new tokens
COUNTS = [1, 2, 4, 8, 16, 32]  # requests or samples in the sharing figure
MOST = COUNTS[-1]  # the count the prose quotes
TABLE_ENTRY_BYTES = 4  # an int32 physical block id


# OPT-13B's attention (Zhang et al. 2022, Table 1): 40 layers, d = 5120, 40 heads.
_OPT_13B = TransformerConfig(50272, 5120, 40, 40, d_ff=20480, max_seq_len=2048)


def _opt13b_bytes_per_token() -> int:
    """OPT-13B's K and V per token: 40 layers, 40 heads of 128, fp16."""
    return kv_bytes_per_token(_OPT_13B, 2)


def opt13b_kib_per_token() -> int:
    """OPT-13B's KV cache per token, KiB."""
    return _opt13b_bytes_per_token() // 1024


def _stream() -> WasteReport:
    """The request _stream's slots under the three policies."""
    gen = torch.Generator().manual_seed(SEED)
    return request_stream_waste(
        REQUESTS, MAX_PROMPT, MAX_OUTPUT, BLOCK, _opt13b_bytes_per_token(), gen
    )


def used(policy: str) -> float:
    """Share of a policy's reserved slots that hold tokens."""
    return _stream().used_fraction(policy)


def mean_length() -> float:
    """Mean final length of the _stream's requests, tokens."""
    return _stream().tokens / REQUESTS


def paged_waste_per_request() -> float:
    """Empty slots of the last block, tokens per request (mean)."""
    r = _stream()
    return (r.paged - r.tokens) / REQUESTS


def contiguous_gib_per_request() -> float:
    """KV memory one contiguous OPT-13B reservation holds, GiB."""
    return T_MAX * _opt13b_bytes_per_token() / 2**30


def batch_gain() -> float:
    """How many more requests the same memory holds paged than contiguous."""
    return used("paged") / used("contiguous")


def time_used(policy: str) -> float:
    """Share of reserved slots holding tokens over every decode step (vLLM's way)."""
    prompt, output = paged_figures.draw_lengths(REQUESTS, MAX_PROMPT, MAX_OUTPUT, SEED)
    return time_averaged_used(prompt, output, BLOCK, T_MAX)[policy]


def vllm_used(policy: str) -> float:
    """The share vLLM's Fig. 2 gives Orca (Max) or Orca (Oracle)."""
    return {"max": VLLM_ORCA_MAX, "oracle": VLLM_ORCA_ORACLE}[policy]


def waste_figure() -> Figure:
    """Reserved vs held slots per request, and the used share per policy."""
    prompt, output = paged_figures.draw_lengths(REQUESTS, MAX_PROMPT, MAX_OUTPUT, SEED)
    return paged_figures.waste_figure(prompt, output, BLOCK, T_MAX, 24)


def block_table_figure() -> Figure:
    """The block tables of the allocator's example run."""
    return paged_figures.block_table_figure(paged_figures.block_table_run())


def llama_block_bytes() -> int:
    """Bytes of K and V in one block of one KV head of one layer, Llama 3 8B, bf16."""
    return 2 * BLOCK * preset("llama-3-8b").head_dim * 2


def cache_bytes_per_table_byte() -> int:
    """Bytes of K/V a program reads per byte of block table it reads."""
    return llama_block_bytes() // TABLE_ENTRY_BYTES


DECODE_BATCH, DECODE_CONTEXT = 64, 4096  # the decode step of the speed paragraph


def llama_decode_cache_gb() -> float:
    """KV cache one decode step reads, 64 Llama 3 8B sequences of 4096 tokens, GB."""
    c = preset("llama-3-8b")
    per_token = kv_bytes_per_token(c, 2)
    return DECODE_BATCH * DECODE_CONTEXT * per_token / 1e9


def llama_decode_cache_ms() -> float:
    """Time to read that cache once at the H100's HBM bandwidth, ms."""
    return llama_decode_cache_gb() * 1e9 / GPUS["H100"].hbm_bandwidth * 1e3


def _prefix(n: int) -> tuple[int, int, int]:
    return paged_figures.prefix_sharing_blocks(n, SYSTEM_LEN, MAX_USER_LEN, BLOCK, SEED)


def _samples(n: int) -> tuple[int, int, int]:
    return paged_figures.parallel_sampling_blocks(
        n, SAMPLE_PROMPT, SAMPLE_OUTPUT, BLOCK
    )


def shared_system_blocks() -> int:
    """Full blocks of the system prompt, the ones prefix caching can share."""
    return SYSTEM_LEN // BLOCK


def prefix_blocks(caching: bool, n: int = MOST) -> int:
    """Blocks held by ``n`` requests with the system prompt."""
    return _prefix(n)[1 if caching else 0]


def prefix_saved(n: int = MOST) -> float:
    """Share of blocks prefix caching saves for ``n`` requests."""
    without, with_cache, _ = _prefix(n)
    return 1 - with_cache / without


def prefix_cached_tokens(n: int = MOST) -> int:
    """Prompt tokens of ``n`` requests served from the cache (no prefill)."""
    return _prefix(n)[2]


def _sample_blocks(forked: bool, n: int = MOST) -> int:
    """Blocks held by ``n`` parallel samples."""
    return _samples(n)[1 if forked else 0]


def sample_saved(n: int = MOST) -> float:
    """Share of blocks forking saves for ``n`` samples."""
    separate, forked, _ = _samples(n)
    return 1 - forked / separate


def sample_copies(n: int = MOST) -> int:
    """Copy-on-write block copies of ``n`` samples."""
    return _samples(n)[2]


def sharing_figure() -> Figure:
    """Blocks held against requests sharing a prompt and against samples."""
    return paged_figures.sharing_figure(
        COUNTS, SYSTEM_LEN, MAX_USER_LEN, SAMPLE_PROMPT, SAMPLE_OUTPUT, BLOCK, SEED
    )
