"""Calibration: the ranges of a model's activations over sample inputs, and the clipping
range each method picks from them.

The model is compiled by Ember with the activations to quantize added as outputs and run on
every calibration batch; per tensor a running min/max and a histogram of its values are kept.
A method turns them into the range ``[lo, hi]`` the quantized tensor covers:

- ``minmax``: the extremes seen (no value clips; a single outlier widens every step);
- ``percentile``: the ``percentile``-th of the absolute values (e.g. 99.99: the tails clip);
- ``entropy``: the clipping threshold whose 128-level quantized histogram is closest to the
  original in KL divergence (the method TensorRT's INT8 calibration made common).
"""
from __future__ import annotations

import math
from typing import Iterable, Mapping

import numpy as np

from ..errors import ArgumentError

BINS = 2048
METHODS = ("minmax", "percentile", "entropy")


class Ranges:
    """Per tensor: min, max and a histogram of absolute values over ``[0, amax]`` (its bins
    widen, merging pairs, when a later batch reaches past ``amax``)."""

    def __init__(self):
        self.lo: dict = {}
        self.hi: dict = {}
        self.hist: dict = {}
        self.amax: dict = {}

    def add(self, name: str, x: np.ndarray) -> None:
        x = np.asarray(x, np.float32).reshape(-1)
        x = x[np.isfinite(x)]
        if x.size == 0:
            return
        lo, hi = float(x.min()), float(x.max())
        self.lo[name] = min(lo, self.lo.get(name, lo))
        self.hi[name] = max(hi, self.hi.get(name, hi))
        a = np.abs(x)
        top = float(a.max()) or 1e-12
        if name not in self.hist:
            self.amax[name], self.hist[name] = top, np.zeros(BINS, np.int64)
        while top > self.amax[name]:  # (double the span: pairs of bins merge)
            h = self.hist[name]
            self.hist[name] = np.concatenate([h.reshape(-1, 2).sum(axis=1), np.zeros(BINS // 2, np.int64)])
            self.amax[name] *= 2
        counts, _ = np.histogram(a, bins=BINS, range=(0.0, self.amax[name]))
        self.hist[name] += counts

    def range(self, name: str, method: str, percentile: float = 99.99) -> tuple:
        """``(lo, hi)`` for ``name`` by ``method`` (always containing 0)."""
        if name not in self.lo:
            raise ArgumentError(f"tensor {name!r} took no finite value in any calibration batch")
        lo, hi = min(self.lo[name], 0.0), max(self.hi[name], 0.0)
        if method == "minmax":
            return lo, hi
        h, amax = self.hist[name], self.amax[name]
        if method == "percentile":
            cdf = np.cumsum(h) / max(h.sum(), 1)
            k = int(np.searchsorted(cdf, percentile / 100.0))
            t = (k + 1) * amax / BINS
        elif method == "entropy":
            t = _kl_threshold(h, amax)
        else:
            raise ArgumentError(f"calibration method must be one of {', '.join(METHODS)}, got {method!r}")
        return max(lo, -t), min(hi, t)


def _kl_threshold(hist: np.ndarray, amax: float, levels: int = 128) -> float:
    """The threshold whose ``levels``-level quantization of ``hist`` (clipped there, the tail
    added to the last bin) is closest to it in KL divergence."""
    hist = hist.astype(np.float64)
    best, best_i = math.inf, len(hist)
    for i in range(levels, len(hist) + 1, 16):
        p = hist[:i].copy()
        p[-1] += hist[i:].sum()
        if p.sum() == 0:
            continue
        # the clipped histogram squeezed to `levels` bins and spread back over the nonzero ones
        chunks = np.array_split(hist[:i], levels)
        q = np.concatenate([np.where(c > 0, c.sum() / max((c > 0).sum(), 1), 0.0) for c in chunks])
        p, q = p / p.sum(), q / max(q.sum(), 1e-30)
        mask = p > 0
        kl = float(np.sum(p[mask] * np.log(p[mask] / np.maximum(q[mask], 1e-12))))
        if kl < best:
            best, best_i = kl, i
    return best_i * amax / len(hist)


def collect(exe, names: list, batches: Iterable[Mapping]) -> Ranges:
    """Run ``exe`` (compiled with ``names`` added as its last outputs) on every batch."""
    ranges = Ranges()
    n = 0
    first = len(exe.output_info) - len(names)
    for feeds in batches:
        outs = exe.run(**dict(feeds))
        for name, v in zip(names, outs[first:]):
            ranges.add(name, v)
        n += 1
    if n == 0:
        raise ArgumentError("the calibration data holds no batch: give at least one input dict")
    return ranges


def uint8_params(lo: float, hi: float) -> tuple:
    """(scale, zero point) of an asymmetric uint8 quantization of ``[lo, hi]`` (0 exact)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / 255.0 or 1.0
    zero = int(np.clip(round(-lo / scale), 0, 255))
    return np.float32(scale), np.uint8(zero)
