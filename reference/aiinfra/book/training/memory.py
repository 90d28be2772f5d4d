"""What ``docs/training/memory.rst`` shows: its values, tables, figures."""

from __future__ import annotations

from dataclasses import replace

from matplotlib.figure import Figure

from aiinfra.memory import figures as memory_figures
from aiinfra.memory import model_states
from aiinfra.memory import tables as memory_tables
from aiinfra.memory.calculator import estimate_memory, memory_report
from aiinfra.memory.layer_terms import layer_activation_bytes, layer_activation_terms
from aiinfra.memory.model_states import model_states_bytes, zero_model_states_bytes
from aiinfra.memory.recompute_cost import recompute_overhead
from aiinfra.models.params import count_parameters
from aiinfra.models.presets import preset
from aiinfra.report import Table

GIB, MIB = 2**30, 2**20


EXAMPLE = "llama-3-8b"  # the chapter's running example


ZERO_PSI, ZERO_RANKS = 7_500_000_000, 64  # ZeRO's example (its Fig. 1)


ADAM_K = model_states.ADAM_STATE_BYTES  # K, bytes/parameter: mixed-precision Adam


# Korthikanti et al. 2022, abstract: a 530B GPT-3-style model on 2240 A100s.
KORTHIKANTI_530B = {"gpus": 2240, "mfu": 54.2, "mfu_recompute": 42.1}


def llama_parameters() -> int:
    """Parameters of Llama 3 8B."""
    return count_parameters(preset(EXAMPLE)).total


def llama_bf16_weights_gib() -> float:
    """Llama 3 8B's weights in bf16, GiB."""
    return 2 * llama_parameters() / GIB


def llama_model_states_gib(grad_dtype: str = "bf16") -> float:
    """Llama 3 8B's mixed-precision Adam model states (16, 18 or 20 bytes), GiB."""
    grad_bytes, k = model_states.gradient_layout(grad_dtype)
    return model_states_bytes(llama_parameters(), 2, grad_bytes, k).total / GIB


def zero_example_gb(stage: int) -> float:
    """Model states per rank of ZeRO's example at ``stage`` (0-3), GB."""
    return zero_model_states_bytes(ZERO_PSI, stage, ZERO_RANKS).total / 1e9


def presets_table() -> Table:
    """Shape, parameters and model states of every dense preset."""
    return memory_tables.presets_table()


def llama_activations_gib_8k(attention: str = "materialised") -> float:
    """Llama 3 8B's activations at 8192 tokens, no recomputation, GiB."""
    return (
        estimate_memory(preset(EXAMPLE), seq=8192, attention=attention).activations
        / GIB
    )


def llama_flash_ratio() -> float:
    """The eager layer's activations over fused kernels', Llama 3 8B at 8192 tokens."""
    return llama_activations_gib_8k() / llama_activations_gib_8k("flash")


def llama_logits_gib_8k() -> float:
    """Llama 3 8B's output layer and fp32 logits at 8192 tokens, GiB."""
    return estimate_memory(preset(EXAMPLE), seq=8192).logits / GIB


def step_rows_table() -> Table:
    """Llama 3 8B at 8192 tokens: model states per gradient layout, activations."""
    return memory_tables.step_rows_table(EXAMPLE, 8192)


def config_layers_table() -> Table:
    """Bytes per token of each model's own layer, counted and measured shrunk."""
    return memory_tables.config_layers_table()


def family_layers_table() -> Table:
    """Llama 3 70B, Mixtral 8x7B and DeepSeek-V3: KiB per token per layer."""
    return memory_tables.family_layers_table()


def family_kib(name: str, part: str) -> float:
    """KiB per token one fused 16-bit layer of ``name`` keeps: ``attention``/``mlp``."""
    attn, mlp = memory_tables.attention_and_mlp_bytes(name)
    return {"attention": attn, "mlp": mlp}[part] / 1024


def deepseek_attention_ratio() -> float:
    """DeepSeek-V3's MLA keeps this many times Llama 3 70B's GQA bytes per token."""
    return family_kib("deepseek-v3", "attention") / family_kib(
        "llama-3-70b", "attention"
    )


