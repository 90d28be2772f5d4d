"""``aiinfra bench storage``: flags checked before any spawn, a tiny stamped run."""

import json

import pytest
from aiinfra import cli

TINY = [
    *("--width", "8", "--steps", "4", "--every", "2", "--batch", "4"),
    *("--seq-len", "16", "--loader-batch", "2", "--loader-batches", "4"),
    *("--vocab-size", "300", "--d-model", "16", "--layers", "1"),
]


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--every", "30"], "--every must be <= steps = 20"),
        (["--batch", "5"], "--batch must be a multiple of 2"),
        (["--width", "0"], "--width must be an int >= 1, got 0"),
        (["--layers", "x"], "argument --layers/--n-layers: invalid int value: 'x'"),
    ],
)
def test_bad_flags_are_usage_errors_that_name_the_flag(tmp_path, capsys, argv, flag):
    out = tmp_path / "s.json"
    with pytest.raises(SystemExit) as exit_:
        cli.main(["bench", "storage", *argv, "--out", str(out)])
    assert exit_.value.code == 2
    assert flag in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_tiny_run_stamps_what_the_pages_show(tmp_path, capsys):
    out = tmp_path / "storage.json"
    assert cli.main(["bench", "storage", *TINY, "--out", str(out), "--json"]) == 0
    res = json.loads(out.read_text())
    assert res["stamp"]["backend"] == "gloo" and res["stamp"]["world_size"] == 4
    (printed,) = json.loads(capsys.readouterr().out)["tables"].values()
    assert ["the restart loaded step", 1] in printed["rows"]

    # DCP wrote one file per rank and the metadata; torch.chunk's rows of 10 and 5.
    reshard = res["reshard"]
    assert reshard["files"] == 5
    chunks = reshard["chunks"]["model.0.weight"]
    assert chunks == [[0, 3, "__0_0.distcp"], [3, 3, "__1_0.distcp"]] + [
        [6, 3, "__2_0.distcp"],
        [9, 1, "__3_0.distcp"],
    ]
    loads = reshard["loads"]
    assert loads["2"]["rows"]["0.weight"] == [5, 5]
    assert loads["3"]["rows"]["0.weight"] == [4, 4, 2]
    assert loads["3"]["rows"]["2.bias"] == [2, 2, 1]
    for n in ("2", "3"):  # DCP copies bytes: resharding is exact
        assert loads[n]["max_abs_diff"] == 0.0 and loads[n]["same_keys"]

    # The kill left a partial folder that no reader takes for a checkpoint.
    atomic = res["atomic"]
    assert atomic["latest"] == atomic["pointer"] == "step_00000001"
    assert atomic["committed"] == ["step_00000001"]
    assert ".metadata" not in atomic["partial_files"]
    assert atomic["restarted_at_step"] == 1

    # fp32 Adam of the 8 -> 32 -> 8 MLP: weights, m and v, 12 bytes per parameter.
    ck = res["checkpointing"]
    psi = 8 * 32 + 32 + 32 * 8 + 8
    assert ck["checkpoint_bytes"] > 12 * psi  # and DCP's metadata
    assert [ck["modes"][m]["saves"] for m in ("none", "sync", "async")] == [0, 2, 2]
    assert ck["hidden_fraction"] < 1

    loader = res["loader"]
    assert loader["dtype"] == "uint16" and loader["tokens_per_step"] == 2 * 16
    for row in loader["rows"]:
        assert row["keeps_up"] == (
            row["loader_tokens_per_s"] >= row["needed_tokens_per_s"]
        )
