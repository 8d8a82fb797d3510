"""The KV pool's Poisson quantile equals scipy's (without importing scipy.stats in a solve)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import poisson

from planning.errors import PlanningError
from planning.sharing.profiles import poisson_quantile, pool_requests


@pytest.mark.parametrize("q", [0.5, 0.9, 0.99, 0.999])
def test_poisson_quantile_equals_scipy(q: float) -> None:
    rng = np.random.default_rng(7)
    mus = np.concatenate([10 ** rng.uniform(-12, 5.5, 600), np.arange(0.05, 40, 0.05)])
    ours = [poisson_quantile(q, float(mu)) for mu in mus]
    assert ours == [int(poisson.ppf(q, mu)) for mu in mus]


def test_pool_requests_and_bad_quantiles() -> None:
    assert pool_requests(1e-9) == 1.0  # at least one request's room
    assert pool_requests(100.0) == float(poisson.ppf(0.99, 100.0))
    for q in (0.0, 1.0, -0.1, float("nan")):
        with pytest.raises(PlanningError, match="quantile"):
            poisson_quantile(q, 5.0)
