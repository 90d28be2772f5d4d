"""KV-cache memory waste: contiguous max-length reservation vs paged blocks.

A server that stores each request's KV cache contiguously must reserve room for the
longest sequence it may become, ``L_max`` tokens, when the request arrives: everything
past the request's final length ``L = L_p + L_o`` (prompt plus output) is reserved but
never holds a token. Reserving the next power of two of the output length (Orca's
"Pow2" policy) halves the waste but still over-reserves up to ``2x``. Paged allocation
(Kwon et al. 2023) takes one block of ``B`` tokens at a time, so a sequence wastes only
the unused slots of its last block, ``ceil(L / B) * B - L < B``. Slots become bytes
through :func:`~aiinfra.models.attention.kv_cache_size.kv_bytes_per_token`.
:func:`time_averaged_used` counts as vLLM's Fig. 2 does, over time: at every decode
step of a request's life, the tokens it holds so far against what it has reserved,
so that slots kept for tokens still to come count as waste too; there Orca (Oracle)
reserves exactly the final length and still wastes.
"""

from dataclasses import dataclass

import torch

from aiinfra import checks


@dataclass(frozen=True)
class WasteReport:
    """Token slots of a request stream under three allocation policies.

    Attributes:
        num_requests: requests in the stream.
        tokens: slots that hold a token (sum of final lengths).
        contiguous: slots reserved at ``L_max`` per request.
        pow2: slots reserved at ``L_p + next_pow2(L_o)`` per request.
        paged: slots in allocated blocks, ``ceil(L / B) * B`` per request.
        bytes_per_token: bytes per slot, to turn slots into bytes.
    """

    num_requests: int
    tokens: int
    contiguous: int
    pow2: int
    paged: int
    bytes_per_token: int

    def used_fraction(self, policy: str) -> float:
        """Fraction of a policy's reserved slots that hold tokens."""
        if policy not in ("contiguous", "pow2", "paged"):
            raise ValueError(
                f"policy must be contiguous, pow2 or paged, got {policy!r}"
            )
        return self.tokens / getattr(self, policy)

    def bytes(self, policy: str) -> int:
        """Bytes a policy reserves (``"tokens"`` gives the bytes holding tokens)."""
        if policy not in ("tokens", "contiguous", "pow2", "paged"):
            raise ValueError(
                f"policy must be tokens, contiguous, pow2 or paged, got {policy!r}"
            )
        return getattr(self, policy) * self.bytes_per_token


