"""SSMFeatureClassifier and SSMFeatureRegressor: SSMs at many time scales and a ridge read-out
(ssmts.nn.FeatureReadout): a fit takes seconds where a network takes minutes. With
training_steps > 0 the same network is trained from the ridge solution, the untrained start
competing on validation data with every epoch. Fitted with a sample_rate, the ridge also reads
the training series at half that rate, which predict(X, sample_rate=...) may then meet."""

from __future__ import annotations

import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from .._warnings import caller_stacklevel
from ..nn import FeatureReadout, log_spaced_steps, scaled_delta
from ..training import (
    EarlyStopping,
    LazyRows,
    SequenceData,
    TrainerConfig,
    fit_model,
    holdout_indices,
    predict_batches,
    resolve_device,
    seed_from,
)
from ..training.config import with_params_doc
from ..training.objectives import accuracy_of_logits, mse_loss, negative_mse, weighted_cross_entropy
from ..training.params import FeatureModelParams, FeatureTransformParams
from ._base import ExtrapolationWarning, SequenceEstimatorMixin, require_y, transactional
from ._input import PreparedInput
from ._ridge import GramRidgeCV, TallRidgeCV
from .classification import RateClassifierMixin, check_labels, label_encoder, restored_label_encoder
from .regression import RateRegressorMixin, check_targets

RIDGE_ALPHAS = np.logspace(-3, 6, 19)
"""Penalties the ridge read-out chooses from by efficient leave-one-out: MiniRocket's grid (1e-3 to 1e3)
extended to 1e6, since with thousands of features and tens of series the leave-one-out optimum lies
beyond 1e3 where the targets carry little signal (it did on every fold of CardanoSentiment and
Covid3Month, whose relative RMSE fell from 1.125 to 1.057 and from 1.000 to 0.948 under 5-fold CV x 2
on their training splits; the development classification sets moved by 0.001)."""

REGRESSION_PENALTY_STANDARD_ERRORS = 0.25
"""The regressors' ridge keeps the largest penalty whose mean leave-one-out error is within this many
standard errors of the lowest (the classifiers' keeps the lowest). Chosen by 5-fold CV x 2 on the
training splits of CardanoSentiment, Covid3Month and Tecator among 0, 0.25, 0.5 and 1: mean relative
RMSE 0.686, 0.680, 0.685, 0.691 (the sets barely tell them apart; 0.25 is the one below DrCIF on all
three). On the classification sets it cost 0.5 points (0.871 -> 0.866), so they keep the lowest."""

EXTRAPOLATION_SPREADS = 1.0
"""A prediction warns when clipping its series' features to the training range moves it by more than
this many standard deviations of the training predictions: the training series themselves do not, a
level shift of one training range does (tests/hardening/test_extrapolation.py; docs/guides/sklearn.md)."""

ENVELOPE_WEIGHT = 4.0
"""The weight of each envelope feature (`envelope=True`) in the ridge, against 1 for each response's PPV,
mean and maximum, once standardized, unless the fit's leave-one-out errors choose another of
ENVELOPE_WEIGHTS: a scale and channel have d_state / 2 x 4 of them against the responses' n_kernels x
(n_biases + 2). Chosen by 5-fold CV x 5 on the training splits of the seven development sets and of a set
of spoken digits (espeak-ng, 400 clips at 4 kHz), by the mean accuracy over the eight: 0.805 without the
envelopes, 0.827 at weight 2, 0.832 at 4 (the spoken digits 0.350 -> 0.488 / 0.526, the seven others
0.870 -> 0.875 / 0.876). Without the modulation statistic, 0.824 / 0.826 (the RMS), 0.824 / 0.824 / 0.821 at
weights 2 / 4 / 8 (the mean of |x| in place of the RMS)."""

ENVELOPE_WEIGHTS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
"""The envelope weights every fit chooses from (GramRidgeCV), by the ridge's leave-one-out errors: the one of
the lowest mean error, if its rows' errors beat those at ENVELOPE_WEIGHT by more than
ENVELOPE_WEIGHT_STANDARD_ERRORS standard errors of the paired differences, else ENVELOPE_WEIGHT. Chosen by
5-fold CV x 5 on the training splits of the seven development sets and the spoken digits, and on two sets
of spoken words made as the demo's clips are (espeak-ng, voice-disjoint training and test splits): the
seven sets 0.8758 at weight 4 and 0.8760 with the choice, the three spoken sets 0.747 and 0.776 (a fixed
weight of 16: 0.840 and 0.774; of 32: 0.826 and 0.776)."""

