"""What ``docs/training/ddp.rst`` shows: its values, tables, figures."""

from __future__ import annotations

import torch.distributed as dist
from matplotlib.figure import Figure
from torch.nn.parallel import distributed as torch_ddp

from aiinfra.parallel import bench as ddp_bench
from aiinfra.parallel import figures as parallel_figures
from aiinfra.parallel import overlap_bound, token_loss
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
    """Median step time per variant and bucket size."""
    return ddp_bench.results_table()


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
    """One token's weight in ``TOKEN_COUNTS[rank][micro]`` (mean of means), x 1/T."""
    return token_loss.token_weights(TOKEN_COUNTS)[rank][micro]


def overlap_tokens(link: str) -> float:
    """T*: tokens per H100 per step that hide the bf16 all-reduce, 8 ranks."""
    return overlap_bound.overlap_tokens(overlap_bound.H100_LINKS[link], OVERLAP_RANKS)


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
