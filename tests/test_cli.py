"""The ``aiinfra`` command: sizes, the cost table, a tiny benchmark, bad flags."""

import argparse
import json
import subprocess
import sys

import pytest
import torch
from aiinfra import cli, clikit
from aiinfra.distributed import free_port


@pytest.mark.parametrize(
    ("text", "expected"),
    [("512", 512), ("1K", 1024), ("16M", 16 * 2**20), ("1G", 2**30), ("4kib", 4096)],
)
def test_size_reads_binary_suffixes(text, expected):
    assert clikit.size(text) == expected


@pytest.mark.parametrize("text", ["3X", "-1", "1.5M", "", "M"])
def test_size_rejects_what_is_not_a_size(text):
    with pytest.raises(argparse.ArgumentTypeError, match="must be an integer with"):
        clikit.size(text)


# Every command's --help on the base install: matplotlib (the docs extra) and
# DeepSpeed (the parallel extra) blocked, in a fresh interpreter.
HELP_WITHOUT_EXTRAS = """
import contextlib, io, json, sys
for name in ("matplotlib", "deepspeed", "transformers"):
    sys.modules[name] = None
from aiinfra import cli
seen = []
for argv in [["--help"]] + [
    [c.group] + ([c.name] if c.name else []) + ["--help"] for c in cli.commands()
]:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            cli.main(argv)
        except SystemExit as e:
            seen.append([argv, e.code, "usage: aiinfra" in out.getvalue()])
print(json.dumps(seen))
"""


def test_every_command_helps_without_the_optional_packages():
    done = subprocess.run(
        [sys.executable, "-c", HELP_WITHOUT_EXTRAS],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    words = {" ".join(argv[:-1]) for argv, _, _ in seen}
    assert {"", "bench collectives", "comm cost", "memory", "bench attention"} <= words
    assert {"bench ddp", "bench zero"} <= words
    assert all(code == 0 and usage for _, code, usage in seen)


def test_a_missing_optional_package_is_named_with_its_extra():
    code = (
        "import sys; sys.modules['deepspeed'] = None\n"
        "from aiinfra import cli\n"
        "sys.exit(cli.main(['bench', 'zero']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert "needs the package 'deepspeed'" in done.stderr
    assert "pip install 'aiinfra[parallel]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_config_errors_are_usage_errors_that_name_the_flag(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bench", "attention", "--device", "cpu", "--impl", "triton"])
    assert exit_.value.code == 2
    assert "--impl: triton needs a CUDA device" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bench", "zero", "--world-size", "5"])
    assert exit_.value.code == 2
    assert "--world-size must divide the batch of 24, got 5" in (
        capsys.readouterr().err
    )


def test_flag_names_rewrites_fields_only_before_must():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-bytes")
    parser.add_argument("--dtype")
    message = "max_bytes must be >= 2048; a dtype of max_bytes"
    assert cli.flag_names(message, parser) == (
        "--max-bytes must be >= 2048; a dtype of max_bytes"
    )
    parser.add_argument("--top-k")
    assert cli.flag_names("top_k (5) must be <= n_experts (4)", parser) == (
        "--top-k (5) must be <= n_experts (4)"
    )


