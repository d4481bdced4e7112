"""Sequence classification and regression out of the box: `python -m ssmts.bench classify [options]`.

SSMClassifier with its defaults ("ssm") and SSMFeatureClassifier with its defaults ("features",
fixed SSMs at many time scales and a ridge read-out) against MiniRocket (sktime's transform + RidgeClassifierCV,
the usual strong and fast baseline), MultiRocket-Hydra ("mr-hydra", aeon's MultiRocketHydraClassifier /
Regressor at their defaults, the strongest fast classifier of the 2024 UCR bake-off; series of unequal
lengths padded with zeros to the longest training series; "drcif", aeon's DrCIF at its defaults, the
interval forest with the best mean rank on the TSER regression archive, runs with --models),
1-nearest-neighbour with Euclidean distance (the classic
floor), on the development sets of the defaults. Earlier defaults run as the "ssm" row with --params
(docs/results/classification.md gives the JSON of each). Every set is read from the files
shipped inside the installed packages (sktime's, else aeon's: `pip install ssmts[bench]`);
nothing is downloaded.

Classification (CLASSIFICATION_SETS):

    set                       train / test   channels x length   classes  (train per class)
    ArrowHead                 36 / 175       1 x 251             3        (12)       sktime
    ACSF1                     100 / 100      1 x 1460            10       (10)       sktime
    PickupGestureWiimoteZ     50 / 50        1 x 29..361         10       (5)        aeon, unequal lengths
    PickupGestureWiimoteZ_eq  50 / 50        1 x 361             10       (5)        aeon, the same series
                                                                                     padded to 361 (UCR's
                                                                                     equal-length version)
    digits                    898 / 899      1 x 64              10       (87..91)   sklearn's 8x8 digits
                                                                                     read row by row, a
                                                                                     stratified half split
                                                                                     (random_state=0)
    ItalyPowerDemand          67 / 1029      1 x 24              2        (33, 34)   sktime
    GunPoint                  50 / 150       1 x 150             2        (24, 26)   sktime

Regression (REGRESSION_SETS, --regression; targets float64):

    CardanoSentiment          74 / 33        2 x 24                                  aeon
    Covid3Month               140 / 61       1 x 84                                  sktime
    Tecator                   172 / 43       1 x 100                                 sktime

BasicMotions (40 / 40, 6 x 100, 4 classes) and UnitTest (20 / 22, 1 x 24, 2 classes) still load
by name (--sets), and so does SpokenWords4k: the demo's spoken-word clips shipped with ssmts
(ssmts/data/spoken_commands_mini, training and test splits, voice-disjoint) resampled to 4 kHz as
`ssmts demo` trains on them, 1 x 4000, 10 classes. Official train/test splits except digits.
Unequal-length sets are lists of (channels, length_i) float64 arrays, the others (n, channels, length) float64 arrays.

Protocols (one model per row; the same model seed --seed in every fit):
  test (default)   fit on the training split, score on the test split (one fit per row);
  --resamples R    R random resamples of the training split only, 70% fit / 30% scored,
                   stratified by class (classes with a single member stay in the fit part; where
                   the classes cannot all be on both sides, a plain random split), ShuffleSplit
                   for regression;
  --cv K           K-fold cross-validation on the training split only (stratified for
                   classification); --repeats S repeats it with S shufflings (seeds seed..seed+S-1).
The development protocols (--resamples, --cv) are what the defaults are chosen on
(docs/results/classification.md); test splits only report. Rows show the mean +- (sample) standard
deviation of the score over the resamples/folds and the mean fit and predict seconds.

Cost: with MiniRocket among the rows, a last line gives every other model's fit + predict seconds
over MiniRocket's, summed over the sets (and the largest ratio of one set), with the threads and the
machine's load average. Before the rows, every model fits and predicts once on a few series of the
first set, untimed, so that no row holds a first compilation (--no-warmup times them too). --busy N
runs N processes that keep a core busy each beside the rows: times beside a busy machine.

--regression runs SSMRegressor and SSMFeatureRegressor on the regression sets, --resamples or --cv
only, against MiniRocket + RidgeCV, 1-NN and the training mean; the score is the RMSE over the
standard deviation of the fit part's targets (lower is better; the mean scores about 1).

--params '{"name": value}' overrides parameters of the "ssm" row, --feature-params those of the
"features" row; --models picks rows
(MODEL_FACTORIES); --json PATH writes every score and fit time (model, set, resample, score,
seconds) so that results pages can be regenerated.
--threads N sets torch's intra-op threads and BLAS's (default 1, so that fit times compare between rows);
it is a cap: the estimators' fits may use fewer while other processes keep cores busy. MiniRocket
runs on numba with N threads too (sktime's n_jobs=N; its default is 1), and MultiRocket-Hydra and
DrCIF with aeon's n_jobs=N.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Callable

import numpy as np
from threadpoolctl import threadpool_limits

from ssmts.baselines import MiniRocketRidge

CLASSIFICATION_SETS = (
    "ArrowHead",
    "ACSF1",
    "PickupGestureWiimoteZ",
    "PickupGestureWiimoteZ_eq",
    "digits",
    "ItalyPowerDemand",
    "GunPoint",
)
REGRESSION_SETS = ("CardanoSentiment", "Covid3Month", "Tecator")

# Share of the training split scored in each --resamples resample.
RESAMPLE_TEST_SIZE = 0.3


def load_classification(name: str):
    """(X_train, y_train, X_test, y_test) of a development set; X: (n, channels, length) float64,
    or a list of (channels, length_i) float64 arrays when the lengths differ."""
    if name == "digits":
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        digits = load_digits()
        X = digits.data[:, None, :].astype(np.float64)
        X_train, X_test, y_train, y_test = train_test_split(
            X, digits.target, test_size=0.5, stratify=digits.target, random_state=0
        )
        return X_train, y_train, X_test, y_test
    if name == "SpokenWords4k":
        return _spoken_words(4000)
    return _load_shipped(name)


def _spoken_words(rate: int):
    """The shipped spoken-word clips at `rate` (band-limited from 16 kHz, as the demo makes them)."""
    from ssmts.data.speech import SPEECH_COMMANDS_RATE, default_spoken_commands_dir, load_speech_commands
    from ssmts.nn.resampling import change_rate

    data = load_speech_commands(default_spoken_commands_dir())
    to_rate = lambda X: change_rate(X, SPEECH_COMMANDS_RATE, rate, method="resample").astype(np.float64)  # noqa: E731
    return to_rate(data.train.X), np.asarray(data.train.y), to_rate(data.test.X), np.asarray(data.test.y)


def load_regression(name: str):
    X_train, y_train, X_test, y_test = _load_shipped(name)  # sktime reads the targets as strings
    return X_train, y_train.astype(np.float64), X_test, y_test.astype(np.float64)


def _data_dir(package: str) -> str | None:
    """The datasets/data folder of an installed package (without importing it), or None."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(list(spec.submodule_search_locations)[0], "datasets", "data")


