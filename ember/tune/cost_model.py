"""The learned cost model: LightGBM on loop-program features, trained on measured records.

What it predicts is how far a candidate is from the best schedule known for its workload,
``log2(best time / time)`` (0 for the best, -1 for twice as slow): a relative score learns
across workloads of very different sizes, which is what lets records of earlier tuning --
other layers, other models -- rank a new task's candidates before its first measurement
(transfer). Candidates that failed count as four times slower than the best.

LightGBM rather than XGBoost: the same gradient-boosted trees at a twentieth of the install
(10 MB against 230 MB with its CUDA libraries).
"""
from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np

__all__ = ["CostModel"]

FAILED = -2.0  # the label of a failed candidate


class CostModel:
    """``update(records)`` then ``predict(features)``: higher is better."""

    def __init__(self, min_samples: int = 8):
        self.min_samples = min_samples
        self._booster = None
        self._rows: dict = {}  # (workload, trace) -> (features, median or inf)
        self.trained_on = 0

    def add(self, workload: str, trace: str, features: Sequence[float], median: float) -> None:
        self._rows[(workload, trace)] = (list(features), median)

    def add_records(self, records: Sequence) -> int:
        """Rows from database records that carry features; returns how many were added. A trace
        with several records (re-measured: :mod:`.search`) is one row at their mean median, or
        failed if one failed."""
        n = 0
        times: dict = {}
        for r in records:
            if not r.features:
                continue
            key = (r.workload, r.trace)
            times.setdefault(key, []).append(r.median if r.ok else math.inf)
            xs = times[key]
            self.add(r.workload, r.trace, json.loads(r.features), sum(xs) / len(xs))
            n += 1
        return n

    @property
    def samples(self) -> int:
        return len(self._rows)

    def fit(self) -> bool:
        """Train on every row so far; False while there are too few rows to learn from."""
        if len(self._rows) < self.min_samples:
            return False
        best: dict = {}
        for (w, _), (_, t) in self._rows.items():
            if math.isfinite(t):
                best[w] = min(best.get(w, math.inf), t)
        X, y = [], []
        for (w, _), (f, t) in self._rows.items():
            if w not in best:
                continue
            X.append(f)
            y.append(math.log2(best[w] / t) if math.isfinite(t) else FAILED)
        if len(X) < self.min_samples or len(set(y)) < 2:
            return False
        import lightgbm as lgb

        params = {"objective": "regression", "learning_rate": 0.1, "num_leaves": 15, "min_data_in_leaf": 2,
                  "min_data_in_bin": 1, "feature_fraction": 0.9, "verbose": -1, "num_threads": 1,
                  "deterministic": True, "seed": 0}
        data = lgb.Dataset(np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64),
                           params={"verbose": -1, "min_data_in_bin": 1})
        self._booster = lgb.train(params, data, num_boost_round=80)
        self.trained_on = len(X)
        return True

    @property
    def trained(self) -> bool:
        return self._booster is not None

    def predict(self, features: Sequence[Sequence[float]]) -> np.ndarray | None:
        """Scores of candidates (higher: faster), or None before the first training."""
        if self._booster is None or not len(features):
            return None
        return self._booster.predict(np.asarray(features, dtype=np.float64), num_threads=1)
