"""What ``docs/models/moe_models.rst`` shows: MoE models by the numbers."""

from __future__ import annotations

import math

from matplotlib.figure import Figure

from aiinfra.accelerators import GPUS
from aiinfra.models.flops import training_flops_per_token
from aiinfra.models.params import (
    count_parameters,
    mtp_module_parameters,
    routed_expert_parameters,
)
from aiinfra.models.presets import preset
from aiinfra.report import Table

from .transformer import MISTRAL

MOE_MODELS = ("mixtral-8x7b", "qwen1.5-moe-a2.7b", "deepseek-v2", "deepseek-v3")
DENSE_MODELS = ("mistral-7b", "llama-3-70b")  # Mixtral's base; V3's active scale
MIXTRAL, V3 = "mixtral-8x7b", "deepseek-v3"
MOE_SEQ_LEN = 4096  # tokens per sequence for the attention term of the FLOPs
BF16 = 2  # bytes per parameter
TRAIN_BYTES = 16  # bf16 weight and gradient, fp32 master, Adam m and v (ZeRO)
FP8_BLOCK = 128  # DeepSeek-V3 Sec. 3.3.2: one weight scale per 128 x 128 block
GPUS_PER_NODE = 8  # an HGX H100 node
EP_EXAMPLE = 64  # expert-parallel degree of the per-GPU example
V3_CARD_B = 685  # DeepSeek-V3's model card: checkpoint size, main model and MTP
# Published (total, activated) in billions: Mistral AI's Mixtral announcement
# (11 Dec 2023), the Qwen1.5-MoE post (28 Mar 2024), the DeepSeek-V2 and V3
# abstracts. The tests hold the counts against each to its digits.
PUBLISHED = {
    "mixtral-8x7b": ("46.7", "12.9"),
    "qwen1.5-moe-a2.7b": ("14.3", "2.7"),
    "deepseek-v2": ("236", "21"),
    "deepseek-v3": ("671", "37"),
}
_B, _GB = 1e9, 1e9


def published(name: str, column: int = 1) -> str:
    """A published count, billions: ``column`` 0 the total, 1 the activated."""
    return PUBLISHED[name][column]


def _counts(name: str) -> tuple[int, int, int]:
    """(total, activated, activated without the input embedding) of a preset."""
    c = preset(name)
    a = count_parameters(c, activated=True)
    return count_parameters(c).total, a.total, a.total - a.embedding


def moe_models_table() -> Table:
    """Total and activated parameters, bf16 weights and training FLOPs per token."""
    rows = []
    for name in (*MOE_MODELS, *DENSE_MODELS):
        total, active, no_embed = _counts(name)
        flops = training_flops_per_token(preset(name), MOE_SEQ_LEN)
        published = " / ".join(PUBLISHED.get(name, ("", ""))).strip(" /")
        rows.append(
            [
                name,
                round(total / _B, 1),
                round(active / _B, 1),
                round(no_embed / _B, 1),
                published,
                f"{active / total:.0%}",
                round(BF16 * total / _GB),
                round(flops / 1e9),
            ]
        )
    note = (
        "B = 1e9 parameters, GB = 1e9 bytes. Activated: what one token uses, K of "
        "the E routed experts of each MoE layer and everything else; Mistral and "
        "Qwen count the input embedding, DeepSeek does not. Training GFLOP per "
        "token: 6 x activated matmul weights + 12 L H d T (PaLM). Published: "
        "total / activated."
    )
    columns = [
        "model",
        "total (B)",
        "activated (B)",
        "activated without embedding (B)",
        "published (B)",
        "activated share",
        "bf16 weights (GB)",
        "training GFLOP / token",
    ]
    return Table(columns, rows, note, f"T = {MOE_SEQ_LEN}")


def total_vs_activated_figure() -> Figure:
    """Total against activated parameters: dense models on the diagonal."""
    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.add_subplot()
    for names, marker, label in (
        (MOE_MODELS, "o", "mixture of experts"),
        (DENSE_MODELS, "s", "dense"),
    ):
        points = [_counts(n)[:2] for n in names]
        xs, ys = [a / _B for _, a in points], [t / _B for t, _ in points]
        ax.scatter(xs, ys, marker=marker, s=40, label=label, zorder=3)
        for name, x, y in zip(names, xs, ys, strict=True):
            ax.annotate(name, (x, y), (6, -3), textcoords="offset points", fontsize=8)
    line = [1, 1000]
    ax.plot(line, line, color="gray", linewidth=0.8, linestyle=":")
    ax.annotate("total = activated (dense)", (120, 150), fontsize=7, rotation=33)
    ax.set(xscale="log", yscale="log", xlim=(1, 1000), ylim=(5, 1500))
    ax.set_xlabel("activated parameters per token (B): compute")
    ax.set_ylabel("total parameters (B): memory")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, which="major", alpha=0.3)
    return fig


def _read_share(name: str, batch: int) -> float:
    """Share of the weights a decode step over ``batch`` tokens reads (uniform)."""
    c = preset(name)
    spec = c.moe_spec()
    total, experts = count_parameters(c).total, routed_expert_parameters(c)
    hit = 1 - (1 - spec.top_k / spec.n_experts) ** batch  # an expert is chosen
    return (total - experts + hit * experts) / total


def _weights_per_gpu_gb(name: str, ep: int) -> float:
    """bf16 GB per GPU: routed experts split ``ep`` ways, the rest replicated."""
    c = preset(name)
    total, experts = count_parameters(c).total, routed_expert_parameters(c)
    return BF16 * (total - experts + experts / ep) / _GB


