"""A chapter's deck cut into lectures by the lecturer's ``slides/decks.toml``.

The tiny book of :mod:`.minibook` gets a third section and a questions page; the
course file sets a title, a lecturer, a date and a slot, and makes the second page
open a lecture. The decks build must then write one file per lecture, each with its
own title slide, agenda, pages, recap and questions, and the deck list must show
the course lecture by lecture, in both languages. A bad course file stops the build
with a message that names the key.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from .minibook import lay_out

SECTION = """\
Third idea
==========

Prose of third.

.. admonition:: Key points
   :class: keypoints

   - A key point of third.
"""

QUESTIONS = """\
Check your understanding
========================

.. aiinfra-question::

   What does :doc:`first` compute?

   .. aiinfra-answer::

      Half of a value.

.. aiinfra-question::

   What is a book?

   .. aiinfra-answer::

      Pages.
"""

COURSE = """\
[course]
title = "CS 742"
lecturer = "Dr. Li"
date = "Autumn 2026"
minutes_per_lecture = 10

[decks.newchapter]
split_before = ["second"]
"""


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> pathlib.Path:
    root = lay_out(tmp_path_factory.mktemp("lectures"))
    chapter = root / "docs" / "newchapter"
    (chapter / "third.rst").write_text(SECTION)
    (chapter / "questions.rst").write_text(QUESTIONS)
    index = chapter / "index.rst"
    index.write_text(index.read_text() + "   third\n   questions\n")
    (root / "slides" / "decks.toml").write_text(COURSE)
    return root


def _build(book: pathlib.Path, lang: str) -> subprocess.CompletedProcess:
    out = book / "site" / f"revealjs-{lang}"
    cmd = [sys.executable, "-m", "sphinx", "-b", "revealjs", "-t", "slides", "-W"]
    cmd += ["--keep-going", "-q", "-D", f"language={lang}"]
    cmd += ["-d", str(book / "doctrees" / f"revealjs-{lang}")]
    return subprocess.run(
        [*cmd, str(book / "docs"), str(out)],
        capture_output=True,
        text=True,
        cwd=book,
        timeout=300,
        env={**__import__("os").environ, "MPLBACKEND": "Agg"},
    )


def _titles(page: str) -> list[str]:
    return [
        re.sub(r"<[^>]+>|¶", "", t).strip()
        for t in re.findall(r"<h[12]>(.*?)</h[12]>", page)
    ]


def test_each_lecture_is_a_deck_of_its_own_pages(book):
    proc = _build(book, "en")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = book / "site" / "revealjs-en" / "newchapter"
    one = (out / "lecture-1.html").read_text(encoding="utf-8")
    two = (out / "lecture-2.html").read_text(encoding="utf-8")
    assert not (out / "lecture-3.html").exists()
    # Title slides: the course, the lecture's number, the part of the chapter.
    assert re.search(r'<p class="deck-course">CS 742 · Lecture 1 · Chapter 1</p>', one)
    assert re.search(r'<p class="deck-course">CS 742 · Lecture 2 · Chapter 1</p>', two)
    assert "New chapter (1/2)" in one and "New chapter (2/2)" in two
    assert "Dr. Li · Autumn 2026" in one
    # Each lecture's pages, agenda and recap; the split the file asked for.
    assert "First idea" in _titles(one) and "Second idea" not in _titles(one)
    assert {"Second idea", "Third idea"} <= set(_titles(two))
    assert "First idea" not in _titles(two)
    for page in (one, two):
        assert "In this lecture" in _titles(page) and "Recap" in _titles(page)
    # A question goes with the last page it draws on; one naming none, to the end.
    assert "What does" in one and "What is a book?" not in one
    assert "What is a book?" in two and "What does" not in two
    # The whole chapter's deck is still there, for the book's Slides button.
    whole = (out / "index.html").read_text(encoding="utf-8")
    assert {"First idea", "Second idea", "Third idea"} <= set(_titles(whole))


def test_the_deck_list_shows_the_course_lecture_by_lecture(book):
    front = (book / "site" / "revealjs-en" / "index.html").read_text(encoding="utf-8")
    assert "CS 742: 2 lectures of at most 10 min." in front
    assert 'href="newchapter/lecture-1.html">Lecture 1</a> · First idea ·' in front
    assert re.search(
        r'href="newchapter/lecture-2.html">Lecture 2</a> · Second idea, Third idea · '
        r"\d+ slides, about \d+ min",
        front,
    )


def test_the_chinese_decks_number_their_lectures_in_chinese(book):
    proc = _build(book, "zh_CN")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    two = book / "site" / "revealjs-zh_CN" / "newchapter" / "lecture-2.html"
    text = two.read_text(encoding="utf-8")
    assert "第 2 讲" in text and "本讲内容" in text
    front = (book / "site" / "revealjs-zh_CN" / "index.html").read_text("utf-8")
    assert "CS 742：共 2 讲，每讲不超过 10 分钟。" in front


@pytest.mark.parametrize(
    ("course", "message"),
    [
        ("[course]\nminutes_per_lecture = 5\n", "'minutes_per_lecture' must be 0"),
        ("[course]\nminutes = 90\n", "unknown key 'minutes'"),
        ('[course]\nchapters = ["nope"]\n', "names 'nope', which is not a chapter"),
        (
            '[decks.newchapter]\nsplit_before = ["nope"]\n',
            "'split_before' names 'nope'",
        ),
        ("[course\n", "not valid TOML"),
    ],
)
def test_a_bad_course_file_stops_the_build_naming_the_key(tmp_path, course, message):
    root = lay_out(tmp_path)
    (root / "slides" / "decks.toml").write_text(course)
    proc = _build(root, "en")
    assert proc.returncode != 0
    assert "decks.toml" in proc.stderr and message in proc.stderr, proc.stderr


def test_a_deck_is_cut_into_the_fewest_lectures_then_evened_out():
    from aiinfra_book.decks import split

    # 70 minutes of pages in 43-minute slots (45 less 2 of overhead): two lectures
    # (a third would be shorter, not needed), 40 + 30.
    assert split([10.0] * 7, 45, overhead=2) == [[0, 1, 2, 3], [4, 5, 6]]
    # Even, not full-then-short: 30 | 25 rather than 30+5+5 | 5+5+5.
    assert split([30.0, 5, 5, 5, 5, 5], 45, overhead=2) == [[0], [1, 2, 3, 4, 5]]
    # A page longer than the slot is a lecture on its own; a break always cuts.
    assert split([50.0, 5, 5], 45, overhead=2) == [[0], [1, 2]]
    assert split([10.0] * 6, 45, overhead=2, breaks=frozenset({2})) == [
        [0, 1],
        [2, 3, 4, 5],
    ]
    with pytest.raises(ValueError, match="budget must be > overhead"):
        split([1.0], 2, overhead=2)


def test_the_course_file_reads_every_key(tmp_path):
    from aiinfra_book.decks import load

    path = tmp_path / "decks.toml"
    assert load(path, ["a", "b"]).order(["a", "b"]) == ["a", "b"]  # no file
    path.write_text(
        '[course]\ntitle = "T"\nchapters = ["b", "a"]\nminutes_per_lecture = 60\n'
        '[decks.b]\nminutes_per_lecture = 30\nsplit_before = ["p2"]\n'
    )
    course = load(path, ["a", "b"], {"a": ["p"], "b": ["p1", "p2"]})
    assert course.order(["a", "b"]) == ["b", "a"]
    assert (course.minutes("a"), course.minutes("b")) == (60, 30)
    assert course.decks["b"].split_before == ("p2",)
    assert type(course).from_dict(course.as_dict()) == course
    path.write_text("[course]\nminutes_per_lecture = true\n")
    with pytest.raises(ValueError, match="'minutes_per_lecture' must be int"):
        load(path, ["a"])
