"""Our ZeRO against DeepSpeed and FSDP2, and the committed results the book reads.

Ground truth: one process training on the whole batch; DeepSpeed 0.19's ZeRO stages
1-3 (``deepspeed.initialize`` over gloo, a plain ``torch.optim.AdamW``, gradient
clipping off) and PyTorch's ``fully_shard``. Every loss must agree with one process's
to 1e-6 (fp32 sums in another order, as in ``test_ddp``). DeepSpeed JIT-compiles a
shared-memory kernel when its communication backend starts on CPU; the nox session
caches it under ``TORCH_EXTENSIONS_DIR`` (``.torch_extensions``), and so does this
module when the variable is unset.
"""

import contextlib
import io
import math
import os
import pathlib

import pytest
from aiinfra.parallel import zero_results
from aiinfra.parallel.zero_compare import compare_losses

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "_data" / "bench" / "zero-gloo.json"
os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(ROOT / ".torch_extensions"))

deepspeed = pytest.importorskip("deepspeed")


@pytest.mark.slow
def test_ours_deepspeed_and_fsdp2_follow_the_loss_of_one_process():
    losses = compare_losses(world_size=2, n_steps=4)
    assert set(losses) == {
        "one process", "FSDP2 fully_shard",
        *(f"{who} ZeRO-{s}" for who in ("ours", "DeepSpeed") for s in (1, 2, 3)),
    }  # fmt: skip
    for name, curve in losses.items():
        assert curve == pytest.approx(losses["one process"], abs=1e-6), name


def test_committed_losses_agree_and_tables_render():
    assert zero_results.max_loss_gap(RESULTS) < 1e-6
    table = zero_results.loss_table(RESULTS)
    assert len(table.rows) == 8 and "DeepSpeed" in table.note


def test_committed_deepspeed_estimates_are_deepspeeds_own():
    est = zero_results.load_zero_results(RESULTS)["estimates"]
    assert est["model"] == zero_results.EXAMPLE
    assert est["deepspeed"] == zero_results.deepspeed_estimates(**est["model"])


def test_deepspeed_estimates_are_2p_plus_18p_over_n_and_differ_from_the_paper():
    # FACTS.md: ZeRO-2 on GPU is 2P + 18P/G in DeepSpeed 0.19; the paper (Fig. 1)
    # has 2P + 14P/G. Stage 3 adds 4 bytes per parameter of the largest layer.
    table = zero_results.estimator_table(RESULTS)
    psi, big = 7_500_000_000, 50_257 * 4096
    est = zero_results.deepspeed_estimates(psi, big, 8, 8)
    assert est["2"]["gpu"] == 2 * psi + int(18 * psi / 64)
    assert est["3"]["gpu"] == 4 * big + int(18 * psi / 64)
    assert est["2"]["cpu"] == psi * 4 * 8 * 1.5  # the 1.5 buffer factor
    for row in table.rows:  # the difference is explained exactly
        assert math.isclose(row[3], row[4], abs_tol=1e-3)
    assert table.rows[0][1] == pytest.approx(16.64, abs=1e-3)  # paper Fig. 1: 16.6
    assert table.rows[1][1] == 1.875  # paper Fig. 1: 1.9 GB


def test_deepspeed_all_live_estimators_print_a_table_and_return_none():
    from aiinfra.parallel.toy import mlp
    from deepspeed.runtime.zero.stage3 import (
        estimate_zero3_model_states_mem_needs_all_live,
    )
    from deepspeed.runtime.zero.stage_1_and_2 import (
        estimate_zero2_model_states_mem_needs_all_live,
    )

    for estimate in (
        estimate_zero2_model_states_mem_needs_all_live,
        estimate_zero3_model_states_mem_needs_all_live,
    ):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert estimate(mlp((6, 7, 9, 3)), num_gpus_per_node=4) is None
        assert "per CPU  |  per GPU |   Options" in out.getvalue()


def test_bench_zero_cli_returns_2_on_bad_flags(capsys):
    import argparse

    parser = argparse.ArgumentParser()
    zero_results.add_arguments(parser)
    assert zero_results.run(parser.parse_args(["--world-size", "5"])) == 2
    assert "--world-size must divide" in capsys.readouterr().err
