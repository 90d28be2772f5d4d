"""The server: an HGX node as data, the matrix ``nvidia-smi topo -m`` prints, its power.

An HGX H100 node is eight GPUs whose NVLinks all end on NVSwitch chips on the same
baseboard, so every GPU pair is "a bonded set of 18 NVLinks" (``NV18``); two CPU
sockets (two NUMA nodes); and a PCIe tree per socket in which each GPU shares a
PCIe switch with its own 400 Gb/s NIC (one NIC per GPU: one *rail* each). The label
``nvidia-smi topo -m`` prints for a GPU-NIC pair follows from where their paths
from the CPU part (:func:`pcie_label`): ``PIX`` one bridge, ``PXB`` several bridges
below one host bridge, ``PHB`` through a host bridge, ``NODE`` between host bridges
of one socket, ``SYS`` across the socket interconnect. The second half turns the
node's parts into watts, racks and facility power (IT power times PUE).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aiinfra import checks
from aiinfra.accelerators import ACCELERATORS, Gpu
from aiinfra.hardware.rails import HGX_H100

#: PCIe Gen5 x16 per direction, bytes/s (H100 SXM datasheet: 128 GB/s both ways).
PCIE5_X16_BYTES_PER_S = 64e9
#: DGX H100 maximum system power, W (DGX H100 datasheet: "~10.2 kW max").
DGX_H100_MAX_W = 10_200.0
#: Intel Xeon Platinum 8480+ TDP, W (Intel ARK; the DGX H100's 8480C is its
#: custom sibling: same 56 cores, TDP assumed equal, unsure).
XEON_8480_TDP_W = 350.0
#: A GB200 NVL72 rack's power, W: about 120 kW as integrators report it (NVIDIA's
#: GB200 NVL72 page prints no single figure: unsure, treat as approximate). Its
#: GPUs and NVLink are :data:`aiinfra.hardware.rails.GB200_NVL72`.
NVL72_RACK_W = 120_000.0
#: A 400 Gb/s OSFP transceiver, W (NVIDIA MMS4X00-NS400 spec: 9 W max): the part
#: of a NIC's power that is sourced; the ConnectX-7 chip itself is left in "other".
OSFP_400G_W = 9.0
#: The densest air-cooled rack of NVIDIA's DGX SuperPOD H100 reference
#: architecture: four DGX H100 per rack (as secondary sources report it; unsure).
AIR_RACK_NODES = 4
#: Average PUE of the Uptime Institute Global Data Center Survey 2024.
UPTIME_2024_PUE = 1.56


@dataclass(frozen=True)
class Device:
    """A GPU or NIC port: its name, socket and PCIe path from its host bridge."""

    name: str
    socket: int
    path: tuple[str, ...]  # (host bridge, switch, ..., the bridge it hangs on)


def pcie_label(a: Device, b: Device) -> str:
    """The ``nvidia-smi topo -m`` label of the PCIe path between two devices."""
    if a.socket != b.socket:
        return "SYS"  # through the socket interconnect (UPI)
    if a.path[0] != b.path[0]:
        return "NODE"  # between two host bridges of one NUMA node
    if a.path == b.path:
        return "PIX"  # on the same bridge
    pairs = enumerate(zip(a.path, b.path, strict=False))
    shared = next((i for i, (x, y) in pairs if x != y), 1)
    return "PHB" if shared == 1 else "PXB"  # up to the host bridge, or below it


@dataclass(frozen=True)
class HgxNode:
    """An HGX-class node: GPUs on NVSwitches, one NIC per GPU, two sockets.

    Args:
        gpu: the key of the GPU in :data:`~aiinfra.accelerators.ACCELERATORS`.
        n_gpus: GPUs on the baseboard, split evenly over the sockets.
        nvlinks_per_gpu: NVLinks each GPU bonds to the NVSwitches (18 on H100).
        nvswitches: NVSwitch chips on the baseboard (4 on HGX H100).
        sockets: CPU sockets, one NUMA node each.
        cores_per_socket: physical cores per socket (56: Xeon 8480).
        nic_gbps: each GPU's NIC, Gb/s (400: ConnectX-7).
        storage_slot: where each socket's dual-port storage NIC sits among that
            socket's host bridges in bus order (1 on the node of the test data);
            ``None``: no storage NIC.
    """

    gpu: str = "H100"
    n_gpus: int = 8
    nvlinks_per_gpu: int = 18
    nvswitches: int = 4
    sockets: int = 2
    cores_per_socket: int = 56
    nic_gbps: float = HGX_H100.nic_gbps
    storage_slot: int | None = 1

    def __post_init__(self) -> None:
        if self.gpu not in ACCELERATORS:
            raise ValueError(
                f"gpu must be one of {sorted(ACCELERATORS)}, got {self.gpu!r}"
            )
        checks.positives(
            n_gpus=self.n_gpus, sockets=self.sockets, nic_gbps=self.nic_gbps
        )
        checks.positives(nvlinks=self.nvlinks_per_gpu, cores=self.cores_per_socket)
        if self.n_gpus % self.sockets:
            raise ValueError(
                f"n_gpus={self.n_gpus} must divide evenly over sockets={self.sockets}"
            )
        per = self.n_gpus // self.sockets
        if self.storage_slot is not None and not 0 <= self.storage_slot <= per:
            raise ValueError(
                f"storage_slot must be in [0, {per}], got {self.storage_slot}"
            )

    @property
    def accelerator(self) -> Gpu:
        """The GPU's datasheet numbers."""
        return ACCELERATORS[self.gpu]

    # region devices
    def devices(self) -> tuple[list[Device], list[Device]]:
        """The GPUs, and the NIC ports in PCIe bus order (``NIC0``, ``NIC1``, ...)."""
        gpus, nics, per = [], [], self.n_gpus // self.sockets
        for s in range(self.sockets):
            slots = [f"gpu{s * per + j}" for j in range(per)]
            if self.storage_slot is not None:
                slots.insert(self.storage_slot, "storage")
            for j, slot in enumerate(slots):
                bridge = f"s{s}.hb{j}"  # one host bridge (root port) per slot
                if slot == "storage":  # one dual-port card: two ports, one bridge
                    nics += [Device("", s, (bridge, "card"))] * 2
                    continue
                i = int(slot[3:])  # GPU i and its NIC share a PCIe switch
                gpus.append(Device(f"GPU{i}", s, (bridge, f"sw{i}", "gpu")))
                nics.append(Device("", s, (bridge, f"sw{i}", "nic")))
        nics = [Device(f"NIC{k}", d.socket, d.path) for k, d in enumerate(nics)]
        return gpus, nics

    # endregion

    def cpu_affinity(self, socket: int) -> str:
        """The cores of a socket as ``topo -m`` prints them, SMT siblings after."""
        c, total = self.cores_per_socket, self.cores_per_socket * self.sockets
        first, sibling = socket * c, total + socket * c
        return f"{first}-{first + c - 1},{sibling}-{sibling + c - 1}"

    def topo_matrix(self) -> list[list[str]]:
        """The matrix of ``nvidia-smi topo -m``: a header row, then one per device.

        GPU rows end with CPU Affinity, NUMA Affinity and GPU NUMA ID (``N/A``).
        """
        gpus, nics = self.devices()
        every = gpus + nics
        head = (
            [""]
            + [d.name for d in every]
            + ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
        )
        rows = [head]
        for a in every:
            row = [a.name]
            for b in every:
                if a is b:
                    row.append("X")
                elif a in gpus and b in gpus:
                    row.append(f"NV{self.nvlinks_per_gpu}")  # all through NVSwitch
                else:
                    row.append(pcie_label(a, b))
            if a in gpus:
                row += [self.cpu_affinity(a.socket), str(a.socket), "N/A"]
            rows.append(row)
        return rows

    def gpu_paths(self) -> list[tuple[str, str, float]]:
        """Each path out of one GPU: (path, ``topo -m`` label, bytes/s one way)."""
        gpus, nics = self.devices()
        rail = next(n for n in nics if n.path[:2] == gpus[0].path[:2])
        return [
            ("NVLink to any GPU", f"NV{self.nvlinks_per_gpu}", self.nvlink_one_way),
            ("PCIe to the host", "PHB", PCIE5_X16_BYTES_PER_S),
            ("its NIC (one rail)", pcie_label(gpus[0], rail), self.nic_gbps / 8 * 1e9),
        ]

    @property
    def nvlink_one_way(self) -> float:
        """NVLink bytes/s from one GPU, one direction (half the datasheet figure)."""
        return self.accelerator.scale_up_bandwidth / 2

    def route(self, a: tuple[int, int], b: tuple[int, int]) -> tuple[str, float]:
        """The path a collective's message takes from GPU ``a`` to GPU ``b``.

        Args:
            a: (node, GPU index) of the sender.
            b: (node, GPU index) of the receiver.

        Returns:
            The link's name and its bytes/s in one direction.
        """
        for name, (node, gpu) in (("a", a), ("b", b)):
            if not (0 <= gpu < self.n_gpus and node >= 0):
                raise ValueError(
                    f"{name}={(node, gpu)}: GPU must be in [0, {self.n_gpus})"
                )
        if a == b:
            raise ValueError(f"a and b must differ, got {a}")
        if a[0] == b[0]:
            return "NVLink", self.nvlink_one_way
        return f"NIC rail {a[1]}", self.nic_gbps / 8 * 1e9


