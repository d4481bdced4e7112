"""The features' ridge read-out, its penalty (and the envelopes' weight) by leave-one-out at the cost of
one penalty (and one decomposition a weight).

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
error over the targets; for classes, of the one-vs-rest targets in {-1, 1}; with per_target, each
target's own, as RidgeCV(alpha_per_target=True)) and returns the same coefficients
(tests/estimators/test_ridge.py holds it against them).

With `standard_errors` > 0 the penalty is instead the largest whose mean leave-one-out error is within
that many standard errors of the lowest (`penalty_within`, a fraction of Breiman's one-standard-error
rule): among fits the data cannot tell apart, the smoother.

With fewer rows than features, `GramRidgeCV` works from the n x n Gram matrix G = Xc Xc^T of the centred
rows (the dual form of the formulas above): with G = Q diag(e) Q^T, for a penalty alpha

    hat values   h_i = 1 / n + sum_j Q_ij^2 e_j / (e_j + alpha)
    fitted values  y^ = Q diag(e / (e + alpha)) Q^T y,   coefficients  Xc^T Q diag(1 / (e + alpha)) Q^T y

It also chooses the prior weight of one block of columns (the features' envelopes) by the same
leave-one-out errors: with the Gram matrices of the block and of the rest formed once, a weight w gives
G = G_rest + w^2 G_block, O(n^3) a weight after one O(n^2 p) pass. It returns scikit-learn's choices and
coefficients at a fraction of their cost (RidgeClassifierCV took 0.9-1.4 s on 720 rows of 10,720 features,
where the Gram matrix takes 0.15 s and each decomposition 0.09 s; tests/estimators/test_ridge.py holds it
against them and against refitting)."""

from __future__ import annotations

import numpy as np
import scipy.linalg
from sklearn.preprocessing import LabelBinarizer
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

ROW_BLOCK_ELEMENTS = 1 << 22
"""Rows of X are centred and rotated this many elements at a time (32 MiB of float64), so that no
second n x p copy of X is held (nor the residuals of every row under every penalty and target)."""


def penalty_within(squared_errors: np.ndarray, standard_errors: float) -> int:
    """Index of the penalty to keep: of the lowest mean leave-one-out error (the first of equals), or
    with `standard_errors` > 0 the largest penalty whose mean error is at most the lowest plus that
    many standard errors of the lowest's mean (its rows' sample deviation over sqrt(n)).
    squared_errors: (n, A) each row's leave-one-out squared error under each penalty, penalties in
    increasing order (summed over the targets of a row)."""
    n = len(squared_errors)
    deviation = squared_errors.std(0, ddof=1) if n > 1 else np.zeros(squared_errors.shape[1])
    return _penalty_of_moments(squared_errors.mean(0), deviation, n, standard_errors)


def _penalty_of_moments(mean: np.ndarray, deviation: np.ndarray, n: int, standard_errors: float) -> int:
    """`penalty_within` from the errors' mean (A,) and sample deviation (A,) over the n rows."""
    best = int(np.argmin(mean))
    if standard_errors == 0:
        return best
    spread = deviation[best] / np.sqrt(n) if n > 1 else 0.0
    within = np.flatnonzero(mean <= mean[best] + standard_errors * spread)
    # None where the errors are undefined (one row leaves none to fit): the first, as scikit-learn's choice.
    return int(within.max()) if len(within) else best


def chosen_penalties(squared_errors: np.ndarray, standard_errors: float, per_target: bool) -> np.ndarray:
    """(k,) index of each target's penalty by `penalty_within`: on that target's own errors (per_target), or
    one for all on the errors summed over the targets. squared_errors: (n, A, k) each row's leave-one-out
    squared error of each target under each penalty (increasing)."""
    k = squared_errors.shape[2]
    if per_target:
        return np.array([penalty_within(squared_errors[:, :, j], standard_errors) for j in range(k)])
    return np.full(k, penalty_within(squared_errors.sum(2), standard_errors))


def lowest_mean_error(squared_errors: np.ndarray, per_target: bool) -> float:
    """The lowest mean leave-one-out squared error a target (the ridges' `best_score_` is minus it): the mean
    over the targets of each one's lowest (per_target), or the lowest of their sum over k. (n, A, k) as
    `chosen_penalties`."""
    means = squared_errors.mean(0)  # (A, k)
    return float(means.min(0).mean() if per_target else means.sum(1).min() / means.shape[1])


