"""tools/catalogues.py: what is left to translate, named by .po line and rst line."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "catalogues", ROOT / "tools" / "catalogues.py"
)
catalogues = importlib.util.module_from_spec(_spec)
sys.modules["catalogues"] = catalogues  # dataclasses look their module up
_spec.loader.exec_module(catalogues)

PO = """\
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

#: ../../docs/ring/index.rst:4
msgid "Done already."
msgstr "已经译好。"

#: ../../docs/ring/index.rst:7
msgid "Not translated yet."
msgstr ""

#: ../../docs/ring/ring.rst:12
#, fuzzy
msgid "The English changed."
msgstr "旧的译文。"

#: ../../docs/ring/ring.rst:20
msgid "It takes :calc:`aiinfra.book.ring:ms()|.1f` ms."
msgstr "耗时 12.5 毫秒。"

#~ msgid "A sentence that was removed."
#~ msgstr "被删掉的句子。"
"""


@pytest.fixture
def locale(tmp_path: pathlib.Path) -> pathlib.Path:
    folder = tmp_path / "locale" / "zh_CN" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    (folder / "ring.po").write_text(PO, encoding="utf-8")
    return tmp_path / "locale"


def test_each_problem_names_po_line_rst_line_state_and_what_to_do(locale):
    found = catalogues.all_problems("zh_CN", locale)
    assert [(p.state, p.po_line, p.source) for p in found] == [
        ("missing", 10, "docs/ring/index.rst:7"),
        ("fuzzy", 15, "docs/ring/ring.rst:12"),
        ("roles", 19, "docs/ring/ring.rst:20"),
        ("stale", 22, ""),
    ]
    line = found[1].line()
    assert line.endswith("delete the '#, fuzzy' line")
    assert "ring.po:15 (docs/ring/ring.rst:12): fuzzy: 'The English changed.'" in line


def test_the_po_line_is_the_msgid_line(locale):
    lines = (locale / "zh_CN" / "LC_MESSAGES" / "ring.po").read_text().splitlines()
    for p in catalogues.all_problems("zh_CN", locale):
        assert p.text in lines[p.po_line - 1]


def test_a_language_without_catalogues_is_named(locale):
    with pytest.raises(ValueError, match="lang 'ja' has no catalogues"):
        catalogues.all_problems("ja", locale)


def test_the_book_catalogues_pass_in_the_docs_environment():
    # The command of the README, as a translator runs it: no test fixtures, no torch.
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "catalogues.py"), "check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout
    assert done.stdout.strip().endswith("zh_CN: nothing to do")


OLD_PO = """\
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

#: ../../docs/ring/ring.rst:4
msgid "The ring sends one chunk per step to its right neighbour."
msgstr "环形算法每一步向右边的邻居发送一个分块。"

#: ../../docs/ring/ring.rst:9
msgid ""
"Each rank sends 2(p-1) messages of n/p bytes. The bandwidth term tends to 2n beta "
"whatever the number of ranks, which makes the ring bandwidth-optimal."
msgstr "每个 rank 发送 2(p-1) 条 n/p 字节的消息。带宽项趋于 2n beta，与 rank 数无关。"
"""

NEW_POT = """\
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

#: ../../docs/ring/ring.rst:4
msgid "The ring sends one chunk per step to its left neighbour."
msgstr ""

