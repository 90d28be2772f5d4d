"""The compute budget against the papers' own totals, and its bad input."""

import subprocess
import sys

import pytest
from aiinfra.hardware import budget
from aiinfra.scaling.laws import LLAMA3_405B

# Brown et al. 2020, Table D.1: GPT-3 175B on 300B tokens, 3.14e23 FLOPs.
GPT3_FLOPS = 3.14e23


def test_six_nd_matches_the_published_budgets():
    assert budget.training_flops(175e9, 300e9) == pytest.approx(GPT3_FLOPS, rel=0.01)
    flops = budget.training_flops(LLAMA3_405B.n, LLAMA3_405B.d)
    assert flops == pytest.approx(LLAMA3_405B.reported_flops, rel=0.01)


def test_gpu_days_by_hand():
    # 3.8e25 FLOPs at 40 % of 989 TFLOP/s: 3.8e25 / 395.6e12 / 86,400 s.
    assert budget.gpu_days(3.8e25, "H100", 0.4) == pytest.approx(1_111_776, rel=1e-4)
    assert budget.wall_days(3.8e25, "H100", 16_384, 0.4) == pytest.approx(
        67.86, rel=1e-3
    )


def test_whole_job_mfu_is_below_the_steady_state_one():
    """GPU-hours count restarts and stalls: the implied MFU of the 405B run lies
    below the 38-43 % Meta measured while it trained, and not far below."""
    run = next(r for r in budget.RUNS if r.name == "Llama 3.1 405B")
    low, _ = budget.LLAMA3_STEADY_MFU
    assert 0.75 * low < budget.implied_mfu(run) < low


def test_deepseek_v3_mfu_against_its_fp8_peak_by_hand():
    """DeepSeek-V3's GEMMs ran in FP8: 6 x 37e9 x 14.8e12 FLOPs in 2.664e6 H800-hours
    is 35 % of the H100's dense BF16 989 TFLOP/s, but 17 % of its FP8 1,979."""
    run = next(r for r in budget.RUNS if r.name == "DeepSeek-V3")
    flops = 6 * 37e9 * 14.8e12
    seconds = 2.664e6 * 3600
    assert budget.implied_mfu(run) == pytest.approx(flops / seconds / 989e12)
    assert budget.implied_mfu(run, "gemms") == pytest.approx(flops / seconds / 1979e12)
    assert round(100 * budget.implied_mfu(run)) == 35
    assert round(100 * budget.implied_mfu(run, "gemms")) == 17
    # a BF16 run's two figures are the same
    llama = next(r for r in budget.RUNS if r.name == "Llama 3.1 405B")
    assert budget.implied_mfu(llama, "gemms") == budget.implied_mfu(llama)
    with pytest.raises(ValueError, match="fmt"):
        budget.implied_mfu(run, "fp4")


def test_every_published_run_implies_a_possible_mfu():
    for run in budget.RUNS:
        assert 0.05 < budget.implied_mfu(run) < 1, run.name


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: budget.training_flops(0, 1e12), "params must be a finite number > 0"),
        (lambda: budget.training_flops(1e9, -1), "tokens must be a finite number > 0"),
        (lambda: budget.gpu_days(1e24, "H100", 0), r"mfu must be in \(0, 1\]"),
        (lambda: budget.gpu_days(1e24, "H100", 1.5), r"mfu must be in \(0, 1\]"),
        (lambda: budget.gpu_days(1e24, "V100", 0.4), "gpu must be one of"),
        (lambda: budget.wall_days(1e24, "H100", 0, 0.4), "n_gpus must be an int >= 1"),
        (
            lambda: budget.wall_days(1e24, "H100", 2.5, 0.4),
            "n_gpus must be an int >= 1",
        ),
        (lambda: budget.budget_table(1e9, 1e12, "H100", 8, ()), "mfus must name"),
    ],
)
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_command_prints_the_budget_and_rejects_a_bad_mfu():
    run = [sys.executable, "-m", "aiinfra.cli", "budget"]
    ok = subprocess.run([*run, "--gpus", "8192"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "8,192 H100 SXM" in ok.stdout and "Llama 3.1 405B" in ok.stdout
    bad = subprocess.run([*run, "--mfu", "1.5"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--mfu" in bad.stderr
