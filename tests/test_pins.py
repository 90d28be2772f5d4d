"""Every dependency is pinned, in one place, and every nox session installs the pins.

A floor (``>=``) resolves to whatever is newest on the day: a fresh machine then
builds with versions nobody tested. ``pyproject.toml`` pins what the package asks
for, ``constraints.txt`` pins everything those pull in, and ``noxfile.py`` passes
the constraints to every install.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][0-9A-Za-z.+!-]*)$")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pyproject_requirements() -> list[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    reqs = list(data["build-system"]["requires"]) + data["project"]["dependencies"]
    for extra in data["project"]["optional-dependencies"].values():
        reqs += extra
    return [r.split(";")[0].strip() for r in reqs]


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = PIN.match(line.strip())
        assert m, f"constraints.txt: {line!r} is not name==version"
        assert _norm(m[1]) not in pins, f"constraints.txt: {m[1]} twice"
        pins[_norm(m[1])] = m[2]
    return pins


def test_every_requirement_of_pyproject_is_an_exact_pin():
    loose = [
        r
        for r in _pyproject_requirements()
        if not PIN.match(r) and not r.startswith("aiinfra[")
    ]
    assert loose == [], "pin these with == (a floor is not a pin)"


def test_the_constraints_agree_with_pyproject():
    pins = _constraints()
    for req in _pyproject_requirements():
        m = PIN.match(req)
        if m is None or _norm(m[1]) == "setuptools":  # the build's own environment
            continue
        assert pins.get(_norm(m[1])) == m[2], f"{req} vs constraints.txt"
    # What the tests import beyond the standard library is installed by the extras.
    for module, dist in (("deepspeed", "deepspeed"), ("triton", "triton")):
        assert dist in pins, module


def test_every_nox_install_uses_the_constraints():
    text = (ROOT / "noxfile.py").read_text()
    # nox -s lock alone resolves without them: it writes them.
    checked = text[: text.index("def lock(")]
    installs = re.findall(r"session\.install\(([^)]*)\)", checked)
    assert installs, "noxfile.py installs nothing?"
    for args in installs:
        assert '"-c", CONSTRAINTS' in args, f"session.install({args}) without pins"


def test_the_npm_dependency_of_the_calculators_is_locked():
    """Pyodide (the calculators in the page) is an exact version, locked with its
    integrity hash, and the lock names the same version (``npm ci`` installs it)."""
    import json

    project = ROOT / "docs" / "_calculator"
    wanted = json.loads((project / "package.json").read_text())["dependencies"]
    lock = json.loads((project / "package-lock.json").read_text())["packages"]
    for name, version in wanted.items():
        assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", version), f"{name}: {version}"
        entry = lock[f"node_modules/{name}"]
        assert entry["version"] == version
        assert entry["integrity"].startswith("sha512-")
    for path, entry in lock.items():
        if path:
            assert entry.get("integrity", "").startswith("sha512-"), path
