"""A training job to plan, and one way to lay it out on the GPUs.

:class:`Job` is what is given: the model, the GPU kind and count, the global batch
in tokens and the sequence length, and the assumptions of the cost model stated as
numbers (the fraction of dense BF16 peak that the matmuls reach, the fraction of
data-parallel traffic left exposed, the fraction of HBM a plan may fill).
:class:`Layout` is what the planner chooses: data, tensor, pipeline and context
parallel sizes (dp, tp, pp, cp), the ZeRO stage over the shard group (dp cp ranks),
the micro-batch b in sequences, activation recomputation and v, the model chunks
per pipeline rank of the interleaved 1F1B schedule (1: plain 1F1B). The links are
the GPU's NVLink inside a node (the datasheet's per-direction bandwidth, half the
"both directions" figure) and one 400 Gb/s NIC per GPU between nodes, as in
rail-optimised HGX clusters; the per-message latencies are those of
:data:`aiinfra.comm.cost.LINKS`.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiinfra import checks
from aiinfra.accelerators import GPUS
from aiinfra.comm.cost import LINKS, LinkModel
from aiinfra.memory.activations import ATTENTION, RECOMPUTE
from aiinfra.memory.model_states import GRADIENT_LAYOUTS
from aiinfra.models.config import TransformerConfig

INTER_NODE = LINKS["ib400"]
#: How the planner prices matmuls: one constant fraction of peak, or by shape.
MATMUL = ("constant", "shape")  # one 400 Gb/s NIC per GPU: 50 GB/s, 5 us


def intra_node_link(gpu: str) -> LinkModel:
    """The NVLink of ``gpu`` from the one table of links (``LINKS["h100-nvlink"]``).

    Per direction, half of the datasheet's both-directions figure: A100 NVLink 3
    600 GB/s, H100/H200 NVLink 4 900 GB/s (FACTS.md, Hardware).
    """
    return LINKS[f"{gpu.lower()}-nvlink"]


@dataclass(frozen=True, eq=False)  # hashed by identity: a search caches per job
class Job:
    """What to train, on what, and the cost model's assumptions.

    Args:
        model: the model.
        gpu: a key of :data:`aiinfra.accelerators.GPUS` (``"H100"``).
        gpus: GPUs of the job; whole nodes, or part of one node.
        global_batch: tokens per optimizer step.
        seq: T, tokens per sequence; must divide ``global_batch``.
        gpus_per_node: GPUs in one NVLink node.
        efficiency: fraction of dense BF16 peak the matmuls reach (an assumption);
            with ``matmul="shape"`` only the attention core's (FlashAttention is
            not a plain GEMM), the linear layers' by :mod:`aiinfra.plan.gemm`.
        matmul: ``"constant"`` (every matmul at ``efficiency``) or ``"shape"``
            (each linear layer's GEMMs at the efficiency of their per-rank
            shapes; dense GQA/MHA models only).
        exposed: fraction of the data-parallel traffic not hidden behind compute
            (an assumption; never less than the traffic's excess over compute).
        memory_fraction: fraction of HBM a layout may fill.
        attention: ``"flash"`` (fused kernel) or ``"materialised"``.
        grad_dtype: gradient layout of the memory calculator (``"bf16"``).

    Raises:
        ValueError: an unknown GPU, attention, gradient layout or matmul
            pricing (``"shape"`` for an MLA or MoE model); a size that is not a
            positive int; ``gpus`` not a multiple (or divisor) of
            ``gpus_per_node``; ``seq`` not dividing ``global_batch``; a fraction
            outside (0, 1].
    """

    model: TransformerConfig
    gpu: str
    gpus: int
    global_batch: int
    seq: int
    gpus_per_node: int = 8
    efficiency: float = 0.6
    exposed: float = 0.2
    memory_fraction: float = 1.0
    attention: str = "flash"
    grad_dtype: str = "bf16"
    matmul: str = "constant"

    def __post_init__(self) -> None:
        if not isinstance(self.model, TransformerConfig):
            raise TypeError(
                f"model must be a TransformerConfig, got {type(self.model).__name__}"
            )
        if self.gpu not in GPUS or f"{str(self.gpu).lower()}-nvlink" not in LINKS:
            raise ValueError(f"gpu must be one of {sorted(GPUS)}, got {self.gpu!r}")
        for name in ("gpus", "global_batch", "seq", "gpus_per_node"):
            checks.positive_int(name, getattr(self, name))
        g, n = self.gpus_per_node, self.gpus
        if n % g and g % n:
            raise ValueError(
                f"gpus must be a multiple of gpus_per_node = {g} (whole nodes) or "
                f"divide it, got {n}"
            )
        if self.global_batch % self.seq:
            raise ValueError(
                f"global_batch must be a multiple of seq = {self.seq} (whole "
                f"sequences), got {self.global_batch}"
            )
        for name in ("efficiency", "exposed", "memory_fraction"):
            checks.number(name, getattr(self, name), 0, 1, low_open=True)
        if self.attention not in ATTENTION:
            raise ValueError(
                f"attention must be one of {ATTENTION}, got {self.attention!r}"
            )
        if self.grad_dtype not in GRADIENT_LAYOUTS:
            raise ValueError(
                f"grad_dtype must be one of {list(GRADIENT_LAYOUTS)}, got "
                f"{self.grad_dtype!r}"
            )
        if self.matmul not in MATMUL:
            raise ValueError(f"matmul must be one of {MATMUL}, got {self.matmul!r}")
        if self.matmul == "shape" and (self.model.is_mla or self.model.n_experts):
            raise ValueError(
                "matmul must be 'constant' for an MLA or MoE model (the shape model "
                "knows dense GQA/MHA layers only)"
            )

    @property
    def sequences(self) -> int:
        """B, sequences per step: ``global_batch / seq``."""
        return self.global_batch // self.seq

    @property
    def recompute_choices(self) -> tuple[str, ...]:
        """Recompute options worth trying, cheapest first.

        With a fused kernel "selective" drops nothing (no attention core is
        kept), so only "none" and "full".
        """
        return RECOMPUTE if self.attention == "materialised" else ("none", "full")


@dataclass(frozen=True)
class Layout:
    """One configuration: the parallel sizes and the per-rank choices.

    Args:
        dp, tp, pp, cp: data, tensor, pipeline and context parallel ranks.
        zero: ZeRO stage 0-3 over the dp cp shard group.
        micro_batch: b, sequences per micro-batch.
        recompute: ``"none"``, ``"selective"`` or ``"full"``.
        v: model chunks per pipeline rank (interleaved 1F1B); 1 is plain 1F1B.
    """

    dp: int
    tp: int
    pp: int
    cp: int
    zero: int
    micro_batch: int
    recompute: str = "none"
    v: int = 1

    def micro_batches(self, job: Job) -> int:
        """m, micro-batches per step per data-parallel replica: ``B / (dp b)``."""
        return job.sequences // (self.dp * self.micro_batch)

    def stage_layers(self, job: Job) -> int:
        """Layers of the busiest pipeline stage, ``ceil(L / pp)``."""
        return -(-job.model.n_layers // self.pp)
