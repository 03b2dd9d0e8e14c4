"""Power of a paired comparison: the minimum detectable effect (MDE) of a geomean
ratio. With ``n`` paired log-ratios of standard deviation ``s``::

    MDE = (z_{1 - alpha/2} + z_{power}) * s / sqrt(n)

detectable as a ratio change of ``1 - exp(-MDE)``. :func:`mde_log` treats pairs as
independent; :func:`mde_log_clustered` uses one mean per scenario."""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np


def z_sum(alpha: float = 0.05, power: float = 0.8) -> float:
    """``z_{1 - alpha/2} + z_{power}`` (2.8016 at the defaults)."""
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must be in (0, 1), got {alpha!r}, {power!r}")
    unit = NormalDist()
    return unit.inv_cdf(1 - alpha / 2) + unit.inv_cdf(power)


def mde_log(log_ratios: Sequence[float], alpha: float = 0.05, power: float = 0.8) -> float:
    """The MDE of the mean of independent paired log-ratios (sample sd, ``n - 1``);
    ``nan`` with fewer than 2 pairs."""
    d = np.asarray(log_ratios, dtype=np.float64).ravel()
    if len(d) < 2:
        return math.nan
    return z_sum(alpha, power) * float(d.std(ddof=1)) / math.sqrt(len(d))


def mde_log_clustered(
    per_scenario: Sequence[Sequence[float]], alpha: float = 0.05, power: float = 0.8
) -> float:
    """The MDE with scenarios as the unit: :func:`mde_log` of the per-scenario means."""
    return mde_log([float(np.mean(s)) for s in per_scenario], alpha, power)


def as_ratio_change(mde: float) -> float:
    """A log-scale MDE as the relative change of the geomean ratio it stands for
    (``1 - exp(-mde)``: 0.03 = a 3 % shorter average JCT)."""
    return 1.0 - math.exp(-mde)
