"""The book's calculators: each form answers what the ``aiinfra`` command prints.

The ground truth is the command itself, run as a reader runs it (a new Python
process, ``python -m aiinfra.cli ... --json``): the form must give the same table,
and for a bad value the command's own message, naming the flag the page marks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from aiinfra.calculator import forms
from aiinfra.models.presets import PRESETS

TINY_CONFIG = json.dumps(
    {
        "model_type": "llama",
        "hidden_size": 256,
        "intermediate_size": 688,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "num_hidden_layers": 4,
        "vocab_size": 1000,
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
    }
)


def command_line(argv: list[str], tmp_path=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "aiinfra.cli", *argv, "--json", "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


CASES = [
    ("memory", {"--model": "llama-3-8b"}),
    ("kv", {"--model": "llama-3-405b", "--gpus": "16", "--context": "131072"}),
    ("kv", {"--model": "mixtral-8x7b", "--gpu": "H200", "--cache": "fp8"}),
    ("kv", {"--model": "deepseek-v3", "--gpu": "H200", "--weights": "fp8"}),
    (
        "memory",
        {
            "--model": "llama-3-70b",
            "--tp": "8",
            "--sp": True,
            "--zero": "1",
            "--dp": "16",
        },
    ),
    (
        "memory",
        {
            "--model": "llama-3-405b",
            "--seq": "8192",
            "--recompute": "full",
            "--grad-dtype": "bf16+fp32",
        },
    ),
    ("plan", {"--model": "llama-3-405b", "--gpus": "16384", "--global-batch": "16M"}),
    (
        "plan",
        {
            "--model": "llama-3-8b",
            "--gpu": "A100",
            "--gpus": "8",
            "--global-batch": "1M",
        },
    ),
    (
        "budget",
        {
            "--params": "7e10",
            "--tokens": "1.5e13",
            "--gpus": "2048",
            "--mfu": "0.35 0.45",
        },
    ),
]


@pytest.mark.parametrize(("kind", "values"), CASES)
def test_a_form_answers_what_the_command_prints(kind, values):
    answer = forms.run(kind, values)
    assert answer["ok"], answer
    done = command_line(answer["argv"])
    assert done.returncode == 0, done.stderr
    table = next(iter(json.loads(done.stdout)["tables"].values()))
    assert answer["columns"] == table["columns"]
    assert answer["rows"] == table["rows"]
    assert answer["note"] == table["note"]
    # The figure's bars: one per row of the printed table (a total left out), the
    # value of the form's figure column.
    label, value = (table["columns"].index(c) for c in forms.FORMS[kind].figure)
    kept = [r for r in table["rows"] if r[label] != "total"]
    assert [b[0] for b in answer["bars"]] == [str(r[label]) for r in kept]
    assert [b[1] for b in answer["bars"]] == [
        float(str(r[value]).replace(",", "")) for r in kept
    ]


def test_a_pasted_config_is_read_as_the_file_would_be(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(TINY_CONFIG)
    answer = forms.run("memory", {"--model": forms.PASTED, "--seq": "512"}, TINY_CONFIG)
    assert answer["ok"], answer
    assert answer["argv"][:3] == ["memory", "--config", forms.PASTED]
    line = [str(path) if a == forms.PASTED else a for a in answer["argv"]]
    table = next(iter(json.loads(command_line(line).stdout)["tables"].values()))
    assert answer["rows"] == table["rows"]


#: Mixtral with an odd expert width: TP cannot split its experts.
ODD_EXPERTS = json.dumps({**PRESETS["mixtral-8x7b"], "intermediate_size": 14335})


@pytest.mark.parametrize(
    ("kind", "values", "config", "flag"),
    [
        ("memory", {"--seq": "-3"}, "", "--seq"),
        ("memory", {"--tp": "three"}, "", "--tp"),
        ("memory", {"--model": forms.PASTED, "--tp": "2"}, ODD_EXPERTS, "--model"),
        ("memory", {"--model": forms.PASTED}, "{not json", "--model"),
        ("plan", {"--gpus": "0"}, "", "--gpus"),
        ("plan", {"--global-batch": "lots"}, "", "--global-batch"),
        ("budget", {"--mfu": "0.3 2"}, "", "--mfu"),
        ("kv", {"--context": "0"}, "", "--context"),
        ("kv", {"--model": forms.PASTED}, "[]", "--model"),
    ],
)
def test_bad_input_gets_the_commands_message_at_its_field(
    kind, values, config, flag, tmp_path
):
    answer = forms.run(kind, values, config)
    assert not answer["ok"]
    assert answer["flag"] == flag
    assert "Traceback" not in answer["message"]
    path = tmp_path / "config.json"
    path.write_text(config)
    line = [str(path) if a == forms.PASTED else a for a in answer["argv"]]
    done = command_line(line)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert answer["message"] in last.replace(str(path), forms.PASTED)


def test_a_field_the_form_does_not_have_is_refused():
    answer = forms.run("memory", {"--gpus": "8"})
    assert (
        not answer["ok"]
        and "--gpus is not a field of the memory form" in answer["message"]
    )
    with pytest.raises(
        ValueError, match="kind must be one of memory, plan, kv, budget"
    ):
        forms.run("serve", {})


def test_the_fields_are_the_commands_flags():
    memory = {f["flag"]: f for f in forms.fields("memory")}
    assert memory["--seq"]["default"] == "4096"  # as `aiinfra memory --help` says
    assert memory["--sp"]["kind"] == "bool"
    assert memory["--recompute"]["choices"] == ["none", "selective", "full"]
    assert memory["--model"]["choices"][-1] == forms.PASTED
    assert {f["flag"] for f in forms.fields("budget")} == set(
        forms.FORMS["budget"].flags
    )
    assert forms.fields("budget")[-1]["default"] == "0.3 0.4 0.5"
    for kind, form in forms.FORMS.items():
        assert set(form.flags) <= set(forms.FIELD_NAMES), kind


def test_every_word_a_result_shows_is_listed_for_translation():
    """WORDS holds every non-number a result shows over the forms' choices, and
    nothing that none of them shows."""
    seen: set[str] = set()

    def add(kind, values):
        answer = forms.run(kind, values)
        assert answer["ok"], answer
        seen.update(answer["columns"])
        seen.add(answer["note"])
        seen.update(
            c
            for row in answer["rows"]
            for c in row
            if isinstance(c, str) and not _number(c)
        )

    for grad in ("bf16", "fp32", "bf16+fp32"):
        for recompute in ("none", "selective", "full"):
            add(
                "memory",
                {
                    "--grad-dtype": grad,
                    "--recompute": recompute,
                    "--zero": "3",
                    "--dp": "8",
                },
            )
    # Tight memory: the planner's layouts recompute (selective with a materialised
    # softmax, full with a fused kernel).
    tight = {
        "--model": "llama-3-405b",
        "--gpu": "A100",
        "--global-batch": "4M",
        "--top": "40",
    }
    add("plan", {**tight, "--gpus": "256", "--attention": "materialised"})
    add("plan", {**tight, "--gpus": "128"})
    add("budget", {})
    add("kv", {"--gpus": "16"})
    assert seen <= set(forms.WORDS), seen - set(forms.WORDS)
    assert set(forms.WORDS) - seen == set(), "listed but never shown"


def _number(text: str) -> bool:
    try:
        float(text.replace(",", "").rstrip("%"))
    except ValueError:
        return False
    return True


#: The torch-free core the calculators stand on (issue 34's list): the config
#: reader, the parameter and FLOP counts, the memory calculator, the KV budget, the
#: planner, the 6ND budget, the roofline and the scaling laws.
CORE = (
    "aiinfra.models.config",
    "aiinfra.models.hf.config",
    "aiinfra.models.params",
    "aiinfra.models.flops",
    "aiinfra.memory.calculator",
    "aiinfra.models.kv_budget",
    "aiinfra.models.attention.kv_cache_size",
    "aiinfra.plan.search",
    "aiinfra.hardware.budget",
    "aiinfra.models.roofline",
    "aiinfra.scaling.laws",
)


def test_the_forms_run_without_torch_numpy_or_matplotlib():
    """What Pyodide has: the standard library only (the calculators' promise)."""
    code = textwrap.dedent(
        """
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {"torch", "numpy", "matplotlib", "triton"}:
                    raise ImportError("blocked: " + name)
        sys.meta_path.insert(0, Block())
        import importlib
        for core in CORE:
            importlib.import_module(core)
        from aiinfra.calculator import forms
        for kind, values in [("memory", {}), ("plan", {}), ("kv", {}), ("budget", {})]:
            answer = forms.run(kind, values)
            assert answer["ok"], answer
        print("ok")
        """
    )
    code = f"CORE = {CORE!r}\n" + code
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_a_pasted_deepseek_v3_config_is_answered():
    # The in-page form calls the same function: MLA and experts now counted.
    pasted = json.dumps(PRESETS["deepseek-v3"])
    answer = forms.run("memory", {"--model": forms.PASTED, "--tp": "8"}, pasted)
    assert answer["ok"], answer
    parts = {r[0]: r for r in answer["rows"]}
    assert parts["activations (layers)"][1] > 0
