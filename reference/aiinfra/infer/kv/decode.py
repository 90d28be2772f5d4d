"""Decoding with and without a KV cache, and what one decode step reads.

:func:`generate_recompute` is decoding as a model without a cache must do it: every
new token runs the model over the whole prefix again, so step ``t`` costs about
``2 Psi (T_0 + t)`` FLOPs. :func:`~aiinfra.models.transformer.generate_greedy` keeps
each layer's keys and values (the :term:`KV Cache`): one forward pass over the
prompt (the *prefill*), then one position per step (the *decode*), ``2 Psi`` FLOPs
plus attention over the cached positions. Both return the same tokens; the test
checks them against each other and against transformers' ``generate``.

:func:`decode_bound_tokens_per_s` is the cost model of a decode step on a GPU: the
step reads every weight and the batch's whole cache once
(:func:`~aiinfra.infer.step_cost.decode_step_bytes`, the one count of the book), so
a sequence's tokens/s is bounded by HBM bandwidth over the bytes read per step
(memory-bound; FACTS "Inference").
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiinfra import checks
from aiinfra.infer.step_cost import decode_step_bytes
from aiinfra.models.config import TransformerConfig
from aiinfra.models.flops import attention_flops_per_token, matmul_parameters
from aiinfra.models.transformer import Transformer


def check_prompt(model: Transformer, prompt: Tensor, max_new_tokens: int) -> None:
    """Refuse a prompt or a length the model cannot decode, naming the argument.

    Raises:
        TypeError: ``prompt`` is not an integer tensor.
        ValueError: ``prompt`` is not ``(B, T)`` with ``B, T >= 1``, holds a token
            outside the vocabulary, ``max_new_tokens < 1``, or the output would pass
            ``max_seq_len``.
    """
    if not isinstance(prompt, Tensor) or prompt.dtype not in (torch.long, torch.int):
        raise TypeError(f"prompt must be a tensor of token ids, got {prompt!r:.60}")
    if prompt.dim() != 2 or prompt.shape[0] < 1 or prompt.shape[1] < 1:
        raise ValueError(
            f"prompt must have shape (B, T) with B, T >= 1 (an empty prompt has no "
            f"last token to continue), got {tuple(prompt.shape)}"
        )
    V = model.config.vocab_size
    if int(prompt.min()) < 0 or int(prompt.max()) >= V:
        raise ValueError(f"prompt holds token ids outside [0, {V}) (vocab_size)")
    checks.positive_int("max_new_tokens", max_new_tokens)
    total = prompt.shape[1] + max_new_tokens
    if total > model.config.max_seq_len:
        raise ValueError(
            f"prompt length {prompt.shape[1]} + max_new_tokens {max_new_tokens} = "
            f"{total} > max_seq_len {model.config.max_seq_len}"
        )


@torch.no_grad()
def generate_recompute(
    model: Transformer, prompt: Tensor, max_new_tokens: int
) -> Tensor:
    """Greedy decoding without a cache: the whole prefix goes through every step.

    Args:
        model: the language model.
        prompt: token ids, shape ``(B, T)``.
        max_new_tokens: tokens to append, each the argmax of the last logits.

    Returns:
        The prompt followed by the new tokens, shape ``(B, T + max_new_tokens)``,
        equal to :func:`~aiinfra.models.transformer.generate_greedy`'s.

    Raises:
        TypeError, ValueError: see :func:`check_prompt`.
    """
    check_prompt(model, prompt, max_new_tokens)
    tokens = prompt
    for _ in range(max_new_tokens):
        logits = model(tokens)  # (B, T + t, V): every position again
        next_token = logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        tokens = torch.cat([tokens, next_token], dim=1)
    return tokens


def step_flops(config: TransformerConfig, prefix: int, cached: bool) -> float:
    """Forward matmul FLOPs of the decode step that follows ``prefix`` positions.

    ``2 Psi`` per position through the weight matmuls (``Psi`` of
    :func:`~aiinfra.models.flops.matmul_parameters`) plus, per query and key pair,
    a third of the training attention term (the forward pass of
    :func:`~aiinfra.models.flops.attention_flops_per_token`: ``4 L H d``). With the
    cache one new position attends to ``prefix + 1`` keys; without it all
    ``prefix + 1`` positions run again and attend causally.

    Raises:
        ValueError: ``prefix < 0``.
    """
    if prefix < 0:
        raise ValueError(f"prefix must be >= 0, got {prefix}")
    psi = matmul_parameters(config)
    per_pair = attention_flops_per_token(config, 1) / 3  # forward: a third of 6
    n = prefix + 1
    if cached:
        return 2 * psi + per_pair * n
    return 2 * psi * n + per_pair * n * (n + 1) / 2


def decode_bound_tokens_per_s(
    config: TransformerConfig,
    bandwidth: float,
    batch: int,
    context: int,
    bytes_per_element: int = 2,
) -> float:
    """The memory-bound ceiling of one sequence's decode speed, tokens/s.

    One step yields one token per sequence and cannot finish before its bytes are
    read: ``bandwidth`` over
    :func:`~aiinfra.infer.step_cost.decode_step_bytes`. Compute, kernel launches and
    the network only lower it.

    Raises:
        ValueError: ``bandwidth <= 0``, or as
            :func:`~aiinfra.infer.step_cost.decode_step_bytes`.
    """
    if bandwidth <= 0:
        raise ValueError(f"bandwidth must be > 0 bytes/s, got {bandwidth}")
    b = bytes_per_element
    return bandwidth / decode_step_bytes(config, batch, context, b, b)
