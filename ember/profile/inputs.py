"""Inputs for timing a model: normal floats, zero integers (so that indices stay in range)."""
from __future__ import annotations

import numpy as np

__all__ = ["random_inputs"]


def random_inputs(infos, seed: int = 0, symbolic: int = 1) -> list:
    """One array per input of ``infos`` (an executable's ``input_info``), symbolic dims at
    ``symbolic``: floats from a normal distribution, integers and booleans zero."""
    rng = np.random.default_rng(seed)
    out = []
    for info in infos:
        shape = [d if isinstance(d, int) else symbolic for d in info.shape]
        dt = np.dtype(str(info.dtype)) if str(info.dtype) != "bfloat16" else np.dtype(np.float32)
        out.append(rng.standard_normal(shape).astype(dt) if np.issubdtype(dt, np.floating) else np.zeros(shape, dt))
    return out