def reserved_slots(
    prompt_lens: torch.Tensor, output_lens: torch.Tensor, block_size: int, max_len: int
) -> WasteReport:
    """Count reserved and used KV slots for given request lengths (1 byte per slot).

    Args:
        prompt_lens: prompt lengths ``L_p >= 1``, shape ``(R,)``.
        output_lens: output lengths ``L_o >= 1``, shape ``(R,)``.
        block_size: tokens per block ``B`` (>= 1).
        max_len: the contiguous reservation ``L_max`` (>= every ``L_p + L_o``).

    Returns:
        The report, with ``bytes_per_token=1``.

    Raises:
        ValueError: if lengths are below 1, exceed ``max_len`` or shapes differ.
    """
    if prompt_lens.shape != output_lens.shape or prompt_lens.dim() != 1:
        raise ValueError(
            f"prompt_lens and output_lens must be 1-D of equal shape, got "
            f"{tuple(prompt_lens.shape)} and {tuple(output_lens.shape)}"
        )
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    lens = (prompt_lens + output_lens).long()  # (R,)
    if prompt_lens.numel() and (prompt_lens.min() < 1 or output_lens.min() < 1):
        raise ValueError("prompt_lens and output_lens must be >= 1")
    if lens.numel() and int(lens.max()) > max_len:
        raise ValueError(
            f"max_len={max_len} is below the longest request {int(lens.max())}"
        )
    pow2_out = 2 ** torch.ceil(torch.log2(output_lens.double())).long()  # (R,)
    return WasteReport(
        num_requests=int(lens.numel()),
        tokens=int(lens.sum()),
        contiguous=int(lens.numel()) * max_len,
        pow2=int((prompt_lens.long() + pow2_out).clamp(max=max_len).sum()),
        paged=int(((lens + block_size - 1) // block_size * block_size).sum()),
        bytes_per_token=1,
    )


def request_stream_waste(
    num_requests: int,
    max_prompt_len: int,
    max_output_len: int,
    block_size: int,
    bytes_per_token: int,
    generator: torch.Generator,
) -> WasteReport:
    """Waste for a stream of requests with uniform random prompt and output lengths.

    Args:
        num_requests: requests ``R`` (>= 1).
        max_prompt_len: prompts are uniform on ``1 .. max_prompt_len``.
        max_output_len: outputs are uniform on ``1 .. max_output_len``; the contiguous
            reservation is ``L_max = max_prompt_len + max_output_len``.
        block_size: tokens per block ``B``.
        bytes_per_token: from
            :func:`~aiinfra.models.attention.kv_cache_size.kv_bytes_per_token`.
        generator: the random source (for reproducible streams).

    Returns:
        The report in slots, with ``bytes_per_token`` set.

    Raises:
        ValueError: if a count or length is below 1.
    """
    checks.positive_ints(
        num_requests=num_requests,
        max_prompt_len=max_prompt_len,
        max_output_len=max_output_len,
        bytes_per_token=bytes_per_token,
    )
    prompt = torch.randint(1, max_prompt_len + 1, (num_requests,), generator=generator)
    output = torch.randint(1, max_output_len + 1, (num_requests,), generator=generator)
    report = reserved_slots(prompt, output, block_size, max_prompt_len + max_output_len)
    return WasteReport(**{**report.__dict__, "bytes_per_token": bytes_per_token})


TIME_POLICIES = ("max", "pow2", "oracle", "paged")  # reservations over a lifetime
# Kwon et al. 2023, Fig. 2: share of KV memory holding tokens, averaged over their
# run: Orca (Max) reserves the longest sequence, Orca (Oracle) the final length.
VLLM_ORCA_MAX, VLLM_ORCA_ORACLE = 0.204, 0.382


def time_averaged_used(
    prompt_lens: torch.Tensor, output_lens: torch.Tensor, block_size: int, max_len: int
) -> dict[str, float]:
    """Share of reserved slots holding tokens, summed over every decode step.

    At step ``t = 1 .. L_o`` a request holds ``L_p + t`` tokens and reserves
    ``L_max`` (``"max"``, Orca (Max)), ``L_p + next_pow2(L_o)`` (``"pow2"``),
    ``L_p + L_o`` (``"oracle"``, Orca (Oracle): the final length, known in
    advance) or ``ceil((L_p + t) / B) B`` (``"paged"``: blocks taken as needed).

    Args:
        prompt_lens: prompt lengths ``L_p >= 1``, shape ``(R,)``.
        output_lens: output lengths ``L_o >= 1``, shape ``(R,)``.
        block_size: tokens per block ``B``.
        max_len: the contiguous reservation ``L_max``.

    Returns:
        ``{policy: held / reserved}`` over all steps of all requests.

    Raises:
        ValueError: as :func:`reserved_slots`.
    """
    reserved_slots(prompt_lens, output_lens, block_size, max_len)  # the same checks
    p, o = prompt_lens.long()[:, None], output_lens.long()[:, None]  # (R, 1)
    t = torch.arange(1, int(o.max()) + 1)[None]  # (1, T): the decode steps
    alive = t <= o  # (R, T)
    held = (p + t) * alive  # tokens in the cache after step t
    pow2 = p + 2 ** torch.ceil(torch.log2(o.double())).long()
    reserved = {
        "max": max_len * alive,
        "pow2": pow2.clamp(max=max_len) * alive,
        "oracle": (p + o) * alive,
        "paged": (held + block_size - 1) // block_size * block_size,
    }
    return {k: float(held.sum() / v.sum()) for k, v in reserved.items()}