def _shipped_location(name: str) -> tuple[str, str] | None:
    """("sktime", "") or ("aeon", its folder) for a set shipped inside sktime (first) or aeon, else None:
    aeon keeps its sets in aeon/datasets/data/<name>/<name>_TRAIN.ts and _TEST.ts, the equal-length
    version of a set as <name>_eq_TRAIN.ts in the same folder."""
    sktime_dir = _data_dir("sktime")
    if sktime_dir and os.path.isdir(os.path.join(sktime_dir, name)):
        return "sktime", ""
    aeon_dir = _data_dir("aeon")
    folder = os.path.join(aeon_dir or "", name[:-3] if name.endswith("_eq") else name)
    if aeon_dir and os.path.isfile(os.path.join(folder, f"{name}_TRAIN.ts")):
        return "aeon", folder
    return None


def _not_shipped(name: str) -> str:
    return (
        f"{name!r} ships neither with sktime nor with aeon (pip install 'ssmts[bench]' for aeon's "
        "sets); this benchmark downloads nothing"
    )


def _load_shipped(name: str):
    """A set shipped inside sktime or aeon (`_shipped_location`)."""
    where = _shipped_location(name)
    if where is None:
        raise ValueError(_not_shipped(name))
    return _load_ucr(name) if where[0] == "sktime" else _load_aeon(where[1], name)


