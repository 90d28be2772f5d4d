"""Tables of the memory section, computed when the book is built.

Each function returns an :class:`aiinfra.report.Table` for the ``aiinfra-table``
directive (through :mod:`aiinfra.book.training`). Calculator results come from
:mod:`aiinfra.memory.calculator`; measured ones run the small experiments of
:mod:`aiinfra.memory.experiments` on the CPU in a second or two. Units: GiB = 2^30
bytes throughout, said in every note.
"""

from __future__ import annotations

import torch

from aiinfra.memory.activations import (
    CORE_TERMS,
    RECOMPUTE,
    activation_bytes_per_layer,
    output_layer_bytes,
)
from aiinfra.memory.calculator import GiB
from aiinfra.memory.experiments import (
    eager_extras_bytes,
    measure_config_layers,
    measure_layers,
    measure_model_states,
    predicted_layer_bytes,
    shrunk_config,
)
from aiinfra.memory.layer_terms import layer_activation_bytes, layer_activation_terms
from aiinfra.memory.model_states import (
    GRADIENT_LAYOUTS,
    model_states_bytes,
    zero_model_states_bytes,
)
from aiinfra.memory.recompute_cost import recompute_overhead
from aiinfra.memory.tiny_gpt import tiny_gpt_config
from aiinfra.models.config import TransformerConfig
from aiinfra.models.params import count_parameters
from aiinfra.models.presets import DENSE_PRESETS, preset
from aiinfra.report import Table


def presets_table(names: tuple[str, ...] = DENSE_PRESETS) -> Table:
    """Shape, parameter count and mixed-precision Adam model states of presets.

    Args:
        names: keys of :data:`~aiinfra.models.presets.PRESETS`.

    Returns:
        One row per model.

    Raises:
        ValueError: a name is not a preset.
    """
    rows = []
    for name in names:
        c = preset(name)
        psi = count_parameters(c).total
        rows.append(
            [
                name,
                c.d_model,
                c.n_layers,
                c.n_heads,
                c.n_kv_heads,
                c.d_ff,
                c.vocab_size,
                f"{psi / 1e9:.2f}e9",
                round(model_states_bytes(psi).total / GiB, 1),
            ]
        )
    return Table(
        columns=["model", "h", "L", "a", "kv heads", "MLP f", "V", "Psi", "16 Psi GiB"],
        rows=rows,
        note="Psi counted from the config; 16 Psi = params + grads + Adam states in "
        "mixed precision, GiB = 2^30 bytes.",
    )


def recompute_table(
    model: str = "gpt3-175b", s: int = 2048, b: int = 1, t: int = 8
) -> Table:
    """Korthikanti et al. Table 2 evaluated for a real model, per GPU.

    Args:
        model: a preset name.
        s: sequence length.
        b: micro-batch size.
        t: tensor-parallel ranks of the parallel rows.

    Returns:
        One row per configuration: bytes per layer and GiB for all L layers.

    Raises:
        ValueError: ``model`` is not a preset, or a size does not fit the formula.
    """
    c = preset(model)
    h, a, n_layers = c.d_model, c.n_heads, c.n_layers
    configs = [
        ("no parallelism", 1, False, "none"),
        (f"tensor parallel (t={t})", t, False, "none"),
        ("tensor + sequence parallel", t, True, "none"),
        ("tensor parallel + selective recompute", t, False, "selective"),
        ("tensor + sequence + selective recompute", t, True, "selective"),
        ("full recompute", t, True, "full"),
    ]
    rows = []
    for label, tp, sp, rc in configs:
        per_layer = activation_bytes_per_layer(s, b, h, a, tp, sp, rc)
        rows.append([label, int(per_layer), round(n_layers * per_layer / GiB, 1)])
    return Table(
        columns=["configuration", "bytes per layer", f"GiB for {n_layers} layers"],
        rows=rows,
        note="16-bit activations; GiB = 2^30 bytes.",
        stamp=f"{model}: s = {s}, b = {b}, h = {h}, a = {a}",
    )


