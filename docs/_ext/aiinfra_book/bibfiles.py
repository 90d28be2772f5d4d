"""Re-read the pages with a bibliography when the set of ``.bib`` files changes.

sphinxcontrib-bibtex re-parses the ``.bib`` files when their list changes, but a
``.. bibliography::`` directive keeps the list of files it saw when its page was
read. An incremental build after a new ``.bib`` file was added therefore reports
every key of that file as missing until the bibliography's page is read again; this
marks those pages outdated whenever ``bibtex_bibfiles`` differs from the last build.
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment


def outdated_bibliographies(
    app: Sphinx,
    env: BuildEnvironment,
    added: set[str],
    changed: set[str],
    removed: set[str],
) -> list[str]:
    """The pages with a bibliography, if the bib files differ from the last build."""
    if "bibtex_bibfiles" not in app.config:  # sphinxcontrib-bibtex is not loaded
        return []
    files = sorted(str(f) for f in app.config.bibtex_bibfiles)
    previous = getattr(env, "aiinfra_bibfiles", None)  # None: unknown, re-read
    env.aiinfra_bibfiles = files
    if previous == files:
        return []
    domain = env.get_domain("cite")
    return sorted({key.docname for key in domain.bibliographies} - removed)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("env-get-outdated", outdated_bibliographies)
    return {"parallel_read_safe": False}
