"""Warm starts for the on-demand engine: the columns a neighbouring plan used, as shape multisets.

A what-if variant or a sweep point is a neighbour of a plan already made: a demand, price or availability change
keeps the template space, a dropped GPU type or region only removes columns, an SLO change keeps the multisets
(their throughputs change). The base plan's templates, written as multisets of node shapes (``InstancePlan.usage``),
are valid columns of every such neighbour that still sells their shapes, so they start its column generation
(``pricing.warm_columns``) and the first restricted master ILP finds a plan near the base's at once. They only
start the search: pricing still proves the LP optimal over all templates and the certificate covers every
template, so a warm solve returns a plan as cheap as the cold one (``tests/allocate/test_warm_whatif.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from planning.result import PlanResult

Multiset = tuple[tuple[str, int], ...]  # ((shape, nodes), …) sorted by shape


@dataclass(frozen=True)
class WarmStart:
    """Per group id (``"{model}/{phase}"``), the multisets of node shapes to start column generation with."""

    columns: Mapping[str, tuple[Multiset, ...]]

    @classmethod
    def from_result(cls, result: PlanResult) -> WarmStart:
        """The templates ``result``'s plan uses, per group (empty for a plan without instances)."""
        found: dict[str, dict[Multiset, None]] = {}
        for inst in result.instances:
            ms = tuple(sorted((str(s), int(n)) for s, n in inst.usage.items() if int(n) > 0))
            if ms:
                found.setdefault(f"{inst.model}/{inst.phase}", {})[ms] = None
        return cls({gid: tuple(ms) for gid, ms in found.items()})

    @classmethod
    def union(cls, starts: Iterable[WarmStart | None]) -> WarmStart:
        """Every column of every start (first-seen order)."""
        found: dict[str, dict[Multiset, None]] = {}
        for w in starts:
            for gid, cols in (w.columns.items() if w is not None else ()):
                found.setdefault(gid, {}).update(dict.fromkeys(cols))
        return cls({gid: tuple(ms) for gid, ms in found.items()})

    def to_dict(self) -> dict[str, list[list[list[object]]]]:
        """Plain JSON: ``{group id: [[[shape, nodes], …], …]}`` (a job request carries it)."""
        return {gid: [[[s, n] for s, n in ms] for ms in cols] for gid, cols in self.columns.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Sequence[Sequence[Sequence[object]]]]) -> WarmStart:
        """The inverse of :meth:`to_dict`; rows that are not ``[shape, nodes]`` pairs are skipped (a warm start
        is only a hint: a bad one costs time, never correctness)."""
        out: dict[str, tuple[Multiset, ...]] = {}
        for gid, cols in data.items():
            found = []
            for ms in cols:
                try:
                    found.append(tuple(sorted((str(s), int(n)) for s, n in ms)))  # type: ignore[call-overload]
                except (TypeError, ValueError):
                    continue
            out[str(gid)] = tuple(found)
        return cls(out)

    def rows(self, group_id: str, shapes: Sequence[str], nmax: int) -> np.ndarray | None:
        """This group's multisets as a space's padded rows (shape indices ascending, padded with ``len(shapes)``);
        multisets with a shape ``shapes`` lacks or more than ``nmax`` nodes are dropped. None when none is left."""
        index = {s: i for i, s in enumerate(shapes)}
        K = len(shapes)
        out = []
        for ms in self.columns.get(group_id, ()):
            if any(s not in index for s, _n in ms) or sum(n for _s, n in ms) > nmax:
                continue
            row = sorted(index[s] for s, n in ms for _ in range(n))
            out.append(row + [K] * (nmax - len(row)))
        return np.array(out, dtype=np.int64) if out else None

    def __len__(self) -> int:
        return sum(len(c) for c in self.columns.values())
