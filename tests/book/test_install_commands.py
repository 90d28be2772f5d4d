"""The install commands the book prints give what the prose says they give.

``docs/overview/running.rst`` says the CPU wheel of PyTorch is enough; on Linux,
PyPI's ``torch`` wheel is the CUDA build (it depends on the ``nvidia-*`` packages),
so the command must name PyTorch's CPU index, at the version the book is tested with.
"""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def test_running_page_installs_the_cpu_wheel_of_the_tested_torch():
    page = (ROOT / "docs" / "overview" / "running.rst").read_text(encoding="utf-8")
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    tested = re.search(r'^TORCH = "(torch==[\d.]+)"', noxfile, re.M).group(1)
    installs = re.findall(r"^\s*\$ pip install (torch\S*)(.*)$", page, re.M)
    assert installs == [(tested, f" --index-url {CPU_INDEX}")]
