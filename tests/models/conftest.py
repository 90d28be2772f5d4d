"""Set-up for the model tests: one intra-op thread per test module.

The tensors here are tiny, so threads only add overhead, and on a busy machine
OpenMP's spinning threads can make a test 30 times slower. The setting is restored
after each test module, so other packages' tests are unaffected.
"""

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_intra_op_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
