"""Every price in a report carries its age, and a report warns when one is older than 30 days (issue 40)."""

from __future__ import annotations

import datetime as dt

import pytest

from planning.catalog import load_catalog
from planning.catalog.prices import STALE_DAYS, price_age_text, stale_price_warning
from planning.catalog.schema import shape_key
from planning.report import price_sections, report_markdown
from planning.result import CapacityUse, PlanResult


@pytest.fixture(scope="module")
def plan_and_date() -> tuple[PlanResult, dt.date]:
    cfg = next(c for c in load_catalog().configs.values() if c.price_on_demand and c.as_of)
    cap = CapacityUse(region=cfg.region_key, shape=shape_key(cfg.gpu_id, cfg.gpu_count), gpu=cfg.gpu_id, used=2,
                      available=4, price_per_hour=cfg.price_on_demand)
    plan = PlanResult(status="optimal", objective="cost", cost_per_hour=2 * cfg.price_on_demand,
                      provisioning_per_hour=2 * cfg.price_on_demand, penalty_per_hour=0.0, served_fraction=1.0,
                      mip_gap=0.0, capacity=(cap,))
    return plan, dt.date.fromisoformat(cfg.as_of)


def test_a_fresh_price_shows_its_age_without_a_warning(plan_and_date: tuple[PlanResult, dt.date]) -> None:
    plan, as_of = plan_and_date
    [section] = price_sections(plan, as_of + dt.timedelta(days=3))
    assert section.paragraphs == ()
    assert section.tables[0].rows[0][-1] == f"{as_of.isoformat()} (3 days)"


def test_an_old_price_is_flagged_and_warned_about(plan_and_date: tuple[PlanResult, dt.date]) -> None:
    plan, as_of = plan_and_date
    [section] = price_sections(plan, as_of + dt.timedelta(days=STALE_DAYS + 15))
    assert section.tables[0].rows[0][-1] == f"{as_of.isoformat()} ({STALE_DAYS + 15} days, stale)"
    assert len(section.paragraphs) == 1 and "1 of 1 prices are older than 30 days" in section.paragraphs[0]
    assert "planning prices refresh" in section.paragraphs[0]
    assert "as of (age)" in report_markdown(plan)


def test_age_helpers_on_the_boundary_and_without_a_date() -> None:
    today = dt.date(2026, 11, 28)
    assert price_age_text("2026-10-29", today) == "2026-10-29 (30 days)"  # 30 days old is not yet stale
    assert price_age_text("2026-10-28", today).endswith("(31 days, stale)")
    assert price_age_text("", today) == "—" and stale_price_warning(["", "—"], today) == ""
    assert stale_price_warning(["2026-11-27", "2026-09-01"], today).startswith("1 of 2 prices")
