"""The long-tail preset: 44 models validate quickly, rates follow the stated Zipf law, sharing needs fewer GPUs."""

from __future__ import annotations

import re

import pytest

from planning import api
from planning.catalog.presets import PRESETS_DIR
from planning.sharing import solve_shared


def test_long_tail_validates_with_zipf_rates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Validating 44 models builds no template library and computes no step-time curve (each raises here: the
    work that would make validation slow), and the rates follow the preset's stated Zipf law."""
    import planning.perf.model as perf_model
    import planning.templates.library as template_library

    def work(*_a: object, **_k: object) -> None:
        raise AssertionError("validation started a library build or perf curves")

    monkeypatch.setattr(template_library, "build_library", work)
    monkeypatch.setattr(perf_model.PerfModel, "_curves", work)
    s = api.load_preset_scenario("long-tail")
    api.validate(s)
    variants = [m for m in s.models if m.base is not None]
    assert len(s.models) == 44 and len(variants) == 40
    assert len({m.base for m in variants}) == 6
    text = (PRESETS_DIR / "long-tail.yaml").read_text()
    exponent = float(re.search(r"k\^-([0-9.]+) req/s", text).group(1))  # type: ignore[union-attr]
    r1 = float(re.search(r"rank k: ([0-9.]+) x", text).group(1))  # type: ignore[union-attr]
    for k, m in enumerate(variants, start=1):
        assert m.demand.rate_rps == pytest.approx(r1 * k ** -exponent, abs=6e-5)
    rates = sorted(m.demand.rate_rps for m in variants)
    assert sum(rates[:24]) / sum(rates) == pytest.approx(0.25, abs=0.01)  # Prism Sec. 3: 60 % of models, 25 %
    assert rates[0] * 3600 < 100  # the tail end gets < 100 requests per hour


@pytest.mark.slow
def test_shared_plan_needs_fewer_gpus_than_dedicated() -> None:
    s = api.load_preset_scenario("long-tail")
    shared = solve_shared(s, method="kvpr")
    dedicated = api.solve(s, with_baselines=False)
    assert shared.status in ("optimal", "feasible") and dedicated.status in ("optimal", "feasible")
    n_dedicated = sum(dedicated.gpus_by_type().values())
    assert shared.n_gpus < n_dedicated
    assert set(shared.dedicated_models) == {"llama-3-8b", "gpt-oss-20b", "qwen3-32b"}
