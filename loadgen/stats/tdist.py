"""Student's t quantiles without scipy: what a batch-means interval with few batches multiplies its
standard error by.

``t_quantile`` is exact for 1 and 2 degrees of freedom and a fourth-order Cornish-Fisher expansion around
the normal quantile beyond (within 0.2 % of the tabled 0.975 quantiles from 3 degrees of freedom on;
``tests/unit/stats/test_stats.py`` checks it against the table).
"""

from __future__ import annotations

import math
from statistics import NormalDist

__all__ = ["t_quantile", "two_sided"]

_NORMAL = NormalDist()


def t_quantile(prob: float, df: float) -> float:
    """The ``prob`` quantile of Student's t with ``df`` degrees of freedom (``df`` may be fractional)."""
    if not 0.0 < prob < 1.0:
        raise ValueError(f"probability must lie in (0, 1), got {prob}")
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    if df == 1:
        return math.tan(math.pi * (prob - 0.5))
    if df == 2:
        return (2 * prob - 1) / math.sqrt(2 * prob * (1 - prob))
    z = _NORMAL.inv_cdf(prob)
    if math.isinf(df) or df > 1e7:
        return z
    z2 = z * z
    g1 = (z2 + 1) * z / 4
    g2 = ((5 * z2 + 16) * z2 + 3) * z / 96
    g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384
    g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def two_sided(level: float, df: float) -> float:
    """The multiplier of a two-sided ``level`` interval (1.96 for 0.95 with many degrees of freedom)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must lie in (0, 1), got {level}")
    return t_quantile(0.5 + level / 2, df)
