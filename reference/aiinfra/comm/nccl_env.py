"""NCCL in practice: the environment variables users set, its log, its topology.

NCCL is configured through environment variables, and it explains itself through its
log: with ``NCCL_DEBUG=INFO`` every rank prints which interface bootstraps the job,
which network transport it found (``NET/IB`` for InfiniBand or RoCE, ``NET/Socket``
for TCP), the rings and trees it built over the topology it detected, how each pair
of GPUs is connected (``P2P`` over NVLink or PCIe, ``SHM`` through host memory,
``NET`` through a NIC) and when it is ready. :data:`ENV_VARS`: the variables users set,
with sources; :func:`label_line`: the stage a log line reports; :func:`nccl_log_excerpt`
a real log (public GitHub issues, hosts anonymised); :data:`TOPOLOGY` the topology.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

NCCL_ENV_URL = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
_DOCS, _C10D = "https://docs.pytorch.org/docs/stable/", "torch/csrc/distributed/c10d"
TORCH_NCCL_ENV_URL = _DOCS + "torch_nccl_environment_variables.html"
TORCH_NCCL_HPP_URL = (
    f"https://github.com/pytorch/pytorch/blob/main/{_C10D}/ProcessGroupNCCL.hpp"
)
TORCH_DEBUG_URL = _DOCS + "distributed.html#debugging-torch-distributed-applications"
NCCL_TOPO_CC_URL = "https://github.com/NVIDIA/nccl/blob/master/src/graph/topo.cc"
NCCL_XML_CC_URL = "https://github.com/NVIDIA/nccl/blob/master/src/graph/xml.cc"
LOG_FILE = Path(__file__).parent / "data" / "nccl_debug_info.log"


@dataclass(frozen=True)
class EnvVar:
    """One environment variable of NCCL or of PyTorch's NCCL process group.

    Args:
        name: the variable.
        what: what it does, one line.
        values: typical values.
        source: the page or file that documents it.
        unsure: what we could not confirm from the source, or ``""``.
        alias: another name the same setting is read from, or ``""``.
    """

    name: str
    what: str
    values: str
    source: str = NCCL_ENV_URL
    unsure: str = ""
    alias: str = ""

    @property
    def layer(self) -> str:
        """``"PyTorch"`` for the ``TORCH_`` variables torch reads, else ``"NCCL"``."""
        return "PyTorch" if self.name.startswith("TORCH_") else "NCCL"


ENV_VARS: tuple[EnvVar, ...] = (
    EnvVar("NCCL_DEBUG", "how much NCCL logs", "WARN, INFO, TRACE"),
    EnvVar(
        "NCCL_DEBUG_SUBSYS",
        "which subsystems log at INFO",
        "INIT,NET,GRAPH,ENV; ^ excludes; ALL",
        unsure="the default set changed across versions",
    ),
    EnvVar(
        "NCCL_DEBUG_FILE",
        "log to a file per process instead of stdout",
        "/tmp/nccl.%h.%p.log (%h host, %p pid)",
    ),
    EnvVar(
        "NCCL_SOCKET_IFNAME",
        "network interfaces for bootstrap and the socket transport",
        "eth0, ib0, ^docker,lo (^ excludes, = exact)",
    ),
    EnvVar(
        "NCCL_IB_HCA",
        "which RDMA devices and ports NET/IB uses (^ excludes)",
        "mlx5_0:1,mlx5_1:1; ^mlx5_4",
    ),
    EnvVar(
        "NCCL_IB_DISABLE",
        "turn off InfiniBand/RoCE: fall back to NET/Socket",
        "0, 1",
    ),
    EnvVar(
        "NCCL_P2P_DISABLE",
        "turn off direct GPU-to-GPU copies (NVLink, PCIe): use SHM instead",
        "0, 1",
    ),
    EnvVar(
        "NCCL_SHM_DISABLE",
        "turn off the host shared-memory transport",
        "0, 1",
    ),
    EnvVar(
        "NCCL_ALGO",
        "force the algorithms NCCL may use",
        "Ring, Tree, NVLS, CollnetDirect (^ excludes)",
    ),
    EnvVar(
        "NCCL_PROTO",
        "force the protocols NCCL may use",
        "LL, LL128, Simple",
    ),
    EnvVar(
        "NCCL_NET_GDR_LEVEL",
        "farthest GPU-NIC distance at which the NIC reads GPU memory directly "
        "(GPUDirect RDMA)",
        "LOC, PIX, PXB, PHB, SYS",
    ),
    EnvVar(
        "NCCL_TOPO_DUMP_FILE",
        "write the detected topology as XML",
        "/tmp/nccl_topo.xml",
    ),
    EnvVar(
        "NCCL_TOPO_FILE",
        "read the topology from an XML file (virtual machines, containers)",
        "/path/topo.xml",
    ),
    EnvVar(
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "after a failed or timed-out collective: 0 nothing, 1 abort the "
        "communicators and end the process, 2 abort only, 3 end the process only",
        "0, 1, 2, 3 (default 3)",
        TORCH_NCCL_HPP_URL,
        "default 3 per a comment in the 2.13 header",
    ),
    EnvVar(
        "TORCH_NCCL_BLOCKING_WAIT",
        "make work.wait() block and raise the timeout in the calling thread",
        "0, 1",
        TORCH_NCCL_ENV_URL,
    ),
    EnvVar(
        "TORCH_NCCL_TRACE_BUFFER_SIZE",
        "entries of the flight recorder: 2000 by default in 2.13, 0 turns it off",
        "2000, 0",
        TORCH_NCCL_ENV_URL,
        alias="TORCH_FR_BUFFER_SIZE",
    ),
    EnvVar(
        "TORCH_NCCL_DUMP_ON_TIMEOUT",
        "dump the flight recorder to files when the watchdog times out",
        "0, 1",
        TORCH_NCCL_ENV_URL,
    ),
    EnvVar(
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
        "path prefix of those dumps, one file per rank",
        "/tmp/nccl_trace_rank_",
        TORCH_NCCL_ENV_URL,
        unsure="the default prefix is from the docs; not in the 2.13 headers",
        alias="TORCH_FR_DUMP_TEMP_FILE",
    ),
    EnvVar(
        "TORCH_DISTRIBUTED_DEBUG",
        "at DETAIL, compare every collective's op and shapes across ranks "
        "before running it",
        "OFF, INFO, DETAIL",
        TORCH_DEBUG_URL,
    ),
)
"""The variables users set, NCCL's first; ``unsure`` marks what we did not confirm."""