def _load_aeon(folder: str, name: str):
    from aeon.datasets import load_from_ts_file

    def load(split):
        X, y = load_from_ts_file(os.path.join(folder, f"{name}_{split}.ts"))
        if isinstance(X, np.ndarray):
            return X.astype(np.float64), y
        return [np.asarray(series, dtype=np.float64) for series in X], y

    return (*load("TRAIN"), *load("TEST"))


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
            return [
                np.stack([np.asarray(frame.iloc[i, c], dtype=np.float64) for c in range(frame.shape[1])])
                for i in range(len(frame))
            ], y

    return (*load("train"), *load("test"))


# The rows: a factory (regression, params, seed) -> an estimator with fit(X, y) and predict(X), X
# as the loaders return it. params is the --params dict (the "ssm" row's overrides; rows that do
# not take them ignore them). A new row is one entry here, plus its name in the default rows below
# where it should run without --models.
def _ssm(regression: bool, params: dict, seed: int):
    from ssmts.estimators import SSMClassifier, SSMRegressor

    return (SSMRegressor if regression else SSMClassifier)(**dict(params, device="cpu", random_state=seed))


def _features(regression: bool, params: dict, seed: int):
    from ssmts.estimators import SSMFeatureClassifier, SSMFeatureRegressor

    return (SSMFeatureRegressor if regression else SSMFeatureClassifier)(
        **dict(params, device="cpu", random_state=seed)
    )


def _one_nn(regression: bool, params: dict, seed: int):
    from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

    return _Flat((KNeighborsRegressor if regression else KNeighborsClassifier)(n_neighbors=1))


def _mean(regression: bool, params: dict, seed: int):
    from sklearn.dummy import DummyClassifier, DummyRegressor

    return _Flat(DummyRegressor() if regression else DummyClassifier())  # the mean, or the majority class


def _threads() -> int:
    """The thread count of every row: torch's, which main sets from --threads."""
    import torch

    return torch.get_num_threads()


def _hydra_in_batches() -> None:
    """aeon's HydraTransformer convolves every series at once: (n, 512, length) floats per dilation,
    24 GB for 3,000 clips of 4,000 steps. The Hydra reference transforms 256 series at a time (the
    batch method aeon keeps); the features are the same, series by series."""
    import torch
    from aeon.transformations.collection.convolution_based._hydra import HydraTransformer

    if hasattr(HydraTransformer._transform, "aeon_original"):
        return
    original = HydraTransformer._transform

    def _transform(self, X, y=None):
        if self.output_type == "dataframe":
            return original(self, X, y)
        transformed = self._hydra.batch(torch.tensor(X).float())
        return transformed.detach().numpy() if self.output_type == "numpy" else transformed

    _transform.aeon_original = original  # type: ignore[attr-defined]
    HydraTransformer._transform = _transform


def _multirocket_hydra(regression: bool, params: dict, seed: int):
    from aeon.classification.convolution_based import MultiRocketHydraClassifier
    from aeon.regression.convolution_based import MultiRocketHydraRegressor

    _hydra_in_batches()
    model = MultiRocketHydraRegressor if regression else MultiRocketHydraClassifier
    return _Padded(model(random_state=seed, n_jobs=_threads()))


