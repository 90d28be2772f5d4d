"""What ``docs/training/tensor_parallel.rst`` shows: its values, tables, figures."""

from __future__ import annotations

import torch
from matplotlib.figure import Figure

from aiinfra.accelerators import GPUS
from aiinfra.comm.cost import get_link
from aiinfra.memory.activations import activation_bytes_per_layer
from aiinfra.models.config import TransformerConfig
from aiinfra.models.layers import SwiGLU
from aiinfra.models.presets import preset
from aiinfra.models.transformer import Transformer
from aiinfra.parallel.tensor import collective_matmul
from aiinfra.parallel.tensor import cost as tp_cost
from aiinfra.parallel.tensor import figures as tp_figures
from aiinfra.parallel.tensor import steps as tp_steps
from aiinfra.parallel.tensor.model import (
    MEGATRON_PLAN,
    SEQUENCE_PARALLEL_PLAN,
    resolve_plan,
)
from aiinfra.report import Table

TP_MODEL = "llama-3-70b"  # the page's example: h = 8192, H = 64, G = 8
TP_SEQ = 8192  # tokens per sequence, one sequence per micro-batch
TP_SIZES = (1, 2, 4, 8, 16, 32)
TP_LINKS = ("h100-nvlink", "ib400")  # the H100's NVLink 4, one 400G NIC


def _tp_mlp_steps() -> list:
    """The SwiGLU MLP (h = 8, d_ff = 16) on 4 simulated ranks, seeded weights."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        mlp = SwiGLU(8, 16)
        x = torch.randn(1, 4, 8)  # (b, T, h)
    return tp_steps.mlp_steps(mlp, x, 4)


def tp_mlp_steps_figure() -> Figure:
    """What each rank holds after each step of the tensor-parallel MLP."""
    return tp_steps.mlp_steps_figure(_tp_mlp_steps())


def tp_mlp_steps_frames() -> list[Figure]:
    """The same, one lecture frame per step."""
    return tp_steps.mlp_steps_frames(_tp_mlp_steps())


def _one_layer() -> Transformer:
    """A one-layer toy model: the plan's module names without the weights' cost."""
    return Transformer(TransformerConfig(n_layers=1))


def tp_plan_figure() -> Figure:
    """Megatron's plan and the sequence-parallel one, drawn on a block."""
    model = _one_layer()
    return tp_figures.plan_figure(
        [
            ("TP", resolve_plan(model, MEGATRON_PLAN)),
            ("TP + SP", resolve_plan(model, SEQUENCE_PARALLEL_PLAN)),
        ]
    )


def tp_heads_figure() -> Figure:
    """Llama 3 70B's grouping, scaled down: 16 query heads on 4 KV heads, p = 4."""
    return tp_figures.heads_figure(16, 4, 4)


def tp_heads(field: str) -> int:
    """``n_heads`` or ``n_kv_heads`` of the page's model."""
    return getattr(preset(TP_MODEL), field)


def tp_logits_figure() -> Figure:
    """Llama 3 8B's logits for one 8192-token sequence, per rank."""
    return tp_figures.logits_figure(
        TP_SEQ, preset("llama-3-8b").vocab_size, (1, 2, 4, 8)
    )


def tp_full_logits_gb() -> float:
    """GB of fp32 logits of one 8192-token sequence of Llama 3 8B, unsplit."""
    return 4 * TP_SEQ * preset("llama-3-8b").vocab_size / 1e9


def tp_vocab_size() -> int:
    """Llama 3's vocabulary."""
    return preset("llama-3-8b").vocab_size


def tp_activations_figure() -> Figure:
    """Activations per layer of Llama 3 70B against p, with and without SP."""
    return tp_figures.activations_figure(preset(TP_MODEL), TP_SEQ, TP_SIZES)


def tp_sp_saving(p: int = 8) -> float:
    """How many times smaller a layer's activations are with SP at ``p``."""
    c = preset(TP_MODEL)
    args = (TP_SEQ, 1, c.d_model, c.n_heads, p)
    tp = activation_bytes_per_layer(*args, False, "selective")
    return tp / activation_bytes_per_layer(*args, True, "selective")


def tp_sent_per_layer(p: int = 8, sp: bool = False) -> float:
    """Elements each rank sends per layer and step with ring collectives, in b T h."""
    ring = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1}
    return sum(ring[op] * k for op, k in tp_cost.layer_traffic(p, sp)) * (p - 1) / p


def tp_sp_traffic_ratio(p: int = 8) -> float:
    """Bytes a rank sends per layer with SP over those without (the re-gathers)."""
    return tp_sent_per_layer(p, True) / tp_sent_per_layer(p, False)