@dataclass(frozen=True)
class TopologyItem:
    """One thing NCCL's topology detection records, with its source."""

    item: str
    what: str
    source: str


TOPOLOGY: tuple[TopologyItem, ...] = (
    TopologyItem(
        "NCCL_TOPO_DUMP_FILE",
        "at init NCCL writes the topology it detected, as XML",
        NCCL_ENV_URL,
    ),
    TopologyItem(
        "<system>", "the root; one <cpu> per NUMA node below it", NCCL_XML_CC_URL
    ),
    TopologyItem(
        "<cpu numaid affinity arch vendor>",
        "a CPU socket and the cores near it",
        NCCL_XML_CC_URL,
    ),
    TopologyItem(
        "<pci busid class link_speed link_width>",
        "a PCIe switch or device, nested as the PCIe tree is",
        NCCL_XML_CC_URL,
    ),
    TopologyItem(
        "<gpu dev sm rank gdr>",
        "a GPU: CUDA device, compute capability, rank, GPUDirect support",
        NCCL_XML_CC_URL,
    ),
    TopologyItem(
        "<nvlink target count>",
        "the NVLinks of a GPU to a peer or an NVSwitch, counted",
        NCCL_XML_CC_URL,
    ),
    TopologyItem(
        "<nic> / <net name dev speed port gdr>",
        "a network card and its ports with their speed (Mb/s)",
        NCCL_XML_CC_URL,
    ),
    TopologyItem(
        "LOC NVL NVB C2C PIX PXB PXN PHB SYS NET",
        "path types: how far apart two devices are, nearest first; the P2P and GDR "
        "level variables take these names",
        NCCL_TOPO_CC_URL,
    ),
)
"""What NCCL's topology XML contains (element names from NCCL's ``xml.cc``)."""


