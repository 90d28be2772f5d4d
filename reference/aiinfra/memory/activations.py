"""Activation memory of a transformer layer (Korthikanti et al. 2022).

Backward needs tensors that forward computed: the input of every matrix multiply, the
softmax output, the GELU input, the dropout masks. Korthikanti et al. ("Reducing
Activation Recomputation in Large Transformer Models", Sec. 4.1) add them up for one
GPT layer with sequence length s, micro-batch b, hidden size h and a heads, storing
activations in 16 bits and dropout masks in one byte: sbh (34 + 5as/h) bytes.
Table 2 of the paper then divides what tensor parallelism (t ranks) splits, what
sequence parallelism splits too, what selective recomputation of the attention core
drops (the 5as/h term), and what full recomputation keeps (the layer input, 2sbh).
:func:`saved_activation_terms` lists the paper's terms one by one for any element
size, so the 32-bit measurement of :mod:`aiinfra.memory.measure` can be compared
term by term. This module keeps the paper's letters (s, a, t) in its arguments and
formulas; the book writes T, H and p for them (docs/notation.rst).

That count is the 2022 GPT baseline: an explicit softmax whose (b, a, s, s) output,
dropout mask and dropout output are saved. A fused attention kernel
(FlashAttention, ``scaled_dot_product_attention``; Dao et al. 2022) saves only its
output and one fp32 log-sum-exp per row and head, and today's LLMs train without
dropout, so ``attention="flash"`` counts 32 sbh + 4 asb bytes: no term in
s^2, about ten times less at s = 8192 for a 4096-wide model. The output layer adds
what Korthikanti et al. put at 4 sbh (1 + V/h) (Sec. 4.1): the final norm's and the
head's 16-bit inputs and the fp32 logits the cross-entropy keeps
(:func:`output_layer_bytes`), V times the hidden width per token.
"""

from __future__ import annotations

RECOMPUTE = ("none", "selective", "full")
ATTENTION = ("materialised", "flash")  # explicit softmax + dropout; fused, no dropout
LSE_BYTES = 4  # the fp32 log-sum-exp a fused kernel keeps per row and head
# The terms of size as^2b: what selective recomputation drops (paper Sec. 5).
CORE_TERMS = (
    "attention: softmax output",
    "attention: softmax dropout mask",
    "attention: dropout output (times V)",
)


def _check(s: int, b: int, h: int, a: int) -> None:
    for name, value in [("s", s), ("b", b), ("h", h), ("a", a)]:
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if h % a:
        raise ValueError(f"a = {a} heads must divide h = {h}")


def saved_activation_terms(
    s: int, b: int, h: int, a: int, act_bytes: int = 2, mask_bytes: int = 1
) -> dict[str, int]:
    """The tensors one GPT layer saves for backward, in bytes (paper Sec. 4.1).

    Args:
        s: sequence length (tokens).
        b: micro-batch size (sequences).
        h: hidden size.
        a: attention heads.
        act_bytes: bytes per activation element (2 in the paper, 4 in fp32).
        mask_bytes: bytes per dropout-mask element (1: a bool).

    Returns:
        ``{term: bytes}`` in forward order; with the defaults the values add up to
        sbh (34 + 5as/h), in general to sbh (16 e + 2 m) + as^2 b (2 e + m).

    Raises:
        ValueError: a size is not a positive integer or ``a`` does not divide ``h``.
    """
    _check(s, b, h, a)
    sbh, as2b, e, m = s * b * h, a * s * s * b, act_bytes, mask_bytes
    return {
        "attention: LayerNorm input": e * sbh,
        "attention: QKV input (LayerNorm output)": e * sbh,
        "attention: Q and K for QK^T": 2 * e * sbh,
        "attention: softmax output": e * as2b,
        "attention: softmax dropout mask": m * as2b,
        "attention: dropout output (times V)": e * as2b,
        "attention: V": e * sbh,
        "attention: output projection input": e * sbh,
        "attention: dropout mask": m * sbh,
        "MLP: LayerNorm input": e * sbh,
        "MLP: first linear input": e * sbh,
        "MLP: GELU input (4h)": 4 * e * sbh,
        "MLP: second linear input (4h)": 4 * e * sbh,
        "MLP: dropout mask": m * sbh,
    }


