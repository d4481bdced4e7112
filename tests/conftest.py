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
