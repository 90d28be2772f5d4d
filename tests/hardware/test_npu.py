"""The Ascend model against what its sources print and hand counts."""

import math

import pytest
from aiinfra.accelerators import NPUS
from aiinfra.hardware import npu, rails


def test_910c_record_is_the_papers():
    # Zuo et al. 2025 (arXiv 2506.12708): 752 TFLOP/s BF16, 128 GB at 3.2 TB/s,
    # 392 GB/s of UB each way per 910C.
    g = NPUS["910C"]
    assert (g.bf16_flops, g.hbm_bytes, g.hbm_bandwidth) == (752e12, 128e9, 3.2e12)
    assert g.scale_up_bandwidth / 2 == 392e9
    assert g.peak("fp16") == 752e12
    with pytest.raises(ValueError, match="fp8"):
        g.peak("fp8")  # not in the paper: left out


def test_fractal_is_the_l0_alignment():
    # Ascend C guide: L0A and L0B are 512-byte aligned; the Cube takes 16x16 fp16.
    assert npu.FRACTAL_BYTES == 512
    assert npu.CUBE**3 == 4096  # HotChips 31: 4,096 fp16 MACs per Cube


@pytest.mark.parametrize(
    ("m", "k", "n", "issues"),
    [(16, 16, 16, 1), (1, 16, 16, 1), (17, 16, 16, 2), (32, 48, 64, 2 * 3 * 4)],
)
def test_cube_issues_by_hand(m, k, n, issues):
    assert npu.cube_issues(m, k, n) == issues


def test_cube_utilization():
    assert npu.cube_utilization(64, 4096, 4096) == 1.0
    assert npu.cube_utilization(1, 4096, 4096) == 1 / 16
    assert math.isclose(npu.cube_utilization(17, 16, 16), 17 / 32)


@pytest.mark.parametrize("bad", [0, -3])
def test_cube_rejects_bad_sizes(bad):
    with pytest.raises(ValueError, match="m"):
        npu.cube_issues(bad, 16, 16)
    with pytest.raises(TypeError, match="k"):
        npu.cube_issues(16, 2.5, 16)


def test_atlas_node_is_a_full_mesh():
    node = npu.AtlasNode()
    assert len(node.hccs_links()) == 8 * 7 // 2
    assert node.links_per_npu() == 7
    assert node.roce_ports() == 8
    with pytest.raises(ValueError, match="npus"):
        npu.AtlasNode(1)


def test_cloudmatrix_all_to_all_by_hand():
    # 64 NPUs, all inside the supernode: 63 chunks of 256 MiB / 64 over UB's
    # 392 GB/s each way.
    n = 256 * 2**20
    expected = 63 * (n / 64) / 392e9
    seconds = rails.all_to_all_seconds(npu.CLOUDMATRIX384, 64, n)
    assert math.isclose(seconds, expected)
    assert npu.CLOUDMATRIX384.gpus == 384
    assert npu.CLOUDMATRIX384.nic_gbps == 400.0  # 400 Gb/s RDMA each way