def deepseek_cache_bytes() -> int:
    """Bytes of DeepSeek-V3's 16-bit latent KV cache per token and layer."""
    c = preset("deepseek-v3")
    return 2 * (c.kv_lora_rank + c.rope_head_dim)


def deepseek_routed_share() -> float:
    """Share of DeepSeek-V3's expert-layer MLP bytes in its K routed experts, %."""
    terms = layer_activation_terms(preset("deepseek-v3"), 4096, 1, attention="flash")
    mlp = [k for k in terms if k.startswith("MoE")] + ["MLP: norm input"]
    mlp.append("MLP: first linear input")
    routed = [k for k in mlp if "routed" in k or "gather" in k]
    return 100 * sum(terms[k] for k in routed) / sum(terms[k] for k in mlp)


def deepseek_routed_kib(experts: int | None = None) -> float:
    """KiB per token DeepSeek-V3's routed experts keep (fused, bf16).

    ``experts``: the top-k K to route to (default: the config's, 8).
    """
    c = preset("deepseek-v3")
    if experts is not None:
        c = replace(c, top_k=experts)
    terms = layer_activation_terms(c, 4096, 1, attention="flash")
    routed = [k for k in terms if "routed" in k or "gather" in k]
    return sum(terms[k] for k in routed) / 4096 / 1024


def deepseek_gib(part: str) -> float:
    """DeepSeek-V3 on TP 8 + SP, fused kernels, 4096 tokens: GiB per rank.

    ``part``: ``activations`` or ``states`` (every expert on every rank).
    """
    est = estimate_memory(
        preset("deepseek-v3"), seq=4096, tp=8, sp=True, attention="flash"
    )
    states = est.params + est.grads + est.optimizer
    return {"activations": est.activations, "states": states}[part] / GIB


def recompute_cost_table() -> Table:
    """Activations kept and FLOPs added by each recomputation, per model."""
    return memory_tables.recompute_cost_table()


def recompute_extra_pct(model: str, seq: int, recompute: str) -> float:
    """FLOPs ``recompute`` adds to a step of ``model`` at ``seq`` tokens, percent."""
    return 100 * recompute_overhead(preset(model), seq, recompute)


def llama_layer_mib(recompute: str = "none", attention: str = "materialised") -> float:
    """One Llama 3 8B layer's 16-bit activations at 8192 tokens, one sequence, MiB."""
    layer = layer_activation_bytes(
        preset(EXAMPLE), 8192, 1, 1, False, recompute, attention
    )
    return layer / MIB


def korthikanti_530b(field: str) -> float:
    """Korthikanti et al.'s 530B run: ``gpus``, ``mfu`` or ``mfu_recompute`` (%).

    ``mfu`` is with sequence parallelism and selective recomputation,
    ``mfu_recompute`` with full recomputation.
    """
    return KORTHIKANTI_530B[field]


def recompute_table() -> Table:
    """Activations per layer under each recomputation strategy."""
    return memory_tables.recompute_table()


def memory_vs_seq_figure() -> Figure:
    """Memory of one rank against sequence length, Llama 3 8B."""
    return memory_figures.memory_vs_seq_figure()


def measured_activations_table() -> Table:
    """Saved-for-backward bytes of a tiny GPT layer, measured and predicted."""
    return replace(memory_tables.measured_activations_table(), words=(0, 1))


def measured_model_states_table() -> Table:
    """Model-state bytes measured from real tensors against the formula."""
    return replace(memory_tables.measured_model_states_table(), words=(0, 1))


def segments_figure() -> Figure:
    """Measured peak of checkpointed segments against the segment count."""
    return memory_figures.segments_figure()


def llama_memory_report() -> Table:
    """``aiinfra memory`` for Llama 3 8B: 8192 tokens, fused attention, ZeRO-1 on 8."""
    return memory_report(
        preset(EXAMPLE), EXAMPLE, seq=8192, attention="flash", zero=1, dp=8
    )
