"""docs/languages.toml: the one list of editions, and its errors."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest
from aiinfra_book import languages

from .conftest import DOCS, ROOT

GOOD = """\
[en]
name = "English"
title = "AI Infrastructure"
published = true

[ja]
name = "日本語"
title = "AI インフラ"
published = false
cjk = true
"""


def _write(tmp_path: pathlib.Path, text: str) -> pathlib.Path:
    (tmp_path / "languages.toml").write_text(text, encoding="utf-8")
    return tmp_path


def test_the_book_has_english_first_and_chinese_published():
    langs = languages.load(DOCS)
    assert languages.source(langs) == "en"
    assert languages.published(langs) == ["en", "zh_CN"]
    assert languages.translations(langs) == ["zh_CN"]
    assert langs["zh_CN"].cjk and not langs["en"].cjk


def test_a_started_language_is_a_translation_but_not_published(tmp_path):
    langs = languages.load(_write(tmp_path, GOOD))
    assert languages.translations(langs) == ["ja"]
    assert languages.published(langs) == ["en"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD.replace("[ja]", "[japanese]"), "not a language code"),
        (GOOD.replace('title = "AI インフラ"\n', ""), "'title' is required"),
        (GOOD.replace("cjk = true", 'cjk = "yes"'), "'cjk' must be a bool"),
        (GOOD.replace("cjk = true", 'font = "x"'), "unknown setting(s) ['font']"),
        (GOOD.replace("published = true", "published = false"), "must be published"),
        ("", "no language"),
    ],
)
def test_a_broken_languages_file_names_the_table_and_the_rule(tmp_path, text, message):
    with pytest.raises(ValueError, match=r"languages\.toml") as info:
        languages.load(_write(tmp_path, text))
    assert message in str(info.value)


def test_a_missing_file_and_an_unknown_language_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="languages file is missing"):
        languages.load(tmp_path)
    with pytest.raises(ValueError, match=r"'xx' is not in .*add a table"):
        languages.find(_write(tmp_path, GOOD), "xx")


def test_a_label_whose_fields_differ_falls_back_to_english(tmp_path):
    po = tmp_path / "labels.po"
    po.write_text(
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        'msgctxt "chapter"\nmsgid "Chapter {n}"\nmsgstr "第 {number} 章"\n\n'
        'msgctxt "recap"\nmsgid "Recap"\nmsgstr "回顾"\n\n'
        '#, fuzzy\nmsgctxt "answer"\nmsgid "Answer"\nmsgstr "答"\n',
        encoding="utf-8",
    )
    assert languages.read_labels(po) == {"recap": "回顾"}


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("book.py", ["build", "--lang", "ja"]),
        ("catalogues.py", ["check", "--lang", "ja"]),
    ],
)
def test_the_tools_refuse_a_language_the_file_does_not_list(tool, args):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / tool), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "'ja'" in proc.stderr and "--lang" in proc.stderr
