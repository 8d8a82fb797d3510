"""A plan report for finance and sales: headline cost per hour/month/year, comparison, and every assumption.

One structure (:class:`Report`: titled sections of paragraphs and tables) renders to Markdown and to a
self-contained printable HTML page (print it to PDF from the browser), so both say the same thing. Numbers are
formatted for people (money to the cent, shares as percentages, no float noise, no ``nan``).

Comparisons count the same components on both sides: the plan's **provisioning** cost (what the nodes cost per
hour) against each baseline's provisioning cost; the plan's initialization penalty (Coral's K × price of newly
started nodes, an amortised start-up cost the optimizer uses to avoid churn) is shown on its own line and
explained, never mixed into a saving. A saving is stated only when both plans serve the same demand.
"""

from __future__ import annotations

import datetime as dt
import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from planning.billing import pricing_kinds_text
from planning.result import HOURS_PER_MONTH, PlanResult, check_lines

CANNOT = "cannot meet demand"  # a baseline whose cost buys less than the demand: never "$0.00/h"


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Section:
    heading: str
    paragraphs: tuple[str, ...] = ()
    tables: tuple[Table, ...] = ()
    bullets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Chart:
    """A bar chart for the printable page: labelled values in one unit (drawn as inline SVG, no script)."""

    title: str
    bars: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class Report:
    title: str
    subtitle: str
    sections: tuple[Section, ...] = field(default_factory=tuple)
    written: str = ""  # the day the report was written (ISO), shown under the title
    charts: tuple[Chart, ...] = ()


def money(value: float | None) -> str:
    """``$1,234.56`` (``—`` for a missing or non-finite value)."""
    if value is None or not math.isfinite(value):
        return "—"
    return f"${value:,.2f}"


