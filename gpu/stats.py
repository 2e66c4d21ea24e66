"""Summary statistics of repeated timings (no numpy: a few dozen numbers)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), interpolated linearly between order statistics.

    Same definition as numpy's default and Excel's PERCENTILE.INC, so the
    numbers can be checked with either.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    median: float
    p95: float
    min: float
    max: float
    stdev: float  # sample standard deviation; 0 for a single value

    def as_dict(self) -> dict:
        return asdict(self)


def summarize(values: Sequence[float]) -> Summary:
    """Mean, median, p95, min, max and sample standard deviation of ``values``."""
    if not values:
        raise ValueError("no values to summarize")
    n = len(values)
    mean = math.fsum(values) / n
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return Summary(n=n, mean=mean, median=percentile(values, 50), p95=percentile(values, 95),
                   min=min(values), max=max(values), stdev=math.sqrt(variance))