def _linear_and_total(
    c: TransformerConfig, s: int, b: int, attention: str
) -> tuple[float, float]:
    """One layer's bytes linear in T, over Tbh, and its total bytes (16-bit)."""
    terms = layer_activation_terms(c, s, b, attention=attention)
    quadratic = (*CORE_TERMS, "attention: log-sum-exp (fp32)")  # in T^2 b or bHT
    linear = sum(v for k, v in terms.items() if k not in quadratic)
    return linear / (s * b * c.d_model), sum(terms.values())


def step_rows_table(model: str = "llama-3-8b", s: int = 8192, b: int = 1) -> Table:
    """Model states under each gradient layout and activations under each attention.

    Args:
        model: a preset name.
        s: sequence length.
        b: micro-batch size.

    Returns:
        One row per accounting: its formula and GiB on one GPU (no parallelism).

    Raises:
        ValueError: ``model`` is not a preset, or a size does not fit the formula.
    """
    c = preset(model)
    h, a, n_layers, v = c.d_model, c.n_heads, c.n_layers, c.vocab_size
    psi = count_parameters(c).total
    sources = {
        "bf16": "16-bit gradients (ZeRO paper)",
        "fp32": "fp32 gradients (Megatron, bf16)",
        "bf16+fp32": "16-bit + fp32 gradients (DeepSpeed estimator)",
    }
    rows = []
    for layout, (grad_bytes, k) in GRADIENT_LAYOUTS.items():
        total = zero_model_states_bytes(psi, 0, 1, k, grad_bytes).total
        rows.append(
            [f"model states, {sources[layout]}", f"{2 + grad_bytes + k} Psi", total]
        )
    for attention, label in (
        ("materialised", "eager layer, softmax kept"),
        ("flash", "fused kernels"),
    ):
        linear, per_layer = _linear_and_total(c, s, b, attention)
        quadratic = "2HT/h" if attention == "materialised" else "4bHT"
        formula = (
            f"L Tbh ({linear:g} + {quadratic})"
            if attention == "materialised"
            else f"L ({linear:g} Tbh + {quadratic})"
        )
        rows.append([f"activations, {label}", formula, n_layers * per_layer])
    rows.append(
        [
            "logits + cross-entropy (fp32)",
            "4 Tbh (1 + V/h)",
            output_layer_bytes(s, b, h, v),
        ]
    )
    return Table(
        columns=["part", "formula", "GiB"],
        rows=[[part, formula, round(x / GiB, 1)] for part, formula, x in rows],
        note="One GPU, no parallelism or recomputation; GiB = 2^30 bytes.",
        stamp=f"{model}: Psi = {psi:,}, s = {s}, b = {b}, h = {h}, a = {a}, "
        f"L = {n_layers}, V = {v:,}",
    )


def measured_activations_table(
    s: int = 16, b: int = 2, h: int = 32, a: int = 4
) -> Table:
    """One TinyGPT layer: bytes saved for backward, measured against the formula.

    Args:
        s: sequence length of the tiny layer.
        b: micro-batch size.
        h: hidden size.
        a: attention heads.

    Returns:
        One row per dtype and recompute mode: the paper's Table 2 value (16-bit
        only), the prediction with LayerNorm statistics, the measurement.
    """
    rows = []
    for dtype in (torch.bfloat16, torch.float32):
        e = torch.finfo(dtype).bits // 8
        for rc in ("none", "selective", "full"):
            config = tiny_gpt_config(seq_len=s, n_layers=1, n_heads=a, d_model=h)
            measured = measure_layers(config, b, dtype, rc).forward_bytes
            paper = activation_bytes_per_layer(s, b, h, a, recompute=rc)
            rows.append(
                [
                    str(dtype).removeprefix("torch."),
                    rc,
                    int(paper) if e == 2 else "-",
                    predicted_layer_bytes(s, b, h, a, e, rc),
                    measured,
                ]
            )
    return Table(
        columns=["dtype", "recompute", "paper Table 2", "predicted", "measured"],
        rows=rows,
        note="Bytes, one layer; predicted = the paper's terms at the dtype's element "
        "size + LayerNorm mean and 1/std.",
        stamp=f"s = {s}, b = {b}, h = {h}, a = {a}",
    )


