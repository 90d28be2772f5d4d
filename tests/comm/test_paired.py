"""The paired comparison of our ring with gloo's, from a hand-made results file."""

import json
import statistics

import pytest
from aiinfra import results
from aiinfra.comm import paired

STAMP = {"world_size": 4, "backend": "gloo", "date": "2026-11-30"}


def _row(algorithm, runs_us):
    row = {"collective": "all_reduce", "algorithm": algorithm, "size": 16 * 2**20}
    return row | ({"runs_us": runs_us} if runs_us is not None else {})


@pytest.fixture
def results_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(results.DATA_ENV, str(tmp_path))

    def write(rows):
        body = {"stamp": STAMP, "config": {}, "rows": rows}
        (tmp_path / "ring-gloo.json").write_text(json.dumps(body))

    return write


def test_the_ratio_is_the_median_of_run_by_run_ratios(results_dir):
    # Run 3 was slow for everybody: pairing cancels it, unpaired medians would not.
    ours, gloo = [50.0, 60.0, 200.0, 55.0, 52.0], [40.0, 50.0, 190.0, 50.0, 41.0]
    results_dir([_row("ring_pipelined", ours), _row("torch", gloo)])
    expected = statistics.median(g / o for o, g in zip(ours, gloo, strict=True))
    assert paired.paired_ratio("ring_pipelined") == pytest.approx(expected)
    assert expected == pytest.approx(50 / 60)  # runs 2: 0.833 is the middle ratio
    busbw = paired.paired_runs()["torch"]
    # busbw = size / t x 2 (p - 1) / p, in GB/s: 16 MiB in 40 us on 4 ranks.
    assert busbw[0] == pytest.approx(16 * 2**20 / 40e-6 * 1.5 / 1e9)
    assert len(paired.paired_runs_figure().axes[0].lines) == 2


def test_a_file_without_runs_or_an_unknown_algorithm_is_an_error(results_dir):
    results_dir([_row("ring", None), _row("torch", [1.0])])
    with pytest.raises(ValueError, match="row 'ring' .* has no runs_us"):
        paired.paired_runs()
    results_dir([_row("ring", [1.0]), _row("torch", [1.0])])
    with pytest.raises(ValueError, match="algorithm must be one of .*got 'tree'"):
        paired.paired_ratio("tree")
    results_dir([])
    with pytest.raises(ValueError, match="hold no rows"):
        paired.paired_runs()
