"""Shared fixtures of the task tests."""

import pytest
import torch


@pytest.fixture
def one_thread():
    """One torch thread while a test runs (pipelines measured and compared on one thread)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
