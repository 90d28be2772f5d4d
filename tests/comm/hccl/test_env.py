"""HCCL's timeouts against the examples and formulas of CANN's documentation."""

import math

import pytest
from aiinfra.comm.hangs import __doc__ as hangs_doc
from aiinfra.comm.hccl.env import (
    HANG_SYMPTOMS,
    HEARTBEAT_LOST_S,
    STACKS,
    STUCK_FRACTIONS,
    VARIABLES,
    exec_timeout,
    rdma_timeout,
)
from aiinfra.distributed import BACKENDS


def test_exec_timeout_rounds_down_to_68_s_on_the_training_series():
    # CANN's example: HCCL_EXEC_TIMEOUT=600 -> 600 // 68 * 68 = 8 * 68 = 544 s;
    # below 68 counts as 68. Atlas A2 takes the value; 0 = never.
    assert exec_timeout(600, "atlas-training") == 8 * 68 == 544
    assert exec_timeout(1, "atlas-training") == 68
    assert exec_timeout(1836, "atlas-training") == 27 * 68
    assert exec_timeout(600, "atlas-a2") == 600
    assert exec_timeout(0, "atlas-a2") == math.inf
    with pytest.raises(ValueError, match="value"):
        exec_timeout(0, "atlas-training")  # (0, 17340]
    with pytest.raises(ValueError, match="value"):
        exec_timeout(17341, "atlas-training")
    with pytest.raises(ValueError, match="product"):
        exec_timeout(600, "gpu")


def test_rdma_timeout_is_4096_ns_times_two_to_the_t():
    # CANN: min retransmission timeout = 4.096 us * 2^timeout; A2 range [5, 20].
    assert rdma_timeout(20) == pytest.approx(4.096e-6 * 1048576)
    assert rdma_timeout(6) == pytest.approx(262.144e-6)
    with pytest.raises(ValueError, match="exponent"):
        rdma_timeout(21)
    assert rdma_timeout(24, "atlas-training") == pytest.approx(4.096e-6 * 2**24)


def test_tables_agree_with_the_package():
    assert [v.name for v in VARIABLES][:3] == [
        "HCCL_CONNECT_TIMEOUT",
        "HCCL_EXEC_TIMEOUT",
        "HCCL_RDMA_TIMEOUT",
    ]
    # The stacks' torch names are the chooser's: nccl on cuda (RCCL too), hccl on npu.
    for device, backend in zip(
        STACKS["torch device type"], STACKS["torch backend"], strict=True
    ):
        assert BACKENDS[device] == backend
    # The guide: LOST after 30 s without a heartbeat; STUCK seen at (1/3 to 2/3) *
    # HCCL_EXEC_TIMEOUT.
    assert HEARTBEAT_LOST_S == 30 and STUCK_FRACTIONS == (1 / 3, 2 / 3)
    for scenario in HANG_SYMPTOMS:  # the book's own three hangs
        assert f"``{scenario}``" in hangs_doc
