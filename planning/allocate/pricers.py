"""Where the on-demand engine's pricing searches run: here, one group after another, or as Ray actors.

Each round of column generation prices every (model, phase) group against the same LP duals: a branch and
bound over node multisets with exact placements at its leaves (``pricing.price``). The groups are independent,
so a round is a fan-out. Two runners share one contract, ``price_all(calls, cancel) -> results in call order``:

``LocalPricers``
    The default (``--backend process``): the groups are priced here, in order. A search takes 0.03-0.4 s on
    the presets (``docs/benchmarks.md``), less than shipping work to another process would save.
``RayPricers``
    ``--backend ray`` / ``PLANNING_BACKEND=ray`` (``PLANNING_RAY_ADDRESS`` for a cluster): one Ray actor per
    group holds that group's search space, shipped once, and keeps its exact-placement cache between rounds;
    a round sends only the duals. The placements an actor makes come back with its answer and are merged into
    the driver's space, so the fixing step, the template sets and later what-ifs reuse them exactly as they
    do after a local search: the answers are identical (a test asserts it), only where the work ran differs.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from planning.context import check_cancel

if TYPE_CHECKING:
    from planning.allocate.pricing import PricedGroup
    from planning.context import CancelToken
    from planning.templates.search import MultisetSpace


@dataclass(frozen=True)
class PriceCall:
    """One group's pricing search: reduced costs against prices ``w`` and duals ``y_d``, ``y_n`` up to ``theta``;
    at most ``limit`` columns (None: every one, a proof round)."""

    group: int
    w: np.ndarray
    y_d: float
    y_n: float
    theta: float
    limit: int | None
    per_region: bool = True
    unbeaten: bool = False
    """Leave out (unplaced) the multisets a listed column beats in every region: a call for a cover ILP without
    availability rows, whose mask would drop them (``planning.allocate.unbeaten``); every column otherwise."""
    protect: tuple[int, ...] = ()
    """With ``unbeaten``: the multiset codes never left out (a MIP start's)."""


Priced = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]
"""(padded multisets, their codes, regions, reduced costs, throughputs) of the columns a search found, and a
floor under the reduced cost of every column of the group (``pricing.price``)."""


class Pricers(Protocol):
    """Runs the pricing searches of a list of groups."""

    def price_all(self, calls: Sequence[PriceCall], cancel: CancelToken | None = None) -> list[Priced]:
        """The columns of each call, in call order."""
        ...  # pragma: no cover

    def close(self) -> None:
        """Release what the runner holds (actors)."""
        ...  # pragma: no cover


def _price_one(pg: PricedGroup, call: PriceCall, cancel: CancelToken | None) -> Priced:
    from planning.allocate.pricing import price
    from planning.allocate.unbeaten import price_unbeaten

    if call.unbeaten and call.limit is None:
        P, codes, reg, rc, floor = price_unbeaten(pg, call.w, call.y_d, call.y_n, call.theta, call.per_region,
                                                  call.protect, cancel)
    else:
        P, codes, reg, rc, floor = price(pg, call.w, call.y_d, call.y_n, call.theta, call.limit, call.per_region,
                                         cancel)
    return P, codes, reg, rc, pg.space.throughput(P, cancel), floor


class LocalPricers:
    """The groups priced in this process, one after another (the default)."""

    def __init__(self, groups: Sequence[PricedGroup]) -> None:
        self.groups = list(groups)

    def price_all(self, calls: Sequence[PriceCall], cancel: CancelToken | None = None) -> list[Priced]:
        out = []
        for call in calls:
            check_cancel(cancel, "pricing search")
            out.append(_price_one(self.groups[call.group], call, cancel))
        return out

    def close(self) -> None:
        return None


