"""Step time and MFU of a layout: compute, bubble and communication, term by term.

A step is priced per GPU as a sum of terms, each from a model the book derives:

- compute: the model's training FLOPs, 6 Psi + 12 L H d T per token
  (:func:`aiinfra.models.flops.training_flops_per_token`; Kaplan et al. 2020, PaLM
  App. B), shared by all GPUs, at ``efficiency`` times the dense BF16 peak (an
  assumption), or, with ``matmul="shape"``, at :func:`matmul_efficiency`: each
  linear layer's forward and two backward GEMMs at the efficiency
  :mod:`aiinfra.plan.gemm` models for their per-rank shapes. The busiest stage
  sets the pace: every stage holds ceil(L / pp) layers, as the memory counts
  them, and :func:`aiinfra.plan.stage_profile.stage_work` adds the output head's
  6 V h FLOPs per token to the last; full recomputation adds one forward of
  the layers, selective one of attention.
- pipeline bubble: compute times (pp - 1) / (v m) (Narayanan et al. 2021;
  interleaved with v chunks per rank).
- tensor parallelism: per layer and micro-batch, 4 all-reduces of b (T / cp) h
  bf16 values (Shoeybi et al. 2019, Fig. 4; 6 with full recompute's second
  forward), ring all-reduces on NVLink in the alpha-beta model
  (:mod:`aiinfra.comm.cost`); on the critical path, so all exposed. Sequence
  parallelism turns each into a reduce-scatter and an all-gather of the same ring
  cost.
- context parallelism: ring attention passes the K and V blocks, b (T / cp)
  (G / tp) d bf16 values each, cp - 1 times forward; backward passes them again
  and sends the fp32 dK, dV accumulators cp hops (the context-parallel page's
  :func:`aiinfra.parallel.context.cost.ring_bytes`, 3.3x forward's bytes at
  cp = 8). Only what exceeds the layer's causal attention compute (half the
  T x T scores, zig-zag balanced) is exposed.
- pipeline sends: b (T / cp) h / tp activations (sequence-parallel shards) per
  stage boundary; the fill and the drain, 2 (pp - 1) sends, are exposed.
- data parallelism: the gradients of the rank's Psi / (pp tp) parameters over
  the dp cp ranks. ZeRO 0-1 accumulate full gradients and reduce them once per
  step (an all-reduce, or a reduce-scatter and an all-gather of the same ring
  cost); ZeRO-2 keeps only a gradient shard, so it reduce-scatters after every
  micro-batch and gathers the parameters once; ZeRO-3 also gathers the parameters
  for every forward and backward (3 Psi per micro-batch; Rajbhandari et al.
  2020). A fraction ``exposed`` of it is not hidden, and never less than its
  excess over compute.

A group's link is NVLink when the mesh (:mod:`aiinfra.plan.mesh`) keeps it inside a
node, else the network (:data:`aiinfra.plan.job.INTER_NODE`). MFU divides the
model's FLOPs (without recomputation) by the step time and the peak.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from aiinfra.accelerators import GPUS
from aiinfra.comm.cost import (
    LinkModel,
    ring_all_gather_time,
    ring_all_reduce_time,
    ring_reduce_scatter_time,
)
from aiinfra.memory.model_states import gradient_layout
from aiinfra.memory.recompute_cost import recompute_flops_per_token
from aiinfra.models.config import TransformerConfig
from aiinfra.models.flops import attention_flops_per_token, training_flops_per_token
from aiinfra.models.params import count_parameters
from aiinfra.plan.gemm import gemm_efficiency
from aiinfra.plan.job import INTER_NODE, Job, Layout, intra_node_link
from aiinfra.plan.mesh import MeshLayout
from aiinfra.plan.stage_profile import stage_work

BF16 = 2  # bytes per activation and per parameter
ACCUMULATOR = 4  # bytes of a dK / dV accumulator element sent in ring backward (fp32)
CAUSAL_SHARE = 0.5  # a causal mask computes half the scores (zig-zag balanced)


@dataclass(frozen=True)
class StepTime:
    """Seconds of one step on one GPU, by term; their sum is the step.

    Attributes:
        compute: matmuls of the busiest stage, recomputation included.
        bubble: pipeline fill and drain, idle.
        tp: tensor-parallel all-reduces.
        cp: context-parallel K/V transfers not hidden by attention.
        pp: pipeline sends of the fill and the drain.
        dp: data-parallel traffic not hidden by compute.
        model_flops: the step's model FLOPs, all GPUs (no recomputation).
        peak: the GPUs' dense BF16 FLOP/s, all GPUs.
    """

    compute: float
    bubble: float
    tp: float
    cp: float
    pp: float
    dp: float
    model_flops: float
    peak: float

    @property
    def step(self) -> float:
        """Seconds per step: the sum of the terms."""
        return self.compute + self.bubble + self.tp + self.cp + self.pp + self.dp

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation: model FLOP/s over peak FLOP/s."""
        return self.model_flops / (self.step * self.peak)