def _at_penalties(squared_errors: np.ndarray, index: np.ndarray) -> np.ndarray:
    """(n,) each row's squared errors summed over the targets, each target's at its penalty index (k,)."""
    return squared_errors[:, index, np.arange(len(index))].sum(1)


def _alpha_attribute(alphas: np.ndarray, per_target: bool, y: np.ndarray):
    """A ridge's `alpha_` from the penalty of each target (k,): one a target for 2-d y with per_target (as
    RidgeCV(alpha_per_target=True)), else a float."""
    return alphas if per_target and np.ndim(y) == 2 else float(alphas[0])


def _check_per_target(per_target: bool, classifier: bool) -> bool:
    if per_target and classifier:  # one-vs-rest scores are compared across classes: one penalty for all
        raise ValueError("per_target=True is for regression: a classifier's one-vs-rest scores share one penalty")
    return bool(per_target)


def _dual_loo_errors(eigenvalues: np.ndarray, Q: np.ndarray, Yc: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """(n, A, k): each row's leave-one-out squared error of each of the k targets of a ridge with an
    unpenalized intercept under each penalty, from the eigendecomposition Q diag(eigenvalues) Q^T of the
    Gram matrix (n, n) of the centred rows and the centred targets Yc (n, k)."""
    n = len(Q)
    shrink = eigenvalues[:, None] / (eigenvalues[:, None] + alphas[None, :])  # (n, A)
    hat = (Q * Q) @ shrink + 1.0 / n  # (n, A)
    fitted = np.einsum("ij,ja,jk->iak", Q, shrink, Q.T @ Yc, optimize=True)  # (n, A, k)
    with np.errstate(invalid="ignore", divide="ignore"):  # one row: 0 / 0, undefined (penalty_within's case)
        residuals = (Yc[:, None, :] - fitted) / (1.0 - hat)[:, :, None]
    return residuals**2


def _targets(y: np.ndarray, classifier: bool, classes: np.ndarray | None = None) -> np.ndarray:
    """(n, k) float64: the targets, or for classes their one-vs-rest coding in {-1, 1}, a column for each
    of `classes` (default: those in y; a class absent from y gets a column of -1)."""
    if classifier:
        coding = LabelBinarizer(pos_label=1, neg_label=-1).fit(y if classes is None else classes)
        return coding.transform(y).astype(np.float64)
    y = np.asarray(y, dtype=np.float64)
    return y[:, None] if y.ndim == 1 else y


def _increasing(alphas) -> np.ndarray:
    alphas = np.asarray(alphas, dtype=np.float64)
    if alphas.ndim != 1 or len(alphas) == 0 or (np.diff(alphas) <= 0).any() or alphas[0] <= 0:
        raise ValueError(f"alphas must be positive penalties in increasing order, got {alphas}")
    return alphas


class GramRidgeCV:
    """Ridge regression (or a ridge classifier, one-vs-rest on {-1, 1} targets) with the penalty chosen
    from `alphas` (increasing) by `penalty_within` on efficient leave-one-out errors, from the Gram matrix
    of the rows (for fewer rows than features; any number of rows, at O(n^2 p + n^3)).

    block (p,) bool and block_weights: the columns of `block` are multiplied by each weight in turn (the
    other columns by 1), and the weight kept is the one of the lowest mean leave-one-out error if its
    rows' errors beat those at `default_weight` by more than `guard` standard errors of their paired
    differences, else `default_weight`: where the data cannot tell the weights apart, the default stands.
    choice_rows: indices of the rows the weight is chosen on (`block_scores_` are theirs; None: all), a
    decomposition a weight of their Gram matrix instead of all the rows'; the fit is then on every row.
    per_target (regression): each target's penalty chosen on its own errors, as separate fits would choose
    it (`alpha_` then (k,) for 2-d y), the block's weight on their sum; else one penalty on their sum.

    fit(X (n, p), y (n,) labels or (n,) / (n, k) targets) sets `alpha_`, `best_score_` (minus the lowest
    mean squared leave-one-out error, per target, at the weight kept), `block_weight_`,
    `block_scores_` ({weight: mean leave-one-out squared error of its rows at its penalty}), and
    `coef_` and `intercept_` for X as given (the block's weight folded in): for classes (k, p) and (k,),
    k being 1 for two classes; for targets the shapes of scikit-learn's Ridge.
    """

    def __init__(
        self,
        alphas,
        *,
        classifier: bool,
        standard_errors: float = 0.0,
        block: np.ndarray | None = None,
        block_weights=(1.0,),
        default_weight: float = 1.0,
        guard: float = 1.0,
        choice_rows: np.ndarray | None = None,
        per_target: bool = False,
    ):
        self.alphas = _increasing(alphas)
        self.classifier = classifier
        self.per_target = _check_per_target(per_target, classifier)
        self.standard_errors = float(standard_errors)
        self.block = block
        self.block_weights = tuple(float(w) for w in block_weights)
        self.default_weight = float(default_weight)
        self.guard = float(guard)
        self.choice_rows = choice_rows

    def fit(self, X: np.ndarray, y: np.ndarray, classes: np.ndarray | None = None) -> "GramRidgeCV":
        """classes: the classifier's classes, when y may lack some (default: those in y)."""
        if self.default_weight not in self.block_weights:
            raise ValueError(f"default_weight {self.default_weight} must be among block_weights {self.block_weights}")
        X = np.asarray(X, dtype=np.float64)
        n, p = X.shape
        Y = _targets(y, self.classifier, classes)
        if not (np.isfinite(X).all() and np.isfinite(Y).all()):  # as scikit-learn's ridges refuse them
            raise ValueError("GramRidgeCV: X and y must be finite (they hold NaN or infinity)")
        block = np.zeros(p, dtype=bool) if self.block is None else np.asarray(self.block, dtype=bool)
        x_mean, y_mean = X.mean(0), Y.mean(0)
        Xc, Yc = X - x_mean, Y - y_mean
        own = Xc[:, block]
        gram_block = own @ own.T
        gram_rest = Xc @ Xc.T - gram_block  # no copy of the other columns
        del own

        choice = np.arange(n) if self.choice_rows is None else np.unique(np.asarray(self.choice_rows))
        whole = len(choice) == n
        # LAPACK's threads slow the decomposition of a matrix this small (720 rows: 0.14 s on 2 threads
        # against 0.075 s on one), so the decompositions run on one BLAS thread.
        with threadpool_limits(limits=1, user_api="blas"):
            # each weight's errors on the rows `choice` (their own centring: the Gram matrices' sub-blocks
            # centred twice), and at the weight kept, the fit on every row
            rest, block_part = (
                (gram_rest, gram_block) if whole else (_centred(gram_rest, choice), _centred(gram_block, choice))
            )
            Y_choice = Yc if whole else Yc[choice] - Yc[choice].mean(0)
            fits = {w: self._weighed(rest + w**2 * block_part, Y_choice) for w in self.block_weights}
            row_errors = {w: _at_penalties(errors, index) for w, (errors, index, _, _) in fits.items()}
            self.block_scores_ = {w: float(e.mean()) for w, e in row_errors.items()}
            weight, m = self.default_weight, len(choice)
            best = min(self.block_weights, key=lambda w: self.block_scores_[w])
            if m >= 3 and all(np.isfinite(v) for v in self.block_scores_.values()):  # else no spread to judge by
                difference = row_errors[best] - row_errors[self.default_weight]
                if difference.mean() < -self.guard * difference.std(ddof=1) / np.sqrt(m):
                    weight = best
            errors, index, eigenvalues, Q = (
                fits[weight] if whole else self._weighed(gram_rest + weight**2 * gram_block, Yc)
            )
        self.block_weight_ = weight
        alphas = self.alphas[index]  # (k,)
        self.alpha_ = _alpha_attribute(alphas, self.per_target, y)
        self.best_score_ = -lowest_mean_error(errors, self.per_target)
        dual = Q @ ((Q.T @ Yc) / (eigenvalues[:, None] + alphas[None, :]))  # (n, k)
        coef = Xc.T @ dual  # (p, k), in the columns as weighted ...
        coef[block] *= weight**2  # ... and for X as given: X_w = X diag(w), coef = diag(w) X_w^T dual
        coef = coef.T
        intercept = y_mean - coef @ x_mean
        if not self.classifier and np.ndim(y) == 1:
            coef, intercept = coef[0], float(intercept[0])
        self.coef_, self.intercept_ = coef, intercept
        return self

    def _weighed(self, gram: np.ndarray, Yc: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(errors (n, A, k), each target's penalty index by the rule (k,), eigenvalues, Q) of the Gram
        matrix (n, n) of centred rows and centred targets Yc (n, k)."""
        eigenvalues, Q = scipy.linalg.eigh(gram, driver="evd", check_finite=False)
        eigenvalues = eigenvalues.clip(min=0.0)  # a Gram matrix has none below 0 but rounding's
        errors = _dual_loo_errors(eigenvalues, Q, Yc, self.alphas)
        return errors, chosen_penalties(errors, self.standard_errors, self.per_target), eigenvalues, Q


def _centred(gram: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The Gram matrix of `rows` centred on their own mean, from the Gram matrix (n, n) of all the rows."""
    sub = gram[np.ix_(rows, rows)]
    return sub - sub.mean(0) - sub.mean(1)[:, None] + sub.mean()


class TallRidgeCV:
    """Ridge regression (or a ridge classifier, one-vs-rest on {-1, 1} targets) with the penalty
    chosen from `alphas` (increasing) by efficient leave-one-out, for X with more rows than columns.

    fit(X (n, p), y (n,) labels or (n, k) targets) sets `alpha_`, `best_score_` (minus the lowest mean
    squared leave-one-out error), `coef_` (k, p) and `intercept_` (k,), where k is 1 for two classes.
    standard_errors: as `penalty_within` (0: the penalty of the lowest error, as scikit-learn's).
    per_target: as GramRidgeCV's.
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
        per_target: bool = False,
    ):
        self.alphas = _increasing(alphas)
        self.classifier = classifier
        self.per_target = _check_per_target(per_target, classifier)
        self.standard_errors = float(standard_errors)
        self.rows_at_once = rows_at_once
        self.verbose = verbose

    def fit(self, X: np.ndarray, y: np.ndarray, classes: np.ndarray | None = None) -> "TallRidgeCV":
        """classes: the classifier's classes, when y may lack some (default: those in y)."""
        X = np.asarray(X, dtype=np.float64)
        n, p = X.shape
        if n <= p:
            raise ValueError(f"TallRidgeCV is for more rows than features; X has {n} rows and {p} features")
        Y = _targets(y, self.classifier, classes)
        if not (np.isfinite(X).all() and np.isfinite(Y).all()):  # as scikit-learn's ridges refuse them
            raise ValueError("TallRidgeCV: X and y must be finite (they hold NaN or infinity)")
        # a block's rows x p rotated rows, and its rows x penalties x targets residuals, within the budget
        block = self.rows_at_once or max(1, ROW_BLOCK_ELEMENTS // max(p, len(self.alphas) * Y.shape[1]))
        row_blocks = [slice(start, start + block) for start in range(0, n, block)]
        x_mean, y_mean = X.mean(0), Y.mean(0)
        Yc = Y - y_mean
        with tqdm(total=2 * n, desc="ridge read-out", unit="row", disable=not self.verbose) as bar:
            best = self._solve(X, Yc, x_mean, row_blocks, bar)
        self.alpha_ = _alpha_attribute(self.alphas[best], self.per_target, y)
        self.intercept_ = y_mean - x_mean @ self.coef_.T
        return self

    def _solve(self, X, Yc, x_mean, row_blocks, bar) -> np.ndarray:
        """best_score_ and coef_ from X (n, p), the centred targets Yc (n, k) and X's mean; returns each
        target's penalty index (k,)."""
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
        # one penalty for all: each row's error summed over the targets; a penalty a target: the sums and
        # squares of each target's errors over the rows (their mean and deviation), not n x A x k errors
        squared_errors = None if self.per_target else np.empty((n, A))
        sums, squares = np.zeros((A, k)), np.zeros((A, k))
        for rows in row_blocks:
            XV = (X[rows] - x_mean) @ V  # (rows, p)
            hat = (XV * XV) @ inverse + 1.0 / n  # (rows, A)
            fitted = (XV @ projections).reshape(-1, A, k)
            residuals = (Yc[rows][:, None, :] - fitted) / (1.0 - hat)[:, :, None]
            squared = residuals**2
            if self.per_target:
                sums += squared.sum(0)
                squares += (squared**2).sum(0)
            else:
                squared_errors[rows] = squared.sum(2)
            bar.update(len(XV))
        if self.per_target:
            mean = sums / n
            deviation = np.sqrt(np.clip(squares - n * mean**2, 0.0, None) / max(n - 1, 1))
            rule = self.standard_errors
            best = np.array([_penalty_of_moments(mean[:, j], deviation[:, j], n, rule) for j in range(k)])
            self.best_score_ = -float(mean.min(0).mean())
        else:
            best = np.full(k, penalty_within(squared_errors, self.standard_errors))
            self.best_score_ = -float(squared_errors.mean(0).min()) / k
        self.coef_ = (V @ (inverse[:, best] * VtXtY)).T  # (k, p)
        return best