# region power
def node_power(
    gpu_w: float,
    n_gpus: int,
    cpu_w: float,
    n_cpus: int,
    nic_w: float,
    n_nics: int,
    other_w: float,
) -> dict[str, float]:
    """A node's power by part, W: GPUs, CPUs, NICs and the rest.

    ``other_w`` is everything else: NVSwitches, memory, drives, fans, power-supply
    losses. Returns ``{"GPUs", "CPUs", "NICs", "other", "total"}``.

    Raises:
        ValueError: an input is negative or not a number.
    """
    values = {"gpu_w": gpu_w, "n_gpus": n_gpus, "cpu_w": cpu_w, "n_cpus": n_cpus}
    values |= {"nic_w": nic_w, "n_nics": n_nics, "other_w": other_w}
    for name, v in values.items():
        checks.non_negative(name, v)
    parts = {"GPUs": gpu_w * n_gpus, "CPUs": cpu_w * n_cpus, "NICs": nic_w * n_nics}
    return parts | {"other": other_w, "total": sum(parts.values()) + other_w}


def nodes_per_rack(node_w: float, rack_w: float) -> int:
    """Whole nodes a rack's power budget feeds."""
    checks.positives(node_w=node_w, rack_w=rack_w)
    return math.floor(rack_w / node_w)


def racks_per_megawatt(rack_w: float, it_mw: float = 1.0) -> int:
    """Whole racks of ``rack_w`` that ``it_mw`` megawatts of IT power feed."""
    checks.positives(rack_w=rack_w, it_mw=it_mw)
    return math.floor(it_mw * 1e6 / rack_w)


def facility_power(it_w: float, pue: float) -> float:
    """The facility's draw, W: IT power times the power usage effectiveness."""
    checks.positives(it_w=it_w)
    if not isinstance(pue, (int, float)) or pue < 1:
        raise ValueError(f"pue must be >= 1 (total / IT power), got {pue!r}")
    return it_w * pue


def cooling(rack_w: float) -> str:
    """``"air"`` up to the air-cooled reference rack, else ``"liquid"``."""
    checks.positives(rack_w=rack_w)
    return "air" if rack_w <= AIR_RACK_NODES * DGX_H100_MAX_W else "liquid"


# endregion