@functools.lru_cache(maxsize=4096)
def _links(
    n: int, dp: int, pp: int, cp: int, tp: int, per_node: int
) -> dict[str, bool]:
    """Whether each group of the layout crosses nodes (cached: 16K-GPU meshes).

    TP never does: the mesh keeps it inside a node.
    """
    mesh = MeshLayout(dp, pp, cp, tp, gpus_per_node=min(per_node, n))
    return {d: mesh.crosses_nodes(d) for d in ("pp", "cp", ("dp", "cp"))}


@functools.lru_cache(maxsize=64)
def _parameters(fields: tuple) -> int:
    """Psi of the model with these fields (cached for a search)."""
    return count_parameters(TransformerConfig(**dict(fields))).total


def _link(job: Job, crosses: bool) -> LinkModel:
    return INTER_NODE if crosses else intra_node_link(job.gpu)


def _dp_time(job: Job, layout: Layout, link: LinkModel) -> float:
    """Seconds of data-parallel traffic per step, before any overlap."""
    shard = layout.dp * layout.cp
    if shard == 1:
        return 0.0
    grad_bytes, _ = gradient_layout(job.grad_dtype)
    params = _parameters(tuple(vars(job.model).items())) / (layout.pp * layout.tp)
    grads = params * grad_bytes
    m = layout.micro_batches(job)
    if layout.zero < 2:  # full gradients accumulate; reduced once per step
        return ring_all_reduce_time(grads, shard, link)
    gather = ring_all_gather_time(params * BF16, shard, link)
    scatter = ring_reduce_scatter_time(grads, shard, link)
    if layout.zero == 2:  # gradients sharded: reduce-scatter every micro-batch
        return m * scatter + gather
    return m * (2 * gather + scatter)  # parameters gathered for F and for B