ENVELOPE_WEIGHT_STANDARD_ERRORS = 1.0
"""How many standard errors (of the paired leave-one-out errors) a weight of ENVELOPE_WEIGHTS must beat
ENVELOPE_WEIGHT by to replace it: 0, 1 and 2 scored within 0.1 points of each other on the development sets."""

ENVELOPE_CHOICE_ROWS = 512
"""Rows the envelope weight is chosen on (a random subset beyond): a decomposition of their Gram matrix a
weight, O(rows^3) (0.02 s at 512 rows, 0.08 s at 720, one thread), where the fit at the weight kept
decomposes the Gram matrix of every row once (or, with more rows than features, the covariance)."""

SHORTEST_MEMORY = 4.0
"""Steps remembered by the fastest time scale (the slowest remembers the longest training series)."""

HALF_RATE_MIN_LENGTH = 4
"""Time points every training series needs for the read-out to read it at half the rate too: x[1::2]
then keeps the 2 that a first difference needs."""


class _FeatureEstimator(SequenceEstimatorMixin):
    """The fit of the faces: featurize the training series and, for the classifier and the regressor (whose
    parameters are FeatureModelParams), fit a ridge on the standardized features and fold the
    standardization into the network's linear read-out."""

    _saved_attributes = SequenceEstimatorMixin._saved_attributes + (
        "n_features_out_",
        "normalize_scores_",
        "alpha_",
        "readout_rates_",
        "envelope_weight_",
    )

    def _new_network(self, d_output: int) -> FeatureReadout:
        steps = log_spaced_steps(self.n_timepoints_in_, self.n_scales, SHORTEST_MEMORY)
        return FeatureReadout(
            self._network_channels,
            steps,
            d_output,
            difference=self.difference,
            backward=self.backward,
            envelope=self.envelope,
            n_kernels=self.n_kernels,
            d_state=self.d_state,
            n_biases=self.n_biases,
            seed=self._seed_,
        )

    def _rebuild_network(self) -> FeatureReadout:
        return self._new_network(self._d_output)

    @property
    def _d_output(self) -> int:
        """Outputs of the read-out."""
        raise NotImplementedError

    def _start_fit(self, X, y=None, needs_y: bool = True) -> PreparedInput:
        """Parameters checked, seed drawn, X read (its scaling statistics fitted); y required unless not needs_y."""
        self.validate_params()
        self._device = resolve_device(self.device)
        self._seed_ = seed_from(self.random_state)
        if needs_y:
            require_y(self, y)
        data = self._prepare_fit_input(X)
        self._check_differences(data)
        return data

    def _check_differences(self, data: PreparedInput) -> None:
        """With difference=True, every series of X must have the 2 time points a first difference needs."""
        short = np.flatnonzero(np.asarray(data.lengths) < 2) if self.difference else []
        if len(short):
            raise ValueError(
                f"series {int(short[0])} of X has {int(data.lengths[short[0]])} time point(s) ({len(short)} series "
                f"shorter than 2{'; n_features = 1 as a 2D X' if data.ndim == 2 and not data.ragged else ''}): "
                "this model reads first differences "
                "(difference=True), which need series of at least 2 time points; set difference=False"
            )

    def _featurize_training_data(self, data: PreparedInput) -> tuple[FeatureReadout, np.ndarray]:
        """A network with its biases set on the training series, and their features (n, n_features) float64."""
        network = self._fitted_bank(data)
        return network, self._features(network, data)

    def _fitted_bank(self, data: PreparedInput) -> FeatureReadout:
        """A network with its biases set on the training series."""
        x = self._scaled(data)
        lengths = data.lengths

        def series(i: int) -> torch.Tensor:
            row = x[[i]]  # a list index: memory-mapped rows (LazyRows) take no slices
            row = row.materialize() if isinstance(row, LazyRows) else row
            return row[0, :, : int(lengths[i])]

        network = self._new_network(1)
        network.fit_biases(series, len(lengths), seed=self._seed_)
        self.train_sample_rate_ = self.sample_rate
        return network

    def _features(self, network: FeatureReadout, data: PreparedInput, half_rate: bool = False) -> np.ndarray:
        """(n, n_features) float64 features of the training series; with half_rate (2n, n_features), those
        of the series at half the rate, x[::2] then x[1::2] (both ways to keep every other step), read
        with Delta doubled."""

        def forward(model, u, mask):
            if not half_rate:
                return model.features(u, mask)
            halves = [(u[..., p::2], None if mask is None else mask[..., p::2]) for p in (0, 1)]
            return torch.cat([model.features(x, m) for x, m in halves], 1)

        what = "features" + (" at half the rate" if half_rate else "")
        with scaled_delta(network, 2.0 if half_rate else 1.0), self._progress(len(data.lengths), what) as update:
            features = predict_batches(
                network,
                SequenceData(self._scaled(data), mask=data.mask, crop_padding=True),
                self.batch_size,
                self._device,
                forward=forward,
                progress=update,
            )
        network.cpu()
        features = features.double().numpy()
        if half_rate:  # (n, 2F): the rows of x[::2], then those of x[1::2]
            return np.concatenate(np.split(features, 2, axis=1))
        self.n_features_out_ = int(features.shape[1])
        return features

    def _readout_rates(self, data: PreparedInput) -> tuple[float, ...]:
        """The rates (Hz) the read-out reads the training series at: the training rate and half of it,
        fitted with a sample_rate and series of HALF_RATE_MIN_LENGTH points or more; () without a rate."""
        if self.train_sample_rate_ is None:
            return ()
        rate = float(self.train_sample_rate_)
        return (rate, rate / 2) if min(data.lengths) >= HALF_RATE_MIN_LENGTH else (rate,)

    def _readout_rows(
        self, network: FeatureReadout, data: PreparedInput, features: np.ndarray, targets: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(rows, targets) the ridge is fitted on: the training series' features (n, n_features) and, at
        half the rate (readout_rates_), theirs at that rate after them (3n rows). The fastest time scales
        do not carry over to half the rate (the band above its Nyquist frequency is gone, and the modes
        there answer quasi-statically), so a ridge fitted at the training rate alone leans on features
        that change there; seeing both, it leans on what both share. The penalty's leave-one-out leaves
        out one row, not a series with its copies, which favours small penalties; on the development
        clips the accuracy moved by less than 4 points over the whole grid of penalties."""
        if len(self.readout_rates_) < 2:
            return features, targets
        rows = np.concatenate([features, self._features(network, data, half_rate=True)])
        return rows, np.concatenate([targets] * 3)

    def _fit_readout(self, data: PreparedInput, targets: np.ndarray, objective: str) -> None:
        """Featurize, fit the ridge (penalty by leave-one-out) on the standardized features (with a
        sample_rate, at half the rate too: _readout_rows) and set model_; with normalize="auto", for
        "channel" and "series" scaling both, keeping the one whose ridge has the better leave-one-out
        score (normalize_scores_). With training_steps > 0, then train the network from there (_train)
        and refit the ridge on all the data."""
        candidates = ("channel", "series") if self.normalize == "auto" else (self.normalize,)
        fits, scores = [], {}
        for normalization in candidates:
            self.normalization_ = normalization
            network, features = self._featurize_training_data(data)
            self.readout_rates_ = self._readout_rates(data)
            rows, row_targets = self._readout_rows(network, data, features, targets)
            ridge, mean, scale = _fit_ridge(objective, rows, row_targets, *_prior(network), self.verbose, self._seed_)
            scores[normalization] = float(np.mean(ridge.best_score_))
            fits.append((scores[normalization], normalization, network, features, rows, ridge, mean, scale))
        _, self.normalization_, network, features, rows, ridge, mean, scale = max(fits, key=lambda fit: fit[0])
        self.normalize_scores_ = scores
        self.history_, self.n_iter_, self.best_epoch_ = [], 0, 0
        # The network trains at the training rate; the ridge on top is then refitted as above.
        if self.training_steps and self._train(network, data, features, targets, objective):
            rows, row_targets = self._readout_rows(network, data, self._features(network, data), targets)
            ridge, mean, scale = _fit_ridge(objective, rows, row_targets, *_prior(network), self.verbose, self._seed_)
        # a regressor's 2-d targets: a penalty each (k,), as scikit-learn's RidgeCV(alpha_per_target=True)
        several = np.ndim(ridge.alpha_) == 1 and not getattr(self, "_y_is_1d", True)
        self.alpha_ = np.asarray(ridge.alpha_, dtype=np.float64) if several else float(np.ravel(ridge.alpha_)[0])
        self.envelope_weight_ = ridge.envelope_weight_
        self._set_readout(network, ridge.coef_, ridge.intercept_, mean, scale)
        self.model_.set_training_range(torch.from_numpy(rows).float())  # the features were float32

    def _train(self, network: FeatureReadout, data: PreparedInput, features, targets, objective: str) -> bool:
        """Train the network (bank and read-out) from the ridge solution on the training data less a
        validation hold-out, through the one fit path, the start competing with every epoch on the
        hold-out. Returns whether an epoch beat the start (the network then holds its weights)."""
        classification = objective == "classification"
        kept, held_out = holdout_indices(
            len(targets), self.validation_fraction, self._seed_, targets if classification else None
        )
        # the start's read-out has an output for every class, also one whose samples were all held out
        classes = np.arange(len(self.classes_)) if classification else None
        ridge, mean, scale = _fit_ridge(
            objective, features[kept], targets[kept], *_prior(network), self.verbose, self._seed_, classes
        )
        self._set_readout(network, ridge.coef_, ridge.intercept_, mean, scale)
        y = torch.from_numpy(targets) if classification else torch.from_numpy(targets).float()
        whole = SequenceData(self._scaled(data), y, data.mask, crop_padding=True)
        train, val = whole.take(torch.from_numpy(kept)), whole.take(torch.from_numpy(held_out))
        if classification:
            start = predict_batches(network, train, self.batch_size, self._device)
            to_logits = _ridge_logits(start, train.y)
            cross_entropy = weighted_cross_entropy()

            def loss_fn(outputs, y, weight=None):
                return cross_entropy(to_logits(outputs), y, weight)

            def score_fn(outputs, y):
                return accuracy_of_logits(to_logits(outputs), y)
        else:
            spread = torch.from_numpy(targets[kept].std(axis=0).clip(1e-12)).float()

            def loss_fn(outputs, y, weight=None):  # in units of each target's spread
                return mse_loss(outputs / spread, y / spread, weight)

            def score_fn(outputs, y):  # the same units: the history's val_score is the standardized -MSE
                return negative_mse(outputs / spread, y / spread)

        stopping = EarlyStopping(self.n_iter_no_change, tol=0.0, from_start=True)
        config = TrainerConfig(
            max_epochs=1,
            min_steps=self.training_steps,
            max_steps=self.training_steps,
            batch_size=self.batch_size,
            lr=self.lr,
            lr_ssm=self.lr,
            weight_decay=0.0,  # decay would pull the ridge solution towards zero
            device=self.device,
            verbose=self.verbose,
        )
        network.train().requires_grad_(True)
        try:
            result = fit_model(
                network,
                train,
                loss_fn,
                config,
                seed=self._seed_,
                score_fn=score_fn,
                validation=val,
                early_stopping=stopping,
                description=type(self).__name__,
            )
        finally:
            network.requires_grad_(False).eval()
        self.history_, self.n_iter_, self.best_epoch_ = result.history, len(result.history), int(stopping.best_epoch)
        return self.best_epoch_ > 0

    def _set_readout(
        self, network: FeatureReadout, coef: np.ndarray, intercept: np.ndarray, mean: np.ndarray, scale: np.ndarray
    ) -> None:
        """model_: the network with readout(f) = coef . (f - mean) / scale + intercept."""
        coef = np.atleast_2d(coef) / scale
        readout = torch.nn.Linear(coef.shape[1], coef.shape[0], dtype=torch.float64)
        with torch.no_grad():
            readout.weight.copy_(torch.from_numpy(coef))
            readout.bias.copy_(torch.from_numpy(np.atleast_1d(intercept) - coef @ mean))
        network.readout = readout
        self.model_ = network.eval()

    def _export_outputs(self):
        raise NotImplementedError(
            f"{type(self).__name__} does not export: its features count the steps where a response exceeds "
            "a threshold, and the FFT of predict and an exported convolution round differently, so a step "
            "within rounding of a threshold would count in one and not the other (outputs off by a whole "
            "1/length of a feature). Save it with save() instead, or export SSMClassifier / SSMRegressor"
        )

    def _outputs(self, X, sample_rate) -> torch.Tensor:
        ratio = self._rate_ratio(sample_rate)
        data = self._prepare_predict_input(X, ratio)  # warns of X far beyond the training values
        self._check_differences(data)
        out = self._predict_outputs(data, ratio, lambda model, u, mask: model.forward_with_extrapolation(u, mask))
        below = self._below_fitted_rates(ratio)  # _predict_outputs warned of it
        if not below and self._far_outside_training(data) is None:  # one warning is enough
            self._warn_if_extrapolating(out[:, -1].double().numpy())
        return out[:, :-1]

    def _lowest_fitted_rate(self) -> float:
        """The lowest rate the read-out was fitted at (readout_rates_; files saved before it: the training rate)."""
        return min(getattr(self, "readout_rates_", (float(self.train_sample_rate_),)))

    def _modes_above_nyquist(self) -> tuple[int, int]:
        return self.model_.modes_above_nyquist()

    def _below_fitted_rates_consequence(self, lowest: float, above: int, modes: int) -> str:
        train = float(self.train_sample_rate_)
        return (
            f"the lowest rate its read-out was fitted at (the training rate {train:.6g}"
            + (" and half of it" if lowest < train else "")
            + f"): {above} of the {modes} modes of its SSMs lie above the Nyquist frequency of this rate and "
            "answer only quasi-statically, and the read-out never saw its features at this rate. Expect a lower "
            "accuracy than at the training rate: measure it on labelled data at this rate, or fit at a rate "
            "nearer to it"
        )

    def _warn_if_extrapolating(self, beyond: np.ndarray) -> None:
        """Smaller shifts than the channel check's still move a linear read-out of pooled responses
        far: warn of the rows whose outputs rest on features beyond the training range."""
        rows = np.flatnonzero(beyond > EXTRAPOLATION_SPREADS)
        if not len(rows):
            return
        shown = ", ".join(map(str, rows[:5])) + (f" and {len(rows) - 5} more" if len(rows) > 5 else "")
        warnings.warn(
            f"{type(self).__name__}: the predictions for {len(rows)} of {len(beyond)} series of X (rows {shown}) "
            "rest on features beyond the range of the training series: clipping those features to the training "
            f"range moves each of these predictions by more than {EXTRAPOLATION_SPREADS:g} spread of the training "
            f"predictions (up to {beyond.max():.3g}). The model extrapolates there, so these predictions are not "
            "to be trusted; check that X is on the scale of the training data (normalize='series' compares "
            "shapes only, if levels are a nuisance)",
            ExtrapolationWarning,
            stacklevel=caller_stacklevel(),
        )


def _ridge_logits(scores: torch.Tensor, y: torch.Tensor):
    """outputs -> logits (n, classes): the ridge's scores (n, classes), or for two classes its
    score (n, 1) as logits (-s/2, s/2), times the temperature under which the scores of the
    training series `scores` have the least cross-entropy with their labels y."""

    def logits(outputs: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
        outputs = outputs.float()
        return temperature * (torch.cat([-outputs / 2, outputs / 2], 1) if outputs.shape[1] == 1 else outputs)

    grid = np.logspace(-1, 3, 41)
    losses = [float(torch.nn.functional.cross_entropy(logits(scores, t), y)) for t in grid]
    best = float(grid[int(np.argmin(losses))])
    return lambda outputs: logits(outputs, best)


def _prior(network: FeatureReadout) -> tuple[np.ndarray, np.ndarray]:
    """(weights, envelope) of `_fit_ridge` for the features of `network`: each standardized feature's weight
    in the ridge before the envelopes' is chosen, ENVELOPE_WEIGHT / sqrt(channels) for the modes' envelopes
    and 1 for the rest, and the envelopes' columns (n_features,) bool. The envelopes are pooled channel by
    channel, the responses from mixes of channels: so that the envelopes hold the same share of the prior
    whatever the number of channels (the share ENVELOPE_WEIGHT was chosen at, on series of one channel),
    each channel's weigh 1 / channels of it."""
    envelope = network.envelope_columns().numpy()
    return np.where(envelope, ENVELOPE_WEIGHT / np.sqrt(network.series.d_input), 1.0), envelope


def _fit_ridge(
    objective: str,
    features: np.ndarray,
    targets: np.ndarray,
    weights: np.ndarray,
    envelope: np.ndarray | None = None,
    verbose: int = 0,
    seed: int = 0,
    classes: np.ndarray | None = None,
) -> tuple[object, np.ndarray, np.ndarray]:
    """(ridge, mean, scale): a ridge (penalty by leave-one-out; a classifier for objective
    "classification") fitted on the features (n, n_features) standardized by their mean and scale, then
    times their weights (n_features,) in the prior (`_prior`), scale = standard deviation / weight (a feature of
    weight w weighs in the ridge's prior as w^2 copies of it would); constant features keep standard
    deviation 1. The weight of the columns `envelope` (n_features,) bool, the modes' envelopes, weighed at
    ENVELOPE_WEIGHT in `weights`, is chosen from ENVELOPE_WEIGHTS by the same leave-one-out errors
    (GramRidgeCV's `block_weight_`, on a random ENVELOPE_CHOICE_ROWS of the rows where there are more;
    `ridge.envelope_weight_`, None without envelopes). With fewer rows than features, GramRidgeCV; with
    more, TallRidgeCV (the penalties at a fraction of scikit-learn's cost there; with verbose, its
    progress bar). For regression the penalty is
    the smoothest within REGRESSION_PENALTY_STANDARD_ERRORS of the best (`penalty_within`), each target's on
    its own errors (as one fit a target would choose it; the envelopes' weight on their sum), chosen and
    fitted on the targets standardized (`_standardized_targets`; `best_score_` is in units of their
    variance), the solution (`coef_`, `intercept_`) then given in the targets' units: the predictions
    scale and shift with the targets exactly, where the squared errors of targets near 1e155 overflow.
    classes: a classifier's classes, one output each, when the targets may lack some."""
    classifier = objective == "classification"
    standard_errors = 0.0 if classifier else REGRESSION_PENALTY_STANDARD_ERRORS
    if not classifier:
        targets, offset, spread = _standardized_targets(targets)
    (n, p), has_envelope = features.shape, envelope is not None and bool(envelope.any())
    # the envelopes' weights, relative to ENVELOPE_WEIGHT (at which `weights` holds them)
    factors = tuple(weight / ENVELOPE_WEIGHT for weight in ENVELOPE_WEIGHTS) if has_envelope else (1.0,)

    rows = None  # the rows the weight is chosen on: all, or a random ENVELOPE_CHOICE_ROWS of them
    if has_envelope and n > ENVELOPE_CHOICE_ROWS:
        rows = np.sort(np.random.default_rng(seed).choice(n, ENVELOPE_CHOICE_ROWS, replace=False))

    def gram_ridge(choice_rows: np.ndarray | None = None) -> GramRidgeCV:
        return GramRidgeCV(
            RIDGE_ALPHAS,
            classifier=classifier,
            standard_errors=standard_errors,
            block=envelope,
            block_weights=factors,
            guard=ENVELOPE_WEIGHT_STANDARD_ERRORS,
            choice_rows=choice_rows,
            per_target=not classifier,
        )

    # BLAS keeps to torch's thread cap, as the features do: on a machine with a busy core, BLAS threads
    # beyond the idle cores wait for each other (a 40-series ridge took 0.2 s instead of milliseconds).
    with threadpool_limits(limits=torch.get_num_threads(), user_api="blas"):
        mean, scale = features.mean(0), features.std(0)
        scale[scale < 1e-12] = 1.0
        scale = scale / weights
        if n <= p:
            ridge = gram_ridge(rows).fit((features - mean) / scale, targets, classes)
            factor = ridge.block_weight_
        else:  # the weight chosen on (some of) the rows by their Gram matrix, then the tall ridge at that weight
            factor = 1.0
            if has_envelope:
                some = np.arange(n) if rows is None else rows
                factor = gram_ridge().fit((features[some] - mean) / scale, targets[some], classes).block_weight_
                scale[envelope] /= factor
            ridge = TallRidgeCV(
                RIDGE_ALPHAS,
                classifier=classifier,
                standard_errors=standard_errors,
                verbose=bool(verbose),
                per_target=not classifier,
            )
            ridge.fit((features - mean) / scale, targets, classes)
    ridge.envelope_weight_ = ENVELOPE_WEIGHT * factor if has_envelope else None
    if not classifier:  # coef_ (k, p) or (p,) for 1-d targets, intercept_ (k,) or a scalar
        coef = np.asarray(ridge.coef_, dtype=np.float64)
        ridge.coef_ = coef * (spread[:, None] if coef.ndim == 2 else spread)
        ridge.intercept_ = (offset + spread * ridge.intercept_).reshape(np.shape(ridge.intercept_))
    return ridge, mean, scale


def _standardized_targets(targets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(z, offset, spread): finite targets (n,) or (n, k) = offset + spread * z, z of mean 0 and standard
    deviation 1 in each column (a constant column: spread 1), offset and spread (k,) ((1,) for 1-d targets).
    Formed from the targets over their largest magnitude, so that nothing is squared in their units."""
    columns = targets.reshape(len(targets), -1)
    peak = np.abs(columns).max(0)
    peak[peak == 0] = 1.0
    unit = columns / peak
    centre, deviation = unit.mean(0), unit.std(0)
    deviation[deviation < 1e-12] = 1.0  # a constant column, up to rounding
    z = (unit - centre) / deviation
    return z.reshape(targets.shape), centre * peak, deviation * peak


@with_params_doc
class SSMFeatureClassifier(_FeatureEstimator, FeatureModelParams, RateClassifierMixin, BaseEstimator):
    """Classify time series by the responses of fixed diagonal SSMs at many time scales, pooled,
    with a ridge classifier on top (an SSM counterpart of MiniRocket: nothing else is trained).

    X: (n_samples, n_timepoints), (n_samples, n_channels, n_timepoints), or a list of series
    of different lengths. `predict(X, sample_rate=...)` reads data at another rate with Delta
    rescaled; fitted with sample_rate, the ridge also reads the training series at half that rate
    (x[::2] and x[1::2]), and data below every rate it read warns (ExtrapolationWarning).
    Fitted: `normalization_` (the scaling used; with normalize="auto" the one chosen),
    `normalize_scores_` (the ridge's leave-one-out score of each scaling tried, higher is better),
    `alpha_` (the ridge penalty), `envelope_weight_` (the weight of the modes' envelopes in the ridge's
    prior, chosen from ENVELOPE_WEIGHTS by leave-one-out; None without envelopes), `n_features_out_`
    (features per series), `readout_rates_` (the rates in Hz the ridge read the training series at: the
    training rate and half of it; () without sample_rate).
    """

    # Chosen by 5-fold CV x 2 on the training splits of the development sets: the backward SSMs
    # raised the mean accuracy from 0.861 to 0.874 (docs/results/classification.md, the dev-protocol table).
    # 42 kernels a scale instead of 84: the same accuracy on 5-fold CV x 5 (0.8709 against 0.8714, a paired
    # difference of 0.05 +- 0.27 points over 175 folds) at about two thirds of the fit + predict time.
    _param_defaults = dict(backward=True, n_kernels=42, envelope=True)

    @property
    def _d_output(self) -> int:
        return 1 if len(self.classes_) == 2 else len(self.classes_)

    @transactional
    def fit(self, X, y):
        data = self._start_fit(X, y)
        y = check_labels(y, len(data.x))
        self._encoder = label_encoder(self, np.unique(y))
        self.classes_ = self._encoder.classes_
        self._fit_readout(data, self._encoder.transform(y), "classification")
        return self

    _saved_attributes = _FeatureEstimator._saved_attributes + ("classes_",)

    def _restore_after_load(self) -> None:
        self._encoder = restored_label_encoder(self.classes_)

    def decision_function(self, X, sample_rate=None):
        """Ridge scores, (n_samples, n_classes); for two classes (n_samples,), > 0 for classes_[1]."""
        scores = self._outputs(X, sample_rate).double().numpy()
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def predict(self, X, sample_rate=None):
        """Predicted labels, (n_samples,). sample_rate: rate of X if not the estimator's."""
        scores = self.decision_function(X, sample_rate)
        index = (scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(1)
        return self.classes_[index]


@with_params_doc
class SSMFeatureRegressor(_FeatureEstimator, FeatureModelParams, RateRegressorMixin, BaseEstimator):
    """Regress targets from the responses of fixed diagonal SSMs at many time scales, pooled, with
    ridge regression on top. y: (n_samples,) or (n_samples, n_targets). The penalty (`alpha_`) is the
    largest whose mean leave-one-out error is within a quarter of a standard error of the lowest: with
    little signal in the targets, the predictions lean towards their training mean; it is chosen on the
    targets standardized (each column), so that predictions scale and shift with the targets exactly.
    Each target gets its own penalty, chosen on its own errors, as scikit-learn's
    RidgeCV(alpha_per_target=True): a target with little signal does not pull another's penalty (`alpha_`
    is then (n_targets,) for 2-d y); the modes' envelopes, where on, take one weight for all, chosen on
    the targets' summed errors. Fitted attributes as SSMFeatureClassifier's; `normalize_scores_` is minus
    the mean leave-one-out squared error in units of the targets' variance (the mean over the targets)."""

    # Chosen by 5-fold CV x 2 on the training splits of CardanoSentiment, Covid3Month and Tecator:
    # levels far outside the training range ruin "channel" predictions on Covid3Month.
    _param_defaults = dict(normalize="series")

    @property
    def _d_output(self) -> int:
        return self.n_targets_

    @transactional
    def fit(self, X, y):
        data = self._start_fit(X, y)
        y2, self._y_is_1d = check_targets(y)
        if len(y2) != len(data.x):
            raise ValueError(f"X has {len(data.x)} samples but y has {len(y2)}")
        if len(y2) < 2:  # leave-one-out of one sample leaves nothing to fit
            raise ValueError(
                f"{type(self).__name__} chooses its ridge penalty by leave-one-out, which needs at least 2 "
                f"samples; got 1 sample"
            )
        self.n_targets_ = y2.shape[1]
        self._fit_readout(data, y2, "regression")
        return self

    _saved_attributes = _FeatureEstimator._saved_attributes + ("n_targets_", "_y_is_1d")

    def predict(self, X, sample_rate=None):
        """Predictions, (n_samples,) or (n_samples, n_targets), float64."""
        out = self._outputs(X, sample_rate).double().numpy()
        return out[:, 0] if self._y_is_1d else out


@with_params_doc
class SSMFeatureTransformer(
    ClassNamePrefixFeaturesOutMixin, _FeatureEstimator, FeatureTransformParams, TransformerMixin, BaseEstimator
):
    """The features of SSMFeatureClassifier as a transformer, for another model to read (an SSM counterpart
    of MiniRocket's transform): fixed diagonal SSMs at many time scales, their responses pooled (PPV at
    biases set on the training series, the mean, the maximum) and, with envelope=True, their modes'
    envelopes. fit(X) draws the SSMs and sets the biases (no y, nothing trained); transform(X) gives
    (n_samples, n_features_out_) float64, unscaled: put a StandardScaler before a linear model.
    `transform(X, sample_rate=...)` reads data at another rate with Delta rescaled (the features of a
    band-limited series then change little, but below the training rate the fastest modes lie above the
    Nyquist frequency and warn, ExtrapolationWarning). Parameters and defaults: the classifier's bank's
    (no read-out, so none of its training); normalize="auto", which compares read-outs, is refused.
    """

    _param_defaults = SSMFeatureClassifier._param_defaults

    @property
    def _d_output(self) -> int:
        return 1  # the network's linear read-out stays unused: transform returns the features before it

    @transactional
    def fit(self, X, y=None):
        """Draw the SSMs and set their biases on the training series X; y is ignored."""
        if self.normalize == "auto":
            raise ValueError(
                f"{type(self).__name__}: normalize='auto' chooses a scaling by the ridge's leave-one-out score, "
                "which a transformer does not fit; choose 'channel' or 'series'"
            )
        data = self._start_fit(X, needs_y=False)
        network = self._fitted_bank(data)  # transform featurizes; the training series' features are not needed
        self.n_features_out_ = network.readout.in_features
        self.readout_rates_ = (float(self.train_sample_rate_),) if self.train_sample_rate_ is not None else ()
        self.history_, self.n_iter_, self.best_epoch_ = [], 0, 0
        self.model_ = network.eval()  # its read-out, and the features' range it would clip to, stay unused
        return self

    def transform(self, X, sample_rate=None):
        """The features of X, (n_samples, n_features_out_) float64."""
        ratio = self._rate_ratio(sample_rate)
        data = self._prepare_predict_input(X, ratio)  # warns of X far beyond the training values
        self._check_differences(data)
        return self._predict_outputs(data, ratio, lambda model, u, mask: model.features(u, mask)).double().numpy()

    @property
    def _n_features_out(self):
        check_is_fitted(self, "model_")
        return self.n_features_out_

    def _below_fitted_rates_consequence(self, lowest: float, above: int, modes: int) -> str:
        return (
            f"the rate it was fitted at: {above} of the {modes} modes of its SSMs lie above the Nyquist frequency "
            "of this rate and answer only quasi-statically, so the features that rest on them differ from the "
            "training series'. A model fitted on features at the training rate may read these otherwise: measure "
            "it on labelled data at this rate"
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        return tags


__all__ = ["SSMFeatureClassifier", "SSMFeatureRegressor", "SSMFeatureTransformer", "RIDGE_ALPHAS"]
