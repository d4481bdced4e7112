"""The features' ridge read-out for more rows than features, its penalty by leave-one-out at the cost
of one penalty.

scikit-learn's RidgeCV / RidgeClassifierCV find the leave-one-out errors of every penalty in closed
form. With fewer rows than features (n <= p) they decompose the n x n Gram matrix once, and each
penalty then costs O(n^2): that is the read-out's usual case, and those classes fit it. With more
rows (n > p: ten thousand clips, or three thousand read at two rates, against ten thousand
features) they decompose the p x p covariance once but then form its inverse and the n hat values
X H^-1 X^T again for every penalty, O(p^3 + n p^2) each: 19 penalties on 30,000 rows of 10,080
features did not finish in an hour. `TallRidgeCV` keeps the eigenvectors V of the covariance and
the rotated rows X V instead, so that for a penalty alpha, with e the eigenvalues,

    hat values   h_i = sum_j (X V)_ij^2 / (e_j + alpha) + 1 / n      (the intercept adds 1 / n)
    fitted values  y^ = X V diag(1 / (e + alpha)) V^T X^T y
    leave-one-out residuals  (y_i - y^_i) / (1 - h_i)

cost O(n p) a penalty after one O(n p^2 + p^3) decomposition (X centred, as the intercept needs).
It chooses the penalty as those classes do (the first of the lowest mean squared leave-one-out
error over the targets; for classes, of the one-vs-rest targets in {-1, 1}) and returns the same
coefficients (tests/estimators/test_ridge.py holds it against them).

With `standard_errors` > 0 the penalty is instead the largest whose mean leave-one-out error is within
that many standard errors of the lowest (`penalty_within`, a fraction of Breiman's one-standard-error
rule): among fits the data cannot tell apart, the smoother. `SmoothestRidgeCV` applies the same rule
to scikit-learn's leave-one-out errors where there are fewer rows than features."""

from __future__ import annotations

import numpy as np
import scipy.linalg
from sklearn.linear_model import Ridge, RidgeCV
from sklearn.preprocessing import LabelBinarizer
from tqdm.auto import tqdm

ROW_BLOCK_ELEMENTS = 1 << 22
"""Rows of X are centred and rotated this many elements at a time (32 MiB of float64), so that no
second n x p copy of X is held."""


def penalty_within(squared_errors: np.ndarray, standard_errors: float) -> int:
    """Index of the penalty to keep: of the lowest mean leave-one-out error (the first of equals), or
    with `standard_errors` > 0 the largest penalty whose mean error is at most the lowest plus that
    many standard errors of the lowest's mean (its rows' sample deviation over sqrt(n)).
    squared_errors: (n, A) each row's leave-one-out squared error under each penalty, penalties in
    increasing order (summed over the targets of a row)."""
    mean = squared_errors.mean(0)
    best = int(np.argmin(mean))
    if standard_errors == 0:
        return best
    n = len(squared_errors)
    spread = squared_errors[:, best].std(ddof=1) / np.sqrt(n) if n > 1 else 0.0
    within = np.flatnonzero(mean <= mean[best] + standard_errors * spread)
    # None where the errors are undefined (one row leaves none to fit): the first, as scikit-learn's choice.
    return int(within.max()) if len(within) else best


def _increasing(alphas) -> np.ndarray:
    alphas = np.asarray(alphas, dtype=np.float64)
    if alphas.ndim != 1 or len(alphas) == 0 or (np.diff(alphas) <= 0).any() or alphas[0] <= 0:
        raise ValueError(f"alphas must be positive penalties in increasing order, got {alphas}")
    return alphas


class SmoothestRidgeCV:
    """Ridge regression with the penalty chosen from `alphas` (increasing) by `penalty_within` on
    scikit-learn's leave-one-out errors (RidgeCV's), then refitted at that penalty.

    fit(X (n, p), y (n,) or (n, k)) sets `alpha_`, `best_score_` (minus the lowest mean squared
    leave-one-out error, as RidgeCV's), `coef_` ((p,) or (k, p)) and `intercept_`.
    """

    def __init__(self, alphas, *, standard_errors: float):
        self.alphas = _increasing(alphas)
        self.standard_errors = float(standard_errors)

    def fit(self, X: np.ndarray, y: np.ndarray) -> "SmoothestRidgeCV":
        search = RidgeCV(alphas=self.alphas, store_cv_results=True).fit(X, y)
        n, A = len(X), len(self.alphas)
        squared_errors = search.cv_results_.reshape(n, -1, A)  # (n, k, A): RidgeCV's (n, A) for one target
        per_row = squared_errors.sum(1)
        self.alpha_ = float(self.alphas[penalty_within(per_row, self.standard_errors)])
        self.best_score_ = -float(squared_errors.mean(axis=(0, 1)).min())
        if self.alpha_ == search.alpha_:
            fit = search
        else:
            fit = Ridge(alpha=self.alpha_).fit(X, y)
        self.coef_, self.intercept_ = fit.coef_, fit.intercept_
        return self


