"""The HGX node model against a real ``nvidia-smi topo -m`` and the DGX H100 sheet."""

from pathlib import Path

import pytest
from aiinfra.hardware import server
from aiinfra.hardware.rails import GB200_NVL72
from aiinfra.hardware.server import (
    Device,
    HgxNode,
    cooling,
    facility_power,
    node_power,
    nodes_per_rack,
    pcie_label,
    racks_per_megawatt,
)

DATA = Path(__file__).parent / "data" / "hgx_h100_topo.txt"


def _real_matrix() -> list[list[str]]:
    """The committed matrix: header and rows, cells stripped, trailing blanks cut."""
    lines = [x for x in DATA.read_text().splitlines() if not x.startswith("#")]
    table = lines[: lines.index("")]
    rows = []
    for line in table:
        cells = [c.strip() for c in line.split("\t")]
        while cells and cells[-1] == "":
            cells.pop()
        rows.append(cells)
    return rows


def _cells(matrix: list[list[str]]) -> list[list[str]]:
    """Drop empty cells (``topo -m`` leaves one empty column before GPU NUMA ID)."""
    return [[c for c in row if c] for row in matrix]


def test_generated_matrix_equals_the_real_hgx_h100_output():
    # vllm-project/vllm#6746: 8x H100 80GB HBM3, 12 NIC ports.
    assert _cells(HgxNode().topo_matrix()) == _cells(_real_matrix())


def test_real_output_has_the_structure_the_model_assumes():
    real = _real_matrix()
    names = real[0][1:21]
    gpu_rows = real[1:9]
    # every GPU pair is NV18: 18 NVLinks, all ending on the NVSwitches
    assert {c for row in gpu_rows for c in row[1:9]} == {"X", "NV18"}
    # each GPU has exactly one NIC at PXB (its rail's NIC behind its PCIe switch)
    for row in gpu_rows:
        assert row[9:21].count("PXB") == 1
    assert names[:8] == [f"GPU{i}" for i in range(8)]


def test_labels_follow_the_pcie_tree():
    gpu = Device("GPU0", 0, ("hb0", "sw0", "gpu"))
    assert pcie_label(gpu, Device("NIC0", 0, ("hb0", "sw0", "nic"))) == "PXB"
    assert pcie_label(gpu, Device("NIC1", 0, ("hb0", "sw0", "gpu"))) == "PIX"
    assert pcie_label(gpu, Device("NIC2", 0, ("hb0", "other"))) == "PHB"
    assert pcie_label(gpu, Device("NIC3", 0, ("hb1", "sw1", "nic"))) == "NODE"
    assert pcie_label(gpu, Device("NIC4", 1, ("hb0", "sw0", "nic"))) == "SYS"


def test_a_node_without_storage_nics_has_one_nic_per_gpu():
    m = HgxNode(storage_slot=None, n_gpus=4, cores_per_socket=8).topo_matrix()
    assert m[0][1:9] == ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1", "NIC2", "NIC3"]
    assert [m[1 + i][5 + i] for i in range(4)] == ["PXB"] * 4
    assert m[1][-3:] == ["0-7,16-23", "0", "N/A"]


def test_paths_out_of_a_gpu_and_routes():
    node = HgxNode()
    paths = {name: (label, bw) for name, label, bw in node.gpu_paths()}
    # H100 SXM datasheet: NVLink 900 GB/s, PCIe Gen5 128 GB/s (both directions);
    # ConnectX-7: 400 Gb/s each way
    assert paths["NVLink to any GPU"] == ("NV18", 450e9)
    assert paths["PCIe to the host"][1] == 64e9
    assert paths["its NIC (one rail)"] == ("PXB", 50e9)
    assert node.route((0, 1), (0, 6)) == ("NVLink", 450e9)
    assert node.route((0, 3), (5, 3)) == ("NIC rail 3", 50e9)
    with pytest.raises(ValueError, match="GPU must be in"):
        node.route((0, 8), (0, 1))
    with pytest.raises(ValueError, match="must differ"):
        node.route((0, 1), (0, 1))


def test_bad_nodes_are_rejected():
    with pytest.raises(ValueError, match="gpu must be one of"):
        HgxNode(gpu="V100")
    with pytest.raises(ValueError, match="divide evenly"):
        HgxNode(n_gpus=7)
    with pytest.raises(ValueError, match="storage_slot"):
        HgxNode(storage_slot=9)
    with pytest.raises(ValueError, match="n_gpus must be a finite number > 0"):
        HgxNode(n_gpus=0)


def test_dgx_h100_power_breakdown_sums_to_its_parts():
    # 8 x 700 W (H100 SXM sheet) + 2 x 350 W (Xeon 8480+ ARK) + 8 x 9 W optics,
    # the rest up to the DGX H100 sheet's 10.2 kW maximum
    p = node_power(700, 8, 350, 2, 9, 8, 3828)
    assert p == {"GPUs": 5600, "CPUs": 700, "NICs": 72, "other": 3828, "total": 10200}
    with pytest.raises(ValueError, match="n_gpus must be a finite number >= 0"):
        node_power(700, -1, 350, 2, 9, 8, 0)
    with pytest.raises(ValueError, match="other_w"):
        node_power(700, 8, 350, 2, 9, 8, "lots")


def test_racks_facility_and_cooling():
    # four 10.2 kW DGX H100 in a 41 kW rack, not five; 1 MW feeds 24 such racks
    assert nodes_per_rack(10_200, 41_000) == 4
    assert racks_per_megawatt(40_800) == 24
    assert racks_per_megawatt(120_000, it_mw=10) == 83
    assert facility_power(1e6, 1.5) == 1.5e6
    assert cooling(40_800) == "air"
    assert cooling(server.NVL72_RACK_W) == "liquid"
    with pytest.raises(ValueError, match="pue must be >= 1"):
        facility_power(1e6, 0.9)
    with pytest.raises(ValueError, match="rack_w must be a finite number > 0"):
        nodes_per_rack(10_200, 0)
    with pytest.raises(ValueError, match="it_mw"):
        racks_per_megawatt(40_000, it_mw=-1)


def test_nvl72_domain_bandwidth_matches_the_quoted_130_tb_per_s():
    # the domain is rails.GB200_NVL72 (one owner); its rack power lives in server
    # NVIDIA GB200 NVL72 page: 72 GPUs, 1.8 TB/s each, "130 TB/s" in all
    total = GB200_NVL72.gpus * 2 * GB200_NVL72.nvlink_gbps / 8 * 1e9
    assert total == pytest.approx(130e12, rel=0.01)
    assert server.NVL72_RACK_W > server.AIR_RACK_NODES * server.DGX_H100_MAX_W
