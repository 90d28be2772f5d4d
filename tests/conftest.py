"""Test-wide set-up: Triton on CPU, a private temp folder, the gpu marker."""

import os
import pathlib
import sys
import tempfile

import torch  # noqa: E402 - torch itself does not import triton

# Triton reads TRITON_INTERPRET when a @triton.jit function is defined, so this must
# run before any test module imports a kernel. Without a GPU, kernels run in
# Triton's CPU interpreter; with one, they compile.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# torchrun, spawn and pytest leave files in the temp folder: keep ours apart.
_TMP = pathlib.Path(__file__).resolve().parents[1] / ".tmp"
_TMP.mkdir(exist_ok=True)
os.environ["TMPDIR"] = str(_TMP)
tempfile.tempdir = str(_TMP)

import aiinfra.distributed  # noqa: E402
import pytest  # noqa: E402

# Ranks fork from a server that imports aiinfra.distributed.PRELOAD once: add pytest
# and the modules whose functions the shared spawns run, so no rank imports them.
aiinfra.distributed.PRELOAD += (
    "pytest",
    "tests.parallel.spawned",
    "tests.parallel.test_three_d",
    "tests.comm.collective_checks",
)


@pytest.fixture(autouse=True, scope="module")
def _one_intra_op_thread():
    """One intra-op thread per test module, restored after it.

    The tensors of the tests are small, so threads only add overhead; and while the
    site builds in the background on a machine of two cores, OpenMP's spinning
    threads made a test 40 times slower (GPTQ's perplexity test: 24 s in CI against
    0.6 s alone).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def pytest_collection_modifyitems(config, items):
    # Tests of the built site run last, while the site builds in the background.
    on_site = [i for i in items if "site" in getattr(i, "fixturenames", ())]
    others = [i for i in items if "site" not in getattr(i, "fixturenames", ())]
    items[:] = others + on_site
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; none is present")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_collection_finish(session):
    # The tests that will run (after -k/-m): start the site's build if one needs it.
    needs_site = any("site" in getattr(i, "fixturenames", ()) for i in session.items)
    if needs_site and not session.config.option.collectonly:
        from tests.book.conftest import start_site_build

        start_site_build()


def pytest_runtest_teardown(item, nextitem):
    # The site built in the background: its notebooks start executing at once.
    book = sys.modules.get("tests.book.conftest")
    if book is not None:
        book.start_notebooks()


def pytest_sessionfinish(session, exitstatus):
    book = sys.modules.get("tests.book.conftest")
    if book is not None:  # a build still running (the run stopped early) is ended
        book.stop_site_build()
