"""Tuning SSMForecaster with sktime's ForecastingGridSearchCV (airline passengers).

Holds out the last year, picks context_length and strategy by an expanding-window
backtest on the first 11 years (3 folds of 12 months), refits the best setting on all
of them and scores it on the held-out year. About 30 s on 2 idle CPU cores.

    python docs_snippets/forecasting_gridsearch.py
"""

import warnings

import pandas as pd
from sktime.datasets import load_airline
from sktime.forecasting.model_selection import ForecastingGridSearchCV
from sktime.performance_metrics.forecasting import MeanAbsolutePercentageError
from sktime.split import ExpandingWindowSplitter, temporal_train_test_split

from ssmts.sktime import SSMForecaster

warnings.filterwarnings("ignore", category=FutureWarning)  # sktime deprecation notices

y = load_airline()
y_train, y_test = temporal_train_test_split(y, test_size=12)
fh = list(range(1, 13))

forecaster = SSMForecaster(max_epochs=60, device="cpu", random_state=0)
search = ForecastingGridSearchCV(
    forecaster,
    cv=ExpandingWindowSplitter(fh=fh, initial_window=96, step_length=12),  # folds after 96, 108, 120 months
    param_grid={"context_length": [24, 36], "strategy": ["direct", "recursive"]},
    scoring=MeanAbsolutePercentageError(symmetric=True),
)
search.fit(y_train, fh=fh)

results = pd.DataFrame(search.cv_results_)
table = pd.DataFrame(
    {
        "params": results["params"],
        "cv sMAPE %": 100 * results["mean_test_MeanAbsolutePercentageError"],
        "fit s": results["mean_fit_time"],
    }
)
print(table.to_string(index=False, float_format="{:.2f}".format))
print("best:", search.best_params_)

y_pred = search.predict()
interval = search.predict_interval(coverage=0.9)
smape = MeanAbsolutePercentageError(symmetric=True)(y_test, y_pred)
inside = ((y_test >= interval.iloc[:, 0]) & (y_test <= interval.iloc[:, 1])).mean()
print(f"held-out year: sMAPE {100 * smape:.2f}%, 90% interval covers {100 * inside:.0f}% of the months")
