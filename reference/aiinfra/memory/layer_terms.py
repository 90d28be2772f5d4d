"""Activation memory of the layer a config describes: GQA, SwiGLU, any MLP width.

Korthikanti et al.'s sbh (34 + 5as/h) (:mod:`aiinfra.memory.activations`) counts a
GPT layer: as many K/V heads as query heads, a 4h GELU MLP, dropout. The Llama
family (Llama, Mistral, Qwen, DeepSeek's dense models) differs in the three places
that hold most of the bytes. Grouped-query attention keeps K and V at G of the H
heads' width. The SwiGLU MLP ``W_2 (SiLU(W_1 x) * W_3 x)`` of width f keeps four
f-wide tensors when written in eager PyTorch (the gate ``W_1 x`` for SiLU's
backward, the up projection ``W_3 x`` and SiLU's output for the product's, the
product for ``W_2``): 4 f e bytes per token, 28 h at f = 3.5 h in 16 bits, against
GPT's 16 h. Megatron-LM's fused SwiGLU (``megatron/core/fusions/fused_bias_swiglu.py``,
``SwiGLUFunction``) saves only its 2f-wide input and recomputes SiLU in backward:
3 f e. And these models train without dropout. :func:`layer_activation_terms`
lists the tensors term by term from the config, in the paper's convention (norm
statistics of O(sb) left out), so that the GPT case gives Table 2 exactly and the
others can be measured (:func:`aiinfra.memory.experiments.measure_config_layers`).
``attention`` chooses the kernels: ``"materialised"`` is the eager layer
(explicit softmax; the paper's dropouts for the GPT family), ``"flash"`` the
fused one (a FlashAttention kernel keeping its output and an fp32 log-sum-exp,
Megatron's fused SwiGLU, no dropout). Notation: T = s tokens, b sequences,
h width, H query heads, G K/V heads, d head width, f MLP width, t TP ranks.
"""

from __future__ import annotations

from aiinfra.memory.activations import ATTENTION, CORE_TERMS, LSE_BYTES, RECOMPUTE
from aiinfra.models.config import TransformerConfig

MASK_BYTES = 1  # a dropout mask is one byte per element (a bool)


def _check(cfg: TransformerConfig, s: int, b: int, tp: int, sp: bool) -> None:
    if not isinstance(cfg, TransformerConfig):
        raise TypeError(f"cfg must be a TransformerConfig, got {type(cfg).__name__}")
    if cfg.is_mla or cfg.is_moe:
        raise ValueError(
            "cfg uses multi-head latent attention or experts, which this count "
            "does not model; it counts GQA/MHA layers with a dense MLP"
        )
    for name, value in [("s", s), ("b", b), ("tp", tp)]:
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if cfg.n_heads % tp or cfg.n_kv_heads % tp:
        raise ValueError(
            f"tp = {tp} must divide n_heads = {cfg.n_heads} and n_kv_heads = "
            f"{cfg.n_kv_heads} (heads are split across TP ranks)"
        )
    if sp and s % tp:
        raise ValueError(f"sequence parallelism needs tp = {tp} to divide s = {s}")


def layer_activation_terms(
    cfg: TransformerConfig,
    s: int,
    b: int,
    tp: int = 1,
    sp: bool = False,
    recompute: str = "none",
    attention: str = "materialised",
    act_bytes: int = 2,
) -> dict[str, float]:
    """The tensors one layer of ``cfg`` saves for backward, bytes per rank.

    Terms that tensor parallelism leaves whole (the norms' inputs, the inputs of
    the QKV and first MLP matmuls, the dropout masks after attention and MLP) are
    divided by t only with sequence parallelism; the others always are.

    Args:
        cfg: a dense GQA/MHA model; h, H, G, d and f are read from it, and its
            MLP (``"gelu"`` or ``"swiglu"``) decides the MLP terms and dropout.
        s: tokens per sequence on this rank.
        b: sequences per micro-batch.
        tp: t, tensor-parallel ranks.
        sp: sequence parallelism splits the terms TP leaves whole.
        recompute: ``"none"``, ``"selective"`` (drops the as^2 terms) or
            ``"full"`` (keeps only the layer input, e s b h).
        attention: ``"materialised"`` (eager kernels) or ``"flash"`` (fused ones).
        act_bytes: e, bytes per activation element.

    Returns:
        ``{term: bytes}`` in forward order; for a GPT config (f = 4h, G = H) they
        add up to :func:`~aiinfra.memory.activations.activation_bytes_per_layer`.

    Raises:
        TypeError: ``cfg`` is not a :class:`TransformerConfig`.
        ValueError: ``cfg`` has MLA or experts, a size is not a positive integer,
            ``tp`` does not divide H and G (or s with ``sp``), or ``recompute`` or
            ``attention`` is unknown.
    """
    _check(cfg, s, b, tp, sp)
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {RECOMPUTE}, got {recompute!r}")
    if attention not in ATTENTION:
        raise ValueError(f"attention must be one of {ATTENTION}, got {attention!r}")
    e, n, h, t = act_bytes, s * b, cfg.d_model, tp
    if recompute == "full":
        return {"layer input": e * n * h}
    # region terms
    H, G, d, f = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_ff
    whole = t if sp else 1  # what TP alone leaves whole, SP splits too
    eager = attention == "materialised"
    dropout = eager and cfg.mlp == "gelu"  # GPT trained with dropout, Llama without
    terms = {
        "attention: norm input": e * n * h / whole,
        "attention: QKV input (norm output)": e * n * h / whole,
        "attention: Q": e * n * H * d / t,
        "attention: K": e * n * G * d / t,
        "attention: V": e * n * G * d / t,
    }
    if eager:
        terms["attention: softmax output"] = e * n * H * s / t
        if dropout:
            terms["attention: softmax dropout mask"] = MASK_BYTES * n * H * s / t
            terms["attention: dropout output (times V)"] = e * n * H * s / t
    else:
        terms["attention: log-sum-exp (fp32)"] = LSE_BYTES * n * H / t
    terms["attention: output projection input"] = e * n * H * d / t
    if dropout:
        terms["attention: dropout mask"] = MASK_BYTES * n * h / whole
    terms["MLP: norm input"] = e * n * h / whole
    terms["MLP: first linear input"] = e * n * h / whole
    if cfg.mlp == "gelu":
        terms["MLP: GELU input"] = e * n * f / t
    elif eager:  # SiLU(W1 x) * W3 x in eager ops: four f-wide tensors
        terms["MLP: gate W1 x (SiLU input)"] = e * n * f / t
        terms["MLP: up W3 x"] = e * n * f / t
        terms["MLP: SiLU output"] = e * n * f / t
    else:  # Megatron's fused SwiGLU: its [W1 x, W3 x] input, SiLU recomputed
        terms["MLP: gate and up (fused SwiGLU input)"] = 2 * e * n * f / t
    terms["MLP: second linear input"] = e * n * f / t
    if dropout:
        terms["MLP: dropout mask"] = MASK_BYTES * n * h / whole
    # endregion
    if recompute == "selective":
        terms = {k: v for k, v in terms.items() if k not in CORE_TERMS}
    return terms


def layer_activation_bytes(
    cfg: TransformerConfig,
    s: int,
    b: int,
    tp: int = 1,
    sp: bool = False,
    recompute: str = "none",
    attention: str = "materialised",
) -> float:
    """Bytes of 16-bit activations one layer of ``cfg`` keeps per rank.

    The sum of :func:`layer_activation_terms` (see there for the arguments and
    errors).
    """
    return sum(layer_activation_terms(cfg, s, b, tp, sp, recompute, attention).values())
