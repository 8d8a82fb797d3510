"""Every Learn lesson at its paper's defaults, figure by figure: within the stated tolerance, or saying why not.

Each test names the figure and the tolerance it checks (the tolerances live with the paper's numbers in
data/learn/paper_figures.csv, each with its source).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from planning import api, learn
from planning.learn_checks import FIGURES_FILE, PaperCheck, paper_figures


def _checks(lesson: learn.Lesson) -> dict[str, PaperCheck]:
    return {c.figure: c for c in lesson.checks}


def test_every_figure_has_a_source_and_a_tolerance() -> None:
    rows = list(csv.DictReader(FIGURES_FILE.open(encoding="utf-8")))
    assert rows and all(r["source"].strip() and r["unit"].strip() for r in rows)
    assert len(paper_figures()) == len(rows)  # no duplicate (lesson, figure)
    assert {r["lesson"] for r in rows} >= {"demystifying", "coral-contention", "coral-mixed-pipeline", "melange", "slo"}


def test_demystifying_app_c_makespans_within_a_hundredth_of_a_second() -> None:
    """Demystifying App. C, Cases 1–3: 44.05, 35.24, 30.94, 28.67 s, each ± 0.01 s."""
    checks = _checks(learn.demystifying_worked_example())
    assert set(checks) == {"one of each type", "t1 + 2×t2", "t1 + TP-2(t2)", "t1 + TP-2(t2), paper's routing"}
    for c in checks.values():
        assert c.tolerance == 0.01 and c.within, c
    lesson = learn.demystifying_worked_example()
    assert any(n.startswith("t1, t2, t3:") for n in lesson.notes)  # the symbols are defined on the page
    assert any(n.startswith("TP-2(t2):") for n in lesson.notes)


def test_coral_fig2_greedy_fails_joint_serves_exactly() -> None:
    """Coral Fig. 2: greedy serves both = 0, the joint ILP = 1 (tolerance 0)."""
    checks = _checks(learn.coral_contention())
    assert checks["greedy serves both"].within and checks["joint ILP serves both"].within
    assert learn.coral_contention(a_nodes=4).checks == ()  # moved away from the paper's pool: no comparison


def test_coral_fig1a_mix_over_best_pure_h100_disagrees_and_says_why() -> None:
    """Coral Fig. 1(a): the paper's mix ÷ the best pure-H100 setup = 1.09 (526 / 481), ± 0.05. Since perf v5 ours is
    1.019 (perf v5.4: 1.024, the measured all-reduce): outside, and the check says so in numbers with the cause computed stage by stage. Qwen3-235B's experts are
    vLLM's fused-MoE kernels measured at this model's own shape, TP and BF16 on both GPUs (nothing scaled); the
    mix is held by its 2xH100 stages (27 layers, TP 2, 8,192 tokens a step) because its L40S stages, whose kernel
    runs 1.74× the roofline at 8,192 tokens, take only 13 of the 94 layers. The H100's kernel prices both sides
    of the ratio; test_learn's counterfactual shows the L40S's is the one that moves it."""
    lesson = api.lesson("coral-mixed-pipeline")
    c = _checks(lesson)["paper's mix ÷ best pure H100 (×)"]
    assert c.paper == 1.09 and c.tolerance == 0.05
    assert not c.within and c.ours == 1.024
    assert c.why.startswith("Disagrees with the paper: 1.024 against 1.09 ± 0.05. The input that differs")
    for number in ("nothing scaled from another shape",
                   "1xL40S × 1 (5 layers, TP 1): 8,192 tokens a step, experts 17.00 ms a layer, 1.74× the roofline",
                   "2xH100 × 1 (27 layers, TP 2): 8,192 tokens a step, experts 3.17 ms a layer, 1.74× the roofline",
                   "at 39,983 prompt tok/s", "take only 13 of the 94 layers", "runs 40,343"):
        assert number in c.why, (number, c.why)
    (caption, rows), = lesson.tables
    assert "Fig. 1(a)" in caption
    assert [r["layers"] for r in rows] == [27, 27, 27, 8, 5] and sum(r["layers"] for r in rows) == 94
    assert [r["binds"] for r in rows] == ["yes"] * 3 + [""] * 2
    for r in rows:  # every stage reads the kernel measured for its own GPU and TP, unscaled
        gpu = r["node"].split("x", 1)[1].split(" ")[0]
        assert f"measured on {gpu} bf16" in r["kernel"] and f"TP {r['tp']};" in r["kernel"], r
        assert "scaled" not in r["kernel"] and r["measured ÷ roofline"] > 1
    # off the paper's setting there is no check, so no stage table either
    assert api.lesson("coral-mixed-pipeline", slo_ms=3600).tables == ()


def test_melange_fig3a_within_the_papers_precision_or_says_which_cell() -> None:
    """Mélange Fig. 3a (printed to 0.1, so ± 0.05): the A10G's lead of up to 2.6× reproduces on the public profile
    (2.64×); the A100's 1.5× does not (1.38×), and the check names the one profile cell it rests on and shows the
    paper's figure inside that cell's printed rounding."""
    checks = _checks(learn.melange_request_size())
    small, big = checks["A10G max advantage (×)"], checks["A100 max advantage (×)"]
    assert small.tolerance == big.tolerance == 0.05
    assert small.within and small.ours == 2.64
    assert not big.within and big.ours == 1.38
    for number in ("2000/2000 tokens", "prints 0.04 req/s", "needs 0.0367 req/s", "(0.035–0.045)", "1.22–1.57×"):
        assert number in big.why, (number, big.why)


def test_melange_fig9_mix_and_a100_saving_reproduce_a10g_saving_says_which_input() -> None:
    """Mélange Fig. 9 (whole percent, so ± 0.5 points): 2 A100 + 1 A10G exactly and 24 % cheaper than A100-only
    reproduce on the public profile; 31 % cheaper than A10G-only does not (8.1 %). The check computes why: the
    paper's case needs 3 A100 or 12 A10G alone, so an A100 serving 5–6× an A10G; the profile's A100 serves 3.91×
    at the paper's 1000/250, 4.26× at the 1000/500 of the authors' copy of the figure, at most 5.00× anywhere; the
    figure's own staircase (2.0 vs 0.37 req/s) gives the paper's 24.2 % and 31.1 % with the same solver."""
    lesson = learn.melange_request_size()
    checks = _checks(lesson)
    for name in ("Fig. 9 mix: A100s", "Fig. 9 mix: A10Gs", "Fig. 9 mix saving vs A100-only (%)"):
        assert checks[name].within, checks[name]
    assert checks["Fig. 9 mix saving vs A100-only (%)"].tolerance == 0.5
    off = checks["Fig. 9 mix saving vs A10G-only (%)"]
    assert not off.within and off.paper == 31 and off.ours == 8.1 and off.tolerance == 0.5
    for number in ("against 3 A100 or 12 A10G alone", "more than 5× and less than 6×", "2 against 0.37 req/s (5.4×)",
                   "3.01 against 0.77 (3.91×) at 1000/250", "1.62 against 0.38 (4.26×) at 1000/500",
                   "at most 5.00× in any bucket (2000/2000)", "at most 8.1 % (17.3 % at 1000/500)",
                   "the paper's 24.2 % and 31.1 %"):
        assert number in off.why, (number, off.why)
    (caption, rows), = lesson.tables
    assert "Fig. 9" in caption
    table = {r["quantity"]: [v for k, v in r.items() if k != "quantity"] for r in rows}
    assert table["mix saving vs A10G-only there (%)"] == ["8.1", "17.3", "31.1"]
    assert table["mix saving vs A100-only there (%)"] == ["24.2"] * 3
    assert table["mix the cheapest plan at the top of that range"] == ["yes"] * 3
    assert table["A10G-only GPUs there"] == ["9", "10", "12"] and table["A100 ÷ A10G"] == ["3.91", "4.26", "5.41"]
    # the text is computed from the plan it describes
    assert "2 A100 + 1 A10G" in lesson.takeaway and f"{lesson.ours['mix saving vs A10G-only (%)']:g} %" in lesson.takeaway
    assert "a few A100s" not in lesson.takeaway
    small = learn.melange_request_size(rate_rps=0.5)
    assert "1 A10G" in small.takeaway and "One GPU type alone is cheapest" in small.takeaway
    assert {c.figure for c in small.checks} == {"A10G max advantage (×)", "A100 max advantage (×)"}
    assert small.tables == ()


def test_fig9_implied_ratio_follows_from_the_printed_case() -> None:
    """Fig. 9's printed case at the paper's prices fixes 3 A100-only and 12 A10G-only, and an A100 ÷ A10G
    throughput in (5, 6); a saving of 25 % instead of 31 % would mean 11 A10G and (4.5, 5.5)."""
    from planning.learn_melange_inputs import fig9_implied, rounding_span

    prices = {"A10G": 1.01, "A100": 3.67}
    case = fig9_implied(2, 1, 24, 31, prices)
    assert (case.a100_only, case.a10g_only, case.ratio_low, case.ratio_high) == (3, 12, 5.0, 6.0)
    other = fig9_implied(2, 1, 24, 25, prices)
    assert (other.a10g_only, other.ratio_low, other.ratio_high) == (11, 4.5, 5.5)
    assert rounding_span("0.04") == pytest.approx((0.035, 0.045))
    assert rounding_span("21.41") == pytest.approx((21.405, 21.415))


def test_melange_fig6_bars_and_text_say_which_input_differs() -> None:
    """Mélange Fig. 6 (bars read to ± 0.02, compared ± 0.05; the text's 2× ± 0.5 at < 60 ms and > 40 % for the
    A10G somewhere in 60–160 ms). Our performance model has no A10G calibration and reproduces none of them at the
    paper's 64/64 tokens; each check names the A10G's decode speed and how much faster the paper's figure needs it.
    The paper's own measured profile (one SLO, not stated) gives 0.75 for the bucket holding 64/64, Fig. 6's bar at
    120 and at 160 ms within ± 0.05."""
    lesson = learn.slo_changes_the_answer()
    checks = _checks(lesson)
    tight, loose = checks["A100 advantage below 60 ms (×)"], checks["A10G advantage at 60–160 ms (×)"]
    bar = checks["Fig. 6 A100 ÷ A10G T/$ at 100 ms (×)"]
    assert tight.tolerance == 0.5 and loose.relation == "at least" and loose.paper == 1.4
    assert bar.paper == 0.83 and bar.tolerance == 0.05
    for c in (tight, loose, bar):
        assert c.within or c.why.startswith("The input that differs is the A10G's decode speed"), c
        if not c.within:
            assert "roofline prior" in c.why and "tok/s from the A10G" in c.why and "× ours" in c.why
    assert "the paper's is at 140 ms, bar 0.69" in loose.why
    assert "Mélange measured 1.20× in favour of the A10G at this SLO (Fig. 6)" in lesson.takeaway  # 1 / 0.83
    assert lesson.ours["A100-80G tokens per $"] / lesson.ours["A10G tokens per $"] == pytest.approx(bar.ours, abs=0.01)
    (_caption, (row,)), = lesson.tables
    assert row["A100 ÷ A10G T/$"] == 0.75 and row["Fig. 6 bars within ± 0.05"] == "120 ms, 160 ms"
    assert set(_checks(learn.slo_changes_the_answer(200.0))) == {"A100 advantage below 60 ms (×)",
                                                                  "A10G advantage at 60–160 ms (×)"}
    assert "Fig. 6 A100 ÷ A10G T/$ at 140 ms (×)" in _checks(learn.slo_changes_the_answer(140.0))


def test_glossary_defines_the_terms_the_pages_use() -> None:
    """Issue 38 §4: the glossary lacked these; each now has a sentence of its own."""
    from planning import viz

    for term in ("ILP", "MIP gap", "goodput", "attainment", "headroom", "KV cache", "Nmax", "ρ", "K", "memP",
                 "roofline", "makespan", "break-even", "TP-2", "T/$", "bucket", "profile"):
        assert len(viz.GLOSSARY.get(term, "")) > 40, term


def test_workbench_doc_shows_the_fig1a_table_the_page_computes() -> None:
    """docs/workbench.md's Coral Fig. 1(a) table is the page's: same setups, templates, GPUs and tok/s per $/h."""
    import re

    doc = (Path(__file__).resolve().parents[2] / "docs" / "workbench.md").read_text(encoding="utf-8")
    section = doc[doc.index("| setup (1800 ms, nodes ≤ 2 GPUs)"):]
    rows = {}
    for line in section.splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = (cells[1].split(" ")[0], int(cells[2]), float(cells[5].replace(",", "")))
    lesson = api.lesson("coral-mixed-pipeline")
    page = {("the paper's mix" if r["setup"].startswith("the paper's mix") else r["setup"]):
            (r["template"], r["gpus"], round(r["per_dollar"])) for r in lesson.rows}
    assert set(rows) == set(page)
    for setup, (template, gpus, per_dollar) in rows.items():
        assert (template, gpus) == page[setup][:2], setup
        assert per_dollar == pytest.approx(page[setup][2], abs=1), setup
    ratio = lesson.ours["paper's mix ÷ best pure H100 (×)"]
    assert f"the paper's mix gives {ratio:.2f}× the best" in re.sub(r"\s+", " ", doc)


def test_workbench_doc_states_the_melange_checks_the_page_computes() -> None:
    """docs/workbench.md's Learn table: each Mélange row's tolerance, our number and agreement are the page's."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "workbench.md").read_text(encoding="utf-8")
    section = doc[doc.index("| lesson | figure (tolerance) | paper | ours | agrees |"):]
    rows = []
    for line in section.splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0].startswith("Mélange"):
            rows.append(cells)
    checks = [*learn.melange_request_size().checks, *learn.slo_changes_the_answer().checks]
    counts = {c.figure: c.ours for c in checks}
    mix = f"{counts['Fig. 9 mix: A100s']:g} A100 + {counts['Fig. 9 mix: A10Gs']:g} A10G"
    checks = [c for c in checks if c.figure != "Fig. 9 mix: A10Gs"]  # one row for the mix
    assert len(rows) == len(checks) == 8
    for cells, c in zip(rows, checks, strict=True):
        assert (mix if c.figure == "Fig. 9 mix: A100s" else f"{c.ours:g}") in cells[3], (cells, c.ours)
        assert cells[4] == ("yes" if c.within else "no"), (cells, c.within)
        tolerance = (f"(≥ {c.paper:g})" if c.relation == "at least" else "(exact)" if c.tolerance == 0
                     else f"± {c.tolerance:g}")
        assert tolerance in cells[1], (cells, c.stated)
