"""Autocast's dtypes, measured, against the op lists of PyTorch's AMP documentation."""

import pytest
import torch
from aiinfra.precision.autocast import CUDA_LIST, autocast_dtypes, autocast_table

# https://pytorch.org/docs/stable/amp.html, "CPU Ops that can autocast to bfloat16"
# (conv1d, bmm, mm, linear, matmul, ...) and "CPU Ops that can autocast to float32"
# (mse_loss, cross_entropy_loss, nll_loss, ...). An op in neither list runs in its
# inputs' dtype; bf16 + fp32 promotes to fp32.
CPU_EXPECTED = {
    "linear": torch.bfloat16,
    "matmul": torch.bfloat16,
    "conv1d": torch.bfloat16,
    "softmax": torch.bfloat16,
    "log_softmax": torch.bfloat16,
    "layer_norm": torch.bfloat16,
    "sum": torch.bfloat16,
    "exp": torch.bfloat16,
    "cross_entropy": torch.float32,
    "mse_loss": torch.float32,
    "relu": torch.bfloat16,
    "add (fp32 bias)": torch.float32,
}
TO_DTYPE = {"low precision": torch.bfloat16, "float32": torch.float32}


def test_cpu_autocast_follows_the_documented_cpu_lists():
    assert autocast_dtypes("cpu", torch.bfloat16) == CPU_EXPECTED
    rows = {r[0]: r[1] for r in autocast_table().rows}
    assert rows["linear"] == "bfloat16" and rows["cross_entropy"] == "float32"


@pytest.mark.gpu
def test_cuda_autocast_follows_the_documented_cuda_lists():
    measured = autocast_dtypes("cuda", torch.bfloat16)
    for name, listed in CUDA_LIST.items():
        expected = TO_DTYPE.get(listed, CPU_EXPECTED[name])
        assert measured[name] == expected, name


def test_autocast_dtypes_rejects_bad_input():
    with pytest.raises(ValueError, match="device_type must be"):
        autocast_dtypes("mps")
    with pytest.raises(ValueError, match="dtype must be"):
        autocast_dtypes("cpu", torch.float64)


def test_set_float32_matmul_precision_switches_tf32_for_cuda_matmuls():
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        assert torch.backends.cuda.matmul.allow_tf32
        torch.set_float32_matmul_precision("highest")
        assert not torch.backends.cuda.matmul.allow_tf32
    finally:
        torch.set_float32_matmul_precision(before)