def _drcif(regression: bool, params: dict, seed: int):
    from aeon.classification.interval_based import DrCIFClassifier
    from aeon.regression.interval_based import DrCIFRegressor

    return _Padded((DrCIFRegressor if regression else DrCIFClassifier)(random_state=seed, n_jobs=_threads()))


def quant_forest(regression: bool):
    """aeon's QUANT forest (200 extra-trees, a tenth of the features a split; entropy for classes), on
    the row's threads (aeon builds it on one)."""
    from sklearn.ensemble import ExtraTreesClassifier, ExtraTreesRegressor

    if regression:
        return ExtraTreesRegressor(n_estimators=200, max_features=0.1, n_jobs=_threads())
    return ExtraTreesClassifier(n_estimators=200, max_features=0.1, criterion="entropy", n_jobs=_threads())


def _quant(regression: bool, params: dict, seed: int):
    """aeon's QUANT, its forest given the row's threads (quant_forest)."""
    from aeon.classification.interval_based import QUANTClassifier
    from aeon.regression.interval_based import QUANTRegressor

    model = QUANTRegressor if regression else QUANTClassifier
    return _Padded(model(estimator=quant_forest(regression), random_state=seed))


MODEL_FACTORIES: dict[str, Callable[[bool, dict, int], object]] = {
    "ssm": _ssm,
    "features": _features,
    # sktime's MiniRocket runs on one numba thread unless told otherwise
    "minirocket": lambda regression, params, seed: MiniRocketRidge(regression, seed, n_jobs=_threads()),
    "mr-hydra": _multirocket_hydra,
    "drcif": _drcif,
    "quant": _quant,
    "1nn": _one_nn,
    "mean": _mean,
}
# The rows run without --models.
MODELS = ("ssm", "features", "minirocket", "mr-hydra", "1nn")
REGRESSION_MODELS = ("ssm", "features", "minirocket", "mr-hydra", "1nn", "mean")
# The rows that take overrides, and the option that gives them.
PARAMS_OPTION = {"ssm": "params", "features": "feature_params"}


def make_model(kind: str, regression: bool, params: dict, seed: int):
    if kind not in MODEL_FACTORIES:
        raise ValueError(f"unknown model {kind!r}; choose among {sorted(MODEL_FACTORIES)}")
    return MODEL_FACTORIES[kind](regression, params, seed)


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


class _Padded(_Flat):
    """An aeon estimator of equal-length panels (n, channels, length): series of unequal lengths
    padded at the end with zeros to the longest training series (and cut to it), as UCR's
    equal-length copies of such sets are."""

    def _table(self, X):
        if isinstance(X, np.ndarray):
            return X
        return super()._table(X).reshape(len(X), X[0].shape[0], self.length)


def splits(X, y, folds: int, regression: bool, seed: int = 0):
    """K folds of (X, y): stratified for classification (plain K-fold where no class has K members)."""
    from sklearn.model_selection import KFold, StratifiedKFold

    if not regression:
        try:
            return list(StratifiedKFold(folds, shuffle=True, random_state=seed).split(X, y))
        except ValueError:
            pass
    return list(KFold(folds, shuffle=True, random_state=seed).split(X))


def cv_splits(X, y, folds: int, regression: bool, repeats: int = 1, seed: int = 0):
    """Repeated K-fold: the K folds of each of `repeats` shufflings (seeds seed, seed + 1, ...)."""
    return [split for repeat in range(repeats) for split in splits(X, y, folds, regression, seed + repeat)]