class TallRidgeCV:
    """Ridge regression (or a ridge classifier, one-vs-rest on {-1, 1} targets) with the penalty
    chosen from `alphas` (increasing) by efficient leave-one-out, for X with more rows than columns.

    fit(X (n, p), y (n,) labels or (n, k) targets) sets `alpha_`, `best_score_` (minus the lowest mean
    squared leave-one-out error), `coef_` (k, p) and `intercept_` (k,), where k is 1 for two classes.
    standard_errors: as `penalty_within` (0: the penalty of the lowest error, as scikit-learn's).
    verbose: a progress bar over the two passes through the rows (minutes at tens of thousands).
    """

    def __init__(
        self,
        alphas,
        *,
        classifier: bool,
        standard_errors: float = 0.0,
        rows_at_once: int | None = None,
        verbose: bool = False,
    ):
        self.alphas = _increasing(alphas)
        self.classifier = classifier
        self.standard_errors = float(standard_errors)
        self.rows_at_once = rows_at_once
        self.verbose = verbose

    def fit(self, X: np.ndarray, y: np.ndarray) -> "TallRidgeCV":
        X = np.asarray(X, dtype=np.float64)
        n, p = X.shape
        if n <= p:
            raise ValueError(f"TallRidgeCV is for more rows than features; X has {n} rows and {p} features")
        Y = self._targets(y)
        if not (np.isfinite(X).all() and np.isfinite(Y).all()):  # as scikit-learn's ridges refuse them
            raise ValueError("TallRidgeCV: X and y must be finite (they hold NaN or infinity)")
        block = self.rows_at_once or max(1, ROW_BLOCK_ELEMENTS // p)
        row_blocks = [slice(start, start + block) for start in range(0, n, block)]
        x_mean, y_mean = X.mean(0), Y.mean(0)
        Yc = Y - y_mean
        with tqdm(total=2 * n, desc="ridge read-out", unit="row", disable=not self.verbose) as bar:
            self._solve(X, Yc, x_mean, row_blocks, bar)
        self.intercept_ = y_mean - x_mean @ self.coef_.T
        return self

    def _solve(self, X, Yc, x_mean, row_blocks, bar) -> None:
        """alpha_, best_score_ and coef_ from X (n, p), the centred targets Yc (n, k) and X's mean."""
        (n, p), k = X.shape, Yc.shape[1]
        bar.set_postfix_str("covariance")
        covariance = np.zeros((p, p))
        XtY = np.zeros((p, k))
        for rows in row_blocks:
            Xc = X[rows] - x_mean
            covariance += Xc.T @ Xc
            XtY += Xc.T @ Yc[rows]
            bar.update(len(Xc))
        bar.set_postfix_str(f"eigendecomposition of {p} x {p}")
        eigenvalues, V = scipy.linalg.eigh(covariance, driver="evd", overwrite_a=True, check_finite=False)
        eigenvalues = eigenvalues.clip(min=0.0)  # a covariance has none below 0 but rounding's
        del covariance

        A = len(self.alphas)
        bar.set_postfix_str(f"leave-one-out of {A} penalties")
        inverse = 1.0 / (eigenvalues[:, None] + self.alphas[None, :])  # (p, A): 1 / (e_j + alpha)
        VtXtY = V.T @ XtY  # (p, k)
        projections = (inverse[:, :, None] * VtXtY[:, None, :]).reshape(p, A * k)
        squared_errors = np.empty((n, A))  # each row's, summed over the targets
        for rows in row_blocks:
            XV = (X[rows] - x_mean) @ V  # (rows, p)
            hat = (XV * XV) @ inverse + 1.0 / n  # (rows, A)
            fitted = (XV @ projections).reshape(-1, A, k)
            residuals = (Yc[rows][:, None, :] - fitted) / (1.0 - hat)[:, :, None]
            squared_errors[rows] = (residuals**2).sum(2)
            bar.update(len(XV))
        best = penalty_within(squared_errors, self.standard_errors)
        coef = V @ (inverse[:, best, None] * VtXtY)  # (p, k)
        self.alpha_ = float(self.alphas[best])
        self.best_score_ = -float(squared_errors.mean(0).min()) / k
        self.coef_ = coef.T

    def _targets(self, y: np.ndarray) -> np.ndarray:
        """(n, k) float64: the targets, or for classes their one-vs-rest coding in {-1, 1}."""
        if self.classifier:
            return LabelBinarizer(pos_label=1, neg_label=-1).fit_transform(y).astype(np.float64)
        y = np.asarray(y, dtype=np.float64)
        return y[:, None] if y.ndim == 1 else y