def share(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"{100 * value:.1f} %"


def number(value: Any, digits: int = 4) -> str:
    """A number for people: integers as integers, others to ``digits`` significant digits with separators."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "—"
        if value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        magnitude = math.floor(math.log10(abs(value))) if value else 0
        decimals = max(0, digits - 1 - magnitude)
        text = f"{value:,.{decimals}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return str(value)


def clip(text: str, limit: int = 200) -> str:
    """At most ``limit`` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _price_rows(result: PlanResult, today: dt.date | None = None) -> list[tuple[str, ...]]:
    """The prices the plan pays, each with its source and date and its age on ``today`` (default: the UTC date)."""
    from planning.catalog import load_catalog
    from planning.catalog.prices import price_age_text, user_overrides
    from planning.catalog.schema import shape_key

    catalog = load_catalog(overrides_dir=user_overrides())  # the prices the plan was solved on
    today = today or dt.datetime.now(dt.UTC).date()
    rows: list[tuple[str, ...]] = []
    for cap in result.capacity:
        if cap.used <= 0:
            continue
        match = None
        for cfg in catalog.configs.values():
            if cfg.region_key == cap.region and shape_key(cfg.gpu_id, cfg.gpu_count) == cap.shape:
                prices = {cfg.price_on_demand, cfg.price_spot}
                if any(p is not None and abs(p - cap.price_per_hour) < 1e-6 for p in prices):
                    match = cfg
                    break
        if match is None:
            rows.append((cap.region, cap.shape, "scenario offer", money(cap.price_per_hour), number(cap.used),
                         "given in the scenario", "—"))
            continue
        kind = "spot" if match.price_spot is not None and abs(match.price_spot - cap.price_per_hour) < 1e-6 \
            and abs(match.price_on_demand - cap.price_per_hour) >= 1e-6 else "on-demand"
        rows.append((cap.region, cap.shape, f"{match.instance_type} ({kind})", money(cap.price_per_hour),
                     number(cap.used), clip(match.source, 160), price_age_text(match.as_of, today)))
    return rows


def price_sections(result: PlanResult, today: dt.date | None = None) -> list[Section]:
    """"Prices used": every price with its date and age on ``today`` (default: the UTC date), and a warning
    when any is older than ``catalog.prices.STALE_DAYS``."""
    from planning.catalog.prices import stale_price_warning

    today = today or dt.datetime.now(dt.UTC).date()
    rows = _price_rows(result, today)
    if not rows:
        return []
    stale = stale_price_warning([r[-1][:10] for r in rows], today)
    return [Section("Prices used (per node-hour)", paragraphs=(f"Warning: {stale}",) if stale else (),
                    tables=(Table(("region", "shape", "instance", "price", "nodes", "source", "as of (age)"),
                                  tuple(rows)),))]


def _assumption_sections(scenario: Mapping[str, Any], prices: str) -> list[Section]:
    """The models' table and the other assumptions; ``prices`` the pricing kinds the plan pays."""
    models = []
    for m in scenario.get("models", ()):
        slo = m.get("slo", {}) or {}
        demand = m.get("demand", {}) or {}
        buckets = demand.get("histogram") or demand.get("buckets")
        size = (f"{len(buckets)} request-size buckets" if buckets else
                f"{number(demand.get('input_len'))} in / {number(demand.get('output_len'))} out tokens")
        models.append((str(m.get("id", "?")), number(slo.get("prefill_ms")), number(slo.get("decode_ms")),
                       number(demand.get("rate_rps")), size))
    opts = scenario.get("options", {}) or {}
    objective = scenario.get("objective", {}) or {}
    budget = objective.get("budget_per_hour")
    bullets = [
        f"Serving mode: {scenario.get('mode', 'disaggregated')} "
        "(disaggregated = prefill and decode on separate nodes; aggregated = both on the same engine).",
        f"Prices: {prices}; regions: "
        f"{', '.join(scenario.get('regions', ())) or 'all in the catalog'}; node shapes: "
        f"{', '.join(scenario.get('shapes', ())) or 'all in the catalog'}.",
        f"Availability: catalog node counts × {number(scenario.get('availability_scale', 1.0))}"
        + (f", {len(scenario.get('availability', ()))} override(s)" if scenario.get("availability") else "") + ".",
        f"Objective: {objective.get('kind', 'cost')}" + (f" within a budget of {money(budget)}/h" if budget else "")
        + ".",
        f"Search: at most {number(opts.get('nmax'))} nodes per serving template (Nmax), templates up to "
        f"{number(opts.get('rho'))}× the model's memory (ρ), initialization penalty factor K = "
        f"{number(opts.get('K'))}, solver {opts.get('solver', 'highs')}, time limit {number(opts.get('time_limit_s'))} s.",
    ]
    return [
        Section("Models, latency targets and traffic",
                tables=(Table(("model", "TTFT / prefill SLO (ms)", "TPOT / decode SLO (ms)", "requests/s",
                               "request size"), tuple(models)),)),
        Section("Other assumptions", bullets=tuple(bullets)),
    ]


def build_report(result: PlanResult, today: dt.date | None = None) -> Report:
    """The report's content for a plan (the scenario it was solved for travels inside ``result``), written
    ``today`` (default: the local date)."""
    scenario = dict(result.scenario or {})
    name = str(scenario.get("name") or "scenario")
    ok = result.has_plan
    if ok:
        bill = result.bill
        headline = [
            f"Status: **{result.status}** ({result.proof()})"
            + f"; serves {share(result.served_fraction)} of the demand.",
            bill.headline() + f" ({number(HOURS_PER_MONTH)} h a month.)",
        ]
        if bill.design_hour_text():
            headline.append(bill.design_hour_text())
        if result.stopped_at:
            headline.append(f"The time limit stopped the solver at: {result.stopped_at}. This is the best plan found "
                            "by then; the gap above bounds how much cheaper the optimum can be.")
    else:  # never "$0 per month" for a plan that does not exist
        headline = [f"Status: **no plan** ({result.status}). There is nothing to rent and no cost to state."]
    if result.transfer_per_hour > 0:
        headline.append(
            f"Cross-region KV transfer: **{money(result.transfer_per_hour)}/h** of egress on top of the nodes (a real "
            "bill, counted in every comparison): "
            + "; ".join(f"{share(f.share)} of {f.model} prefill in {f.src}, decode in {f.dst} ({money(f.usd_per_hour)}/h, "
                        f"+{number(f.transfer_s * 1e3)} ms hand-off)" for f in result.kv_flows if f.cross_region) + ".")
    if result.penalty_per_hour > 0:
        headline.append(
            f"Start-up allowance: {money(result.penalty_per_hour)}/h on top — Coral's initialization penalty (K × the "
            "hourly price of every node started now), which spreads start-up time over the re-planning interval. It "
            "is not a bill; comparisons below leave it out on both sides.")
    gpus = result.gpus_by_type()
    if gpus:
        headline.append("GPUs: " + ", ".join(f"{n} × {g}" for g, n in gpus.items()) + "; regions: "
                        + ", ".join(result.regions_used()) + ".")
    if result.message:
        headline.append(result.message)
    comparison_rows = []
    for b in result.baselines:
        if not b.ran:  # the time limit left no time for it: no figures, never $0
            comparison_rows.append((b.name, "not run", "not run", "—", "—", clip(b.note)))
            continue
        if not b.feasible:  # its cost buys less than the demand: no $/h, $/month or saving to compare
            comparison_rows.append((b.name, CANNOT, CANNOT, f"{share(b.served_fraction)} (worst model)", "—",
                                    clip(f"serves {b.shortfall}; {b.note}" if b.shortfall else b.note)))
            continue
        pct = result.savings_vs(b) if ok else None  # one formula and one "same demand" rule (result.savings_pct)
        saving = pct / 100.0 if pct is not None else None
        comparison_rows.append((b.name, money(b.cost_per_hour), money(b.cost_per_hour * HOURS_PER_MONTH),
                                share(b.served_fraction),
                                share(saving) if saving is not None else "not comparable (serves different demand)",
                                clip(b.note)))
    sections = [Section("Headline", paragraphs=tuple(headline))]
    if comparison_rows and ok:
        full = result.comparable_cost
        comparison_rows.insert(0, ("this plan (design hour, full cost)", money(full), money(full * HOURS_PER_MONTH),
                                   share(result.served_fraction), "—", result.status))
    if comparison_rows:
        sections.append(Section(
            "Compared with simpler strategies",
            paragraphs=("Each baseline is planned for the same demand, regions and prices, at the design hour's full "
                        "cost (marginal node prices, egress and committed capacity on both sides). The saving is "
                        "stated only when both serve the same demand.",),
            tables=(Table(("strategy", "$/h", "$/month", "served", "plan saves", "note"), tuple(comparison_rows)),)))
    if result.checks:  # planning.checks: each check with its figures; a failed one with its cause and fix
        sections.append(Section("Checks", bullets=tuple(clip(c.line(), 400) for c in result.checks)))
    sections += finance_sections(result)
    sections += _assumption_sections(scenario, pricing_kinds_text(result.cost_by_pricing_kind,
                                                                  str(scenario.get("pricing", "on_demand"))))
    sections += price_sections(result)
    inst_rows = tuple((i.model, i.phase, i.region, number(i.count), ", ".join(f"{n} × {g}" for g, n in sorted(i.gpus.items())),
                       f"{number(i.throughput)} {i.throughput_unit}", share(i.utilisation), money(i.cost_per_hour))
                      for i in result.instances)
    if inst_rows:
        sections.append(Section("What to rent", tables=(Table(
            ("model", "phase", "region", "instances", "GPUs per instance", "throughput each", "load", "$/h"),
            inst_rows),)))
    perf_lines = [f"{k}: {v}" for k, v in (result.provenance or {}).items()]
    sections.append(Section(
        "Where the performance numbers come from",
        paragraphs=("Throughputs come from the project's performance model (roofline physics, calibrated on public "
                    "kernel measurements, checked against published end-to-end serving results; docs/perf-model.md "
                    "gives the error per GPU class). Plan capacity inherits that uncertainty.",),
        bullets=tuple(perf_lines)))
    if result.diagnostics:
        sections.append(Section("Diagnostics", bullets=tuple(clip(d, 400) for d in result.diagnostics)))
    subtitle = str(scenario.get("description") or "").strip()
    return Report(f"Serving plan — {name}", subtitle, tuple(sections), (today or dt.date.today()).isoformat(),
                  report_charts(result))


def report_charts(result: PlanResult) -> tuple[Chart, ...]:
    """The bill by month (a horizon bill), the design hour's full cost by pricing kind, and the plan against the
    baselines that meet demand ($/h, the design hour's full cost on both sides); none without a plan."""
    if not result.has_plan:
        return ()
    charts = []
    bill = result.bill
    if bill.months:
        charts.append(Chart("The bill by month ($)", tuple((str(m), v) for m, v in bill.months)))
    kinds = [(KIND_LABELS.get(k, k), v) for k, v in result.cost_by_pricing_kind.items() if v > 0]
    if len(kinds) > 1:
        charts.append(Chart("Design hour by pricing kind ($/h, full cost)", tuple(kinds)))
    rivals = [(b.name, b.cost_per_hour) for b in result.baselines if b.ran and b.feasible]
    if rivals:
        charts.append(Chart("This plan against the baselines that meet demand ($/h)",
                            (("this plan", result.comparable_cost), *sorted(rivals, key=lambda r: r[1]))))
    return tuple(charts)


KIND_LABELS = {"owned": "owned", "reserved": "reserved", "on_demand": "on-demand", "spot": "spot", "egress": "egress"}


def finance_sections(result: PlanResult) -> list[Section]:
    """Costs by pricing kind, commitments to sign, idle committed capacity, spot risk, the horizon's totals against
    all on-demand and all reserved, and the year's bill (empty for a plan without finance inputs)."""
    fin = dict(result.finance or {})
    if not result.has_plan or not (fin or result.cost_by_pricing_kind):
        return []
    out: list[Section] = []
    kinds = result.cost_by_pricing_kind
    if kinds:
        kind_rows = tuple((KIND_LABELS.get(k, k), money(v)) for k, v in kinds.items())
        out.append(Section("Cost by pricing kind (the design hour, full cost)", paragraphs=(
            "Owned and reserved include their fixed cost for every node, serving or idle; on-demand and spot what "
            "the plan's nodes cost (spot at its expected cost with interruptions). With the KV egress they add up "
            "to the design hour's full cost; the bill above is what the horizon pays.",),
            tables=(Table(("kind", "$/h (design hour)"), kind_rows),)))
    if result.commitments:
        commit_rows = tuple((c.status, c.region, c.shape, number(c.count), f"{number(c.term_years)} y", money(c.upfront_usd),
                      f"${c.hourly_usd:,.4f}", f"${c.effective_hourly:,.4f}", share(c.break_even),
                      share(c.utilisation) if c.utilisation is not None else "—") for c in result.commitments)
        out.append(Section("Commitments", paragraphs=(
            "Held reservations and the ones to sign (status sign: the sizing's decision). Break-even: the share of "
            "the term's hours a reserved node must serve to cost less than on-demand; utilisation: the share it "
            "serves in the horizon's plan.",),
            tables=(Table(("status", "region", "shape", "nodes", "term", "upfront / node", "hourly / node",
                           "effective $/h", "break-even", "utilisation"), commit_rows),)))
    idle = [r for r in fin.get("idle", []) if r.get("idle")]
    if idle:
        out.append(Section("Idle committed capacity", paragraphs=(
            "Paid whether it serves or not; counted in the plan's cost and in every baseline's, never as a saving.",),
            tables=(Table(("region", "shape", "kind", "held", "used", "idle", "$/h idle"), tuple(
                (r["region"], r["shape"], r["kind"], number(r["held"]), number(r["used"]), number(r["idle"]),
                 money(r["idle_usd_per_hour"])) for r in idle)),)))
    spot = fin.get("spot") or {}
    if spot.get("models"):
        spot_rows = tuple((m, share(v["spot_share"]), share(v["expected_served_fraction"]),
                           number(v["interruptions_per_day"])) for m, v in sorted(spot["models"].items()))
        out.append(Section("Spot risk", paragraphs=(
            f"Interruptions lose capacity for {number(spot['recovery_hours'])} h ({spot['recovery']} recovery); at "
            f"most {share(spot['max_share'])} of any model's demand depends on spot nodes. Rates and their sources: "
            "the assumptions below.",),
            tables=(Table(("model", "capacity on spot", "expected served", "interruptions per day"), spot_rows),)))
    sizing = fin.get("sizing")
    if sizing:
        variants = [("optimal commitments", sizing), *(fin.get("comparisons") or {}).items()]
        out.append(Section("The horizon: commitments against all on-demand and all reserved", paragraphs=(
            "Totals over the horizon (nodes, reservations, owned pools), each the same way: " + (
                f"the chosen commitments are proven within {share(sizing['gap'])} of the optimum "
                f"(over {sizing['certified_over']})." if sizing.get("gap") is not None else "no bound proven."),),
            tables=(Table(("variant", "status", "total", "proven gap"), tuple(
                (name, s["status"], money(s["total_usd"]), share(s["gap"]) if s.get("gap") is not None else "—")
                for name, s in variants)),)))
    totals = fin.get("bill_totals") or {}
    if totals:
        tables = [Table(("month", "total"), tuple((str(m), money(v)) for m, v in result.bill.months))]
        for by in ("kind", "model", "region", "cloud"):
            tables.append(Table((by, "horizon total"), tuple((KIND_LABELS.get(k, k) if by == "kind" else k, money(v))
                                                              for k, v in totals.get(by, {}).items())))
        out.append(Section("The bill", paragraphs=(
            f"From {fin.get('bill_source', 'the plan')}; committed capacity is charged to the models by use, its "
            "idle part to (idle). The CSV (planning solve --bill FILE, or the Plan page) has every month × model × "
            "region × kind.",), tables=tuple(tables)))
    if fin.get("assumptions"):
        out.append(Section("Finance assumptions", bullets=tuple(clip(a, 600) for a in fin["assumptions"])))
    return out


def _md_cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def report_markdown(result: PlanResult) -> str:
    """The report as Markdown."""
    rep = build_report(result)
    out = [f"# {rep.title}", "", f"Written {rep.written}.", ""]
    if rep.subtitle:
        out += [rep.subtitle, ""]
    for sec in rep.sections:
        out += [f"## {sec.heading}", ""]
        for p in sec.paragraphs:
            out += [p, ""]
        for b in sec.bullets:
            out.append(f"- {b}")
        if sec.bullets:
            out.append("")
        for t in sec.tables:
            out.append("| " + " | ".join(t.columns) + " |")
            out.append("|" + "|".join("---" for _ in t.columns) + "|")
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t.rows]
            out.append("")
    return "\n".join(out)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:960px;margin:2rem auto;color:#1b1b1b;