def resample_splits(y, resamples: int, regression: bool, seed: int = 0, test_size: float = RESAMPLE_TEST_SIZE):
    """(fit, held) indices of `resamples` random splits of a training split of len(y) series, test_size of
    them held out: stratified by class for classification, the members of single-member classes always
    in the fit part; a plain random split where the classes cannot all be on both sides."""
    from sklearn.model_selection import ShuffleSplit, StratifiedShuffleSplit

    y = np.asarray(y)
    if not regression:
        classes, counts = np.unique(y, return_counts=True)
        singles = np.flatnonzero(np.isin(y, classes[counts < 2]))
        rest = np.flatnonzero(~np.isin(y, classes[counts < 2]))
        try:
            parts = StratifiedShuffleSplit(resamples, test_size=test_size, random_state=seed).split(
                np.zeros(len(rest)), y[rest]
            )
            return [(np.sort(np.concatenate([rest[fit], singles])), np.sort(rest[held])) for fit, held in parts]
        except ValueError:  # too few series for every class on both sides
            pass
    parts = ShuffleSplit(resamples, test_size=test_size, random_state=seed).split(np.zeros(len(y)))
    return [(np.sort(fit), np.sort(held)) for fit, held in parts]


def score(y_true, y_pred, regression: bool, y_train=None) -> float:
    """Accuracy, or for regression the RMSE relative to the training targets' standard deviation
    (scale-free, so that sets can be averaged; the training mean scores about 1)."""
    if regression:
        rmse = np.sqrt(np.mean((np.asarray(y_true, dtype=float) - np.asarray(y_pred, dtype=float)) ** 2))
        return float(rmse / np.std(np.asarray(y_train, dtype=float)))
    return float(np.mean(np.asarray(y_true) == np.asarray(y_pred)))


def run_one(kind: str, X_train, y_train, X_test, y_test, *, regression: bool, params: dict, seed: int):
    """(score on the test data, fit seconds, predict seconds)."""
    model = make_model(kind, regression, params, seed)
    started = time.perf_counter()
    model.fit(X_train, y_train)
    fitted = time.perf_counter()
    predictions = model.predict(X_test)
    return score(y_test, predictions, regression, y_train), fitted - started, time.perf_counter() - fitted


def warm_up(kinds, data: tuple, *, regression: bool, params: dict, seed: int, size: int = 30) -> None:
    """Fit and predict every model once on the first `size` training series of `data` (untimed), so
    that no row's time holds a first compilation (MiniRocket's numba, the features' compiled pass) or a
    first import."""
    X_train, y_train = data[0], np.asarray(data[1])
    rows = np.arange(min(size, len(y_train)))
    if not regression and len(np.unique(y_train[rows])) < 2:
        rows = np.concatenate([np.flatnonzero(y_train == label)[:3] for label in np.unique(y_train)])
    for kind in kinds:
        X = _rows(X_train, rows)
        run_one(kind, X, y_train[rows], X, y_train[rows], regression=regression, params=params.get(kind, {}), seed=seed)


def cost_ratios(table: dict, sets, baseline: str = "minirocket") -> dict[str, tuple[float, float]]:
    """{model: (its fit + predict seconds over `baseline`'s, summed over the sets; the largest ratio of
    one set)} of every other model of `table` ({model: {set: [(score, fit s, predict s)]}})."""

    def seconds(kind, name):
        return float(np.mean([fit + predict for _, fit, predict in table[kind][name]]))

    base = {name: seconds(baseline, name) for name in sets}
    return {
        kind: (
            sum(seconds(kind, name) for name in sets) / sum(base.values()),
            max(seconds(kind, name) / base[name] for name in sets),
        )
        for kind in table
        if kind != baseline
    }


COST_GOAL = 2.0
"""The features' goal: fit + predict at most this multiple of MiniRocket's (summed over the sets)."""
BUSY_COST_GOAL = 3.0
"""The same goal beside busy processes (--busy), which slow the features' threads more than MiniRocket's."""


