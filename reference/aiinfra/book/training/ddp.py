"""What ``docs/training/ddp.rst`` shows: its values, tables, figures."""

from __future__ import annotations

import functools
from dataclasses import replace

import torch
import torch.distributed as dist
from matplotlib.figure import Figure
from torch.nn.parallel import distributed as torch_ddp

from aiinfra import results
from aiinfra.models.presets import preset
from aiinfra.models.transformer import Transformer
from aiinfra.parallel.data import bench as ddp_bench
from aiinfra.parallel.data import figures as parallel_figures
from aiinfra.parallel.data import overlap as overlap_bound
from aiinfra.parallel.data import timeline as dp_timeline
from aiinfra.parallel.data import timeline_figures as dp_timeline_figures
from aiinfra.parallel.data import token_loss
from aiinfra.parallel.toy import mlp
from aiinfra.report import Table

from .memory import MIB

DDP_BAR = ddp_bench.BAR  # the tests hold the committed results to it


OVERLAP_WIDTHS = (32, 64, 64, 64, 64, 32)  # the toy MLP of the overlap timeline


OVERLAP_BUCKET_BYTES = 20_000  # its bucket cap: five buckets


DDP_ALL_REDUCE_LATENCY = parallel_figures.ALL_REDUCE_LATENCY  # its cost model


DDP_ALL_REDUCE_TIME = parallel_figures.ALL_REDUCE_TIME


TOKEN_COUNTS = ((100, 300), (2000, 100))  # tokens per micro-batch, two ranks


OVERLAP_RANKS = 8  # N_d of the overlap bound


LATENCY_SHARE = 0.1  # f: the latency share a bucket may spend


def ddp_parameters() -> int:
    """Parameters of the MLP the DDP benchmark trains."""
    return ddp_bench.n_params()


def ddp_gradient_mib() -> float:
    """Its fp32 gradients, MiB."""
    return 4 * ddp_parameters() / MIB


def ddp_step_time_figure() -> Figure:
    """Measured step time per variant and against bucket size."""
    return ddp_bench.ddp_step_time_figure()


def ddp_results_table() -> Table:
    """Median step time per variant and bucket size, and a GPU's beside them.

    Where ``python tools/gpu.py run`` left a stamped file (``ddp-nccl.json``), its
    step times fill two more columns (``-`` for a pair it did not measure) and its
    machine ends the stamp.
    """
    table = ddp_bench.results_table()
    gpu = results.load_optional("ddp", "nccl")
    if gpu is None:
        return table
    ddp = ddp_bench.step_time_ms("torch DDP", backend="nccl")
    step = {(r["impl"], r["bucket_mib"]): 1e3 * r["step_s"] for r in gpu["rows"]}
    rows = []
    for row in table.rows:
        ms = step.get((row[0], row[1]))
        cells = ["-", "-"] if ms is None else [round(ms, 2), round(ms / ddp, 2)]
        rows.append([*row, *cells])
    on, fields = results.measured_on(gpu["stamp"])
    fields = {f"gpu_{k}": v for k, v in fields.items()}
    fields["gpu_ranks"] = gpu["stamp"]["world_size"]
    gpu_on = on.replace("{", "{gpu_")
    stamp = f"{table.stamp}; GPU: {gpu_on}, {{gpu_ranks}} nccl rank(s)"
    return replace(
        table,
        columns=[*table.columns, "GPU step (ms)", "GPU / DDP"],
        rows=rows,
        stamp=stamp,
        fields=table.fields | fields,
    )


def bucketed_over_ddp() -> float:
    """Our bucketed DDP's step time over DistributedDataParallel's (25 MiB)."""
    return ddp_bench.bucketed_over_ddp()


def best_bucket_mib() -> float:
    """The bucket size at which our bucketed DDP was fastest, MiB."""
    return ddp_bench.best_bucket_mib()


def step_time_ms(impl: str, best_bucket: bool = False) -> float:
    """Median step time of ``impl`` (largest bucket, or the best one), ms."""
    bucket = ddp_bench.best_bucket_mib(impl) if best_bucket else None
    return ddp_bench.step_time_ms(impl, bucket)


