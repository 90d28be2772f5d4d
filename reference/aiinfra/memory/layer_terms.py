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
Megatron's fused SwiGLU, no dropout). DeepSeek-V2/V3's layers are counted
too, as the package's own
:class:`~aiinfra.models.attention.mla.MultiHeadLatentAttention` and
:class:`~aiinfra.models.moe.layer.MoELayer` save them (:func:`mla_attention_terms`,
:func:`moe_mlp_terms`), and :func:`model_activation_bytes` adds up a model's
layers, dense ones before ``first_dense_layers`` and experts after.
Notation: T = s tokens, b sequences, n = s b, h width, H query heads, G K/V heads,
d head width, f MLP width, t TP ranks; for MLA d_c' = ``q_lora_rank``,
d_c = ``kv_lora_rank``, d^R = ``rope_head_dim``; for MoE E routed experts,
K per token, f_e an expert's width, f_s the shared experts' joint width.
"""

from __future__ import annotations

from aiinfra.memory.activations import ATTENTION, CORE_TERMS, LSE_BYTES, RECOMPUTE
from aiinfra.models.config import TransformerConfig

MASK_BYTES = 1  # a dropout mask is one byte per element (a bool)
ROUTER_BYTES = 4  # the router runs in fp32 (the package's and DeepSeek-V3's code)
INDEX_BYTES = 8  # int64 token and slot indices of an expert's gather


def _check(cfg: TransformerConfig, s: int, b: int, tp: int, sp: bool) -> None:
    if not isinstance(cfg, TransformerConfig):
        raise TypeError(f"cfg must be a TransformerConfig, got {type(cfg).__name__}")
    for name, value in [("s", s), ("b", b), ("tp", tp)]:
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if cfg.n_heads % tp or cfg.n_kv_heads % tp:
        raise ValueError(
            f"tp = {tp} must divide n_heads = {cfg.n_heads} and n_kv_heads = "
            f"{cfg.n_kv_heads} (heads are split across TP ranks)"
        )
    spec = cfg.moe_spec()
    if spec is not None and (spec.d_expert % tp or spec.shared_width % tp):
        raise ValueError(
            f"tp = {tp} must divide d_expert = {spec.d_expert} and the shared "
            f"experts' width = {spec.shared_width} (experts are split as the MLP is)"
        )
    if sp and s % tp:
        raise ValueError(f"sequence parallelism needs tp = {tp} to divide s = {s}")


def mla_attention_terms(
    cfg: TransformerConfig, s: int, b: int, tp: int, whole: int, eager: bool, e: int
) -> dict[str, float]:
    """What the package's multi-head latent attention saves, bytes per rank.

    :class:`~aiinfra.models.attention.mla.MultiHeadLatentAttention` keeps, beyond
    the norm's input and output: the query latent before its RMSNorm (d_c') and
    after it, c^Q, which W^UQ and W^QR read; the same two for the K/V latent
    (d_c), c^KV, which W^UK and W^UV read; the per-head Q and K of width
    d + d^R (the content part and the decoupled RoPE part concatenated; RoPE's
    rotation saves nothing, its tables are buffers), V of width d, and then what
    the attention core keeps (the softmax output, or the fused kernel's fp32
    log-sum-exp) and the output projection's input. The latents are counted whole
    on every TP rank, with or without SP (the down-projections are small and
    replicated): an upper bound where a framework shards them. transformers'
    ``DeepseekV3Attention`` differs in two places: one matmul gives the latent
    and the RoPE key together (d_c + d^R wide), and with FlashAttention-2 it pads
    V to d + d^R.

    Args:
        cfg: an MLA config (``kv_lora_rank`` > 0).
        s: tokens per sequence.
        b: sequences.
        tp: t, heads are split t ways.
        whole: t with sequence parallelism, else 1.
        eager: the materialised softmax (True) or a fused kernel (False).
        e: bytes per activation element.

    Returns:
        ``{term: bytes}`` in forward order.
    """
    # region mla-terms
    n, h, t = s * b, cfg.d_model, tp
    H, d, d_r = cfg.n_heads, cfg.head_dim, cfg.rope_head_dim
    d_cq, d_c = cfg.q_lora_rank, cfg.kv_lora_rank
    terms = {
        "attention: norm input": e * n * h / whole,
        "attention: QKV input (norm output)": e * n * h / whole,
    }
    if d_cq:  # compressed queries: W^DQ x, normalised to c^Q
        terms["MLA: query latent W^DQ x (norm input)"] = e * n * d_cq
        terms["MLA: query latent c^Q"] = e * n * d_cq
    terms["MLA: K/V latent W^DKV x (norm input)"] = e * n * d_c
    terms["MLA: K/V latent c^KV"] = e * n * d_c
    terms["attention: Q"] = e * n * H * (d + d_r) / t
    terms["attention: K"] = e * n * H * (d + d_r) / t
    terms["attention: V"] = e * n * H * d / t
    if eager:
        terms["attention: softmax output"] = e * n * H * s / t
    else:
        terms["attention: log-sum-exp (fp32)"] = LSE_BYTES * n * H / t
    terms["attention: output projection input"] = e * n * H * d / t
    # endregion
    return terms


def moe_mlp_terms(
    cfg: TransformerConfig, s: int, b: int, tp: int, whole: int, eager: bool, e: int
) -> dict[str, float]:
    """What the package's mixture-of-experts layer saves, bytes per rank.

    :class:`~aiinfra.models.moe.layer.MoELayer` routes in fp32: the router's
    input in fp32 (a copy when activations are 16-bit, and then the norm output
    itself is kept only by shared experts; in fp32 the norm output itself), the
    E scores (softmax or sigmoid output), each token's K chosen
    experts (int64), and with ``norm_topk`` the K weights and their sum that
    the division keeps. The grouped choice and the top-k values are freed with
    forward, since only the indices are used. Each expert then gathers its
    tokens, ``x[token]``: per assignment the int64 token and slot indices, the
    gathered h-wide input, the expert's SwiGLU (4 f_e wide eager, 3 f_e fused),
    and, to scale by the gate weight, the expert's output, the weight and the
    scaled output that ``index_add_`` keeps: K times per token, so the routed
    part grows K-fold against one MLP of width f_e. Shared experts run on every
    token (4 f_s or 3 f_s), with Qwen's sigmoid gate adding its output and the
    shared output. Without a capacity factor every token keeps its K experts;
    with one each expert takes at most C assignments, so at most E C are kept.
    Expert widths are split t ways as the dense MLP's are (expert tensor
    parallelism = t, no expert parallelism); the h-wide and routing terms are
    split only with SP. transformers' ``DeepseekV3MoE`` runs the same loop
    (gather, expert, weight, ``index_add_``) but weights in the router's fp32,
    so its weighted output is 4 h bytes per assignment; frameworks that sort
    tokens and use grouped GEMMs keep other buffers, not counted here. With a
    16-bit router weight the package's matmul also keeps its fp32 copy, E h 4
    bytes per layer whatever the tokens: a model state's copy, left out.

    Args:
        cfg: a config with experts.
        s: tokens per sequence.
        b: sequences.
        tp: t, expert widths are split t ways.
        whole: t with sequence parallelism, else 1.
        eager: eager SwiGLU (True) or Megatron's fused one (False).
        e: bytes per activation element.

    Returns:
        ``{term: bytes}`` in forward order.
    """
    # region moe-terms
    n, h, t = s * b, cfg.d_model, tp
    spec = cfg.moe_spec()
    E, K, f_e, f_s = spec.n_experts, spec.top_k, spec.d_expert, spec.shared_width
    cap = spec.capacity(n)
    routed = n * K if cap is None else min(n * K, E * cap)  # assignments kept
    swiglu = 4 if eager else 3  # f-wide tensors of an eager or fused SwiGLU
    terms = {"MLP: norm input": e * n * h / whole}
    if e >= ROUTER_BYTES or spec.n_shared:  # the router's or the shared experts'
        terms["MLP: first linear input"] = e * n * h / whole
    if e < ROUTER_BYTES:  # x.to(float32): a copy the router's matmul keeps
        terms["MoE: router input (fp32)"] = ROUTER_BYTES * n * h / whole
    terms["MoE: router scores (fp32)"] = ROUTER_BYTES * n * E / whole
    terms["MoE: top-k expert indices (int64)"] = INDEX_BYTES * n * K / whole
    if spec.norm_topk:
        terms["MoE: top-k weights and their sum (fp32)"] = (
            ROUTER_BYTES * n * (K + 1) / whole
        )
    terms["MoE: gather indices, token and slot (int64)"] = (
        2 * INDEX_BYTES * routed / whole
    )
    terms["MoE: routed experts' gathered input"] = e * routed * h / whole
    terms["MoE: routed experts' SwiGLU"] = swiglu * e * routed * f_e / t
    terms["MoE: routed output, gate weight, scaled output"] = (
        e * routed * (2 * h + 1) / whole
    )
    if spec.n_shared:
        terms["MoE: shared experts' SwiGLU"] = swiglu * e * n * f_s / t
        if spec.shared_gate:
            terms["MoE: shared gate and shared output"] = e * n * (1 + h) / whole
    # endregion
    return terms


def layer_activation_terms(
    cfg: TransformerConfig,
    s: int,
    b: int,
    tp: int = 1,
    sp: bool = False,
    recompute: str = "none",
    attention: str = "materialised",
    act_bytes: int = 2,
    layer: int | None = None,
) -> dict[str, float]:
    """The tensors one layer of ``cfg`` saves for backward, bytes per rank.

    Terms that tensor parallelism leaves whole (the norms' inputs, the inputs of
    the QKV and first MLP matmuls, the dropout masks after attention and MLP) are
    divided by t only with sequence parallelism; the others always are.

    Args:
        cfg: the model; h, H, G, d and f are read from it, its MLP (``"gelu"``
            or ``"swiglu"``) decides the MLP terms and dropout, MLA
            (:func:`mla_attention_terms`) and experts (:func:`moe_mlp_terms`)
            their own terms.
        s: tokens per sequence on this rank.
        b: sequences per micro-batch.
        tp: t, tensor-parallel ranks.
        sp: sequence parallelism splits the terms TP leaves whole.
        recompute: ``"none"``, ``"selective"`` (drops the as^2 terms) or
            ``"full"`` (keeps only the layer input, e s b h).
        attention: ``"materialised"`` (eager kernels) or ``"flash"`` (fused ones).
        act_bytes: e, bytes per activation element.
        layer: which layer (0-based), deciding a dense MLP or experts;
            ``None``: the last one (an expert layer in a mixture of experts).

    Returns:
        ``{term: bytes}`` in forward order; for a GPT config (f = 4h, G = H) they
        add up to :func:`~aiinfra.memory.activations.activation_bytes_per_layer`.

    Raises:
        TypeError: ``cfg`` is not a :class:`TransformerConfig`.
        ValueError: a size is not a positive integer, ``tp`` does not divide H
            and G (or the experts' widths, or s with ``sp``), ``layer`` is out
            of range, or ``recompute`` or ``attention`` is unknown.
    """
    _check(cfg, s, b, tp, sp)
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {RECOMPUTE}, got {recompute!r}")
    if attention not in ATTENTION:
        raise ValueError(f"attention must be one of {ATTENTION}, got {attention!r}")
    if layer is None:
        layer = cfg.n_layers - 1
    if not isinstance(layer, int) or not 0 <= layer < cfg.n_layers:
        raise ValueError(f"layer must be in [0, {cfg.n_layers}), got {layer!r}")
    e, n, h, t = act_bytes, s * b, cfg.d_model, tp
    if recompute == "full":
        return {"layer input": e * n * h}
    H, G, d = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    whole = t if sp else 1  # what TP alone leaves whole, SP splits too
    eager = attention == "materialised"
    dropout = eager and cfg.mlp == "gelu"  # GPT trained with dropout, Llama without
    if cfg.is_mla:
        terms = mla_attention_terms(cfg, s, b, t, whole, eager, e)
    else:
        # region terms
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
        # endregion
    if cfg.is_moe_layer(layer):
        terms |= moe_mlp_terms(cfg, s, b, t, whole, eager, e)
    else:
        terms |= _dense_mlp_terms(cfg, n, t, whole, eager, dropout, e)
    if recompute == "selective":
        terms = {k: v for k, v in terms.items() if k not in CORE_TERMS}
    return terms


def _dense_mlp_terms(
    cfg: TransformerConfig,
    n: int,
    t: int,
    whole: int,
    eager: bool,
    dropout: bool,
    e: int,
) -> dict[str, float]:
    """The dense MLP's terms (GELU or SwiGLU), bytes per rank."""
    h, f = cfg.d_model, cfg.d_ff
    terms = {
        "MLP: norm input": e * n * h / whole,
        "MLP: first linear input": e * n * h / whole,
    }
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
    return terms


def layer_activation_bytes(
    cfg: TransformerConfig,
    s: int,
    b: int,
    tp: int = 1,
    sp: bool = False,
    recompute: str = "none",
    attention: str = "materialised",
    layer: int | None = None,
) -> float:
    """Bytes of 16-bit activations one layer of ``cfg`` keeps per rank.

    The sum of :func:`layer_activation_terms` (see there for the arguments and
    errors).
    """
    terms = layer_activation_terms(cfg, s, b, tp, sp, recompute, attention, layer=layer)
    return sum(terms.values())


def model_activation_bytes(
    cfg: TransformerConfig,
    s: int,
    b: int,
    tp: int = 1,
    sp: bool = False,
    recompute: str = "none",
    attention: str = "materialised",
) -> float:
    """Bytes of 16-bit activations all L layers of ``cfg`` keep per rank.

    The dense layers before ``first_dense_layers`` and the expert layers after
    them are counted each as :func:`layer_activation_terms` says (see there for
    the arguments and errors).
    """
    dense = cfg.first_dense_layers if cfg.n_experts else cfg.n_layers
    total = 0.0
    for layer, count in [(0, dense), (cfg.n_layers - 1, cfg.n_layers - dense)]:
        if count:
            per = layer_activation_bytes(cfg, s, b, tp, sp, recompute, attention, layer)
            total += count * per
    return total
