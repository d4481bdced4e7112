"""Fixtures shared by the test packages."""

import pytest
import torch


@pytest.fixture
def fixed_thread_count():
    """Two fits compared to 1e-7 (the idempotence checks of sklearn and sktime) must run at one
    thread count: on a loaded machine a CPU fit's threads follow the idle cores, and a changed
    count changes how torch splits its sums. torch's deterministic mode keeps the count."""
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    yield
    torch.use_deterministic_algorithms(before)


@pytest.fixture
def float64_default_dtype():
    """torch's default dtype set to float64 for one test (and restored), to show that a function works
    in the dtype of its inputs, not in the default one."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)