def activation_bytes_per_layer(
    s: int,
    b: int,
    h: int,
    a: int,
    tp: int = 1,
    sp: bool = False,
    recompute: str = "none",
    attention: str = "materialised",
) -> float:
    """Bytes of activations one transformer layer keeps per rank (paper Table 2).

    ================================== ===========================
    configuration                      bytes per layer
    ================================== ===========================
    no parallelism                     sbh (34 + 5as/h)
    tensor parallel t                  sbh (10 + 24/t + 5as/(ht))
    tensor + sequence parallel         sbh/t (34 + 5as/h)
    tensor parallel + selective        sbh (10 + 24/t)
    tensor + sequence + selective      34 sbh / t
    full recompute                     2 sbh
    ================================== ===========================

    With ``attention="flash"`` the two dropout masks (2 sbh, replicated under
    tensor parallelism) and the 5as/h core go, and the kernel's log-sum-exp
    (4 asb, split over t) comes: sbh (8 + 24/t) + 4asb/t, or (32 sbh + 4asb)/t with
    sequence parallelism. Selective recomputation then has no core left to drop.

    Args:
        s: sequence length (tokens).
        b: micro-batch size (sequences).
        h: hidden size.
        a: attention heads.
        tp: t, tensor-parallel ranks (1: no tensor parallelism).
        sp: whether sequence parallelism shards the non-tensor-parallel parts.
        recompute: ``"none"``, ``"selective"`` (the attention core) or ``"full"``.
        attention: ``"materialised"`` (the paper's softmax and dropouts) or
            ``"flash"`` (a fused kernel, no dropout).

    Returns:
        Bytes per layer on one rank, 16-bit activations.

    Raises:
        ValueError: a size is not positive, ``tp`` does not divide ``a`` (or ``s``
            with sequence parallelism), or ``recompute`` or ``attention`` is unknown.
    """
    _check(s, b, h, a)
    if not isinstance(tp, int) or tp < 1 or a % tp:
        raise ValueError(f"tp = {tp} must be a positive integer dividing a = {a}")
    if sp and s % tp:
        raise ValueError(f"sequence parallelism needs tp = {tp} to divide s = {s}")
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {RECOMPUTE}, got {recompute!r}")
    if attention not in ATTENTION:
        raise ValueError(f"attention must be one of {ATTENTION}, got {attention!r}")
    if attention == "flash":
        return _flash_layer_bytes(s, b, h, a, tp, sp, recompute)
    # region table-2
    sbh, t = s * b * h, tp
    core = 0 if recompute == "selective" else 5 * a * s / (h * t)  # softmax, dropout
    if recompute == "full":
        per_layer = 2 * sbh  # only the layer input is kept
    elif sp:
        per_layer = sbh * (34 / t + core)  # everything split t ways
    else:
        per_layer = sbh * (10 + 24 / t + core)  # 10: norms, masks, QKV/fc1 inputs
    # endregion
    return per_layer


def _flash_layer_bytes(
    s: int, b: int, h: int, a: int, t: int, sp: bool, recompute: str
) -> float:
    """Table 2 with a fused attention kernel and no dropout (see the caller)."""
    # region flash
    sbh = s * b * h
    lse = LSE_BYTES * a * s * b / t  # fp32 log-sum-exp per row and head, split by t
    if recompute == "full":
        per_layer = 2 * sbh  # only the layer input is kept
    elif sp:
        per_layer = 32 * sbh / t + lse  # everything split t ways
    else:
        per_layer = sbh * (8 + 24 / t) + lse  # 8: norm and QKV/fc1 inputs, no masks
    # endregion
    return per_layer


def output_layer_bytes(s: int, b: int, h: int, v: int, tp: int = 1) -> float:
    """Bytes the output layer and the loss keep for backward (paper Sec. 4.1).

    The final norm's input and the head's input (16-bit, 2 sbh each) and the logits
    that the cross-entropy keeps in fp32 (4 sbV): 4 sbh (1 + V/h), the paper's
    count; a vocabulary-parallel head splits the logits over t ranks.

    Args:
        s: sequence length (tokens).
        b: micro-batch size (sequences).
        h: hidden size.
        v: vocabulary size V.
        tp: t, tensor-parallel ranks sharing the vocabulary.

    Returns:
        Bytes on one rank.

    Raises:
        ValueError: a size is not a positive integer.
    """
    for name, value in [("s", s), ("b", b), ("h", h), ("v", v), ("tp", tp)]:
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return 4 * s * b * h + 4 * s * b * v / tp
