"""The papers' figures each Learn lesson is checked against, restated in ``data/learn/paper_figures.csv``.

A row is one number a paper prints (with its section and figure as ``source``), how ours is compared with it
(``approx``: within ``tolerance`` in the figure's unit; ``at least``: ours ≥ value; ``reported``: shown beside
ours, not compared, because the inputs differ by design) and its unit. A lesson turns the rows it reproduces into
:class:`PaperCheck` values; a check outside its tolerance carries the sentence saying which input differs.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from planning.errors import PlanningError

FIGURES_FILE = Path(__file__).resolve().parent.parent / "data" / "learn" / "paper_figures.csv"
RELATIONS = ("approx", "at least", "reported")


@dataclass(frozen=True)
class PaperFigure:
    """One number a paper prints, as restated in ``data/learn/paper_figures.csv``."""

    lesson: str
    figure: str
    value: float
    relation: str
    tolerance: float
    unit: str
    source: str


@dataclass(frozen=True)
class PaperCheck:
    """A paper's figure beside the engine's at the paper's own setting.

    ``within`` says whether ours agrees (``approx``: |ours − paper| ≤ tolerance; ``at least``: ours ≥ paper);
    ``why`` says, where it does not, which input differs.
    """

    figure: str
    paper: float
    ours: float
    relation: str
    tolerance: float
    unit: str
    source: str
    why: str = ""

    @property
    def within(self) -> bool:
        if not math.isfinite(self.ours):
            return False
        if self.relation == "at least":
            return self.ours >= self.paper
        return abs(self.ours - self.paper) <= self.tolerance + 1e-9

    @property
    def stated(self) -> str:
        """The tolerance in words: ``± 0.01 s``, ``≥ 1.4 ×``."""
        if self.relation == "at least":
            return f"≥ {self.paper:g} {self.unit}"
        return f"± {self.tolerance:g} {self.unit}"


@dataclass(frozen=True)
class Lesson:
    """One worked example: what the paper says, what the engine computes, the rows to show, ``checks``: the
    paper's figures beside ours at the paper's own setting (empty when a control moved away from it), and
    ``tables`` that show the inputs behind them."""

    key: str
    title: str
    paper: str
    takeaway: str
    paper_numbers: Mapping[str, float]
    ours: Mapping[str, float]
    rows: tuple[Mapping[str, Any], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    checks: tuple[PaperCheck, ...] = ()
    # further tables, each (caption, rows): the inputs a check compares, side by side
    tables: tuple[tuple[str, tuple[Mapping[str, Any], ...]], ...] = ()


@lru_cache(maxsize=1)
def paper_figures() -> dict[tuple[str, str], PaperFigure]:
    """Every restated figure by (lesson key, figure name).

    Raises
    ------
    PlanningError
        A row with a bad number or relation (naming the row).
    """
    out: dict[tuple[str, str], PaperFigure] = {}
    with FIGURES_FILE.open(encoding="utf-8") as f:
        for i, row in enumerate(csv.DictReader(f), start=2):
            try:
                value, tol = float(row["value"]), float(row["tolerance"])
            except ValueError:
                raise PlanningError(f"{FIGURES_FILE.name} (row {i})", "value or tolerance is not a number.",
                                    "write plain numbers.") from None
            if row["relation"] not in RELATIONS:
                raise PlanningError(f"{FIGURES_FILE.name} (row {i})", f"relation {row['relation']!r} is unknown.",
                                    f"use one of {', '.join(RELATIONS)}.")
            out[(row["lesson"], row["figure"])] = PaperFigure(row["lesson"], row["figure"], value, row["relation"],
                                                              tol, row["unit"], row["source"])
    return out


def figures_of(lesson: str) -> dict[str, float]:
    """The paper's numbers of one lesson, figure → value, in the file's order."""
    return {f.figure: f.value for (key, _), f in paper_figures().items() if key == lesson}


def check(lesson: str, figure: str, ours: float, why: str = "") -> PaperCheck:
    """The restated figure ``figure`` of ``lesson`` beside ``ours``; ``why`` is kept only when ours is outside.

    Raises
    ------
    PlanningError
        When the figure is not in ``data/learn/paper_figures.csv``.
    """
    f = paper_figures().get((lesson, figure))
    if f is None:
        raise PlanningError("figure", f"{lesson}: {figure!r} is not in {FIGURES_FILE.name}.",
                            "add the paper's number with its source.")
    c = PaperCheck(figure, f.value, float(ours), f.relation, f.tolerance, f.unit, f.source)
    return c if c.within else replace(c, why=why)
