"""One source for the baselines: the registry runs them, names them, describes them on the Plan page and tells
the timeline which to re-plan per epoch."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from planning import api
from planning.allocate import AllocationProblem, Offer, TemplateOption, WorkloadClass
from planning.baselines import base, baseline_names, run_all_baselines, run_baseline
from planning.baselines.registry import BASELINES, PER_EPOCH, Baseline, entry
from planning.errors import PlanningError
from planning.timeline.loop import BASELINE_LABELS
from planning.timeline.plan import BASELINES as TIMELINE_BASELINES

ROOT = Path(__file__).resolve().parents[2]


def _problem(linked: bool) -> AllocationProblem:
    t = (TemplateOption("p:L4", "m/prefill", {"1xL4": 1}, {"p": 6.0}),
         TemplateOption("d:H100", "m/decode", {"1xH100": 1}, {"d": 9.0}))
    offers = (Offer("r", "1xL4", 1.0, 8), Offer("r", "1xH100", 4.0, 2))
    cls = (WorkloadClass("p", "m/prefill", 6.0), WorkloadClass("d", "m/decode", 4.0))
    return AllocationProblem(t, offers, cls, links=((("p", "d"),) if linked else ()))


def test_every_entry_names_a_function_and_describes_itself() -> None:
    for b in BASELINES:
        module, _, name = b.function.partition(":")
        assert callable(getattr(__import__(module, fromlist=[name]), name)), b.function
        assert b.label and b.description.endswith(".")
    assert [b.name for b in BASELINES] == ["homo", "homo-ilp", "cauchy", "single", "memp"]


def test_names_follow_the_registry_and_its_applies_rule() -> None:
    assert baseline_names(_problem(linked=False)) == ["homo", "homo-ilp", "single:H100", "single:L4", "memp"]
    assert baseline_names(_problem(linked=True)) == ["homo", "homo-ilp", "cauchy", "single:H100", "single:L4", "memp"]


def test_run_all_passes_each_strategy_only_its_options(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, set[str]] = {}
    real = base.run_baseline

    def spy(name: str, problem: AllocationProblem, **options: object) -> base.BaselineResult:
        seen[name] = set(options) - {"cancel"}
        return real(name, problem, **options)

    monkeypatch.setattr(base, "run_baseline", spy)
    run_all_baselines(_problem(linked=False), order=["m/prefill", "m/decode"],
                      model_size=None, gpu_memory_gb=None, request_rate=None)
    assert seen["homo"] == {"order"}
    assert seen["memp"] == {"model_size", "gpu_memory_gb", "request_rate"}
    assert seen["homo-ilp"] == seen["single:L4"] == set()


def test_an_unknown_baseline_names_the_known_ones() -> None:
    with pytest.raises(PlanningError, match=r"single:<gpu>") as info:
        run_baseline("single", _problem(linked=False))
    assert info.value.field == "baseline"
    assert entry("single:A10G") is not None and entry("nope") is None


def test_a_new_entry_runs_through_the_registry() -> None:
    extra = Baseline("homo-copy", "planning.baselines.homo:homo_ilp", "Copy", "homo-ilp again.")
    p = _problem(linked=False)
    assert dataclasses.replace(extra).run(p).cost_per_hour == pytest.approx(run_baseline("homo-ilp", p).cost_per_hour)


def test_the_page_and_the_timeline_read_the_registry() -> None:
    caption = api.baseline_caption()
    assert all(f"**{b.label}**: {b.description}" in caption for b in BASELINES)
    assert [row["name"] for row in api.baseline_catalog()] == [b.name for b in BASELINES]
    page = (ROOT / "views" / "3_Plan.py").read_text(encoding="utf-8")
    assert not [b.description for b in BASELINES if b.description[:40] in page]  # no second copy on the page
    assert TIMELINE_BASELINES == PER_EPOCH == ("homo", "homo-ilp")
    assert BASELINE_LABELS == {"homo": "Homo (re-planned)", "homo-ilp": "Homo-ILP (re-planned)"}