def overlap_parameters() -> int:
    """Parameters of the MLP of the overlap timeline."""
    return sum(p.numel() for p in mlp(OVERLAP_WIDTHS).parameters())


def overlap_saved_percent() -> float:
    """What overlap saves against sending every bucket after backward, percent."""
    t = parallel_figures.simulate_overlap(mlp(OVERLAP_WIDTHS), OVERLAP_BUCKET_BYTES)
    return 100 * t.saved / t.sequential


def overlap_figure() -> Figure:
    """Backward and bucket all-reduces of one step of the toy MLP."""
    return parallel_figures.overlap_figure(OVERLAP_WIDTHS, OVERLAP_BUCKET_BYTES)


def overlap_frames() -> list[Figure]:
    """The same, one frame per all-reduced bucket."""
    return parallel_figures.overlap_frames(OVERLAP_WIDTHS, OVERLAP_BUCKET_BYTES)


def ddp_bucket_cap_mib() -> int:
    """DistributedDataParallel's default ``bucket_cap_mb`` (torch source)."""
    return torch_ddp._DEFAULT_BUCKET_CAP_MB


def ddp_first_bucket_mib() -> float:
    """The first bucket's cap after DDP's rebuild, MiB (torch source)."""
    return dist._DEFAULT_FIRST_BUCKET_BYTES / MIB


def token_weight(rank: int, micro: int) -> float:
    """One token's weight in ``TOKEN_COUNTS[rank][micro]`` (mean of means), x 1/tau."""
    return token_loss.token_weights(TOKEN_COUNTS)[rank][micro]


def overlap_tokens(link: str) -> float:
    """tau*: tokens per H100 per backward that hide the bf16 all-reduce, 8 ranks."""
    return overlap_bound.overlap_tokens(overlap_bound.H100_LINKS[link], OVERLAP_RANKS)


def overlap_step_tokens(link: str, micro_batches: int) -> float:
    """Tokens per H100 per step that hide it with k micro-batches under no_sync."""
    return overlap_bound.overlap_tokens_per_step(
        overlap_bound.H100_LINKS[link], OVERLAP_RANKS, micro_batches
    )


def link_gbps(link: str) -> float:
    """The link's bandwidth per direction, GB/s."""
    return overlap_bound.H100_LINKS[link].bandwidth / 1e9


def h100_tflops() -> float:
    """H100 SXM dense BF16 peak, TFLOP/s."""
    return overlap_bound.H100_BF16_FLOPS / 1e12


def link_alpha_us(link: str) -> float:
    """The link's per-message latency alpha, microseconds."""
    return overlap_bound.H100_LINKS[link].alpha * 1e6


def min_bucket_mib(link: str) -> float:
    """Smallest bucket whose latency share is ``LATENCY_SHARE`` on 8 ranks, MiB."""
    link_ = overlap_bound.H100_LINKS[link]
    return overlap_bound.min_bucket_bytes(link_, OVERLAP_RANKS, LATENCY_SHARE) / MIB


def overlap_bound_figure() -> Figure:
    """All-reduce over backward time against tokens per GPU; bucket latency share."""
    return overlap_bound.overlap_bound_figure(OVERLAP_RANKS)


TIMELINE_MODEL = "gpt2"  # the simulated timeline: GPT-2 small's twelve blocks
TIMELINE_TOKENS = 8192  # tau per GPU per step: eight sequences of 1024 tokens
TIMELINE_MFU = 0.4  # MFU: the fraction of peak FLOP/s that backward reaches
_SWEEP_MIB = tuple(2 ** (k / 2) for k in range(-2, 17))  # bucket caps, 0.5-256 MiB
SMALL_BUCKET_MIB = 1  # the timeline's small-bucket setting


@functools.cache
def _timeline_model() -> Transformer:
    with torch.device("meta"):  # shapes only: nothing allocated
        return Transformer(preset(TIMELINE_MODEL))


def _blocks() -> list[dp_timeline.Gradient]:
    return dp_timeline.model_gradients(_timeline_model().blocks)


