"""An Ascend NPU as data: the Da Vinci Cube, the Atlas 800T A2 node, CloudMatrix384.

No Ascend device ran any of this: it counts what the documentation describes.

- The Cube unit of a Da Vinci AI Core multiplies two 16 x 16 fp16 matrices in one
  instruction (CANN's Ascend C guide, "basic architecture"), 16^3 = 4,096
  multiply-adds (HotChips 31). A matrix product is cut into these fractals, padded
  to whole ones: :func:`cube_issues`, :func:`cube_utilization`. An fp16 fractal is
  512 bytes, the alignment the guide gives for L0A and L0B.
- An Atlas 800T A2 server holds 8 NPUs, each with its own network port on the chip
  (the 8 NPU ports of a node, MindCluster's deployer guide) and an HCCS link to
  every other NPU of the server (HCCL's Mesh algorithm is written for that full
  mesh): :class:`AtlasNode`. Huawei prints no bandwidth for these links.
- CloudMatrix384: 384 910C NPUs on one UB fabric, each with 392 GB/s of UB and
  400 Gb/s of RDMA each way (Zuo et al. 2025): :data:`CLOUDMATRIX384`, a
  :class:`~aiinfra.hardware.rails.ScaleUpDomain` like NVL72's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

from aiinfra import checks
from aiinfra.accelerators import NPUS
from aiinfra.hardware.rails import ScaleUpDomain

#: Side of the Cube's fp16 fractal: one instruction multiplies 16 x 16 by 16 x 16.
CUBE = 16
#: Bytes of one fp16 fractal (16 x 16 x 2): L0A's and L0B's alignment in the guide.
FRACTAL_BYTES = CUBE * CUBE * 2
#: NPUs in one Atlas 800T A2 server (MindCluster: the 8 NPU ports of a node).
ATLAS_A2_NPUS = 8
#: RDMA bandwidth of one CloudMatrix384 NPU, Gb/s each way (Zuo et al. 2025).
CM384_RDMA_GBPS = 400.0
#: NPUs in one CloudMatrix384 supernode (Zuo et al. 2025).
CM384_NPUS = 384


def cube_issues(m: int, k: int, n: int) -> int:
    """Cube instructions of an (m x k) @ (k x n) fp16 product, padded to fractals.

    Args:
        m: rows of the left matrix (tokens), >= 1.
        k: the shared dimension, >= 1.
        n: columns of the right matrix, >= 1.

    Returns:
        ceil(m / 16) x ceil(k / 16) x ceil(n / 16).

    Raises:
        ValueError: a dimension < 1 (TypeError if not an int).
    """
    checks.positive_ints(m=m, k=k, n=n)
    # region cube
    tiles = [math.ceil(d / CUBE) for d in (m, k, n)]  # fractals per dimension
    return tiles[0] * tiles[1] * tiles[2]  # one 16x16x16 product per instruction
    # endregion


def cube_utilization(m: int, k: int, n: int) -> float:
    """Share of the Cube's multiply-adds that are the product's own, not padding.

    Returns:
        m k n / (16^3 x :func:`cube_issues`), 1.0 when every dimension is a
        multiple of 16.

    Raises:
        ValueError: as :func:`cube_issues`.
    """
    return m * k * n / (CUBE**3 * cube_issues(m, k, n))


@dataclass(frozen=True)
class AtlasNode:
    """An Atlas 800T A2 server: NPUs joined pairwise by HCCS, one port each out.

    Attributes:
        npus: NPUs in the server.
    """

    npus: int = ATLAS_A2_NPUS

    def __post_init__(self) -> None:
        checks.integer("npus", self.npus, low=2)

    def hccs_links(self) -> list[tuple[int, int]]:
        """The HCCS links: one between every pair of NPUs (a full mesh)."""
        return list(combinations(range(self.npus), 2))

    def links_per_npu(self) -> int:
        """HCCS links that end at one NPU: one to each other NPU."""
        return sum(1 for pair in self.hccs_links() if 0 in pair)

    def roce_ports(self) -> int:
        """Network ports of the server: one on each NPU, none through a PCIe NIC."""
        return self.npus


def _ub_gbps() -> float:
    """UB bandwidth of one 910C, Gb/s each way, from its record (both ways, B/s)."""
    return NPUS["910C"].scale_up_bandwidth / 2 * 8 / 1e9


#: CloudMatrix384 as a scale-up domain: 384 NPUs on UB (the domain's "NVLink"
#: field holds UB's 3,136 Gb/s each way), 400 Gb/s of RDMA per NPU out.
CLOUDMATRIX384 = ScaleUpDomain(
    "CloudMatrix384", CM384_NPUS, _ub_gbps(), CM384_RDMA_GBPS
)
