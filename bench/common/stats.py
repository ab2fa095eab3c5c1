"""Order statistics of the benchmarks' timings."""

import math


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile: the smallest value with at least `fraction` of the
    values at or below it (fraction 0.95 gives p95). `values` must not be empty."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)]
