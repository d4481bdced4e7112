"""One definition of the constructor of every ssmts estimator.

sklearn's and sktime's get_params read parameter names from the signature of
__init__; `make_init` builds an __init__ with an explicit keyword-only signature
(visible to help(), inspect and get_params) that stores each argument unmodified.
"""
from __future__ import annotations

import inspect

PARAMETER_DOCS = """
    Backbone
        d_model : int, default 64. Width H of every block.
        d_state : int, default 64. State size N of each head (N/2 complex modes).
        n_layers : int, default 4. Number of SSM blocks.
        heads : int, default 1. Block-diagonal heads (1 = one MIMO system, d_model = SISO).
        bidirectional : bool or {"essm", "ldnn"}, default False.
        init : {"legs", "ptd", "lin", "inv", "half", "randn"}, default "legs".
        discretization : {"zoh", "bilinear", "gbt"}, default "zoh".
        dropout : float, default 0.0.
        norm : {"layer", "batch", "none"}, default "layer".
        prenorm : bool, default True.
        activation : {"gated_gelu", "gelu", "leaky_relu"}, default "gated_gelu".
        pooling : {"mean", "last"}, default "mean". Sequence-to-vector pooling.
        dt_min, dt_max : float, defaults 1e-3, 1e-1. Log-uniform range of Delta at init.
    Training
        max_epochs : int, default 50.
        batch_size : int, default 32.
        lr : float, default 3e-3. Learning rate of all non-SSM parameters.
        lr_ssm : float or None, default 1e-3. Learning rate of Lambda, Delta and B (no weight decay).
        weight_decay : float, default 0.01.
        optimizer : {"adamw", "adam", "sgd"}, default "adamw".
        scheduler : {"cosine", "plateau", "none"}, default "cosine".
        early_stopping : bool, default False. Hold out `validation_fraction`, stop after
            `n_iter_no_change` epochs without an improvement of `tol`, restore the best weights.
        validation_fraction, n_iter_no_change, tol : defaults 0.1, 10, 1e-4.
        warm_start : bool, default False. Continue training the fitted model on the next fit.
        scale_input : bool, default True. Standardize each channel with training statistics.
        device : {"auto", "cpu", "cuda"}, default "auto".
        random_state : int, RandomState or None. Fixes initialization, shuffling and dropout.
        verbose : int, default 0. 1 shows a tqdm bar with loss and validation score per epoch.
        sample_rate : float or None. Rate (Hz) of the data passed in; the rate seen at fit is
            the training rate, and data at another rate is handled zero-shot by rescaling
            Delta by training rate / new rate.
"""


def make_init(defaults: dict, doc: str = ""):
    """An __init__ taking exactly `defaults` as keyword-only parameters and storing them as is."""
    names = tuple(defaults)

    def __init__(self, **params):
        unknown = sorted(set(params) - set(names))
        if unknown:
            raise TypeError(f"{type(self).__name__}() got unexpected parameter(s) {unknown}")
        for name in names:
            setattr(self, name, params.get(name, defaults[name]))

    __init__.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=defaults[n]) for n in names]
    )
    __init__.__doc__ = doc
    return __init__
