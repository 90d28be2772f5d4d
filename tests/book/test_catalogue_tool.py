"""tools/catalogues.py: what is left to translate, named by .po line and rst line."""

from __future__ import annotations

import importlib.util
import pathlib
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
