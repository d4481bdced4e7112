"""A pretrained file, even one signed anew, cannot declare a context long enough to exhaust memory:
no weight depends on the context length, so it has a bound of its own."""

import json

import numpy as np
import pandas as pd
import pytest

from ssmts.estimators._persistence import _checksum
from ssmts.sktime import SSMForecaster
from ssmts.sktime._pretrained import MAX_CONTEXT_LENGTH, METADATA_KEY, default_weights, read_pretrained


def _with_context(tmp_path, context_length):
    from safetensors.torch import save_file

    meta, tensors = read_pretrained(default_weights())
    meta = {**meta, "context_length": context_length}
    meta["sha256"] = _checksum(tensors, meta)  # a forger's file: only the value checks can refuse it
    path = tmp_path / "context.safetensors"
    save_file(tensors, str(path), metadata={METADATA_KEY: json.dumps(meta)})
    return str(path)


def test_a_context_beyond_the_bound_is_refused_before_any_allocation(tmp_path):
    path = _with_context(tmp_path, 10**9)  # fit allocated 7.45 GiB for it
    y = pd.Series(np.sin(np.arange(60) / 4.0))
    with pytest.raises(ValueError, match=rf"context_length=1000000000, beyond {MAX_CONTEXT_LENGTH}.*altered"):
        SSMForecaster(pretrained=True, pretrained_weights=path).fit(y, fh=[1])


def test_a_context_within_the_bound_still_reads(tmp_path):
    meta, _ = read_pretrained(_with_context(tmp_path, MAX_CONTEXT_LENGTH))
    assert meta["context_length"] == MAX_CONTEXT_LENGTH