def goal_lines(table: dict, sets, regression: bool, busy: int = 0) -> list[str]:
    """The features' goals, each with "met" or "NOT met", where `table` ({model: {set: [(score, fit s,
    predict s)]}}) holds the rows they compare: classification, the mean accuracy over the sets at or
    above MultiRocket-Hydra's; regression, the relative RMSE at or below DrCIF's on every set; both,
    fit + predict at most COST_GOAL times MiniRocket's (BUSY_COST_GOAL beside `busy` > 0 busy processes)."""
    if "features" not in table:
        return []

    def mean_score(kind, name):
        return summary(table[kind][name])[0]

    def verdict(met: bool) -> str:
        return "met" if met else "NOT met"

    lines = []
    if regression and "drcif" in table:
        for name in sets:
            ours, theirs = mean_score("features", name), mean_score("drcif", name)
            met = verdict(ours <= theirs)
            lines.append(f"{name}: relative RMSE {ours:.3f} at or below DrCIF's {theirs:.3f}: {met}")
    if not regression and "mr-hydra" in table:
        ours = float(np.mean([mean_score("features", name) for name in sets]))
        theirs = float(np.mean([mean_score("mr-hydra", name) for name in sets]))
        lines.append(
            f"mean accuracy {ours:.3f} at or above MultiRocket-Hydra's {theirs:.3f}: {verdict(ours >= theirs)}"
        )
    if "minirocket" in table:
        overall, _ = cost_ratios(table, sets)["features"]
        goal, where = (BUSY_COST_GOAL, f" beside {busy} busy process(es)") if busy else (COST_GOAL, "")
        lines.append(f"fit + predict {overall:.2f}x MiniRocket's, at most {goal:g}x{where}: {verdict(overall <= goal)}")
    return lines


def _rows(X, index):
    return X[index] if isinstance(X, np.ndarray) else [X[i] for i in index]


def evaluate(kind: str, data: tuple, *, regression: bool, folds: list | None, params: dict, seed: int):
    """[(score, fit seconds, predict seconds)] of one model on one set, data = (X_train, y_train, X_test, y_test) as the
    loaders return it: one pair on the test split (folds None), else one per (fit, held) index pair of
    the training split."""
    X_train, y_train, X_test, y_test = data
    if folds is None:
        return [run_one(kind, X_train, y_train, X_test, y_test, regression=regression, params=params, seed=seed)]
    y_train = np.asarray(y_train)
    return [
        run_one(
            kind,
            _rows(X_train, fit),
            y_train[fit],
            _rows(X_train, held),
            y_train[held],
            regression=regression,
            params=params,
            seed=seed,
        )
        for fit, held in folds
    ]


