"""Pipeline depth: what each stage computes and holds, rank by rank.

A pipeline is as fast as its slowest stage and as large as its fullest one, and the
two are different stages. The first stage holds the most activations: under 1F1B
rank r keeps min(p - r, m) micro-batches of its layers alive
(:func:`aiinfra.plan.stage_memory.in_flight`), p on rank 0, one on the last. The
last stage computes the most: besides its layers it runs the output head and the
loss, 6 V h FLOPs per token of training, which for a 128K vocabulary is a good part
of a layer; the first stage's embedding is a lookup and costs no matmul. Llama 3
(Dubey et al. 2024, Sec. 3.3.2) balances this by giving the first and the last
stage one layer fewer: :func:`split_layers` with ``trim=1``. Layers are split
evenly otherwise, the remainder going to the first stages. Memory per rank is the
planner's (:mod:`aiinfra.plan.stage_memory`), with the V x h matrix only on the
first and the last stage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aiinfra.models.flops import training_flops_per_token
from aiinfra.plan.job import Job, Layout
from aiinfra.plan.stage_memory import in_flight, stage_estimate


def split_layers(n_layers: int, pp: int, trim: int = 0) -> list[int]:
    """Layers per pipeline stage, ``trim`` fewer on the first and the last.

    Args:
        n_layers: L, the model's layers.
        pp: stages.
        trim: layers taken off the first and the last stage (Llama 3: 1).

    Returns:
        ``pp`` counts that add up to ``n_layers``.

    Raises:
        ValueError: ``pp`` < 2 with ``trim`` > 0, or a stage would have no layer.
    """
    for name, value in [("n_layers", n_layers), ("pp", pp)]:
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not isinstance(trim, int) or trim < 0 or (trim and pp < 2):
        raise ValueError(f"trim must be an int >= 0 (0 when pp = 1), got {trim!r}")
    base, rem = divmod(n_layers + 2 * trim, pp)
    layers = [base + (r < rem) for r in range(pp)]
    layers[0] -= trim
    layers[-1] -= trim
    if min(layers) < 1:
        raise ValueError(f"{n_layers} layers on pp = {pp} stages leave one empty")
    return layers


def stage_work(
    job: Job, layout: Layout, layers: Sequence[int] | None = None
) -> tuple[list[float], float]:
    """Each pipeline rank's training FLOPs per token, in units of one layer's.

    Args:
        job: the job (model, sequence).
        layout: the layout; only ``pp`` matters.
        layers: each stage's layers; ``None``: :func:`split_layers` (no trim).

    Returns:
        The work of each rank, first to last (the last adds the output head, 6 V
        h FLOPs per token), and one layer's training FLOPs per token.

    Raises:
        ValueError: as :func:`split_layers`, or ``layers`` is not ``pp``
            positive counts.
    """
    cfg, pp = job.model, layout.pp
    head = 6 * cfg.vocab_size * cfg.d_model  # the output layer, per token
    per_layer = (training_flops_per_token(cfg, job.seq) - head) / cfg.n_layers
    if layers is None:
        layers = split_layers(cfg.n_layers, pp)
    if len(layers) != pp or min(layers) < 1:
        raise ValueError(f"layers must be {pp} positive counts, got {layers!r}")
    work = [
        n + (head / per_layer if r == pp - 1 else 0.0) for r, n in enumerate(layers)
    ]
    return work, per_layer


@dataclass(frozen=True)
class StageLoad:
    """One pipeline rank's share of a step.

    Attributes:
        rank: pipeline rank, 0 first.
        layers: its layers.
        work: its training FLOPs in units of one layer's (the last adds the head).
        states: bytes of parameters, gradients and optimizer states.
        activations: bytes of the activations in flight at its peak.
        logits: bytes of the fp32 logits (last stage only).
    """

    rank: int
    layers: int
    work: float
    states: float
    activations: float
    logits: float

    @property
    def total(self) -> float:
        """All bytes of the rank."""
        return self.states + self.activations + self.logits


def stage_profile(
    job: Job, layout: Layout, trim: int = 0, layers: Sequence[int] | None = None
) -> list[StageLoad]:
    """Work and memory of every pipeline rank of ``layout``.

    Args:
        job: the job (model, sequence, batch).
        layout: a valid layout with ``pp`` >= 1.
        trim: layers taken off the first and the last stage.
        layers: instead of ``trim``, each stage's layers (the planner prices
            ``ceil(L / pp)`` on every stage).

    Returns:
        One :class:`StageLoad` per rank, first to last.

    Raises:
        ValueError: as :func:`split_layers`, or ``layers`` is not ``pp``
            positive counts.
    """
    cfg, pp = job.model, layout.pp
    m, v = layout.micro_batches(job), layout.v
    if layers is None:
        layers = split_layers(cfg.n_layers, pp, trim)
    work, _ = stage_work(job, layout, layers)
    loads = []
    for rank, n in enumerate(layers):
        est = stage_estimate(job, layout, n)
        last = rank == pp - 1
        states = est.params + est.grads + est.optimizer  # with one V x h matrix
        if 0 < rank < pp - 1:  # a middle stage holds neither embedding nor head
            stage_params = est.n_params
            states *= (stage_params - cfg.vocab_size * cfg.d_model) / stage_params
        loads.append(
            StageLoad(
                rank=rank,
                layers=n,
                work=work[rank],
                states=states,
                activations=in_flight(pp, m, v, rank) * est.activations,
                logits=est.logits if last else 0.0,
            )
        )
    return loads
