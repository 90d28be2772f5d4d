"""Session-wide spawns of the storage tests (see :mod:`tests.storage.spawned`)."""

import pytest
from aiinfra.distributed import run_distributed
from aiinfra.storage import reshard

from tests.storage.spawned import TIMEOUT, crash_run, load_run, save_run


@pytest.fixture(scope="session")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("storage")


@pytest.fixture(scope="session")
def saved(root):
    return run_distributed(save_run, 4, str(root), timeout=TIMEOUT)


@pytest.fixture(scope="session")
def crashed(root):
    """The crash run's error: it must fail, since rank 1 dies mid-save."""
    with pytest.raises(RuntimeError) as error:
        run_distributed(crash_run, 2, str(root / "atomic"), timeout=TIMEOUT)
    return str(error.value)


@pytest.fixture(scope="session")
def loaded2(root, saved, crashed):
    return run_distributed(load_run, 2, str(root), timeout=TIMEOUT)[0]


@pytest.fixture(scope="session")
def loaded3(root, saved):
    return reshard(str(root / "sharded"), 3, timeout=TIMEOUT)
