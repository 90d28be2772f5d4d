"""The H100's memory levels against the totals NVIDIA's whitepaper prints."""

import pytest
from aiinfra.accelerators import GPUS
from aiinfra.hardware import gpu_memory as gm

# NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), H100 SXM5 column:
# 528 tensor cores, 16,896 FP32 cores, a 33,792 KB register file per GPU.
WHITEPAPER = {"tensor_cores": 528, "fp32_cores": 16896, "register_kib": 33792}


def test_per_sm_sizes_times_sms_give_the_whitepaper_totals():
    sms = GPUS["H100"].sms
    assert gm.TENSOR_CORES_PER_SM * sms == WHITEPAPER["tensor_cores"]
    assert gm.FP32_CORES_PER_SM * sms == WHITEPAPER["fp32_cores"]
    registers = gm.h100_memory_levels()[0]
    assert registers.bytes_total == WHITEPAPER["register_kib"] * 1024


def test_levels_grow_in_size_and_hbm_is_the_slowest():
    levels = gm.h100_memory_levels()
    assert [lv.name for lv in levels] == ["registers", "shared memory", "L2", "HBM"]
    sizes = [lv.bytes_total for lv in levels[1:]]
    assert sizes == sorted(sizes)
    smem, hbm = levels[1], levels[3]
    assert smem.bandwidth > hbm.bandwidth == GPUS["H100"].hbm_bandwidth


def test_the_fp32_clock_reproduces_the_fp32_peak():
    clock = gm.fp32_clock_hz("H100")
    assert 2 * WHITEPAPER["fp32_cores"] * clock == pytest.approx(67e12)


def test_unknown_gpu_is_a_key_error():
    with pytest.raises(KeyError):
        gm.fp32_clock_hz("H900")
