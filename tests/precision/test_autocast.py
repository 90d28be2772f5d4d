"""Autocast's dtypes, measured, against the op lists of torch's source and docs.

Ground truth for the CUDA column: the op lists torch itself compiles, the macros of
the installed ``ATen/autocast_mode.h``; for the CPU column: the AMP documentation's
CPU lists and a measurement.
"""

import pytest
import torch
from aiinfra.precision.autocast import (
    ATEN_OPS,
    CUDA_LIST,
    autocast_dtypes,
    autocast_table,
    torch_autocast_lists,
)

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


def test_the_cuda_column_is_torchs_own_lists():
    try:
        lists = torch_autocast_lists()
    except FileNotFoundError:
        pytest.skip("this torch build ships no ATen headers")
    listed = set().union(*lists.values())
    for name, label in CUDA_LIST.items():
        ops = ATEN_OPS.get(name, (name,))
        if label == "low precision":
            assert all(op in lists["low precision"] for op in ops), name
        elif label.startswith("float32"):
            assert all(op in lists["float32"] for op in ops), name
            assert (name in listed) == (name not in ATEN_OPS), name
        else:  # relu, add: on no list; add's fp32 is type promotion
            assert label.startswith("on no list"), name
            assert not any(op in listed for op in ops), name
    assert torch.result_type(torch.ones(1, dtype=torch.bfloat16), torch.ones(1)) == (
        torch.float32
    )


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