def summary(results) -> tuple[float, float, float, float]:
    """(mean score, sample standard deviation of the score (0 for one fit), mean fit seconds, mean
    predict seconds)."""
    scores = np.array([r[0] for r in results])
    return (
        float(scores.mean()),
        float(scores.std(ddof=1)) if len(scores) > 1 else 0.0,
        float(np.mean([r[1] for r in results])),
        float(np.mean([r[2] for r in results])),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ssmts.bench classify", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sets", nargs="+", default=None, help="development sets (default: all of the task)")
    parser.add_argument(
        "--models",
        nargs="+",
        default=None,
        help=f"rows among {sorted(MODEL_FACTORIES)} (default {MODELS}; with --regression {REGRESSION_MODELS})",
    )
    parser.add_argument("--cv", type=int, default=None, metavar="K", help="K-fold CV on the training split")
    parser.add_argument("--repeats", type=int, default=1, metavar="S", help="repeat --cv with S shufflings")
    parser.add_argument(
        "--resamples",
        type=int,
        default=None,
        metavar="R",
        help=f"R random resamples of the training split, {round(100 * RESAMPLE_TEST_SIZE)}%% "
        "of it held out (stratified for classification)",
    )
    parser.add_argument(
        "--regression", action="store_true", help="SSMRegressor on the regression sets (with --cv or --resamples)"
    )
    parser.add_argument("--params", default="{}", help="JSON of parameter overrides of the ssm row")
    parser.add_argument(
        "--feature-params",
        default="{}",
        help="JSON of parameter overrides of the features row (SSMFeatureClassifier/Regressor)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the models and of the resamples/folds")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch's (and numba's) threads, a cap (default 1: fit times compare between rows)",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="run N processes that keep a core busy each beside the rows (times under load; default 0)",
    )
    parser.add_argument(
        "--no-warmup",
        action="store_true",
        help="time each model's first fit too (by default every model first fits a few series untimed, so "
        "that no row holds a first compilation)",
    )
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument(
        "--json",
        default=None,
        metavar="PATH",
        help="write every score and fit time (model, set, resample, score, seconds) to PATH",
    )
    args = parser.parse_args(argv)

    if args.cv and args.resamples:
        parser.error("--cv and --resamples are two protocols: pick one")
    if args.cv is not None and args.cv < 2:
        parser.error("--cv K needs K >= 2")
    if args.resamples is not None and args.resamples < 1:
        parser.error("--resamples R needs R >= 1")
    if args.repeats < 1 or (args.repeats > 1 and not args.cv):
        parser.error("--repeats S (S >= 1) repeats --cv K")
    if args.regression and not (args.cv or args.resamples):
        parser.error("--regression needs --cv K or --resamples R: the regression sets are for development only")
    models = args.models or (REGRESSION_MODELS if args.regression else MODELS)
    unknown = [kind for kind in models if kind not in MODEL_FACTORIES]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose among {sorted(MODEL_FACTORIES)}")
    if args.threads < 1:
        parser.error(f"--threads must be an integer >= 1, got {args.threads}")
    if args.busy < 0:
        parser.error(f"--busy must be an integer >= 0, got {args.busy}")
    parsed = {}
    for option in ("params", *PARAMS_OPTION.values()):
        flag = "--" + option.replace("_", "-")
        try:
            parsed[option] = json.loads(getattr(args, option))
        except json.JSONDecodeError as error:
            parser.error(f"{flag} is not valid JSON: {error}")
        if not isinstance(parsed[option], dict):
            parser.error(f"{flag} must be a JSON object of parameters, got {getattr(args, option)!r}")
    params = parsed["params"]
    overrides = {kind: parsed[option] for kind, option in PARAMS_OPTION.items()}
    # the sets last: what is missing depends on what is installed, and the options' own errors
    # should read the same everywhere
    sets = args.sets or (REGRESSION_SETS if args.regression else CLASSIFICATION_SETS)
    for name in sets:  # before any row runs, as for the models
        if name not in ("digits", "SpokenWords4k") and _shipped_location(name) is None:
            parser.error(_not_shipped(name))

    # MiniRocket runs on numba: its default OpenMP layer leaves threads spinning after each call,
    # which slows every later torch fit of this process several-fold; the workqueue layer does not.
    # (No NUMBA_NUM_THREADS: it caps numba's pool for the whole process, so a later row asking for more
    # threads would fail; each row's n_jobs sets the threads it uses.)
    os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")
    import torch

    torch.set_num_threads(args.threads)  # the estimators' fits use at most this many
    metric = "relative RMSE" if args.regression else "accuracy"
    if args.cv:
        protocol = f"{args.cv}-fold CV on the training split"
        protocol += f", {args.repeats} repeats" if args.repeats > 1 else ""
    elif args.resamples:
        protocol = (
            f"{args.resamples} {'random' if args.regression else 'stratified'} resamples of the training "
            f"split, {RESAMPLE_TEST_SIZE:.0%} held out"
        )
    else:
        protocol = "test split"
    print(
        f"# {metric} ({protocol}), fit seconds at {args.threads} thread(s); overrides: "
        + "; ".join(f"{kind} {overrides[kind] or 'none'}" for kind in PARAMS_OPTION)
    )
    table: dict[str, dict[str, list[tuple[float, float, float]]]] = {}
    records: list[dict] = []
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        if not args.no_warmup:
            first = (load_regression if args.regression else load_classification)(sets[0])
            warm_up(models, first, regression=args.regression, params=overrides, seed=args.seed)
        loads = [os.getloadavg()[0]]
        with threadpool_limits(limits=args.threads, user_api="blas"):  # every row's BLAS (the ridges) too
            _run_rows(args, sets, models, overrides, params, metric, protocol, table, records)
        loads.append(os.getloadavg()[0])
    finally:
        for process in busy:
            process.kill()
            process.wait()
    load = f"{args.threads} thread(s), {args.busy} busy process(es), load average {loads[0]:.1f} -> {loads[1]:.1f}"
    _print_table(table, sets, metric, args.markdown)
    if "minirocket" in table and len(table) > 1:
        print(f"# fit + predict seconds against MiniRocket's (summed over the sets; the largest set's ratio), {load}")
        for kind, (overall, worst) in cost_ratios(table, sets).items():
            print(f"{kind:11s} {overall:6.2f}x  (largest {worst:.2f}x)")
    goals = goal_lines(table, sets, args.regression, args.busy)
    if goals:
        print(f"# the features' goals ({protocol}; {load})")
        for line in goals:
            print(line)
    return 0


