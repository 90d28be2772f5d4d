"""Bus bandwidth against nccl-tests, and the measured rows as the book's table.

Ground truth for busbw: nccl-tests ``doc/PERFORMANCE.md`` (NVIDIA): algbw = S / t,
busbw = algbw x factor with factor 2(n-1)/n for all-reduce, (n-1)/n for
reduce-scatter, all-gather and all-to-all (S the total size), 1 for broadcast and
reduce.
"""

import pytest
from aiinfra import results as stored
from aiinfra.comm import results


@pytest.mark.parametrize(
    ("collective", "n", "expected"),
    [
        ("all_reduce", 8, 1.75),
        ("all_reduce", 2, 1.0),
        ("all_reduce", 1, 0.0),
        ("reduce_scatter", 8, 0.875),
        ("all_gather", 4, 0.75),
        ("all_to_all", 16, 0.9375),
        ("broadcast", 8, 1.0),
        ("reduce", 8, 1.0),
    ],
)
def test_busbw_factor_matches_nccl_tests_performance_md(collective, n, expected):
    assert results.busbw_factor(collective, n) == expected


def test_busbw_is_algbw_times_the_factor_in_gb_per_s():
    # 1 GB in 0.1 s is 10 GB/s algbw (10^9 bytes, as nccl-tests); x 1.75 on 8 ranks.
    assert results.algbw(1e9, 0.1) == pytest.approx(10.0)
    assert results.busbw("all_reduce", 1e9, 0.1, 8) == pytest.approx(17.5)
    assert results.busbw("broadcast", 1e9, 0.1, 8) == pytest.approx(10.0)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: results.busbw_factor("allreduce", 8), "collective must be one of"),
        (lambda: results.busbw_factor("all_reduce", 0), "n must be an int >= 1"),
        (lambda: results.algbw(-1, 1.0), "size_bytes must be finite and >= 0"),
        (lambda: results.algbw(1024, 0.0), "seconds must be finite and > 0"),
        (lambda: results.busbw("all_reduce", 1024, 1.0, 0), "n_ranks must be an int"),
    ],
)
def test_bad_input_raises_value_error_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_busbw_factor_table_has_a_column_per_rank_count():
    table = results.busbw_factor_table(ns=(2, 8))
    assert table.columns == ["collective", "p = 2", "p = 8"]
    assert ["all_reduce", 1.0, 1.75] in table.rows


ROW = {
    "collective": "all_reduce",
    "algorithm": "ring",
    "size": 1024,
    "count": 256,
    "dtype": "float32",
    "time_us": 50.0,
    "algbw": 0.02,
    "busbw": 0.03,
    "wrong": 0,
}


def test_results_table_and_ratio_read_the_stored_rows(tmp_path, monkeypatch):
    monkeypatch.setenv(stored.DATA_ENV, str(tmp_path))
    torch_row = {**ROW, "algorithm": "torch", "busbw": 0.06}
    big = {**ROW, "size": 2**20, "count": 2**18}
    stored.write(
        "collectives", {"rows": [ROW, torch_row, big]}, backend="gloo", world_size=4
    )
    table = results.results_table()
    assert table.rows == [list(r.values()) for r in (ROW, torch_row, big)]
    assert table.rows[0][:2] == ["all_reduce", "ring"]
    assert "gloo, 4 ranks" in table.stamp_text
    assert results.results_table(min_bytes=2048).rows == [list(big.values())]
    assert results.busbw_ratio("all_reduce", "ring", "torch", 1024) == 0.5
    with pytest.raises(ValueError, match="algorithm 'rabenseifner' at size 1024"):
        results.busbw_ratio("all_reduce", "rabenseifner", "torch", 1024)


def test_missing_results_name_the_command_that_writes_them(tmp_path, monkeypatch):
    monkeypatch.setenv(stored.DATA_ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError, match="aiinfra bench collectives"):
        results.results_table()