#: ../../docs/ring/ring.rst:9
msgid "Each rank sends 2(p-1) messages of n/p bytes."
msgstr ""
"""


def _update(tmp_path, old_po: str, new_pot: str) -> pathlib.Path:
    locale = tmp_path / "locale"
    po = locale / "zh_CN" / "LC_MESSAGES" / "ring.po"
    po.parent.mkdir(parents=True)
    po.write_text(old_po, encoding="utf-8")
    pot = tmp_path / "gettext"
    pot.mkdir()
    (pot / "ring.pot").write_text(new_pot, encoding="utf-8")
    catalogues.update(pot, "zh_CN", locale)
    return po


def test_update_keeps_the_previous_english_of_a_fuzzy_entry(tmp_path):
    po = _update(tmp_path, OLD_PO, NEW_POT)
    text = po.read_text(encoding="utf-8")
    # The changed sentence: fuzzy, its old translation, and the English it had.
    assert (
        "#, fuzzy\n"
        '#| msgid "The ring sends one chunk per step to its right neighbour."\n'
        'msgid "The ring sends one chunk per step to its left neighbour."\n'
        'msgstr "环形算法每一步向右边的邻居发送一个分块。"'
    ) in text
    # The header names the catalogue's language; no placeholder, not fuzzy.
    header = text.split("\n\n", 1)[0]  # the comment and the header entry
    assert "# 中文 (zh_CN) translation of AI Infrastructure" in header
    for placeholder in ("FIRST AUTHOR", "YEAR-MO-DA", "LL@li.org", "#, fuzzy"):
        assert placeholder not in header, placeholder
    if shutil.which("msgfmt"):  # GNU gettext's own reader accepts the file
        out = subprocess.run(
            ["msgfmt", "--check", "-o", "/dev/null", str(po)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert "warning" not in out.stderr, out.stderr


def test_update_prefills_a_shortened_paragraph_from_its_obsolete_entry(tmp_path):
    po = _update(tmp_path, OLD_PO, NEW_POT)
    with open(po, "rb") as f:
        cat = catalogues.read_po(f)
    short = cat["Each rank sends 2(p-1) messages of n/p bytes."]
    assert short.fuzzy and short.string.startswith("每个 rank 发送")
    assert not cat.obsolete  # used, so gone
    # The longer English it was taken from, wrapped as gettext wants it.
    text = po.read_text(encoding="utf-8")
    assert '#| msgid ""\n#| "Each rank sends 2(p-1) messages of n/p bytes. The ' in text
    if shutil.which("msgfmt"):
        subprocess.run(["msgfmt", "--check", "-o", "/dev/null", str(po)], check=True)


def test_a_second_update_keeps_a_long_previous_msgid_whole(tmp_path):
    po = _update(tmp_path, OLD_PO, NEW_POT)
    first = po.read_text(encoding="utf-8")
    catalogues.update(tmp_path / "gettext", "zh_CN", tmp_path / "locale")
    assert po.read_text(encoding="utf-8") == first  # nothing lost, no "# |" comment


def test_update_drops_obsolete_entries_once_nothing_is_left_to_translate(tmp_path):
    done = OLD_PO.replace(
        'msgid "The ring sends one chunk per step to its right neighbour."',
        'msgid "Gone from the book."',
    )
    pot = NEW_POT.replace(
        'msgid "The ring sends one chunk per step to its left neighbour."\nmsgstr ""',
        'msgid "Gone."\nmsgstr ""',
    )
    po = _update(tmp_path, done, pot)
    with open(po, "rb") as f:
        cat = catalogues.read_po(f)
    assert "Gone from the book." in {
        m.id for m in cat.obsolete.values()
    }  # "Gone." is missing
    cat["Gone."].string = "已删除。"
    for m in cat:
        m.flags.discard("fuzzy")
    with open(po, "wb") as f:
        catalogues.write_po(f, cat, width=catalogues.WIDTH)
    (tmp_path / "gettext" / "ring.pot").write_text(pot, encoding="utf-8")
    catalogues.update(tmp_path / "gettext", "zh_CN", tmp_path / "locale")
    assert "#~" not in po.read_text(encoding="utf-8")


def test_update_names_a_missing_template_folder(tmp_path):
    with pytest.raises(ValueError, match="holds no .pot files"):
        catalogues.update(tmp_path, "zh_CN", tmp_path)


@pytest.mark.parametrize(
    ("text", "trap"),
    [
        ("因此为:math:`x` 。", True),
        ("调用 ``sendrecv``的结果", True),
        ("因此为 :math:`x` ，调用 ``sendrecv`` 的结果", False),
        ("因此为\\ :math:`x`\\ 的值", False),
        ("（:cite:p:`thakur2005`）", False),
        ("*缺失*条目", True),
        ("*缺失* 条目，**粗体** 也是", False),
        ("p * q 与 2*3", False),
    ],
)
def test_chinese_touching_markup_is_flagged(text, trap):
    assert catalogues.touches_markup(text) is trap


def test_a_markup_trap_is_a_problem_with_its_fix(tmp_path):
    po = tmp_path / "zh_CN" / "LC_MESSAGES" / "ring.po"
    po.parent.mkdir(parents=True)
    po.write_text(
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        "#: ../../docs/ring/ring.rst:3\n"
        'msgid "It costs :math:`x` here."\nmsgstr "代价为:math:`x`。"\n',
        encoding="utf-8",
    )
    (found,) = catalogues.all_problems("zh_CN", tmp_path)
    assert found.state == "markup" and found.source == "docs/ring/ring.rst:3"
    assert "put a space" in found.line()


def test_the_book_catalogues_are_valid_for_gnu_gettext():
    """msgfmt --check: what other tools (Poedit, Weblate, msgmerge) will read."""
    if not shutil.which("msgfmt"):
        if os.environ.get("CI") == "true":
            raise RuntimeError("CI must run msgfmt (apt-get install gettext)")
        pytest.skip("no msgfmt (apt-get install gettext)")
    for po in sorted((ROOT / "docs" / "locale").glob("*/LC_MESSAGES/*.po")):
        out = subprocess.run(
            ["msgfmt", "--check", "-o", "/dev/null", str(po)],
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, out.stderr
        # No header placeholder left (FIRST AUTHOR, YEAR-MO-DA, ...).
        assert "warning" not in out.stderr, out.stderr


@pytest.mark.parametrize(
    ("english", "chinese", "state"),
    [
        # Sphinx parses a translation as rst and drops it if it reads as a list.
        ("tensor and sequence parallel", "+ 序列并行", "kind"),
        ("first, then second", "1. 先做第一步", "kind"),
        ("1. permute by expert", "1. 按专家重排", None),  # a figure's words: as is
        ("tensor + sequence parallel", "张量并行 + 序列并行", None),
        # A reduction written as a multiple.
        ("8.0 times smaller", "小了 8.0 倍", "ratio"),
        (
            "a student :calc:`r()|.1f` times smaller",
            "一个小 :calc:`r()|.1f` 倍的学生",
            "ratio",
        ),
        ("a hundredfold lower", "低一百倍", "ratio"),
        ("8 times larger", "大了 8 倍", None),
        ("an eighth of it", "只有原来的 1/8", None),
    ],
)
def test_a_list_start_and_a_reduction_as_a_multiple_are_flagged(
    tmp_path, english, chinese, state
):
    po = tmp_path / "x.po"
    po.write_text(
        f'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        f'msgid "{english}"\nmsgstr "{chinese}"\n',
        encoding="utf-8",
    )
    found = [p.state for p in catalogues.problems(po, tmp_path)]
    assert found == ([state] if state else [])