def measured_model_states_table() -> Table:
    """Model states after one AdamW step, measured against the formula (bytes)."""
    rows = []
    for mixed, label in ((False, "fp32 AdamW"), (True, "bf16 + fp32 master AdamW")):
        measured, formula, n_tensors = measure_model_states(mixed)
        for part in ("params", "grads", "optimizer"):
            rows.append([label, part, getattr(formula, part), getattr(measured, part)])
        rows[-1][2] = f"{formula.optimizer} + 4 x {n_tensors}"
    return Table(
        columns=["setting", "part", "formula", "measured"],
        rows=rows,
        note="Bytes of a 2-layer TinyGPT; formula (4+4+8) Psi or (2+2+12) Psi, and "
        "4 bytes of AdamW's step counter per parameter tensor.",
    )


LAYER_MODELS = ("gpt3-175b", "llama-3-8b", "mistral-7b", "qwen2.5-72b", "llama-3-405b")


def config_layers_table(
    names: tuple[str, ...] = LAYER_MODELS, s: int = 16, b: int = 2, k: int = 64
) -> Table:
    """Bytes per token a layer keeps, read from each config, and measured.

    Args:
        names: dense presets (GQA/MHA).
        s: sequence length of the measured, shrunk layer.
        b: its micro-batch size.
        k: the shrink factor of h, f and d (:func:`shrunk_config`).

    Returns:
        One row per model: f/h, G/H, the T-linear bytes of one 16-bit layer per
        token in units of h (eager and fused kernels), and for the Llama family the
        fp32 bytes saved by the package's own shrunk block against the count.

    Raises:
        ValueError: a name is not a dense GQA/MHA preset.
    """
    rows = []
    for name in names:
        c = preset(name)
        eager, _ = _linear_and_total(c, 8192, 1, "materialised")
        fused, _ = _linear_and_total(c, 8192, 1, "flash")
        measured: int | str = "-"
        counted: int | str = "-"
        if c.mlp == "swiglu":  # GPT's layer, with dropout: the TinyGPT table
            small = shrunk_config(c, k, s)
            measured = measure_config_layers(small, b, s).forward_bytes
            terms = layer_activation_terms(small, s, b, act_bytes=4)
            counted = int(sum(terms.values())) + eager_extras_bytes(small, b, s)
        rows.append(
            [name, round(c.d_ff / c.d_model, 2), f"{c.n_kv_heads}/{c.n_heads}"]
            + [round(eager, 2), round(fused, 2), counted, measured]
        )
    return Table(
        columns=[
            "model",
            "f / h",
            "G / H",
            "eager (x Tbh)",
            "fused (x Tbh)",
            "counted, shrunk (bytes)",
            "measured, shrunk (bytes)",
        ],
        rows=rows,
        note="Bytes one 16-bit layer keeps per token, in units of h, without the "
        "quadratic softmax or log-sum-exp term; the shrunk layer has h, f and d "
        "divided by k, runs in fp32, and its count adds the eager RMSNorm's "
        "normalised input and 1/rms and the causal mask.",
        stamp="k = {k}, s = {s}, b = {b}",
        fields={"k": k, "s": s, "b": b},
    )


RECOMPUTE_CASES = (
    ("gpt3-175b", 2048),
    ("llama-3-8b", 8192),
    ("llama-3-70b", 8192),
    ("llama-3-405b", 8192),
)


