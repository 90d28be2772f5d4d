"""HCCL's timeouts and the variables that set them, as CANN's documentation gives them.

Three clocks bound an HCCL job, each the counterpart of one of NCCL's:
``HCCL_CONNECT_TIMEOUT`` bounds the socket handshake that builds a communicator,
``HCCL_EXEC_TIMEOUT`` how long a rank waits for its peers inside a collective (the
counterpart of the process group's ``timeout`` behind ``NCCL TIMEOUT``), and
``HCCL_RDMA_TIMEOUT`` the RoCE NIC's retransmission timer, 4.096 us x 2^t like
InfiniBand's local ACK timeout that ``NCCL_IB_TIMEOUT`` sets. The values are those
of the CANN 8.0.0 environment variable reference; other releases differ (CANN 6.0.RC1
gave HCCL_EXEC_TIMEOUT a default of 600 s, 6.0.1 and 7.0 1800 s, 8.0 1836 s), so
each record names its release. :data:`HANG_SYMPTOMS` lists what HCCL's fault
diagnosis guide says each of the book's three hangs looks like in HCCL's logs: read,
not reproduced, since no NPU ran here.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiinfra import checks

PRODUCTS = ("atlas-training", "atlas-a2")  # Atlas training series (910), Atlas A2
EXEC_STEP = 68  # s: the Atlas training series rounds HCCL_EXEC_TIMEOUT down to this
EXEC_MAX = {"atlas-training": 17340, "atlas-a2": 2147483647}  # s, documented maxima
RDMA_RANGE = {"atlas-training": (5, 24), "atlas-a2": (5, 20)}  # documented exponents
RDMA_UNIT = 4.096e-6  # s: the retransmission timer is RDMA_UNIT x 2^HCCL_RDMA_TIMEOUT


@dataclass(frozen=True)
class Variable:
    """One of HCCL's environment variables.

    Args:
        name: the variable.
        bounds: what it bounds, in words.
        default: its default, as documented (with its unit).
        allowed: the values it accepts on Atlas A2, as documented.
    """

    name: str
    bounds: str
    default: str
    allowed: str


#: The variables of this page, CANN 8.0.0 (Atlas A2 training series).
VARIABLES = (
    Variable("HCCL_CONNECT_TIMEOUT", "building a communicator", "120 s", "120-7200 s"),
    Variable(
        "HCCL_EXEC_TIMEOUT",
        "waiting for peers in a collective",
        "1836 s",
        "0 (never) to 2^31 - 1 s",
    ),
    Variable(
        "HCCL_RDMA_TIMEOUT", "one RoCE retransmission", "20", "5-20 (4.096 us x 2^t)"
    ),
    Variable("HCCL_RDMA_RETRY_CNT", "RoCE retransmissions", "7", "1-7"),
    Variable(
        "HCCL_ALGO",
        "the algorithm between servers",
        "HCCL's choice",
        "level0:NA;level1:<algo>",
    ),
)


def exec_timeout(value: float, product: str) -> float:
    """The wait HCCL actually applies for ``HCCL_EXEC_TIMEOUT=value``, in seconds.

    The Atlas training series (910) rounds down to a multiple of 68 s, and treats
    anything below 68 as 68 (600 -> 544, the documentation's example); Atlas A2 takes
    the value as it is, 0 meaning never (returned as ``inf``).

    Raises:
        ValueError: ``value`` outside the product's documented range ((0, 17340] on
            the training series, [0, 2^31 - 1] on A2) or an unknown ``product``.
    """
    checks.one_of("product", product, PRODUCTS)
    low_open = product == "atlas-training"
    checks.number("value", value, 0, EXEC_MAX[product], low_open=low_open)
    if product == "atlas-a2":
        return float("inf") if value == 0 else float(value)
    return float(max(EXEC_STEP, int(value) // EXEC_STEP * EXEC_STEP))


def rdma_timeout(exponent: int, product: str = "atlas-a2") -> float:
    """The shortest RoCE retransmission timeout, 4.096 us x 2^exponent, in seconds.

    Raises:
        ValueError: ``exponent`` outside the product's documented range ([5, 20] on
            A2, [5, 24] on the training series) or an unknown ``product``.
    """
    checks.one_of("product", product, PRODUCTS)
    checks.int_in("exponent", exponent, *RDMA_RANGE[product])
    return RDMA_UNIT * 2**exponent


#: The book's three hangs (:mod:`aiinfra.comm.hangs`) as HCCL's fault diagnosis guide
#: describes them (hicann/hccl, docs/en/user_guide/fault_diagnosis/task_exec_stage.md).
HANG_SYMPTOMS = {
    "mismatch": (
        "Notify wait timeout (EI0002)",
        "every rank, when the execution timeout expires; their logs name different "
        "operators",
    ),
    "stall": (
        "Stuck Occurred",
        "the heartbeat sees no progress well before the execution timeout",
    ),
    "die": (
        "Heartbeat Lost Occurred",
        "the rank stops sending heartbeats; every rank's log names it",
    ),
}
HEARTBEAT_LOST_S = 30  # s without a heartbeat before a peer is reported lost
STUCK_FRACTIONS = (1 / 3, 2 / 3)  # a stall is seen within these of HCCL_EXEC_TIMEOUT


#: NCCL, HCCL and RCCL side by side: what a PyTorch job sees of each stack.
STACKS = {
    "accelerator": ("NVIDIA GPU", "Ascend NPU", "AMD Instinct GPU"),
    "torch device type": ("cuda", "npu", "cuda"),
    "torch backend": ("nccl", "hccl", "nccl"),
    "collective library": ("NCCL", "HCCL", "RCCL (NCCL's API)"),
    "link inside a server": ("NVLink", "HCCS", "Infinity Fabric (xGMI)"),
    "device tool": ("nvidia-smi", "npu-smi", "rocm-smi"),
    "PyTorch package": ("torch", "torch + torch_npu", "torch (ROCm)"),
}
