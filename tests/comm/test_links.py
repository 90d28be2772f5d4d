"""One table of links: every module prices a link by its name in ``LINKS``.

Ground truth: NVIDIA's datasheets (FACTS.md, Hardware) give NVLink's bandwidth per
GPU with both directions added: A100 (NVLink 3) 600 GB/s, H100 and H200 (NVLink 4)
900 GB/s; a collective's ring step sends one way, half of it. The source scan
fails when a second module defines a link of its own (a ``Link`` or
``LinkModel`` built from, or a link constant set to, a link's bandwidth typed as a
number outside :mod:`aiinfra.comm.cost` and the GPU table), the way
the tensor-parallel page once priced NVLink at 200 GB/s while the rest of the
training chapter used 450.
"""

from __future__ import annotations

import ast
from pathlib import Path

import aiinfra
import pytest
from aiinfra.comm.cost import LINKS
from aiinfra.parallel.data.overlap import H100_LINKS
from aiinfra.plan.job import INTER_NODE, intra_node_link

PACKAGE = Path(aiinfra.__file__).parent
DATASHEET_BOTH_WAYS = {"A100": 600e9, "H100": 900e9, "H200": 900e9}


@pytest.mark.parametrize(("gpu", "both_ways"), DATASHEET_BOTH_WAYS.items())
def test_each_gpus_nvlink_is_half_its_datasheet_figure(gpu, both_ways):
    link = LINKS[f"{gpu.lower()}-nvlink"]
    assert 1 / link.beta == pytest.approx(both_ways / 2)
    assert intra_node_link(gpu) is link


def test_the_training_chapters_links_are_the_tables():
    assert H100_LINKS["nvlink"].bandwidth == 1 / LINKS["h100-nvlink"].beta == 450e9
    assert H100_LINKS["nic400"].bandwidth == 1 / LINKS["ib400"].beta == 400e9 / 8
    assert INTER_NODE is LINKS["ib400"]


def _numbers(node: ast.AST) -> list[float]:
    return [
        n.value
        for n in ast.walk(node)
        if isinstance(n, ast.Constant) and isinstance(n.value, int | float)
    ]


def test_no_module_but_the_tables_defines_a_link():
    bandwidths = {1 / m.beta for m in LINKS.values()}
    bandwidths |= {2 * b for b in bandwidths} | {8 * b for b in bandwidths}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ("comm/cost.py", "accelerators.py"):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in (
                "LinkModel",
                "Link",
            ):
                if any(v in bandwidths for v in _numbers(node)):
                    found.append(f"{rel}:{node.lineno}")
            if isinstance(node, ast.Assign | ast.AnnAssign):
                text = ast.unparse(node).lower()
                hits = [v for v in _numbers(node) if v in bandwidths and v >= 1e9]
                if hits and ("link" in text or "nic" in text):
                    found.append(f"{rel}:{node.lineno}")
    assert found == []