def recompute_cost_table(cases: tuple[tuple[str, int], ...] = RECOMPUTE_CASES) -> Table:
    """What each recomputation keeps and what it costs in FLOPs, per model.

    Args:
        cases: (preset name, sequence length) pairs.

    Returns:
        One row per case: one layer's 16-bit activations (eager layer, one
        sequence, no parallelism) under each mode, in MiB, and the FLOPs that
        selective and full recomputation add to the step, in percent.

    Raises:
        ValueError: a name is not a dense GQA/MHA preset.
    """
    rows = []
    for name, s in cases:
        c = preset(name)
        mib = [
            round(layer_activation_bytes(c, s, 1, recompute=rc) / 2**20)
            for rc in RECOMPUTE
        ]
        extra = [round(100 * recompute_overhead(c, s, rc), 1) for rc in RECOMPUTE[1:]]
        rows.append([name, s, *mib, *extra])
    return Table(
        columns=[
            "model",
            "T",
            "none (MiB)",
            "selective (MiB)",
            "full (MiB)",
            "selective: extra FLOPs (%)",
            "full: extra FLOPs (%)",
        ],
        rows=rows,
        note="One layer's activations, eager kernels, one sequence, no parallelism; "
        "extra FLOPs of the second forward over the step's model FLOPs (attention "
        "counted over the full T x T square).",
    )


FAMILY_MODELS = ("llama-3-70b", "mixtral-8x7b", "deepseek-v3")


def attention_and_mlp_bytes(
    name: str, s: int = 4096, b: int = 1, attention: str = "flash"
) -> tuple[float, float]:
    """Bytes per token one 16-bit layer of a preset keeps: (attention, MLP).

    The last layer is taken (an expert layer in a mixture of experts); the
    attention's part is every term up to the MLP's norm, the MLP's the rest.

    Args:
        name: a preset.
        s: tokens per sequence.
        b: sequences.
        attention: ``"flash"`` (fused kernels) or ``"materialised"``.

    Returns:
        (attention bytes, MLP bytes), each per token.
    """
    terms = layer_activation_terms(preset(name), s, b, attention=attention)
    keys = list(terms)
    split = keys.index("MLP: norm input")
    attn = sum(terms[k] for k in keys[:split])
    mlp = sum(terms[k] for k in keys[split:])
    return attn / (s * b), mlp / (s * b)


def family_layers_table(
    names: tuple[str, ...] = FAMILY_MODELS, s: int = 4096, b: int = 1
) -> Table:
    """GQA against MLA, a dense MLP against experts: bytes per token per layer.

    Args:
        names: presets.
        s: tokens per sequence.
        b: sequences.

    Returns:
        One row per model: its attention and MLP, and the KiB per token that
        one 16-bit layer with fused kernels keeps in each and in all.
    """
    rows = []
    for name in names:
        c = preset(name)
        attn_kind = "MLA" if c.is_mla else f"GQA {c.n_heads}/{c.n_kv_heads}"
        spec = c.moe_spec()
        if spec is None:
            mlp_kind = f"SwiGLU f = {c.d_ff}"
        else:
            mlp_kind = f"MoE {spec.top_k}/{spec.n_experts} x {spec.d_expert}"
            if spec.n_shared:
                mlp_kind += f" + {spec.shared_width}"
        attn, mlp = attention_and_mlp_bytes(name, s, b)
        kib = [round(x / 1024, 1) for x in (attn, mlp, attn + mlp)]
        rows.append([name, attn_kind, mlp_kind, *kib])
    return Table(
        columns=[
            "model",
            "attention",
            "MLP",
            "attention (KiB)",
            "MLP (KiB)",
            "layer (KiB)",
        ],
        rows=rows,
        note="KiB one 16-bit layer keeps per token for backward with fused kernels "
        "(FlashAttention, fused SwiGLU), no recomputation or parallelism. GQA H/G: "
        "query and K/V heads; MoE K/E x f_e + f_s: K of E routed experts of width "
        "f_e per token, shared experts of joint width f_s; an expert layer, "
        "counted as the package's own layers keep it.",
        stamp="s = {s}, b = {b}",
        fields={"s": s, "b": b},
    )
