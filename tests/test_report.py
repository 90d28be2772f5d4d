"""aiinfra.report.Table: one object, the book's table and the terminal's text/JSON."""

from __future__ import annotations

import json

import pytest
from aiinfra.report import Table, format_cell


def _table() -> Table:
    return Table(
        columns=["algorithm", "steps", "time (us)"],
        rows=[["ring", 14, 671.94], ["recursive doubling", 3, 1072.0]],
        note="alpha-beta-gamma model (Thakur et al. 2005)",
        stamp="p = 8, n = 16 MiB",
    )


def test_to_text_right_aligns_every_column_and_ends_with_note_then_stamp():
    expected = (
        "         algorithm  steps  time (us)\n"
        "------------------  -----  ---------\n"
        "              ring     14      671.9\n"
        "recursive doubling      3       1072\n"
        "alpha-beta-gamma model (Thakur et al. 2005)\n"
        "p = 8, n = 16 MiB"
    )
    assert _table().to_text() == expected


def test_to_text_without_note_or_stamp_has_only_the_table():
    text = Table(columns=["a", "bb"], rows=[[1, 2]]).to_text()
    assert text == "a  bb\n-  --\n1   2"


def test_to_json_keeps_raw_values_and_separates_note_from_stamp():
    data = json.loads(_table().to_json())
    assert data == {
        "columns": ["algorithm", "steps", "time (us)"],
        "rows": [["ring", 14, 671.94], ["recursive doubling", 3, 1072.0]],
        "note": "alpha-beta-gamma model (Thakur et al. 2005)",
        "stamp": "p = 8, n = 16 MiB",
    }


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (671.94, "671.9"),
        (1072.0, "1072"),
        (0.000123456, "0.0001235"),
        (14, "14"),
        (2.5e10, "2.5e+10"),
        ("ring", "ring"),
    ],
)
def test_format_cell_gives_floats_four_significant_digits(value, text):
    assert format_cell(value) == text


def test_a_row_of_the_wrong_length_is_rejected():
    expected = r"rows\[1\] has 2 cells, expected len\(columns\) = 3"
    with pytest.raises(ValueError, match=expected):
        Table(columns=["a", "b", "c"], rows=[[1, 2, 3], [1, 2]])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"columns": ["a", 2]}, "columns must be strings"),
        ({"columns": ["a"], "note": 3}, "note must be a str"),
        ({"columns": ["a"], "stamp": None}, "stamp must be a str"),
    ],
)
def test_non_text_columns_note_or_stamp_are_rejected(kwargs, match):
    with pytest.raises(TypeError, match=match):
        Table(**kwargs)


@pytest.mark.parametrize("words", [(2,), (-1,), [0], (0, 5)])
def test_words_must_name_columns(words):
    with pytest.raises(ValueError, match=r"words must be a tuple of column indices"):
        Table(columns=["a", "b"], rows=[["x", "y"]], words=words)


@pytest.mark.parametrize("cell", ["+ sequence parallel", "- none", "1. first", "(a) x"])
def test_a_word_cell_that_rst_reads_as_a_list_is_refused(cell):
    # The book parses a word cell's translation as rst: a list would be dropped.
    with pytest.raises(ValueError, match=r"rows\[0\]\[0\].*starts like an rst list"):
        Table(["layout"], [[cell]])
    Table(["layout"], [[cell]], words=())  # not translated: any text
