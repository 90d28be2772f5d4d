"""What ``docs/models/expert_parallel.rst`` shows: its values, tables, figures.

DeepSeek-V3's sizes come from the preset table; its 64-way expert parallelism over
8 nodes and its limit of 4 nodes per token from its report (Sec. 3.2, 2.1.2). The
byte table uses the sizes of the tests (h = 16, 24 tokens per rank, float64).
"""

from __future__ import annotations

import functools

from matplotlib.figure import Figure

from aiinfra.comm.cost import LINKS
from aiinfra.models.expert_parallel import figures
from aiinfra.models.expert_parallel.cost import dispatch_bytes, ep_all_to_all_time
from aiinfra.models.moe.spec import MoESpec
from aiinfra.models.presets import preset
from aiinfra.report import Table

from .attention_variants import GIB

MIB = 2**20
EP_PRESET = "deepseek-v3"
V3_EP, V3_NODES = 64, 8  # DeepSeek-V3 Sec. 3.2: 64-way EP spanning 8 nodes
EP_TEST_SPEC = MoESpec(n_experts=8, top_k=2, d_expert=8)  # E = 8, K = 2
EP_TEST_H, EP_TEST_T, EP_TEST_P, EP_TEST_W = (
    16,
    24,
    4,
    8,
)  # h, T per rank, p, bytes (float64)
EP_TOKENS = 4096  # tokens per GPU of the modelled dispatch
_LOCAL_LINK = "h100-nvlink"  # ep_all_to_all_time's default: the book's one NVLink


def v3_top_k() -> int:
    """``K``: DeepSeek-V3's routed experts per token."""
    return preset(EP_PRESET).moe_spec().top_k


def v3_d_model() -> int:
    """``h``: DeepSeek-V3's hidden width."""
    return preset(EP_PRESET).d_model


def v3_expert_parameters() -> int:
    """Parameters of DeepSeek-V3's routed experts: ``3 h d_e E`` per MoE layer."""
    c = preset(EP_PRESET)
    spec = c.moe_spec()
    return c.n_moe_layers * spec.n_experts * 3 * c.d_model * spec.d_expert


def v3_expert_gib() -> float:
    """GiB of DeepSeek-V3's routed experts in bf16."""
    return 2 * v3_expert_parameters() / GIB


def v3_experts_per_gpu() -> int:
    """Routed experts per GPU of a MoE layer under DeepSeek-V3's 64-way EP."""
    return preset(EP_PRESET).moe_spec().n_experts // V3_EP


def v3_expert_gib_per_gpu() -> float:
    """GiB of bf16 routed experts per GPU under 64-way EP."""
    return v3_expert_gib() / V3_EP


def v3_remote_share() -> float:
    """``(p-1)/p`` at p = 64: the assignments leaving a rank, uniform routing."""
    return (V3_EP - 1) / V3_EP


def dispatch_figure() -> Figure:
    """Dispatch and combine step by step, from a real routing on 2 ranks."""
    return figures.dispatch_figure()


def bytes_table() -> Table:
    """Rows and bytes per rank of one routing on 4 ranks, with the uniform formula."""
    return figures.bytes_table(EP_TEST_SPEC, EP_TEST_H, EP_TEST_T, EP_TEST_P, EP_TEST_W)


def uniform_dispatch_bytes() -> float:
    """``T K (p-1)/p h w`` for the byte table's sizes."""
    return dispatch_bytes(
        EP_TEST_T, EP_TEST_SPEC.top_k, EP_TEST_H, EP_TEST_P, EP_TEST_W
    )


def _v3_dispatch_bytes() -> int:
    spec = preset(EP_PRESET).moe_spec()
    return (
        EP_TOKENS * spec.top_k * preset(EP_PRESET).d_model
    )  # FP8: one byte per element


def v3_dispatch_mib() -> float:
    """MiB one GPU's dispatch holds: 4096 tokens x K = 8 x h = 7168 in FP8."""
    return _v3_dispatch_bytes() / MIB


def all_to_all_time_figure() -> Figure:
    """Modelled dispatch time against the EP size, one node and across nodes."""
    c = preset(EP_PRESET)
    return figures.all_to_all_time_figure(EP_TOKENS, c.moe_spec().top_k, c.d_model, 1)


def nvlink_over_ib() -> float:
    """How much faster the model's NVLink moves a byte than its 400 Gb/s NIC."""
    return LINKS["ib400"].beta / LINKS[_LOCAL_LINK].beta


def nvlink_gbs() -> float:
    """The NVLink of the all-to-all figure, GB/s each way (the H100's)."""
    return 1 / LINKS[_LOCAL_LINK].beta / 1e9


def nic_gbs() -> float:
    """The NIC of the all-to-all figure, Gb/s."""
    return 8 / LINKS["ib400"].beta / 1e9


def ib_slowdown_at_v3_ep() -> float:
    """Modelled dispatch time at p = 64 over 8-GPU nodes, over that at p = 8."""
    n = _v3_dispatch_bytes()
    return ep_all_to_all_time(n, V3_EP) / ep_all_to_all_time(n, 8)


@functools.cache
def node_limit_table() -> Table:
    """DeepSeek-V3's copies per token across nodes, with and without its limit."""
    return figures.node_limit_table(preset(EP_PRESET).moe_spec(), V3_NODES)


def _column(name: str) -> list:
    t = node_limit_table()
    return [row[t.columns.index(name)] for row in t.rows]


def v3_copies_per_expert() -> float:
    """Copies leaving a token's node if one is sent per remote expert (no limit)."""
    return _column("copies per expert")[0]


def v3_copies_per_node_unlimited() -> float:
    """Copies leaving a token's node, one per remote node, without the limit."""
    return _column("copies per node")[0]


def v3_copies_per_node_limited() -> float:
    """Copies leaving a token's node, one per remote node, at most 4 nodes."""
    return _column("copies per node")[1]


def v3_node_limit() -> int:
    """``M``: nodes a DeepSeek-V3 token may be sent to."""
    return preset(EP_PRESET).moe_spec().topk_groups


def mesh_figure() -> Figure:
    """Expert and data parallelism on a 2 x 2 mesh."""
    return figures.mesh_figure()


def dispatch_frames() -> list[Figure]:
    """The dispatch figure's three steps one at a time, at slide size."""
    routings = figures.dispatch_routings()
    frames = []
    for steps in range(1, len(figures.DISPATCH_STEPS) + 1):
        fig = Figure(figsize=(10, 5), layout="constrained")
        figures.draw_dispatch(fig.add_subplot(), routings, steps, 14)
        frames.append(fig)
    return frames
