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
term by term.
"""

from __future__ import annotations

RECOMPUTE = ("none", "selective", "full")
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

    Args:
        s: sequence length (tokens).
        b: micro-batch size (sequences).
        h: hidden size.
        a: attention heads.
        tp: t, tensor-parallel ranks (1: no tensor parallelism).
        sp: whether sequence parallelism shards the non-tensor-parallel parts.
        recompute: ``"none"``, ``"selective"`` (the attention core) or ``"full"``.

    Returns:
        Bytes per layer on one rank, 16-bit activations.

    Raises:
        ValueError: a size is not positive, ``tp`` does not divide ``a`` (or ``s``
            with sequence parallelism), or ``recompute`` is unknown.
    """
    _check(s, b, h, a)
    if not isinstance(tp, int) or tp < 1 or a % tp:
        raise ValueError(f"tp = {tp} must be a positive integer dividing a = {a}")
    if sp and s % tp:
        raise ValueError(f"sequence parallelism needs tp = {tp} to divide s = {s}")
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {RECOMPUTE}, got {recompute!r}")
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