def layer_gemms(job: Job, layout: Layout) -> list[tuple[int, int, int, int]]:
    """The forward GEMMs of one micro-batch on one rank, with their weights.

    Args:
        job: the job (a dense GQA/MHA model).
        layout: the layout; a rank holds ``1 / tp`` of each weight and
            ``b T / cp`` tokens.

    Returns:
        ``(m, n, k, count)`` per weight matrix: QKV, the output projection, the
        MLP's input (gate and up for SwiGLU) and output, each ``count = L``
        times, and the output head once; ``m`` is the tokens.
    """
    cfg, tp = job.model, layout.tp
    t = layout.micro_batch * job.seq // layout.cp  # tokens of the micro-batch
    h, d, n_in = cfg.d_model, cfg.head_dim, 2 if cfg.mlp == "swiglu" else 1
    L = cfg.n_layers
    return [
        (t, (cfg.n_heads + 2 * cfg.n_kv_heads) * d // tp, h, L),  # W_q, W_k, W_v
        (t, h, cfg.n_heads * d // tp, L),  # W_o
        (t, n_in * cfg.d_ff // tp, h, L),  # gate and up (SwiGLU) or fc1
        (t, h, cfg.d_ff // tp, L),  # down or fc2
        (t, -(-cfg.vocab_size // tp), h, 1),  # the output head, vocab-parallel
    ]


@functools.lru_cache(maxsize=8192)
def matmul_efficiency(job: Job, layout: Layout) -> float:
    """The step's matmul FLOPs over their time at peak: one fraction of peak.

    Each weight's forward GEMM (m, n, k) and its two backward ones, dX (m, k, n)
    and dW (k, n, m), do the same FLOPs, each at :func:`gemm_efficiency` of its
    shape; the attention core (scores and values: FlashAttention, not priced by
    the GEMM model) at ``job.efficiency``. The result weighs each by its FLOPs
    (a harmonic mean), so the compute term divides by one rate.

    Args:
        job: the job, ``matmul="shape"``.
        layout: the layout.

    Returns:
        Achieved FLOP/s of the step's matmuls over the dense BF16 peak.
    """
    seconds = flops = 0.0  # in units of peak FLOP/s
    for m, n, k, count in layer_gemms(job, layout):
        work = 2 * m * n * k * count
        for shape in ((m, n, k), (m, k, n), (k, n, m)):  # forward, dX, dW
            seconds += work / gemm_efficiency(*shape, gpu=job.gpu)
            flops += work
    t = layout.micro_batch * job.seq // layout.cp
    attention = attention_flops_per_token(job.model, job.seq) * t / layout.tp
    return (flops + attention) / (seconds + attention / job.efficiency)


def step_time(job: Job, layout: Layout) -> StepTime:
    """Price one step of ``job`` laid out as ``layout``.

    Args:
        job: the job and the cost model's assumptions.
        layout: a valid layout (see :mod:`aiinfra.plan.search`).

    Returns:
        The step's terms.
    """
    cfg, gpu = job.model, GPUS[job.gpu]
    dp, tp, pp, cp, b = layout.dp, layout.tp, layout.pp, layout.cp, layout.micro_batch
    m, layers = layout.micro_batches(job), layout.stage_layers(job)
    crosses = _links(job.gpus, dp, pp, cp, tp, job.gpus_per_node)
    efficiency = (
        job.efficiency if job.matmul == "constant" else matmul_efficiency(job, layout)
    )
    rate = efficiency * gpu.bf16_flops  # achieved FLOP/s of one GPU

    # region compute
    per_token = training_flops_per_token(cfg, job.seq)
    extra = recompute_flops_per_token(cfg, job.seq, layout.recompute)  # 2nd forward
    model_flops = per_token * job.global_batch
    stages = [layers] * pp  # ceil(L / pp) on every stage, as memory counts them
    work, per_layer = stage_work(job, layout, stages)  # the last adds the head
    recompute = extra / cfg.n_layers  # per layer and token
    busiest = max(w * per_layer + layers * recompute for w in work)
    compute = busiest * job.global_batch / (job.gpus // pp) / rate
    bubble = compute * (pp - 1) / (layout.v * m)
    # endregion

    # region communication
    tokens = b * job.seq // cp  # tokens of one micro-batch on one rank
    n_tp = tokens * cfg.d_model * BF16  # the b (T / cp) h activations
    reduces = 6 if layout.recompute == "full" else 4
    t_tp = (
        layers * m * reduces * ring_all_reduce_time(n_tp, tp, intra_node_link(job.gpu))
    )

    t_cp = 0.0
    if cp > 1:
        link = _link(job, crosses["cp"])
        kv = 2 * tokens * (cfg.n_kv_heads // tp) * cfg.head_dim  # K and V elements
        hop = link.alpha + kv * BF16 * link.beta
        hop_acc = link.alpha + kv * ACCUMULATOR * link.beta  # dK, dV in fp32
        send_f = (cp - 1) * hop  # forward: K, V around the ring
        send_b = (cp - 1) * hop + cp * hop_acc  # backward: K, V again; dK, dV home
        # one layer's attention, forward + backward, causal: half the T x T square
        attention = attention_flops_per_token(cfg, job.seq)  # full square, all L
        attn = CAUSAL_SHARE * attention / cfg.n_layers * tokens / tp / rate
        exposed_f = max(0.0, send_f - attn / 3)
        exposed_b = max(0.0, send_b - 2 * attn / 3)
        t_cp = layers * m * (exposed_f + exposed_b)

    t_pp = 0.0
    if pp > 1:
        link = _link(job, crosses["pp"])
        t_pp = 2 * (pp - 1) * (link.alpha + n_tp / tp * link.beta)

    t_dp = _dp_time(job, layout, _link(job, crosses[("dp", "cp")]))
    exposed = max(job.exposed * t_dp, t_dp - compute)
    # endregion
    return StepTime(
        compute,
        bubble,
        t_tp,
        t_cp,
        t_pp,
        exposed,
        model_flops,
        job.gpus * gpu.bf16_flops,
    )