line-height:1.45;padding:0 1rem}h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.15rem;margin-top:1.6rem;
border-bottom:1px solid #ddd;padding-bottom:.2rem}table{border-collapse:collapse;width:100%;font-size:.88rem;
margin:.6rem 0}th,td{border:1px solid #ccc;padding:.3rem .45rem;text-align:left;vertical-align:top}
th{background:#f3f3f3}.subtitle,.written{color:#555}.charts svg{margin:.4rem 1rem .4rem 0}@media print{body{margin:0;max-width:none}h2{page-break-after:avoid}
table{page-break-inside:auto}tr{page-break-inside:avoid}}
"""


def _inline(text: str) -> str:
    escaped = html.escape(text)
    parts = escaped.split("**")
    return "".join(f"<strong>{p}</strong>" if i % 2 else p for i, p in enumerate(parts))


def svg_bars(chart: Chart, width: int = 440, bar: int = 18) -> str:
    """One horizontal bar chart as inline SVG (printable, no script): a bar per label, its value at its end."""
    top = max((v for _, v in chart.bars), default=0.0) or 1.0
    label_w, value_w = 130, 90
    span = width - label_w - value_w
    rows = []
    for i, (label, value) in enumerate(chart.bars):
        y = 26 + i * (bar + 6)
        w = max(0.0, value) / top * span
        rows.append(f"<text x='{label_w - 6}' y='{y + bar - 5}' text-anchor='end' font-size='12'>"
                    f"{html.escape(clip(label, 20))}</text><rect x='{label_w}' y='{y}' width='{w:.1f}' "
                    f"height='{bar}' fill='#4c78a8'/><text x='{label_w + w + 4:.1f}' y='{y + bar - 5}' "
                    f"font-size='12'>{html.escape(money(value))}</text>")
    height = 32 + len(chart.bars) * (bar + 6)
    return (f"<svg width='{width}' height='{height}' role='img' "
            f"aria-label='{html.escape(chart.title)}'><text x='0' y='14' font-size='13' font-weight='600'>"
            f"{html.escape(chart.title)}</text>{''.join(rows)}</svg>")


def report_html(result: PlanResult) -> str:
    """The report as one self-contained, printable HTML page (no scripts, no external resources)."""
    rep = build_report(result)
    body = [f"<h1>{html.escape(rep.title)}</h1>", f"<p class='written'>Written {html.escape(rep.written)}</p>"]
    if rep.subtitle:
        body.append(f"<p class='subtitle'>{html.escape(rep.subtitle)}</p>")
    for i, sec in enumerate(rep.sections):
        if i == 1 and rep.charts:  # after the headline
            body.append("<div class='charts'>" + "".join(svg_bars(c) for c in rep.charts) + "</div>")
        body.append(f"<h2>{html.escape(sec.heading)}</h2>")
        body += [f"<p>{_inline(p)}</p>" for p in sec.paragraphs]
        if sec.bullets:
            body.append("<ul>" + "".join(f"<li>{_inline(b)}</li>" for b in sec.bullets) + "</ul>")
        for t in sec.tables:
            head = "".join(f"<th>{html.escape(c)}</th>" for c in t.columns)
            rows = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in t.rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(rep.title)}</title><style>{_CSS}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")


def report_sections(result: PlanResult) -> Sequence[Section]:
    """The sections (for pages that lay them out themselves)."""
    return build_report(result).sections


def terminal_summary(result: PlanResult) -> str:
    """A short plain-text summary for the terminal (``planning solve`` without ``--json``/``--markdown``): status,
    cost, served share, savings against the best baseline, GPUs, instances, baselines, notes and timings."""
    if not result.has_plan:  # never "$0.00/h, 0.0 % served" for a plan that does not exist
        lines = [f"status: no plan ({result.status})", result.message or "no plan was found"]
        lines.extend(f"check: {c.line()}" for c in result.checks if c.failed)
        lines.extend(f"note: {d}" for d in result.diagnostics)
        return "\n".join(lines) + "\n"
    gap = f" (gap {result.mip_gap:.2%})" if result.status == "feasible" and result.mip_gap is not None else ""
    lines = [f"status: {result.status}{gap}    served: {result.served_fraction:.1%}",
             result.bill.headline().replace("**", "")]  # the bill as every page and report says it
    if result.bill.design_hour_text():
        lines.append(result.bill.design_hour_text().replace("**", ""))
    if result.stopped_at:
        lines.append(f"stopped by the time limit at: {result.stopped_at}")
    sizing = (result.finance or {}).get("sizing") or {}
    if sizing.get("gap") is not None:  # the notes quote no gap a time limit stopped (finance.plan.sizing_note)
        lines.append(f"commitment sizing: {sizing.get('status')}, proven within {sizing['gap']:.2%} of the optimum"
                     + ((" when its work budget ran out" if sizing.get("stopped_by") == "work" else
                         " when its time limit stopped the proof") if sizing.get("time_limited") else ""))
    best = result.best_baseline()
    saving = result.savings_vs(best) if best is not None else None
    if best is not None and saving is not None:
        lines.append(f"savings vs best baseline ({best.name}, ${best.cost_per_hour:,.2f}/h): {saving / 100:.1%}")
    lines.append("GPUs: " + ", ".join(f"{n}×{g}" for g, n in result.gpus_by_type().items()))
    lines.append("")
    df = result.instances_frame()
    if not df.empty:
        lines.append(df[["model", "phase", "region", "count", "gpus", "throughput", "utilisation", "cost_per_hour"]]
                     .to_string(index=False))
    lines.append("")
    lines.append(result.baselines_frame()[["name", "cost_per_hour", "served_fraction", "feasible", "savings_pct"]]
                 .to_string(index=False))
    lines.extend(f"check: {line}" for line in check_lines(result.checks))
    lines.extend(f"note: {d}" for d in result.diagnostics)
    t = result.timings
    lines.append(f"timings: templates {t.get('templates_seconds', 0):.2f}s, allocation {t.get('allocation_seconds', 0):.2f}s, "
                 f"baselines {t.get('baselines_seconds', 0):.2f}s")
    return "\n".join(lines) + "\n"
