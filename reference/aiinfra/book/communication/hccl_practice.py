"""What ``docs/communication/hccl_practice.rst`` shows: HCCL's variables and stacks.

Every value is read from CANN's documentation (:mod:`aiinfra.comm.hccl.env`): no NPU
ran here.
"""

from __future__ import annotations

from fractions import Fraction

from matplotlib.figure import Figure

from aiinfra.comm.hccl import env, figures
from aiinfra.report import Table


def variable_table() -> Table:
    """HCCL's timeouts and their documented defaults and ranges on Atlas A2."""
    rows = [[v.name, v.bounds, v.default, v.allowed] for v in env.VARIABLES]
    return Table(
        ["variable", "bounds", "default", "values"],
        rows,
        words=(1, 2, 3),
        note="CANN 8.0.0 environment variable reference, Atlas A2 training series.",
    )


def exec_timeout_figure() -> Figure:
    """The HCCL_EXEC_TIMEOUT applied against the one set, on both products."""
    return figures.exec_timeout_figure()


def exec_timeout_600_s() -> float:
    """The wait the Atlas training series applies for HCCL_EXEC_TIMEOUT=600, s."""
    return env.exec_timeout(600, "atlas-training")


def exec_timeout_step_s() -> int:
    """The step the Atlas training series rounds HCCL_EXEC_TIMEOUT down to, s."""
    return env.EXEC_STEP


def rdma_timeout_default_s() -> float:
    """The shortest RoCE retransmission timeout at HCCL_RDMA_TIMEOUT's default, s."""
    return env.rdma_timeout(20)


def hang_table() -> Table:
    """The book's three hangs as HCCL's fault diagnosis guide describes them."""
    rows = [[k, *v] for k, v in env.HANG_SYMPTOMS.items()]
    return Table(
        ["hang", "HCCL reports", "when and where"],
        rows,
        words=(2,),
        note="From HCCL's fault diagnosis guide (hicann/hccl); not reproduced on an "
        "NPU.",
    )


def stacks_table() -> Table:
    """NVIDIA's, Huawei's and AMD's collective stacks side by side."""
    rows = [[k, *v] for k, v in env.STACKS.items()]
    return Table(["what", "NVIDIA", "Huawei", "AMD"], rows, words=(0,))


def heartbeat_lost_s() -> int:
    """Seconds without a heartbeat after which HCCL reports a rank lost."""
    return env.HEARTBEAT_LOST_S


def stuck_detection_from() -> str:
    """The earliest a stall is seen, as a fraction of HCCL_EXEC_TIMEOUT (``"1/3"``)."""
    return str(Fraction(env.STUCK_FRACTIONS[0]).limit_denominator(10))


def stuck_detection_to() -> str:
    """The latest a stall is seen, as a fraction of HCCL_EXEC_TIMEOUT (``"2/3"``)."""
    return str(Fraction(env.STUCK_FRACTIONS[1]).limit_denominator(10))