def timeline_parameters() -> int:
    """Parameters of the simulated model's blocks (embeddings excluded)."""
    return sum(g.numel for g in _blocks())


def _simulated(link: str, bucket_mib: float | None = None) -> dp_timeline.DpTimeline:
    """The simulated step over ``link``: DDP's default buckets (None) or a cap."""
    first = dist._DEFAULT_FIRST_BUCKET_BYTES if bucket_mib is None else None
    cap = int((ddp_bucket_cap_mib() if bucket_mib is None else bucket_mib) * MIB)
    link_ = overlap_bound.H100_LINKS[link]
    return dp_timeline.simulate_dp_step(
        _blocks(), TIMELINE_TOKENS, link_, OVERLAP_RANKS, cap, first, TIMELINE_MFU
    )


def timeline_ms(link: str, what: str, bucket_mib: float | None = None) -> float:
    """``exposed``, ``step``, ``communication`` or ``backward_end`` of it, ms."""
    return 1e3 * getattr(_simulated(link, bucket_mib), what)


def timeline_buckets(link: str, bucket_mib: float | None = None) -> int:
    """How many buckets the simulated step all-reduces."""
    return len(_simulated(link, bucket_mib).buckets)


def timeline_bound_tokens(link: str) -> float:
    """tau* at the timeline's MFU: MFU times the peak bound, tokens per GPU."""
    return TIMELINE_MFU * overlap_tokens(link)


@functools.cache
def _sweep(link: str) -> tuple[float, ...]:
    caps = [int(c * MIB) for c in _SWEEP_MIB]
    link_ = overlap_bound.H100_LINKS[link]
    return tuple(
        dp_timeline.exposed_vs_bucket(
            _blocks(), TIMELINE_TOKENS, link_, OVERLAP_RANKS, caps, TIMELINE_MFU
        )
    )


def best_sweep_mib(link: str) -> float:
    """The bucket cap of the sweep with the least exposed time, MiB."""
    exposed = _sweep(link)
    return _SWEEP_MIB[exposed.index(min(exposed))]


def best_sweep_ms(link: str) -> float:
    """The least exposed time of the sweep, ms."""
    return 1e3 * min(_sweep(link))


def one_bucket_ms(link: str) -> float:
    """Exposed time with one bucket for all the gradients, ms."""
    whole = 2 * timeline_parameters() / MIB  # bf16 gradients, MiB
    return timeline_ms(link, "exposed", whole)


def embedding_all_reduce_ms(link: str) -> float:
    """The ring all-reduce of the tied embedding's bf16 gradient over ``link``, ms."""
    numel = _timeline_model().embed.weight.numel()
    one = [dp_timeline.Gradient("embed.weight", numel, 0.0)]
    link_ = overlap_bound.H100_LINKS[link]
    step = dp_timeline.simulate_dp_step(one, 1, link_, OVERLAP_RANKS, 2 * numel)
    return 1e3 * step.exposed  # nothing to hide behind: all of it is exposed


def dp_timeline_figure() -> Figure:
    """Gantt lanes of the simulated step for three link and bucket settings."""
    settings = [
        (f"NVLink, {ddp_bucket_cap_mib()} MiB", _simulated("nvlink")),
        (f"400G NIC, {ddp_bucket_cap_mib()} MiB", _simulated("nic400")),
        (f"400G NIC, {SMALL_BUCKET_MIB} MiB", _simulated("nic400", SMALL_BUCKET_MIB)),
    ]
    return dp_timeline_figures.timeline_figure(settings)


def bucket_sweep_figure() -> Figure:
    """Exposed time against the bucket cap over NVLink and over a 400G NIC."""
    caps = [int(c * MIB) for c in _SWEEP_MIB]
    curves = [
        (
            overlap_bound.H100_LINKS[key].name,
            caps,
            _sweep(key),
            min_bucket_mib(key) * MIB,
        )
        for key in ("nvlink", "nic400")
    ]
    return dp_timeline_figures.bucket_sweep_figure(curves, ddp_bucket_cap_mib() * MIB)
