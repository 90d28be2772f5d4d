"""What every command shares: flags read from a config dataclass, one output
convention, progress on stderr only when asked, lazy chapter packages."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import sys
from contextlib import redirect_stderr

import pytest
from aiinfra import checks, clikit, progress, timing
from aiinfra.report import Table


@dataclasses.dataclass(frozen=True)
class Toy:
    """A config as the benchmarks write them.

    Args:
        width: documented only here, in the docstring.
    """

    n_layers: int = 4  # layers L
    width: int = 64
    ks: tuple[int, ...] = (1, 2, 4)  # drafted tokens
    rate: float = 0.5  # a share in (0, 1]
    causal: bool = False  # the causal mask
    dtype: str | None = None  # element type (None: the device's)
    extra: dict = dataclasses.field(default_factory=dict)  # not a flag

    def __post_init__(self) -> None:
        checks.positive_ints(n_layers=self.n_layers, width=self.width)
        checks.number("rate", self.rate, 0, 1, low_open=True)


def toy_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toy", formatter_class=clikit.HelpFormatter)
    clikit.add_config_flags(parser, Toy, choices={"dtype": ("float32", "bfloat16")})
    clikit.add_output_flags(parser, measures=True)
    return parser


def test_flags_take_types_defaults_and_help_from_the_dataclass():
    parser = toy_parser()
    args = parser.parse_args([])
    assert clikit.config_from(args, Toy) == Toy()
    text = " ".join(parser.format_help().split())
    assert "--layers N_LAYERS, --n-layers N_LAYERS layers L (default: 4)" in text
    assert "--width WIDTH documented only here, in the docstring. (default: 64)" in text
    assert "--ks INT [INT ...] drafted tokens (default: 1 2 4)" in text
    assert "--causal, --no-causal the causal mask" in text
    assert "--extra" not in text
    args = parser.parse_args(["--ks", "1,2", "8", "--causal", "--dtype", "float32"])
    cfg = clikit.config_from(args, Toy, width=32)
    assert (cfg.ks, cfg.causal, cfg.dtype, cfg.width) == (
        (1, 2, 8),
        True,
        "float32",
        32,
    )


def test_a_bad_value_is_refused_by_the_dataclass_naming_the_field():
    args = toy_parser().parse_args(["--rate", "1.5"])
    with pytest.raises(ValueError, match=r"rate must be a finite number in \(0, 1\]"):
        clikit.config_from(args, Toy)
    with pytest.raises(SystemExit):
        toy_parser().parse_args(["--dtype", "int8"])


def test_names_match_in_any_case_and_list_the_registry_on_a_miss():
    gpu = clikit.name_of(("A100", "H100"))
    assert gpu("h100") == "H100" and gpu("A100") == "A100"
    with pytest.raises(argparse.ArgumentTypeError, match="one of A100, H100"):
        gpu("b200")


def test_show_prints_titled_tables_under_the_inputs_or_one_json_document(capsys):
    parser = toy_parser()
    args = parser.parse_args(["--width", "8"])
    args.command_parser = parser
    tables = {"First": Table(["a"], [[1.5]]), "Second": Table(["b"], [[10830.4]])}
    clikit.show(args, tables)
    out = capsys.readouterr().out
    assert out.startswith("# toy --layers 4 --width 8 --ks 1 2 4 --rate 0.5")
    assert "First\n=====\n" in out and "Second\n======\n" in out
    assert "10830" in out and "e+04" not in out  # one format per column
    args.json = True
    clikit.show(args, tables, {"stamp": {"load_1min": 0.5}})
    doc = json.loads(capsys.readouterr().out)
    assert doc["inputs"]["width"] == 8 and doc["inputs"]["ks"] == [1, 2, 4]
    assert list(doc["tables"]) == ["First", "Second"]
    assert doc["result"]["stamp"]["load_1min"] == 0.5


def test_save_writes_only_when_asked(tmp_path, monkeypatch, capsys):
    from aiinfra import results

    monkeypatch.setenv(results.DATA_ENV, str(tmp_path / "book"))
    parser = toy_parser()
    body = {"config": {}, "rows": []}
    res = clikit.save(parser.parse_args([]), "moe", body, backend="cpu", world_size=1)
    assert "stamp" in res and not (tmp_path / "book").exists()
    out = tmp_path / "mine.json"
    args = parser.parse_args(["--out", str(out)])
    clikit.save(args, "moe", body, backend="cpu", world_size=1)
    assert json.loads(out.read_text())["stamp"]["backend"] == "cpu"
    clikit.save(
        parser.parse_args(["--stamp"]), "moe", body, backend="cpu", world_size=1
    )
    assert (tmp_path / "book" / "moe-cpu.json").is_file()
    with pytest.raises(SystemExit):  # one or the other
        parser.parse_args(["--stamp", "--out", str(out)])


def test_the_spread_of_repeats_is_stamped_and_a_noisy_run_warned_about():
    with timing.recording():
        timing.note_spread([1.0, 1.5, 2.0])  # median 50 % above the best
        spread = clikit.repeat_spread()
    assert spread == {"timings": 1, "median": 0.5, "max": 0.5}
    assert clikit.repeat_spread() is None  # nothing recorded outside
    err = io.StringIO()
    with redirect_stderr(err):
        clikit.warn_if_noisy({"repeat_spread": spread, "load_1min": 3.0})
        clikit.warn_if_noisy({"repeat_spread": {"median": 0.02}, "load_1min": 0.1})
    assert err.getvalue().count("warning:") == 1 and "50%" in err.getvalue()


def test_progress_is_silent_unless_shown_and_says_what_runs_once(capsys):
    assert list(progress.track(range(3), "steps")) == [0, 1, 2]
    with progress.waiting("ranks", 1):
        pass
    assert capsys.readouterr().err == ""
    with progress.shown(True, "aiinfra toy: three steps"):
        assert list(progress.track(range(3), "steps")) == [0, 1, 2]
        with progress.waiting("ranks", 1):
            pass
    err = capsys.readouterr().err
    assert err.count("aiinfra toy: three steps") == 1 and "/3 " in err and "~1 s" in err


def test_chapter_packages_import_their_names_on_first_use():
    import aiinfra.comm

    assert "ring_all_reduce" in aiinfra.comm.__all__
    assert "ring_all_reduce" in dir(aiinfra.comm)
    from aiinfra.comm import ring_all_reduce
    from aiinfra.comm.ring import ring_all_reduce as direct

    assert ring_all_reduce is direct
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        aiinfra.comm.nothing  # noqa: B018
    assert "torch" in sys.modules  # ring_all_reduce needs it; the package did not
