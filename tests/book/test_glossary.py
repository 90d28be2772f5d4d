"""The glossary is a contract: every catalogue writes a term the way the glossary does.

An entry of ``docs/glossary.rst`` lists the English term, then its other English names
(an abbreviation such as ``MHA``, the CamelCase name ``AllReduce``), then its Chinese
line: the one term the Chinese edition writes for it. Where the Chinese edition keeps
the English (rank, hook, bucket, AllReduce), a comment ``.. zh_CN keeps: NAME``
right above the entry says which English it writes; a Chinese line under such an
entry (``进程编号``) is only a name a reader may look up: the Chinese text must not
use it.

For each translated, non-fuzzy message of every catalogue whose English uses a term
(whole words, any plural; outside ``literals``, code roles and :math:/:calc:/:cite:),
the Chinese must contain the term's rendering: the entry's Chinese line, or the kept
English and none of the entry's Chinese names. An abbreviation may also stay as it is
(GQA). Real exceptions go into ``ALLOWED`` with their reason.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po, write_po

DOCS = Path(__file__).resolve().parents[2] / "docs"
GLOSSARY = DOCS / "glossary.rst"
CATALOGUES = DOCS / "locale" / "zh_CN" / "LC_MESSAGES"
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
KEEPS = re.compile(r"^ {3}\.\. zh_CN keeps: (?P<name>\S.*?)\s*$")
TERM_LINE = re.compile(r"^ {3}(?P<line>[^\s:.].*?)\s*$")
# What a reader does not read as prose: literals, formulas, computed numbers,
# citations, links; a role with a title keeps its title, :term: keeps its text.
NOT_PROSE = re.compile(
    r"``.+?``|:(?:math|calc|cite(?::\w+)?):`[^`]*`|https?://\S+"
    r"|:[\w:+-]+:`(?P<title>[^`<]*?)\s*<[^`>]*>`|:term:`(?P<term>[^`]*)`"
    r"|:[\w:+-]+:`[^`]*`"
)


@dataclass(frozen=True)
class Entry:
    """One glossary entry and the Chinese edition's decision for it."""

    term: str  # the English term, the entry's first line
    names: tuple[str, ...]  # its other English names: MHA, AllReduce
    rendering: str  # what the Chinese edition writes
    kept: bool  # whether that is the English
    avoid: tuple[str, ...]  # Chinese names of a kept term, not to be used


@dataclass(frozen=True)
class Allowed:
    """A message that may render a term differently, and why."""

    catalogue: str
    term: str
    english: str  # words of the message's English that identify it
    reason: str


@dataclass(frozen=True)
class Deviation:
    """A message whose Chinese does not write a term as the glossary does."""

    po: Path
    line: int
    term: str
    expected: str
    found: str
    english: str

    def __str__(self) -> str:
        return (
            f"{self.po.name}:{self.line}: the English uses {self.term!r}; the glossary "
            f"writes {self.expected!r}, the Chinese has {self.found!r} (English: "
            f"{textwrap.shorten(self.english, 70)!r}). Fix the msgstr, or add "
            f"Allowed({self.po.name!r}, {self.term!r}, <words of the English>, "
            f"<reason>) to ALLOWED in tests/book/test_glossary.py"
        )


ALLOWED: tuple[Allowed, ...] = (
    Allowed(
        "communication.po",
        "collective",
        "Measured by aiinfra bench collectives",
        "'aiinfra bench collectives' is a command, typed as it is in both editions",
    ),
    # The operating system's kernel is 内核; the glossary's kernel is the GPU's.
    *(
        Allowed(catalogue, "kernel", english, "the operating system's kernel (内核)")
        for catalogue, english in (
            ("cloud.po", "namespace"),
            ("cloud.po", "kernel module"),
            ("cloud.po", "host kernel"),
            ("cloud.po", "kernel log"),
            ("communication.po", "killed by the kernel"),
            ("communication.po", "out-of-memory killer"),
            ("communication.po", "kernel buffer"),
            ("communication.po", "kernel socket buffer"),
            ("inference.po", "listen queue"),
        )
    ),
    Allowed(
        "cloud.po",
        "job",
        " Job",
        "Kubernetes' Job resource (a Job, its JobSet, an Indexed Job), named as its "
        "API names it",
    ),
    Allowed("cloud.po", "job", "Job", "Volcano's Job kind, a cell of the CRD table"),
    Allowed(
        "cloud.po",
        "job",
        "job=aiinfra-train",
        "a Prometheus label and its value, drawn as the series carries it",
    ),
    Allowed(
        "communication.po",
        "job",
        "is a job for",
        "the English idiom ('a job for recursive doubling'), not a distributed job",
    ),
    *(
        Allowed(catalogue, "hang", english, "'hangs' a part below another, not a hang")
        for catalogue, english in (
            ("communication.po", "tree hangs each rank"),
            ("hardware.po", "switches hang on the root ports"),
            ("hardware.po", "PCIe tree hangs on"),
        )
    ),
    *(
        Allowed("hardware.po", "Ascend", english, "Ascend C, a language's name")
        for english in ("the Ascend C guide", "an Ascend C kernel", "An Ascend C")
    ),
    Allowed(
        "training.po",
        "checkpoint",
        "Peak saved bytes against the number of checkpoint segments",
        "segments of activation checkpointing, which the glossary writes 激活重计算",
    ),
)