class _PricerActor:
    """A Ray actor holding one group's search space (its placement cache persists between rounds)."""

    def __init__(self, pg: PricedGroup) -> None:
        self.pg = pg

    def price(self, call: PriceCall) -> tuple[Priced, dict[int, Any], tuple[int, int, int, float, float]]:
        cache = self.pg.space.cache
        n0 = len(cache)
        s0 = self.pg.space.stats
        before = (s0.prefixes, s0.candidates, s0.evaluated, s0.seconds_search, s0.seconds_exact)
        priced = _price_one(self.pg, call, None)
        new = dict(itertools.islice(cache.items(), n0, None))  # placements made by this call (insertion order)
        s1 = self.pg.space.stats
        work = (s1.prefixes - before[0], s1.candidates - before[1], s1.evaluated - before[2],
                s1.seconds_search - before[3], s1.seconds_exact - before[4])
        return priced, new, work


class RayPricers:
    """One Ray actor per group; a round sends the duals to every actor at once and waits for all answers."""

    def __init__(self, groups: Sequence[PricedGroup], num_cpus: int | None = None) -> None:
        from planning.parallel import ray_module

        self.ray = ray_module(num_cpus)
        self.groups = list(groups)
        self.actors: list[Any] = []
        self._starting = threading.Lock()  # the linked cover bounds price two models at once (threads)

    def _start(self) -> None:
        """The actors, started at the first round (so they get the placements the seed columns already made)."""
        from planning.allocate.pricing import PricedGroup
        from planning.parallel import RAY_RETRIES

        # num_cpus=0: an actor waits between rounds and a round is short, so a CPU each would leave groups
        # unscheduled whenever groups outnumber CPUs (coral-core has more groups than this machine has cores);
        # SPREAD puts the actors over a cluster's nodes
        # an actor whose node dies restarts (up to RAY_RETRIES times) from the group as shipped and re-runs its
        # call: the search is exact, so the answer is the same (only its placement cache starts over). Ray may
        # report the actor "temporarily unavailable" until it notices the node is gone, which uses up the call's
        # retries; then price_all fails with parallel.ray_failure's message (a clear error, no lost columns)
        remote = self.ray.remote(num_cpus=0, scheduling_strategy="SPREAD", max_restarts=RAY_RETRIES,
                                 max_task_retries=RAY_RETRIES)(_PricerActor)
        # an actor gets its group without the driver's column pool (the pool is the LP's, not the search's)
        self.actors = [remote.remote(PricedGroup(pg.group, pg.space, pg.demand, pg.t_bar, {})) for pg in self.groups]

    def price_all(self, calls: Sequence[PriceCall], cancel: CancelToken | None = None) -> list[Priced]:
        from planning.parallel import POLL_S, ray_failure

        check_cancel(cancel, "pricing search")
        with self._starting:
            if not self.actors:
                self._start()
        refs = [self.actors[c.group].price.remote(c) for c in calls]
        pending = list(refs)
        try:
            while pending:
                _ready, pending = self.ray.wait(pending, num_returns=len(pending), timeout=POLL_S)
                if pending and cancel is not None and cancel.is_set():
                    break
        finally:
            for ref in pending:
                self.ray.cancel(ref, force=False)
        check_cancel(cancel, "pricing search")
        try:
            answers = self.ray.get(refs)
        except Exception as exc:
            lost = ray_failure(exc, "a pricing round")
            if lost is None:
                raise
            raise lost from None
        out = []
        for call, (priced, new, work) in zip(calls, answers, strict=True):
            _merge(self.groups[call.group].space, new, work)
            out.append(priced)
        return out

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor)
        self.actors = []


def _merge(space: MultisetSpace, new: dict[int, Any], work: tuple[int, int, int, float, float]) -> None:
    """Add an actor's placements and search work to the driver's space (as if the search had run here)."""
    for code, entry in new.items():
        space.cache.setdefault(code, entry)
    st = space.stats
    st.calls += 1
    st.prefixes += work[0]
    st.candidates += work[1]
    st.evaluated += work[2]
    st.seconds_search += work[3]
    st.seconds_exact += work[4]


def make_pricers(groups: Sequence[PricedGroup], backend: str | None = None) -> Pricers:
    """The runner for ``backend`` (None: the process default, see ``planning.parallel.resolve_backend``)."""
    from planning.parallel import resolve_backend

    if resolve_backend(backend) == "ray":
        return RayPricers(groups)
    return LocalPricers(groups)
