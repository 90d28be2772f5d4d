"""Which folders of ``docs/`` are chapters: the one list the generated pages use.

A chapter is an entry ``<folder>/index`` of the root document's toctree named
``chapters``::

    .. toctree::
       :name: chapters

       communication/index
       training/index

That toctree is the only place a chapter is listed: the decks, the deck list, the
front page's chapter list, the Slides buttons and the slide build's source files are
all derived from it. This module reads it without Sphinx, so that ``conf.py`` and
``tools/book.py`` can use it before a build starts.
"""

from __future__ import annotations

import pathlib
import re

_DIRECTIVE = re.compile(r"^\.\. toctree::[ \t]*\n((?:[ \t]+.*\n|[ \t]*\n)*)", re.M)


def chapters(docs: pathlib.Path, root_doc: str = "index") -> list[str]:
    """Folder names of the chapters, in book order.

    Args:
        docs: the source folder (``docs/``).
        root_doc: the root document's name, without ``.rst``.

    Returns:
        Each chapter's folder, in the order of the ``chapters`` toctree.

    Raises:
        ValueError: the root document has no toctree named ``chapters``, or an entry
            of it is not ``<folder>/index``.
    """
    text = (docs / f"{root_doc}.rst").read_text(encoding="utf-8")
    for match in _DIRECTIVE.finditer(text + "\n"):
        body = match.group(1)
        if not re.search(r"^\s+:name:\s+chapters\s*$", body, re.M):
            continue
        entries = [
            line.strip()
            for line in body.splitlines()
            if line.strip() and not line.strip().startswith(":")
        ]
        found = []
        for entry in entries:
            folder, sep, page = entry.partition("/")
            if not sep or page != "index" or "/" in folder:
                raise ValueError(
                    f"{root_doc}.rst: chapter entry {entry!r} is not '<folder>/index'"
                )
            found.append(folder)
        return found
    raise ValueError(f"{root_doc}.rst has no toctree with ':name: chapters'")


def chapter_pages(docs: pathlib.Path, chapter: str) -> list[str]:
    """The pages of a chapter's toctree (``docs/<chapter>/index.rst``), in order."""
    text = (docs / chapter / "index.rst").read_text(encoding="utf-8")
    pages: list[str] = []
    for match in _DIRECTIVE.finditer(text + "\n"):
        pages += [
            line.strip()
            for line in match.group(1).splitlines()
            if line.strip() and not line.strip().startswith(":")
        ]
    return pages
