"""The features' ridge read-out on more rows than features: `python -m ssmts.bench readout [options]`.

Fits the read-out's ridge classifier (penalty by leave-one-out over the estimators' 19 penalties) on
random standardized features of each --shape ROWSxFEATURES, with --classes one-vs-rest targets, by
TallRidgeCV (what SSMFeatureClassifier uses there) and by scikit-learn's RidgeClassifierCV, one after
the other in this process on the same BLAS threads, and prints both times and their ratio, and
whether they chose the same penalty. scikit-learn's may be skipped above --sklearn-max-rows (it costs
O(p^3 + n p^2) a penalty: at 30,000 x 10,080 it did not finish in an hour).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def _shape(text: str) -> tuple[int, int]:
    rows, features = (int(part) for part in text.lower().split("x"))
    if rows <= features:
        raise argparse.ArgumentTypeError(f"{text}: the read-out uses TallRidgeCV only for more rows than features")
    return rows, features


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ssmts.bench readout", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--shape",
        type=_shape,
        nargs="+",
        default=[_shape("3000x1000"), _shape("6000x2000")],
        help="ROWSxFEATURES, more rows than features (default 3000x1000 6000x2000)",
    )
    parser.add_argument("--classes", type=int, default=10, help="classes of the one-vs-rest targets (default 10)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
    parser.add_argument(
        "--sklearn-max-rows", type=int, default=20000, help="skip scikit-learn's fit above these rows (default 20000)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random features and labels (default 0)")
    args = parser.parse_args(argv)

    from sklearn.linear_model import RidgeClassifierCV
    from threadpoolctl import threadpool_limits

    from ..estimators._ridge import TallRidgeCV
    from ..estimators.features import RIDGE_ALPHAS

    print(f"threads {args.threads}; load average {_load()}")
    print("rows x features | TallRidgeCV s | RidgeClassifierCV s | ratio | same penalty")
    for rows, features in args.shape:
        rng = np.random.default_rng(args.seed)
        signal = rng.standard_normal((rows, features))
        labels = (signal[:, : args.classes] + rng.standard_normal((rows, args.classes))).argmax(1)
        X = (signal - signal.mean(0)) / signal.std(0)
        with threadpool_limits(args.threads, user_api="blas"):
            started = time.perf_counter()
            ours = TallRidgeCV(RIDGE_ALPHAS, classifier=True).fit(X, labels)
            ours_s = time.perf_counter() - started
            if rows > args.sklearn_max_rows:
                print(f"{rows} x {features} | {ours_s:.1f} | (skipped) | | ")
                continue
            started = time.perf_counter()
            theirs = RidgeClassifierCV(alphas=RIDGE_ALPHAS).fit(X, labels)
            theirs_s = time.perf_counter() - started
        same = "yes" if ours.alpha_ == theirs.alpha_ else f"no ({ours.alpha_:g} / {theirs.alpha_:g})"
        ratio = f"{theirs_s / ours_s:.1f}x faster"
        print(f"{rows} x {features} | {ours_s:.1f} | {theirs_s:.1f} | {ratio} | {same}", flush=True)
    print(f"load average at the end {_load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