def _run_rows(args, sets, models, overrides, params, metric, protocol, table, records) -> None:
    """Every (set, model) row: scored, timed, printed, kept in `table` and `records` (and in --json)."""
    for name in sets:
        data = (load_regression if args.regression else load_classification)(name)
        X_train, y_train = data[0], data[1]
        if args.cv:
            folds = cv_splits(X_train, y_train, args.cv, args.regression, args.repeats, args.seed)
        elif args.resamples:
            folds = resample_splits(y_train, args.resamples, args.regression, args.seed)
        else:
            folds = None
        for kind in models:
            results = evaluate(
                kind, data, regression=args.regression, folds=folds, params=overrides.get(kind, {}), seed=args.seed
            )
            table.setdefault(kind, {})[name] = results
            records += [
                dict(model=kind, set=name, resample=i, score=s, seconds=t, predict_seconds=p)
                for i, (s, t, p) in enumerate(results)
            ]
            mean, std, seconds, predict_seconds = summary(results)
            spread = f" ± {std:.4f} over {len(results)}" if len(results) > 1 else ""
            print(
                f"{name:24s} {kind:11s} {metric} {mean:.4f}{spread}  fit {seconds:7.2f} s  "
                f"predict {predict_seconds:6.2f} s",
                flush=True,
            )
            if args.json:  # after every row, so that an interrupted run keeps what it measured
                _write_json(
                    args.json,
                    dict(
                        metric=metric,
                        protocol=protocol,
                        regression=args.regression,
                        cv=args.cv,
                        repeats=args.repeats,
                        resamples=args.resamples,
                        test_size=RESAMPLE_TEST_SIZE if args.resamples else None,
                        seed=args.seed,
                        threads=args.threads,
                        params=params,
                        feature_params=overrides["features"],
                        sets=list(sets),
                        models=list(models),
                        results=records,
                    ),
                )


def _write_json(path: str, payload: dict) -> None:
    with open(path, "w") as f:
        json.dump(payload, f, indent=1)


def _print_table(table, sets, metric, markdown: bool) -> None:
    """One row per model: mean ± std of the score per set (one fit: the score alone) with its mean fit
    seconds, then the mean of the sets' mean scores and of their fit seconds."""
    header = ["model"] + list(sets) + [f"mean {metric}", "mean fit s"]
    rows = []
    for kind, by_set in table.items():
        summaries = [summary(by_set[name]) for name in sets]
        cells = [
            (f"{m:.3f} ± {s:.3f}" if len(by_set[name]) > 1 else f"{m:.3f}") + f" ({t:.1f} s)"
            for name, (m, s, t, _) in zip(sets, summaries)
        ]
        rows.append(
            [kind]
            + cells
            + [f"{np.mean([m for m, _, _, _ in summaries]):.3f}", f"{np.mean([t for _, _, t, _ in summaries]):.1f}"]
        )
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