def test_comm_cost_prints_every_algorithm_and_the_crossovers(capsys):
    assert cli.main(["comm", "cost", "--p", "8", "--size", "16M"]) == 0
    out = capsys.readouterr().out
    assert "rabenseifner_all_reduce" in out and "recursive doubling vs ring" in out
    assert cli.main(["comm", "cost", "--p", "16", "--link", "ib100", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["inputs"] == {"p": 16, "size": 16 * 2**20, "link": "ib100"}
    costs, crossovers = doc["tables"].values()
    assert crossovers["rows"][0][0] == 16
    assert "rabenseifner_all_reduce" in [r[0] for r in costs["rows"]]


@pytest.mark.slow
def test_bench_collectives_runs_and_writes_a_stamped_results_file(tmp_path, capsys):
    out = tmp_path / "bench.json"
    argv = [
        "bench",
        "collectives",
        "--world-size",
        "2",
        "--min-bytes",
        "1K",
        "--max-bytes",
        "1K",
        "--collectives",
        "all_reduce",
        "--algorithms",
        "ring,torch",
        "--warmup",
        "0",
        "--iters",
        "1",
        "--json",
        "--out",
        str(out),
    ]
    assert cli.main(argv) == 0
    printed = json.loads(capsys.readouterr().out)["result"]
    assert [r["algorithm"] for r in printed["rows"]] == ["ring", "torch"]
    assert all(r["wrong"] == 0 for r in printed["rows"])
    saved = json.loads(out.read_text())
    assert saved["stamp"]["world_size"] == 2 and saved["stamp"]["backend"] == "gloo"
    assert saved["config"]["iters"] == 1


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["bench", "collectives", "--world-size", "0"], "--world-size"),
        (
            ["bench", "collectives", "--min-bytes", "2K", "--max-bytes", "1K"],
            "--max-bytes",
        ),
        (["bench", "collectives", "--min-bytes", "3X"], "--min-bytes"),
        (["bench", "collectives", "--collectives", "allreduce"], "--collectives"),
        (
            [
                "bench",
                "collectives",
                "--collectives",
                "broadcast",
                "--algorithms",
                "ring",
            ],
            "--algorithms",
        ),
        (
            ["bench", "collectives", "--world-size", "4", "--local-size", "3"],
            "--local-size",
        ),
        (["bench", "collectives", "--iters", "0"], "--iters"),
        (["bench", "collectives", "--dtype", "float8"], "--dtype"),
        (["bench", "collectives", "--backend", "mpi"], "--backend"),
        (["comm", "cost", "--p", "0"], "--p"),
        (["comm", "cost", "--size", "big"], "--size"),
        (["comm", "cost", "--link", "wifi"], "--link"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(argv, flag, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    assert flag in capsys.readouterr().err


def test_nccl_without_gpus_exits_2_before_any_process_starts(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bench", "collectives", "--backend", "nccl", "--world-size", "2"])
    assert exit_.value.code == 2
    assert "--backend nccl needs one CUDA GPU per rank" in capsys.readouterr().err


def test_a_bare_command_lists_the_commands(capsys):
    # A newcomer's first try: `aiinfra` alone lists the groups, `aiinfra bench`
    # the benchmarks; neither is an error.
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    assert "memory" in out and "bench" in out and "required" not in out
    assert cli.main(["bench"]) == 0
    assert "collectives" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bench", "colectives"])
    assert exit_.value.code == 2


def test_memory_is_a_one_word_command_of_aiinfra(capsys):
    assert (
        cli.main(["memory", "--model", "llama-3-8b", "--zero", "3", "--dp", "8"]) == 0
    )
    out = capsys.readouterr().out
    assert "zero=3, dp=8" in out and "GiB" in out


def test_memory_bad_dp_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["memory", "--model", "llama-3-8b", "--dp", "0"])
    assert exit_.value.code == 2
    assert "--dp: must be an int >= 1" in capsys.readouterr().err


def test_help_shows_every_default(capsys):
    with pytest.raises(SystemExit):
        cli.main(["bench", "decode", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--new-tokens NEW_TOKENS tokens to generate (default: 512)" in out
    assert "--repeats REPEATS timed runs (default: 3)" in out
    with pytest.raises(SystemExit):
        cli.main(["budget", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "training tokens D (default: 1.56e+13)" in out
    assert "(default: 0.3 0.4 0.5)" in out


@pytest.mark.slow
def test_bench_collectives_joins_a_torchrun_job_instead_of_spawning():
    """The README's multi-node command, on one machine: torchrun starts the ranks."""
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-port",
        str(free_port()),
        "-m",
        "aiinfra.cli",
        "bench",
        "collectives",
        "--backend",
        "gloo",
        "--collectives",
        "all_reduce",
        "--algorithms",
        "ring,torch",
        "--min-bytes",
        "1K",
        "--max-bytes",
        "1K",
        "--iters",
        "1",
        "--json",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    start = out.stdout.index("{")  # only rank 0 prints
    result = json.loads(out.stdout[start:])["result"]
    assert {r["algorithm"] for r in result["rows"]} == {"ring", "torch"}
    assert all(r["wrong"] == 0 for r in result["rows"])
    assert result["stamp"]["world_size"] == 2


def test_chapter_commands_are_found_without_a_list():
    # Every subpackage with a cli.py contributes its COMMANDS; no registry to edit.
    import importlib
    import pathlib

    import aiinfra

    root = pathlib.Path(aiinfra.__file__).parent
    expected = sorted(f"aiinfra.{p.parent.name}.cli" for p in root.glob("*/cli.py"))
    assert cli.chapter_clis() == expected
    n_commands = sum(
        len(importlib.import_module(m).COMMANDS) for m in cli.chapter_clis()
    )
    # 16, then roofline, budget, storage, hangs, k8s render, k8s monitoring, restart,
    # container, list, bench hf-checkpoints, kv, k8s kueue, evict, preflight
    assert len(cli.commands()) == n_commands == 30


def _require_calls() -> set[tuple[str, str]]:
    """Every ``require(module, extra)`` of the package, read from its source."""
    import ast
    import pathlib

    import aiinfra

    found = set()
    for path in pathlib.Path(aiinfra.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", ""))
                == "require"
                and len(node.args) == 2
                and all(isinstance(a, ast.Constant) for a in node.args)
            ):
                found.add((node.args[0].value, node.args[1].value))
    return found


def test_every_install_hint_names_a_distribution_its_extra_installs(monkeypatch):
    # The hint must be installable as printed: the distribution pip knows (PyYAML
    # for `import yaml`), pinned in constraints.txt and listed in the named extra.
    import pathlib
    import re
    import tomllib

    root = pathlib.Path(__file__).resolve().parents[1]
    pins = {
        re.sub(r"[-_.]+", "-", line.split("==")[0]).lower()
        for line in (root / "constraints.txt").read_text().splitlines()
        if "==" in line
    }
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    calls = _require_calls()
    assert {("yaml", "cloud"), ("deepspeed", "parallel")} <= calls
    for module, extra in calls:
        dist = clikit.DISTRIBUTIONS.get(module, module)
        assert dist.lower().replace("_", "-") in pins, (module, dist)
        listed = {re.split(r"[=<>\[]", r)[0].lower() for r in extras[extra]}
        assert dist.lower() in listed, (module, extra)
        with pytest.raises(clikit.MissingDependency) as info:
            clikit.require("no_such_module_" + module, extra)
        assert f"pip install 'aiinfra[{extra}]'" in str(info.value)
    monkeypatch.setitem(sys.modules, "yaml", None)  # as if PyYAML were missing
    with pytest.raises(clikit.MissingDependency) as info:
        clikit.require("yaml", "cloud")
    assert str(info.value).endswith("(or pip install PyYAML)")


# The calculators and --help with torch (and numpy's heavy users) blocked: none of
# them may import torch, so they answer in well under a second.
WITHOUT_TORCH = """
import contextlib, io, json, sys
for name in ("torch", "matplotlib", "transformers", "deepspeed"):
    sys.modules[name] = None
from aiinfra import cli
runs = [
    ["--help"],
    ["memory", "--model", "llama-3-8b", "--seq", "8192", "--zero", "1", "--dp", "8"],
    ["comm", "cost", "--p", "64", "--size", "256M", "--link", "ib400"],
    ["plan", "--model", "llama-3-70b", "--gpu", "h100", "--gpus", "64",
     "--global-batch", "4M", "--top", "5"],
    ["budget", "--gpu", "h100", "--json"],
    ["scaling", "--flops", "3.8e25"],
    ["k8s", "render", "--kind", "jobset"],
    ["list"],
] + [
    [*words.split(), "--help"]
    for words in ("memory", "comm cost", "plan", "budget", "scaling", "k8s render")
]
codes = []
for argv in runs:
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            codes.append(cli.main(argv))
        except SystemExit as e:
            codes.append(e.code)
print(json.dumps(codes))
"""


def test_help_and_the_calculators_never_import_torch():
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    codes = json.loads(done.stdout.strip().splitlines()[-1])
    assert codes == [0] * len(codes)