def tp_valid_sizes() -> str:
    """The TP sizes that split the page's model's heads: ``"1, 2, 4, 8"``."""
    c = preset(TP_MODEL)
    ok = [p for p in range(1, c.n_heads + 1) if not c.n_heads % p + c.n_kv_heads % p]
    return ", ".join(map(str, ok))


def tp_heads_per_rank(field: str, p: int) -> float:
    """``n_heads`` or ``n_kv_heads`` of the page's model over ``p`` ranks."""
    return tp_heads(field) / p


def tp_traffic_table(p: int = 8) -> Table:
    """The collectives of one layer and step, with and without SP, at ``p`` ranks."""
    rows = []
    for sp, name in ((False, "tensor parallel"), (True, "tensor + sequence parallel")):
        ops = tp_cost.layer_traffic(p, sp)
        counts = {op: sum(1 for o, _ in ops if o == op) for op, _ in ops}
        listed = ", ".join(f"{n} {op.replace('_', '-')}" for op, n in counts.items())
        rows.append([name, listed, tp_sent_per_layer(p, sp)])
    return Table(
        ["layout", "collectives per layer", "sent per rank (b T h)"],
        rows,
        note=(
            f"p = {p}; a ring sends (p-1)/p of the buffer per all-gather or "
            "reduce-scatter, twice that per all-reduce. The tests count the "
            "collectives that ran on 2 and 4 gloo ranks and find these."
        ),
        words=(0, 1),
    )


def tp_comm_share_figure() -> Figure:
    """Communication share of a Llama 3 70B layer against p, NVLink vs InfiniBand."""
    return tp_figures.comm_share_figure(
        preset(TP_MODEL),
        TP_SIZES[1:],
        TP_SEQ,
        TP_SEQ,
        GPUS["H100"].bf16_flops,
        TP_LINKS,
    )


def tp_comm_share(p: int, link: str) -> float:
    """Percent of a layer's time in TP collectives (not overlapped), 100 % compute."""
    c = preset(TP_MODEL)
    peak = GPUS["H100"].bf16_flops
    return 100 * tp_cost.layer_cost(c, p, TP_SEQ, TP_SEQ, peak, link).comm_share


def tp_link_gbps(link: str) -> float:
    """The bandwidth of ``link`` (a name in the one table of links), GB/s each way."""
    return 1 / get_link(link).beta / 1e9


def tp_layer_ms(p: int, part: str, link: str = "h100-nvlink") -> float:
    """Milliseconds of one layer's ``compute`` or ``communication`` at ``p``."""
    c = preset(TP_MODEL)
    peak = GPUS["H100"].bf16_flops
    return 1e3 * getattr(tp_cost.layer_cost(c, p, TP_SEQ, TP_SEQ, peak, link), part)


# Collective matmul: the SwiGLU's first matmuls (w1 and w3) of a Llama 3 70B layer
# under SP at p = 8, fed by an all-gather of one 8192-token sequence in bf16.
TP_OVERLAP_P = 8
TP_OVERLAP_CHUNKS = tuple(2**k for k in range(9))  # 1 to 256 chunks


def _fc1_gather_and_compute() -> tuple[float, float]:
    """(bytes all-gathered, seconds of the matmul on one of p GPUs at peak)."""
    c = preset(TP_MODEL)
    n_bytes = TP_SEQ * c.d_model * 2  # b T h in bf16
    flops = 2 * TP_SEQ * c.d_model * 2 * c.d_ff / TP_OVERLAP_P  # w1 and w3
    return n_bytes, flops / GPUS["H100"].bf16_flops


def tp_overlap_us(link: str, chunks: int) -> float:
    """Exposed all-gather of the fc1 matmul, microseconds, at a chunk count."""
    n_bytes, compute = _fc1_gather_and_compute()
    return 1e6 * collective_matmul.chunked_all_gather_exposed(
        n_bytes, TP_OVERLAP_P, compute, chunks, link
    )


def tp_overlap_best_chunks(link: str) -> int:
    """The chunk count of :data:`TP_OVERLAP_CHUNKS` that exposes the least."""
    return min(TP_OVERLAP_CHUNKS, key=lambda k: tp_overlap_us(link, k))


def tp_overlap_best_us(link: str) -> float:
    """Exposed microseconds at the best chunk count of :data:`TP_OVERLAP_CHUNKS`."""
    return tp_overlap_us(link, tp_overlap_best_chunks(link))


def tp_fc1_compute_us() -> float:
    """The fc1 matmul's seconds on one GPU at the bf16 peak, microseconds."""
    return 1e6 * _fc1_gather_and_compute()[1]


def tp_overlap_figure() -> Figure:
    """Exposed communication of the fc1 all-gather against chunks, two links."""
    n_bytes, compute = _fc1_gather_and_compute()
    return collective_matmul.exposed_figure(
        n_bytes, TP_OVERLAP_P, compute, TP_LINKS, TP_OVERLAP_CHUNKS
    )
