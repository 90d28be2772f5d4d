"""``aiinfra preflight``: the config's checks, the judges, the checksum, one spawn.

The judges and the checksum are held against hand-made cases; one spawned run
with an SDC and a straggler planted checks that each check flags its fault and
nothing else, and the committed result that the book shows says the same.
"""

import pytest
import torch
from aiinfra import results
from aiinfra.cloud.preflight.checks import FLIPPED_BIT, bit_checksum, flip_bit
from aiinfra.cloud.preflight.config import INJECTED_SLOWDOWN, PreflightConfig
from aiinfra.cloud.preflight.run import run_preflight, sdc_ranks, straggler_ranks


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ranks": 1}, "ranks"),
        ({"straggler_ratio": 1.0}, "straggler_ratio"),
        ({"straggler_ratio": 0}, "straggler_ratio"),
        ({"min_busbw": 0}, "min_busbw"),
        ({"inject": ("sdc:4",)}, r"inject rank must be in 0..3"),
        ({"inject": ("melt:1",)}, "inject must be FAULT:RANK"),
        ({"inject": ("sdc:1", "sdc:2")}, "names sdc twice"),
        ({"backend": "mpi"}, "backend"),
        ({"size": 0}, "size"),
    ],
)
def test_bad_configs_are_refused_before_any_rank_is_spawned(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PreflightConfig(**kwargs)


def test_a_flipped_low_bit_passes_allclose_but_not_the_checksum():
    c = torch.randn(64, 64, generator=torch.Generator().manual_seed(1))
    bad = c.clone()
    flip_bit(bad)
    assert torch.allclose(bad, c)  # what a tolerance-based check would conclude
    assert not torch.equal(bad, c)
    assert abs(int(bit_checksum(bad)) - int(bit_checksum(c))) == 1 << FLIPPED_BIT


def test_checksum_refuses_a_two_byte_dtype():
    with pytest.raises(TypeError, match="4-byte"):
        bit_checksum(torch.zeros(3, dtype=torch.bfloat16))


def test_the_majority_names_the_corrupt_rank_and_two_ranks_cannot_tell():
    assert sdc_ranks([[5, 5], [5, 5], [5, 7], [5, 5]]) == [2]
    assert sdc_ranks([[5, 5], [5, 5], [5, 5]]) == []
    assert sdc_ranks([[5], [6]]) == [0, 1]  # no majority: both suspect
    # A rank that drifts from its own first result is flagged even if a majority
    # of ranks drifted the same way.
    assert sdc_ranks([[5, 9], [5, 9], [5, 9]]) == [0, 1, 2]


def test_a_straggler_is_above_the_ratio_times_the_median():
    assert straggler_ranks([1.0, 1.1, 0.9, 3.0], 1.5) == [3]
    assert straggler_ranks([1.0, 1.1, 0.9, 1.4], 1.5) == []


@pytest.mark.slow
def test_each_planted_fault_is_flagged_on_its_rank_only():
    cfg = PreflightConfig(ranks=4, inject=("sdc:1", "slow:2"), timeout=30.0)
    res = run_preflight(cfg)
    ar, gemm = res["all_reduce"], res["gemm"]
    assert ar["exact"] == [True] * 4 and ar["passed"]
    # The corrupt rank differs from the others in every result after the flip, by
    # the flipped bit exactly; before it, all four agree.
    good, bad = gemm["checksums"][0], gemm["checksums"][1]
    half = cfg.iters // 2
    assert good[:half] == bad[:half]
    assert [b - g for g, b in zip(good, bad, strict=True)][half:] == [
        1 << FLIPPED_BIT
    ] * half
    assert gemm["sdc_ranks"] == [1]
    assert res["replicas"]["disagree"] == [1]
    assert gemm["stragglers"] == [2]
    assert gemm["seconds"][2] / gemm["median"] > cfg.straggler_ratio
    assert res["healthy"] is False
    assert INJECTED_SLOWDOWN > cfg.straggler_ratio


def test_the_committed_run_flags_the_planted_ranks():
    res = results.load("preflight", "gloo")
    faults = res["faults"]
    assert res["gemm"]["sdc_ranks"] == [faults["sdc"]]
    assert res["replicas"]["disagree"] == [faults["sdc"]]
    assert res["gemm"]["stragglers"] == [faults["slow"]]
    assert all(res["all_reduce"]["exact"])


def test_the_command_refuses_a_bad_inject_before_spawning(capsys):
    from aiinfra import cli

    with pytest.raises(SystemExit) as exit_:
        cli.main(["preflight", "--ranks", "2", "--inject", "slow:2"])
    assert exit_.value.code == 2
    assert "inject rank must be in 0..1" in capsys.readouterr().err
