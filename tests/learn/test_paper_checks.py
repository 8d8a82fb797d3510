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


def test_coral_fig1a_mix_over_best_pure_h100_within_005() -> None:
    """Coral Fig. 1(a): the paper's mix ÷ the best pure-H100 setup = 1.09 (526 / 481), ours ± 0.05. Perf v5's
    measured fused-MoE kernels moved ours from 1.041 to 1.019 (the H100's experts further above the roofline than
    the L40S's): still above 1 (the paper's claim, the mix beats every pure-H100 setup), outside the tolerance, and
    the check names that input."""
    c = _checks(api.lesson("coral-mixed-pipeline"))["paper's mix ÷ best pure H100 (×)"]
    assert c.paper == 1.09 and c.tolerance == 0.05
    assert c.ours > 1
    assert c.within or ("fused-MoE kernels" in c.why and c.why.startswith("The input")), c


def test_melange_fig3_advantages_and_fig9_mix() -> None:
    """Mélange Fig. 3a (A10G up to 2.6× ± 0.1, A100 up to 1.5× ± 0.15) and Fig. 9 (2 A100 + 1 A10G exactly, 24 %
    ± 2 points cheaper than A100-only) reproduce; Fig. 9's 31 % vs A10G-only does not, and says which input."""
    lesson = learn.melange_request_size()
    checks = _checks(lesson)
    for name in ("A10G max advantage (×)", "A100 max advantage (×)", "Fig. 9 mix: A100s", "Fig. 9 mix: A10Gs",
                 "Fig. 9 mix saving vs A100-only (%)"):
        assert checks[name].within, checks[name]
    off = checks["Fig. 9 mix saving vs A10G-only (%)"]
    assert not off.within and off.paper == 31 and off.tolerance == 2
    assert "A10G's throughput at 1000/250 tokens" in off.why and "0.77 req/s" in off.why
    # the text is computed from the plan it describes
    assert "2 A100 + 1 A10G" in lesson.takeaway and f"{lesson.ours['mix saving vs A10G-only (%)']:g} %" in lesson.takeaway
    assert "a few A100s" not in lesson.takeaway
    small = learn.melange_request_size(rate_rps=0.5)
    assert "1 A10G" in small.takeaway and "One GPU type alone is cheapest" in small.takeaway
    assert {c.figure for c in small.checks} == {"A10G max advantage (×)", "A100 max advantage (×)"}


def test_melange_fig6_slo_checks_say_which_input_differs() -> None:
    """Mélange Fig. 6: A100 about 2× (± 0.5) below 60 ms and the A10G ≥ 1.4× at 60–160 ms. Our performance model
    does not reproduce either at the paper's 64/64 tokens; both checks name the A10G's decode speed as the input
    that differs, with the numbers behind it."""
    lesson = learn.slo_changes_the_answer()
    checks = _checks(lesson)
    tight, loose = checks["A100 advantage below 60 ms (×)"], checks["A10G advantage at 60–160 ms (×)"]
    assert tight.tolerance == 0.5 and loose.relation == "at least" and loose.paper == 1.4
    for c in (tight, loose):
        assert c.within or "The input that differs is the A10G's" in c.why, c
    if not loose.within:
        assert "tok/s" in loose.why and "batch" in loose.why
    assert lesson.ours["A10G tokens per $"] / lesson.ours["A100-80G tokens per $"] == pytest.approx(loose.ours, abs=0.01)
    assert set(_checks(learn.slo_changes_the_answer(200.0))) == {"A100 advantage below 60 ms (×)"}



def test_glossary_defines_the_terms_the_pages_use() -> None:
    """Issue 38 §4: the glossary lacked these; each now has a sentence of its own."""
    from planning import viz

    for term in ("ILP", "MIP gap", "goodput", "attainment", "headroom", "KV cache", "Nmax", "ρ", "K", "memP",
                 "roofline", "makespan", "break-even", "TP-2", "T/$"):
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
