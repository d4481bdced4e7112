"""Sequence classification and regression out of the box: `python -m ssmts.bench classify [options]`.

SSMClassifier with its defaults against MiniRocket (sktime's transform + RidgeClassifierCV,
the usual strong and fast baseline), 1-nearest-neighbour with Euclidean distance (the
classic floor) and SSMClassifier with the defaults of ssmts 0.1 ("previous"), on the
development sets of the defaults:

    set               train / test   channels x length   classes
    GunPoint          50 / 150       1 x 150             2      (sktime, official split)
    ItalyPowerDemand  67 / 1029      1 x 24              2      (sktime, official split)
    BasicMotions      40 / 40        6 x 100             4      (sktime, official split)
    UnitTest          20 / 22        1 x 24              2      (sktime, official split)
    digits            898 / 899      1 x 64              10     (sklearn's 8x8 digits read row by row
                                                                 as 64-step sequences; stratified
                                                                 half split, random_state=0)

Two protocols:
  test (default)  fit on the training split, report accuracy on the test split;
  --cv K          stratified K-fold cross-validation on the training split only. This is what
                  the defaults were chosen on (docs/benchmarks_results.md); test splits only report.

--regression runs SSMRegressor on sktime's regression sets (Covid3Month, Tecator) with
cross-validation on their training splits only, against MiniRocket + RidgeCV, 1-NN and the
training mean (RMSE / standard deviation of the training targets; lower is better).

--params '{"name": value}' overrides parameters of the "ssm" row (the "previous" row is always
ssmts 0.1's defaults); --models picks rows; --threads sets torch's threads (default 1: times
comparable between rows).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

CLASSIFICATION_SETS = ("GunPoint", "ItalyPowerDemand", "BasicMotions", "UnitTest", "digits")
REGRESSION_SETS = ("Covid3Month", "Tecator")
MODELS = ("ssm", "previous", "minirocket", "1nn")

# The defaults of ssmts 0.1, before they were chosen on the development protocol (every
# parameter whose default has changed since).
PREVIOUS_DEFAULTS = dict(d_model=64, d_state=64, n_layers=4, max_epochs=50, min_steps=0, batch_size=32, lr=3e-3,
                         normalize="channel", early_stopping=False, bidirectional=False, dropout=0.0)
PREVIOUS_CLASSIFIER_DEFAULTS = dict(label_smoothing=0.0)


def load_classification(name: str):
    """(X_train, y_train, X_test, y_test) of a development set; X: (n, channels, length) float64."""
    if name == "digits":
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        digits = load_digits()
        X = digits.data[:, None, :].astype(np.float64)
        X_train, X_test, y_train, y_test = train_test_split(
            X, digits.target, test_size=0.5, stratify=digits.target, random_state=0)
        return X_train, y_train, X_test, y_test
    return _load_ucr(name)


def load_regression(name: str):
    X_train, y_train, X_test, y_test = _load_ucr(name)  # sktime reads the targets as strings
    return X_train, y_train.astype(np.float64), X_test, y_test.astype(np.float64)


def _load_ucr(name: str):
    """A set shipped with sktime: numpy3D when the series have equal lengths, else a list of
    (channels, length_i) arrays (PLAID, JapaneseVowels)."""
    from sktime.datasets import load_UCR_UEA_dataset

    def load(split):
        try:
            X, y = load_UCR_UEA_dataset(name, split=split, return_type="numpy3D")
            return X.astype(np.float64), y
        except ValueError:  # unequal lengths
            frame, y = load_UCR_UEA_dataset(name, split=split, return_type="nested_univ")
            return [np.stack([np.asarray(frame.iloc[i, c], dtype=np.float64) for c in range(frame.shape[1])])
                    for i in range(len(frame))], y

    return (*load("train"), *load("test"))


def make_model(kind: str, regression: bool, params: dict, seed: int):
    if kind in ("ssm", "previous"):
        from ssmts import SSMClassifier, SSMRegressor

        settings = dict(PREVIOUS_DEFAULTS if kind == "previous" else params, device="cpu", random_state=seed)
        if kind == "previous" and not regression:
            settings.update(PREVIOUS_CLASSIFIER_DEFAULTS)
        return (SSMRegressor if regression else SSMClassifier)(**settings)
    if kind == "minirocket":
        return _MiniRocket(regression, seed)
    if kind == "1nn":
        from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

        return _Flat((KNeighborsRegressor if regression else KNeighborsClassifier)(n_neighbors=1))
    if kind == "mean":
        from sklearn.dummy import DummyRegressor

        return _Flat(DummyRegressor())
    raise ValueError(f"unknown model {kind!r}")


class _Flat:
    """A tabular sklearn estimator on the flattened series (n, channels * length); series of
    unequal lengths are padded at the end with zeros to the longest training series (and cut
    to it), the usual way to give 1-NN ED a fixed length."""

    def __init__(self, estimator):
        self.estimator = estimator

    def _table(self, X):
        if isinstance(X, np.ndarray):
            return X.reshape(len(X), -1)
        out = np.zeros((len(X), X[0].shape[0], self.length))
        for i, series in enumerate(X):
            out[i, :, : min(self.length, series.shape[-1])] = series[:, : self.length]
        return out.reshape(len(X), -1)

    def fit(self, X, y):
        self.length = None if isinstance(X, np.ndarray) else max(series.shape[-1] for series in X)
        self.estimator.fit(self._table(X), y)
        return self

    def predict(self, X):
        return self.estimator.predict(self._table(X))


class _MiniRocket:
    """MiniRocket features (sktime; multivariate when there are several channels) + a ridge
    with its penalty chosen by leave-one-out, as in the MiniRocket paper."""

    def __init__(self, regression: bool, seed: int):
        self.regression, self.seed = regression, seed

    def fit(self, X, y):
        from sklearn.linear_model import RidgeClassifierCV, RidgeCV
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            from sktime.transformations.panel.rocket import MiniRocket, MiniRocketMultivariate
            from sktime.transformations.panel.rocket import MiniRocketMultivariateVariable
        if isinstance(X, np.ndarray):
            transform = (MiniRocketMultivariate if X.shape[1] > 1 else MiniRocket)(random_state=self.seed)
        else:  # unequal lengths: sktime's variable-length MiniRocket reads a nested DataFrame
            transform = MiniRocketMultivariateVariable(random_state=self.seed, pad_value_short_series=0.0)
        ridge = (RidgeCV if self.regression else RidgeClassifierCV)(alphas=np.logspace(-3, 3, 10))
        self.transform = transform.fit(_sktime_panel(X))
        self.ridge = make_pipeline(StandardScaler(with_mean=False), ridge).fit(self._features(X), y)
        return self

    def _features(self, X):
        return np.asarray(self.transform.transform(_sktime_panel(X)))

    def predict(self, X):
        return self.ridge.predict(self._features(X))


def _sktime_panel(X):
    """numpy3D as it is; a list of (channels, length_i) arrays as a nested DataFrame."""
    if isinstance(X, np.ndarray):
        return X
    import pandas as pd

    return pd.DataFrame({f"dim_{c}": [pd.Series(series[c]) for series in X] for c in range(X[0].shape[0])})


def score(y_true, y_pred, regression: bool, y_train=None) -> float:
    """Accuracy, or for regression the RMSE relative to the training targets' standard deviation
    (scale-free, so that sets can be averaged; the training mean scores about 1)."""
    if regression:
        rmse = np.sqrt(np.mean((np.asarray(y_true, dtype=float) - np.asarray(y_pred, dtype=float)) ** 2))
        return float(rmse / np.std(np.asarray(y_train, dtype=float)))
    return float(np.mean(np.asarray(y_true) == np.asarray(y_pred)))


def run_one(kind: str, X_train, y_train, X_test, y_test, *, regression: bool, params: dict, seed: int):
    """(score on the test data, fit seconds)."""
    model = make_model(kind, regression, params, seed)
    started = time.perf_counter()
    model.fit(X_train, y_train)
    seconds = time.perf_counter() - started
    return score(y_test, model.predict(X_test), regression, y_train), seconds


def splits(X, y, folds: int, regression: bool, seed: int = 0):
    from sklearn.model_selection import KFold, StratifiedKFold

    if regression:
        return list(KFold(folds, shuffle=True, random_state=seed).split(X))
    return list(StratifiedKFold(folds, shuffle=True, random_state=seed).split(X, y))


def evaluate(kind: str, data: tuple, *, regression: bool, cv: int | None, params: dict, seed: int):
    """Mean score and mean fit time of one model on one set, data = (X_train, y_train, X_test,
    y_test) as the loaders return it (test split, or K folds of the training split)."""
    X_train, y_train, X_test, y_test = data
    if not cv:
        return run_one(kind, X_train, y_train, X_test, y_test, regression=regression, params=params, seed=seed)

    def rows(X, index):
        return X[index] if isinstance(X, np.ndarray) else [X[i] for i in index]

    results = [run_one(kind, rows(X_train, fit), y_train[fit], rows(X_train, held), y_train[held],
                       regression=regression, params=params, seed=seed)
               for fit, held in splits(X_train, y_train, cv, regression)]
    return float(np.mean([r[0] for r in results])), float(np.mean([r[1] for r in results]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ssmts.bench classify", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", default=None, help="development sets (default: all of the task)")
    parser.add_argument("--models", nargs="+", default=None, help=f"rows among {MODELS} (+ 'mean' with --regression)")
    parser.add_argument("--cv", type=int, default=None, metavar="K", help="K-fold CV on the training split")
    parser.add_argument("--regression", action="store_true", help="SSMRegressor on the regression sets (with --cv)")
    parser.add_argument("--params", default="{}", help="JSON of SSM parameter overrides")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)

    # MiniRocket runs on numba: its default OpenMP layer leaves threads spinning after each call,
    # which slows every later torch fit of this process several-fold; the workqueue layer does not.
    os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")
    os.environ.setdefault("NUMBA_NUM_THREADS", str(args.threads))
    import torch

    torch.set_num_threads(args.threads)
    if args.regression and not args.cv:
        parser.error("--regression needs --cv K: the regression sets are for development only")
    sets = args.sets or (REGRESSION_SETS if args.regression else CLASSIFICATION_SETS)
    models = args.models or (("ssm", "previous", "minirocket", "1nn", "mean") if args.regression else MODELS)
    params = json.loads(args.params)
    metric = "relative RMSE" if args.regression else "accuracy"
    protocol = f"{args.cv}-fold CV on the training split" if args.cv else "test split"
    print(f"# {metric} ({protocol}), fit seconds at {args.threads} thread(s); SSM overrides: {params or 'none'}")
    table: dict[str, dict[str, tuple[float, float]]] = {}
    for name in sets:
        data = (load_regression if args.regression else load_classification)(name)
        for kind in models:
            value, seconds = evaluate(kind, data, regression=args.regression, cv=args.cv, params=params, seed=args.seed)
            table.setdefault(kind, {})[name] = (value, seconds)
            print(f"{name:18s} {kind:11s} {metric} {value:.4f}  fit {seconds:7.2f} s", flush=True)
    _print_table(table, sets, metric, args.markdown)
    return 0


def _print_table(table, sets, metric, markdown: bool) -> None:
    header = ["model"] + list(sets) + [f"mean {metric}", "mean fit s"]
    rows = []
    for kind, by_set in table.items():
        values = [by_set[name][0] for name in sets]
        seconds = [by_set[name][1] for name in sets]
        rows.append([kind] + [f"{v:.3f} ({s:.1f} s)" for v, s in zip(values, seconds)]
                    + [f"{np.mean(values):.3f}", f"{np.mean(seconds):.1f}"])
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
        for row in [header] + rows:
            print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


if __name__ == "__main__":
    sys.exit(main())