def read_glossary(path: Path) -> list[Entry]:
    """The entries of a ``.. glossary::`` with their decisions.

    Raises:
        ValueError: an entry's first line is not English, or it has no decision
            (neither one Chinese line nor a ``zh_CN keeps`` comment naming one of its
            English lines).
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    start = lines.index(".. glossary::") + 1
    heads: list[tuple[int, str | None, list[str]]] = []
    keeps, previous = None, None
    for number, line in enumerate(lines[start:], start + 1):
        marker, term = KEEPS.match(line), TERM_LINE.match(line)
        if marker:
            keeps = marker["name"]
        elif term and previous:
            heads[-1][2].append(term["line"])
        elif term:
            heads.append((number, keeps, [term["line"]]))
        if not marker:
            keeps = None  # a marker belongs to the entry right below it
        previous = term
    entries, problems = [], []
    for number, keep, names in heads:
        english = [n for n in names if not HAN.search(n)]
        chinese = tuple(n for n in names if HAN.search(n))
        where = f"{path.name}:{number}:"
        if HAN.search(names[0]):
            problems.append(f"{where} {names[0]!r} is not English")
        elif keep is not None and keep not in english:
            problems.append(f"{where} keeps {keep!r}, not one of its English lines")
        elif keep is None and len(chinese) != 1:
            problems.append(
                f"{where} {names[0]!r} needs one Chinese line, or a "
                f"'.. zh_CN keeps: NAME' comment above it (found {len(chinese)})"
            )
        else:
            rendering, avoid = (keep, chinese) if keep else (chinese[0], ())
            entries.append(
                Entry(english[0], tuple(english[1:]), rendering, bool(keep), avoid)
            )
    if problems:
        raise ValueError("\n".join(problems))
    return entries


def prose(text: str) -> str:
    """The words of a message a reader reads as prose (see ``NOT_PROSE``)."""
    return NOT_PROSE.sub(lambda m: m["title"] or m["term"] or " ", text)


def english_pattern(name: str) -> re.Pattern[str]:
    """A name as a whole word, any plural; a word with two capitals (an acronym or a
    name: ZeRO, KV, NCCL) as spelt, any other word in any case (``All-reduce``)."""
    *words, last = re.split(r"[-\s]+", name)
    y = last.endswith("y")  # strategy, strategies; GPU-day, GPU-days
    last, tail = (last[:-1], "(?:y|ies|ys)") if y else (last, "(?:e?s)?")
    parts = [
        re.escape(w) if sum(c.isupper() for c in w) >= 2 else f"(?i:{re.escape(w)})"
        for w in (*words, last)
    ]
    joined = r"[-\s]+".join(parts)  # all-reduce, all reduce
    return re.compile(rf"(?<![\w-]){joined}{tail}(?!\w)", re.A)


def rendered(text: str, rendering: str) -> bool:
    """Whether a Chinese text writes a rendering: Chinese as it is, English as a whole
    word with the same capitals (a lower-case word may start a sentence)."""
    if HAN.search(rendering):
        return rendering in text
    head, body = rendering[0], re.escape(rendering[1:]).replace(r"\ ", r"\s+")
    first = f"[{head}{head.upper()}]" if rendering.islower() else re.escape(head)
    return bool(re.search(rf"(?<![\w-]){first}{body}(?:e?s)?(?!\w)", text, re.A))


def check(
    catalogues: Iterable[Path], entries: Sequence[Entry], allowed: Sequence[Allowed]
) -> tuple[list[Deviation], int, set[Allowed]]:
    """Every deviation from the glossary in the catalogues.

    Returns:
        The deviations not allowed, the number of (message, term) pairs checked, and
        the items of ``allowed`` that excused one.
    """
    names = sorted(
        ((name, entry) for entry in entries for name in (entry.term, *entry.names)),
        key=lambda pair: -len(pair[0]),  # longest first: all-reduce before reduce
    )
    patterns = [(english_pattern(name), name, entry) for name, entry in names]
    term_lines = {n for e in entries for n in (e.term, *e.names, *e.avoid)}
    term_lines |= {e.rendering for e in entries}
    deviations, checked, used = [], 0, set()
    for po in catalogues:
        with po.open("rb") as f:
            messages = [m for m in read_po(f) if m.id and m.string and not m.fuzzy]
        messages = [m for m in messages if isinstance(m.id, str)]  # no plural forms
        for msg in messages:
            if po.name == "glossary.po" and msg.id in term_lines:
                continue  # a term line names the term in both editions
            english, chinese = prose(msg.id), prose(msg.string)
            seen: dict[Entry, set[str]] = {}
            for pattern, name, entry in patterns:
                english, hits = pattern.subn("\0", english)  # a longer name hides
                if hits:
                    seen.setdefault(entry, set()).add(name)
            for entry, found in seen.items():
                checked += 1
                accepted = [entry.rendering, *(n for n in found if n != entry.term)]
                avoided = [a for a in entry.avoid if a in chinese]
                if any(rendered(chinese, a) for a in accepted) and not avoided:
                    continue
                key = (po.name, entry.term)
                excuses = [a for a in allowed if (a.catalogue, a.term) == key]
                excuse = next((a for a in excuses if a.english in msg.id), None)
                if excuse:
                    used.add(excuse)
                    continue
                found = avoided[0] if avoided else textwrap.shorten(msg.string, 90)
                where = (po, msg.lineno, entry.term, entry.rendering)
                deviations.append(Deviation(*where, found, msg.id))
    return deviations, checked, used


def test_the_glossary_decides_each_term():
    entries = {e.term: e for e in read_glossary(GLOSSARY)}
    # Its decisions on the chapters' central terms; every name is one Sphinx extracted.
    assert all(entries[t].kept for t in ("rank", "hook", "bucket", "ZeRO"))
    assert entries["all-reduce"].rendering == "AllReduce"
    assert entries["all-reduce"].avoid == ("全归约",)
    assert entries["data parallelism"].rendering == "数据并行"
    assert entries["multi-head attention"].names == ("MHA",)
    with (CATALOGUES / "glossary.po").open("rb") as f:
        extracted = {m.id for m in read_po(f)}
    for e in entries.values():
        assert {e.term, *e.names, e.rendering, *e.avoid} <= extracted, e


@pytest.mark.parametrize(
    ("head", "problem"),
    [
        ("   TP\n", "6: 'TP' needs one Chinese line"),
        ("   TP\n   张量\n   张量并行\n", "6: 'TP' needs one Chinese line"),
        ("   .. zh_CN keeps: TP\n   tensor parallelism\n", "7: keeps 'TP'"),
        ("   张量并行\n   TP\n", "6: '张量并行' is not English"),
    ],
)
def test_an_entry_without_one_decision_is_an_error(tmp_path, head, problem):
    rst = tmp_path / "glossary.rst"
    rst.write_text(f"G\n=\n\n.. glossary::\n\n{head}      Splitting.\n", "utf-8")
    with pytest.raises(ValueError, match=f"glossary.rst:{re.escape(problem)}"):
        read_glossary(rst)


def test_every_catalogue_follows_the_glossary():
    entries = read_glossary(GLOSSARY)
    deviations, checked, used = check(sorted(CATALOGUES.glob("*.po")), entries, ALLOWED)
    assert checked > len(entries)  # the book uses its terms: fewer means no matching
    assert not deviations, "\n".join(map(str, deviations))
    assert set(ALLOWED) == used, f"no longer needed: {set(ALLOWED) - used}"


SYNTHETIC = [  # English, Chinese, the deviation: term, expected, found
    ("All-reduce it.", "全规约。", ("all-reduce", "AllReduce", "全规约。")),
    ("Each rank sends.", "每个进程编号发送。", ("rank", "rank", "进程编号")),
    ("Buckets wait.", "桶在等待。", ("bucket", "bucket", "桶在等待。")),
    ("Data parallelism.", "数据平行。", ("data parallelism", "数据并行", "数据平行。")),
    # Not deviations: a compound, an abbreviation, code and formulas.
    ("A ring all-reduce, then GQA.", "先做环形 AllReduce，再做 GQA。", None),
    ("Call ``all_reduce`` on :math:`\\text{rank}`.", "调用 ``all_reduce``。", None),
]
FUZZY = ("The broadcast.", "the broadcast")  # a fuzzy entry is not checked


def _catalogue(path: Path) -> Path:
    catalog = Catalog(locale="zh_CN")
    for english, chinese, _ in SYNTHETIC:
        catalog.add(english, chinese)
    catalog.add(*FUZZY, flags=["fuzzy"])
    with path.open("wb") as f:
        write_po(f, catalog, width=88)
    return path


def test_a_deviating_translation_is_reported(tmp_path):
    po = _catalogue(tmp_path / "chapter.po")
    deviations, checked, _ = check([po], read_glossary(GLOSSARY), ())
    lines = po.read_text("utf-8").splitlines()
    found = {(lines[d.line - 1], d.term, d.expected, d.found) for d in deviations}
    assert found == {(f'msgid "{e}"', *d) for e, _, d in SYNTHETIC if d}
    assert checked == 6  # and all-reduce and GQA rendered well
    bucket = next(d for d in deviations if d.term == "bucket")
    assert str(bucket).startswith(f"chapter.po:{bucket.line}: the English uses")
    assert "Fix the msgstr, or add Allowed('chapter.po', 'bucket'" in str(bucket)


def test_an_allowed_message_passes(tmp_path):
    po = _catalogue(tmp_path / "chapter.po")
    allowed = Allowed("chapter.po", "bucket", "Buckets wait", "a test")
    deviations, _, used = check([po], read_glossary(GLOSSARY), [allowed])
    assert {d.term for d in deviations} == {"all-reduce", "data parallelism", "rank"}
    assert used == {allowed}
