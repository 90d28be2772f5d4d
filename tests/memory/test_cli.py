"""``aiinfra memory``: the table, JSON, and a clear error for every bad input."""

import json

import pytest
from aiinfra import cli
from aiinfra.memory.calculator import GiB, estimate_memory
from aiinfra.models.presets import PRESETS, preset


def _run(argv, capsys):
    try:
        rc = cli.main(["memory", *argv])
    except SystemExit as exit_:  # argparse's usage errors
        rc = exit_.code
    out, err = capsys.readouterr()
    return rc, out, err


def test_prints_the_breakdown_with_both_units(capsys):
    rc, out, err = _run(["--model", "Llama-3-8B", "--seq", "8192"], capsys)
    assert rc == 0 and err == ""
    for word in ("parameters", "gradients", "optimizer", "activations", "total"):
        assert word in out
    assert "GiB = 2^30 bytes" in out and "GB = 10^9 bytes" in out
    assert "8,030,261,248" in out


def test_json_equals_the_calculator(capsys):
    argv = ["--model", "llama-3-70b", "--tp", "8", "--sp", "--recompute", "selective"]
    argv += ["--zero", "1", "--dp", "16", "--json"]
    rc, out, _ = _run(argv, capsys)
    (table,) = json.loads(out)["tables"].values()
    total = dict((r[0], r) for r in table["rows"])["total"]
    est = estimate_memory(
        preset("llama-3-70b"), 4096, 1, 8, True, "selective", zero=1, dp=16
    )
    assert rc == 0 and total[1] == int(est.total)
    assert total[2] == round(est.total / GiB, 2)


def test_reads_a_config_file(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(PRESETS["gpt2"]))
    rc, out, _ = _run(["--config", str(path), "--seq", "1024", "--json"], capsys)
    (table,) = json.loads(out)["tables"].values()
    assert rc == 0 and "124,439,808" in table["stamp"]


def test_a_preset_and_its_config_file_give_the_same_table(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(PRESETS["qwen2.5-72b"]))
    _, from_file, _ = _run(["--config", str(path), "--tp", "8", "--json"], capsys)
    _, from_name, _ = _run(["--model", "Qwen2.5-72B", "--tp", "8", "--json"], capsys)
    (file_table,) = json.loads(from_file)["tables"].values()
    (name_table,) = json.loads(from_name)["tables"].values()
    assert file_table["rows"] == name_table["rows"]
    assert "72,706,203,648" in from_name  # q, k, v biases counted


@pytest.mark.parametrize(
    "argv, config, match",
    [
        (["--seq", "-5"], None, "--seq: must be an int >= 1"),
        (["--dp", "0", "--zero", "2"], None, "--dp: must be an int >= 1"),
        (["--tp", "3"], None, "tp = 3 must divide n_heads = 32"),
        (["--tp", "2", "--sp", "--seq", "1001"], None, "divide s"),
        ([], {"hidden_size": 64}, "'vocab_size' is missing"),
        ([], {**PRESETS["gpt2"], "n_embd": -768}, "'n_embd' must be positive"),
        (
            ["--tp", "2"],
            {**PRESETS["mixtral-8x7b"], "intermediate_size": 14335},
            "must divide d_expert = 14335",
        ),
        (
            [],
            {**PRESETS["llama-3-8b"], "rope_scaling": {"rope_type": "llama3"}},
            "RoPE",
        ),
        ([], "{not json", "Expecting"),
        ([], "missing", "No such file"),
    ],
)
def test_bad_input_exits_2_with_a_message(argv, config, match, tmp_path, capsys):
    if config is None:
        argv = ["--model", "llama-3-8b", *argv]
    else:
        path = tmp_path / "config.json"
        if config != "missing":
            path.write_text(config if isinstance(config, str) else json.dumps(config))
        argv = ["--config", str(path), *argv]
    rc, out, err = _run(argv, capsys)
    assert rc == 2 and out == ""
    assert "aiinfra memory: error:" in err and match in err


def test_model_and_config_are_exclusive(capsys):
    assert _run(["--model", "gpt2", "--config", "x.json"], capsys)[0] == 2
    assert _run(["--model", "gpt-5"], capsys)[0] == 2


def test_mla_and_moe_models_are_answered(capsys):
    from aiinfra.memory.calculator import GiB, estimate_memory
    from aiinfra.models.presets import preset

    argv = ["--model", "DeepSeek-V3", "--tp", "8", "--sp", "--attention", "flash"]
    rc, out, _ = _run([*argv, "--json"], capsys)
    assert rc == 0
    (table,) = json.loads(out)["tables"].values()
    est = estimate_memory(preset("deepseek-v3"), tp=8, sp=True, attention="flash")
    row = next(r for r in table["rows"] if r[0] == "activations (layers)")
    assert row[1] == int(est.activations) and row[2] == round(est.activations / GiB, 2)


def test_attention_and_gradient_layout_options(capsys):
    # Llama 3 8B, s = 8192, s b h L = 2^30 (hand count, per token and layer in
    # units of h bytes: norm inputs 2 + 2, QKV and fc1 inputs 2 + 2, Q 2, K and V
    # 0.5 each (G = H/4), output projection input 2, SwiGLU at f = 3.5 h: 4 x 7 eager
    # or 3 x 7 fused): 41 + 2as/h = 169 GiB with the eager softmax (no dropout),
    # 34 GiB + 32 MiB of log-sum-exp with fused kernels;
    # gradients 2 Psi (bf16) or 4 Psi (fp32) bytes, Psi = 8,030,261,248.
    argv = ["--model", "llama-3-8b", "--seq", "8192", "--json"]
    rows = {}
    for extra in ([], ["--attention", "flash", "--grad-dtype", "fp32"]):
        rc, out, _ = _run(argv + extra, capsys)
        assert rc == 0
        (table,) = json.loads(out)["tables"].values()
        rows[bool(extra)] = {r[0]: r for r in table["rows"]}
    assert rows[False]["activations (layers)"][2] == 41 + 2 * 32 * 8192 / 4096
    assert rows[True]["activations (layers)"][2] == round(34 + 1 / 32, 2)
    assert rows[False]["gradients (bf16)"][1] == 2 * 8_030_261_248
    assert rows[True]["gradients (fp32)"][1] == 4 * 8_030_261_248
    logits = 4 * 8192 * 4096 + 4 * 8192 * 128256  # 4 sbh (1 + V/h)
    assert rows[True]["logits + cross-entropy (fp32)"][1] == logits
    assert _run(argv + ["--grad-dtype", "fp8"], capsys)[0] == 2
