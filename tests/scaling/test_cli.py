"""``aiinfra scaling``: the allocations it prints, and its bad flags.

Ground truths: C = 6ND for every row; Llama 3 405B's published 405B parameters on
15.6T tokens (Dubey et al. 2024), 38.5 tokens per parameter; Chinchilla's "about
20" tokens per parameter (Hoffmann et al. 2022, Table 3) for Besiroglu et al.'s
refit; argparse's exit status 2 with the flag named for bad input.
"""

from __future__ import annotations

import json

import pytest
from aiinfra import cli


def run_json(capsys, *flags):
    """The two tables by the words that start their titles: compute_optimal (the
    allocations) and llama3_405b (Llama 3 405B's run)."""
    assert cli.main(["scaling", *flags, "--json"]) == 0
    tables = json.loads(capsys.readouterr().out)["tables"]
    allocation, run = tables.values()
    assert next(iter(tables)).startswith("Compute-optimal N and D")
    return {"compute_optimal": allocation, "llama3_405b": run}


def test_each_laws_allocation_spends_the_budget(capsys):
    out = run_json(capsys, "--flops", "3.8e25")
    table = out["compute_optimal"]
    laws = [row[0] for row in table["rows"]]
    assert laws[:4] == [
        "Kaplan et al. 2020",
        "Hoffmann et al. 2022, printed",
        "Hoffmann et al. 2022, unrounded exponents",
        "Besiroglu et al. 2024",
    ]
    for _, n, d, per_param, _ in table["rows"]:
        assert 6 * n * d == pytest.approx(3.8e25, rel=1e-9)
        assert per_param == pytest.approx(d / n)
    besiroglu = table["rows"][3]
    assert 10 < besiroglu[3] < 30  # about 20 tokens per parameter


def test_llama3_405b_choice_is_put_in_each_laws_terms(capsys):
    out = run_json(capsys, "--flops", "3.8e25")
    table = out["llama3_405b"]
    assert "38.5 tokens per parameter" in table["stamp"]
    for row in table["rows"][1:]:  # the Chinchilla-form laws
        _, n_opt, _, ratio, loss, best, compute = row
        assert ratio == pytest.approx(405e9 / n_opt)
        assert loss >= best  # the optimum is the least loss for the budget
        assert 0 < compute <= 1  # an optimal model reaches the loss with less


def test_without_a_fit_file_the_published_laws_remain(capsys, tmp_path):
    out = run_json(capsys, "--flops", "1e22", "--fit", str(tmp_path / "none.json"))
    assert len(out["compute_optimal"]["rows"]) == 4  # Kaplan, Hoffmann twice, Besiroglu


def test_text_output_has_both_tables(capsys):
    assert cli.main(["scaling", "--flops", "5.76e23"]) == 0
    text = capsys.readouterr().out
    assert "Compute-optimal allocation" in text and "Llama 3 405B" in text


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--flops", "0"], "--flops: must be a number > 0"),
        (["--flops", "lots"], "--flops: must be a number > 0"),
        ([], "--flops must be given"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(capsys, flags, message):
    with pytest.raises(SystemExit) as exc:
        cli.main(["scaling", *flags])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
