"""``aiinfra plan`` and its model sources: output, JSON, and bad flags.

Ground truths: the preset itself for a ``config.json`` and a checkpoint directory
written from it (the same parsed config); the planner called directly for the
command's rows; argparse's exit status 2 with the flag named for bad input.
"""

from __future__ import annotations

import json

import pytest
from aiinfra import cli
from aiinfra.models.presets import PRESETS, preset
from aiinfra.plan.cli import tokens
from aiinfra.plan.job import Job
from aiinfra.plan.search import plan
from aiinfra.plan.source import load_model

ARGS = ["plan", "--model", "llama-3-8b", "--gpu", "h100", "--gpus", "8"]
ARGS += ["--global-batch", "1M", "--seq", "8192"]


def test_config_file_and_checkpoint_directory_give_the_preset(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(PRESETS["llama-3-8b"]))
    assert load_model(tmp_path / "config.json")[1] == preset("llama-3-8b")
    assert load_model(tmp_path)[1] == preset("llama-3-8b")
    assert load_model("LLAMA-3-8B") == ("llama-3-8b", preset("llama-3-8b"))


def test_llama3_405b_has_the_papers_sizes():
    cfg = load_model("llama-3-405b")[1]  # Dubey et al. 2024, Table 3
    assert (cfg.n_layers, cfg.d_model, cfg.d_ff) == (126, 16384, 53248)
    assert (cfg.n_heads, cfg.n_kv_heads, cfg.vocab_size) == (128, 8, 128256)


def test_bad_model_sources_are_refused(tmp_path):
    with pytest.raises(ValueError, match="model must be dense"):
        load_model("deepseek-v3")
    with pytest.raises(ValueError, match="model must be a checkpoint directory"):
        load_model(tmp_path)
    with pytest.raises(ValueError, match="model must be a preset"):
        load_model("llama-9")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="model must be a readable config.json"):
        load_model(tmp_path)


def test_tokens_reads_binary_suffixes():
    assert [tokens(t) for t in ("4096", "1K", "16M", "1g")] == [
        4096,
        1024,
        2**24,
        2**30,
    ]


def test_json_rows_are_the_planners_best(capsys):
    assert cli.main([*ARGS, "--top", "3", "--json"]) == 0
    out, legend = json.loads(capsys.readouterr().out)["tables"].values()
    assert [row[0] for row in legend["rows"]][1:5] == ["ZeRO", "b", "k", "v"]
    best = plan(Job(preset("llama-3-8b"), "H100", 8, 2**20, 8192), top=3)
    assert len(out["rows"]) == 3
    sizes = [row[1:5] for row in out["rows"]]
    assert sizes == [[p.layout.dp, p.layout.tp, p.layout.pp, p.layout.cp] for p in best]
    assert out["columns"][-1] == "MFU (%)"


def test_text_output_is_a_table(capsys):
    assert cli.main([*ARGS, "--top", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # the inputs, a blank line, the title and its rule, then the table
    assert lines[0].startswith("# aiinfra plan --model llama-3-8b --gpu H100")
    assert lines[4].split()[:5] == ["#", "dp", "tp", "pp", "cp"]
    assert lines[6].split()[0] == "1" and lines[7].split()[0] == "2"
    assert "What the columns mean" in lines


@pytest.mark.parametrize(
    ("change", "flag"),
    [
        (["--gpu", "b200"], "--gpu"),
        (["--gpus", "12"], "--gpus must be a multiple"),
        (["--global-batch", "1000"], "--global-batch must be a multiple of seq"),
        (["--model", "nope"], "--model must be a preset"),
        (["--gpus", "1", "--model", "llama-3-405b"], "--gpus must be more than 1"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(change, flag, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main([*ARGS, *change])
    assert exit_.value.code == 2
    assert flag in capsys.readouterr().err