def serving_figure() -> Figure:
    """Weights read per decode step against batch; weights per GPU against EP."""
    fig = Figure(figsize=(9, 3.6), layout="constrained")
    read, per_gpu = fig.subplots(1, 2)
    batches = [2**i for i in range(10)]
    for name in MOE_MODELS:
        read.plot(batches, [_read_share(name, b) for b in batches], "-o", ms=3)
        eps = [2**i for i in range(9) if 2**i <= preset(name).n_experts]
        per_gpu.plot(eps, [_weights_per_gpu_gb(name, n) for n in eps], "-o", ms=3)
        per_gpu.lines[-1].set_label(name)
    read.set_ylim(0, 1.05)
    read.set_xscale("log", base=2)
    read.set_xlabel("sequences per decode step")
    read.set_ylabel("share of the weights read")
    read.set_title("expected reads, uniform routing", fontsize=9)
    per_gpu.set_xscale("log", base=2)
    per_gpu.set_yscale("log")
    hbm = GPUS["H100"].hbm_bytes / _GB
    per_gpu.axhline(hbm, color="gray", linewidth=0.8, linestyle=":")
    per_gpu.annotate("H100 HBM", (2, hbm * 1.1), fontsize=7)
    per_gpu.set_xlabel("expert-parallel degree (GPUs)")
    per_gpu.set_ylabel("bf16 weights per GPU (GB)")
    per_gpu.set_title("experts split, the rest replicated", fontsize=9)
    per_gpu.legend(fontsize=7)
    for ax in (read, per_gpu):
        ax.grid(True, alpha=0.3)
    return fig


def total_b(name: str) -> float:
    """A preset's total parameters, billions."""
    return _counts(name)[0] / _B


def activated_b(name: str) -> float:
    """A preset's activated parameters per token (embedding counted), billions."""
    return _counts(name)[1] / _B


def activated_without_embedding_b(name: str) -> float:
    """Activated parameters per token without the input embedding, billions."""
    return _counts(name)[2] / _B


def flops_ratio(moe: str = MIXTRAL, dense: str = MISTRAL) -> float:
    """Training FLOPs per token of ``moe`` over those of ``dense``."""
    return training_flops_per_token(
        preset(moe), MOE_SEQ_LEN
    ) / training_flops_per_token(preset(dense), MOE_SEQ_LEN)


def expert_share(name: str = V3) -> float:
    """Share of a model's parameters in its routed experts."""
    c = preset(name)
    return routed_expert_parameters(c) / count_parameters(c).total


def bf16_weights_gb(name: str = V3) -> float:
    """A preset's weights in bf16, GB."""
    return BF16 * total_b(name)


def fp8_weights_gb(name: str = V3, block: int = FP8_BLOCK) -> float:
    """Weights as DeepSeek-V3 releases them, GB: FP8 matmuls, bf16 for the rest.

    Every attention and expert matrix in e4m3 (1 byte) with one fp32 scale per
    ``block x block`` tile; the embedding, the head, the routers and the norms in
    bf16 (2 bytes). The main model only, as :func:`total_b`.
    """
    c, n = preset(name), count_parameters(preset(name))
    routers = c.n_moe_layers * c.n_experts * c.d_model  # gate weights stay bf16
    fp8 = (n.attention + n.mlp - routers) * (1 + 4 / block**2)
    return (fp8 + BF16 * (n.embedding + n.head + n.norms + routers)) / _GB


def training_state_tb(name: str = V3) -> float:
    """Weights, gradients and Adam state at 16 bytes per parameter, TB."""
    return TRAIN_BYTES * total_b(name) / 1e3


def mtp_module_b(name: str = V3) -> float:
    """DeepSeek-V3's multi-token-prediction module as stored, billions."""
    return mtp_module_parameters(preset(name)) / _B


def checkpoint_b(name: str = V3) -> float:
    """The main model and one MTP module, as DeepSeek-V3's checkpoint holds, B."""
    return total_b(name) + mtp_module_b(name)


def node_hbm_gb(gpu: str = "H100") -> float:
    """HBM of one node of :data:`GPUS_PER_NODE` GPUs, GB."""
    return GPUS_PER_NODE * GPUS[gpu].hbm_bytes / _GB


def min_ep_to_fit(name: str = V3, gpu: str = "H100") -> int:
    """Smallest power-of-two EP degree whose bf16 weights per GPU fit the HBM."""
    hbm = GPUS[gpu].hbm_bytes / _GB
    ep = 1
    while _weights_per_gpu_gb(name, ep) > hbm:
        ep *= 2
    return ep


def weights_per_gpu_gb(name: str = V3, ep: int = EP_EXAMPLE) -> float:
    """bf16 weights per GPU at expert-parallel degree ``ep``, GB."""
    return _weights_per_gpu_gb(name, ep)


def tokens_per_step_at_ridge(name: str = V3, gpu: str = "H100") -> int:
    """Tokens a step needs for each expert's GEMM to reach ``gpu``'s ridge.

    An expert's GEMM over ``m`` tokens does ``2 m`` FLOPs per weight and reads
    the weight's 2 bf16 bytes: ``m`` FLOP per byte (activations left out). It
    reaches the ridge at ``m`` = ridge, and a step of ``B`` tokens gives each
    expert ``B K / E`` of them on average.
    """
    spec = preset(name).moe_spec()
    return math.ceil(GPUS[gpu].ridge * spec.n_experts / spec.top_k)