# Labels, roughly in the order NCCL initialises. The first rule that matches wins,
# so a connection (``via NET/IB``) is a transport, not the discovery of the network.
# region labels
LABEL_RULES: tuple[tuple[str, str], ...] = (
    ("version", r"NCCL version \S+|cudaDriverVersion"),
    ("environment", r"set by environment to"),
    ("bootstrap", r"Bootstrap ?:|Bootstrap timings"),
    ("transport: P2P", r"via P2P/"),
    ("transport: SHM", r"via SHM/"),
    ("transport: NET", r"via NET/"),
    ("transport: NVLS", r"NVLS comm|via NVLS|Connected NVLS"),
    ("network: InfiniBand", r"NET/IB\b|Using network IB"),
    ("network: sockets", r"NET/Socket|Using network Socket"),
    ("network plugin", r"NET/Plugin|P2P plugin"),
    ("init start", r"Init START"),
    ("send/receive chunk size", r"P2P Chunksize"),
    (
        "rings, trees, channels",
        r"Channel \d+/\d+ :\s+\d|Trees? \[?\d|Ring \d+ :",
    ),
    ("topology", r"affinity|NVLS multicast|nNodes|MNNVL"),
    ("init done", r"Init COMPLETE|Init timings|Connected all (rings|trees)"),
)
# endregion
LABELS = (*(label for label, _ in LABEL_RULES), "other")
MEANINGS: dict[str, str] = {
    "version": "which NCCL and CUDA driver: the first thing to quote in a bug report",
    "environment": "a variable NCCL read: check it is the one you meant to set",
    "bootstrap": "the interface and address ranks use to find each other (TCP)",
    "network: InfiniBand": "RDMA devices found: if missing, traffic goes over TCP",
    "network: sockets": "no RDMA device used: inter-node traffic over TCP sockets",
    "network plugin": "an external network plugin (e.g. for SHARP or AWS EFA)",
    "init start": "this rank's place in the communicator: rank, size, GPU bus id",
    "topology": "what NCCL detected: CPU affinity, NVLink SHARP, nodes",
    "rings, trees, channels": "the order of ranks in each channel's ring and tree",
    "send/receive chunk size": "the piece size of point-to-point send/receive "
    "(pipeline parallelism, all-to-all), not of the rings",
    "transport: P2P": "GPU to GPU directly, over NVLink or PCIe",
    "transport: SHM": "GPU to GPU through host memory: no P2P between them",
    "transport: NET": "through a NIC: between nodes, or forced",
    "transport: NVLS": "NVLink SHARP: the NVSwitch reduces",
    "init done": "the communicator is ready, with the time each stage took",
    "other": "anything else",
}
"""What each label of :func:`label_line` tells a reader of the log."""

_PREFIX = re.compile(r"^(?:\S+:\d+:\d+ \[\d+\] )?(?:NCCL INFO )?")


def strip_prefix(line: str) -> str:
    """Drop the ``host:pid:tid [dev] NCCL INFO`` prefix of a log line."""
    return _PREFIX.sub("", line.strip(), count=1)


def label_line(line: str) -> str:
    """Which stage of NCCL's initialisation a ``NCCL_DEBUG=INFO`` line reports.

    Args:
        line: one log line, with or without its ``host:pid:tid [dev] NCCL INFO``
            prefix.

    Returns:
        One of :data:`LABELS` (``"other"`` if no rule matches).

    Raises:
        TypeError: ``line`` is not a string.
    """
    if not isinstance(line, str):
        raise TypeError(f"line must be a str, got {type(line).__name__}")
    text = strip_prefix(line)
    for label, pattern in LABEL_RULES:
        if re.search(pattern, text):
            return label
    return "other"


def nccl_log_excerpt(path: str | Path = LOG_FILE) -> list[tuple[str, str]]:
    """The committed ``NCCL_DEBUG=INFO`` excerpt: (source URL, line) per log line.

    Lines starting with ``#`` are comments; ``# source: URL`` starts a part.
    """
    out, source = [], ""
    for line in Path(path).read_text().splitlines():
        if line.startswith("# source:"):
            source = line.removeprefix("# source:").strip()
        elif line.strip() and not line.startswith("#"):
            out.append((source, line))
    return out
