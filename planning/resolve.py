"""Scenario → what can be planned: model specs, (model, phase) groups, offers and their price/availability matrices.

The first step of every use case (solve, build_templates, validate); computed once per call and passed on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from planning.catalog.schema import Catalog, ModelSpec, shape_order
from planning.errors import UnknownIdError
from planning.groups import Group, plan_groups
from planning.offers import ResolvedOffer, resolve_offers
from planning.scenario import Scenario


def resolve_models(scenario: Scenario, catalog: Catalog) -> dict[str, ModelSpec]:
    """Catalog specs of the scenario's models (custom ones from their HF config).

    Raises
    ------
    UnknownIdError
        A model id not in the catalog and without ``custom_config``.
    """
    from planning.catalog.models import model_from_hf_config

    out: dict[str, ModelSpec] = {}
    for i, req in enumerate(scenario.models):
        if req.custom_config is not None:
            out[req.id] = model_from_hf_config(dict(req.custom_config), req.id)
        elif (req.base or req.id) in catalog.models:  # a variant (fine-tune) shares its base's architecture
            out[req.id] = catalog.models[req.base or req.id]
        elif req.base is None:
            raise UnknownIdError(f"models[{i}].id", req.id, catalog.models)
    for i, req in enumerate(scenario.models):  # variants of the scenario's own (custom) models
        if req.id not in out:
            if req.base not in out:
                raise UnknownIdError(f"models[{i}].base", str(req.base), [*catalog.models, *out])
            out[req.id] = out[str(req.base)]
    return out


@dataclass(frozen=True)
class ResolvedScenario:
    """A scenario resolved against the catalog: what can be bought, which models, which groups.

    ``prices[r, k]`` / ``available[r, k]`` are the $/h and node count of ``shapes[k]`` in ``regions[r]``
    (NaN / 0 where that shape is not sold there).
    """

    scenario: Scenario
    offers: tuple[ResolvedOffer, ...]
    specs: dict[str, ModelSpec]
    groups: tuple[Group, ...]
    shapes: tuple[str, ...]  # every offered shape, ordered by GPU then count
    regions: tuple[str, ...]  # every region with an offer, sorted
    prices: np.ndarray = field(repr=False)
    available: np.ndarray = field(repr=False)

    @classmethod
    def from_offers(cls, scenario: Scenario, offers: Sequence[ResolvedOffer], specs: Mapping[str, ModelSpec],
                    groups: Sequence[Group]) -> ResolvedScenario:
        """The resolved form of given offers, specs and groups: shapes, regions and the price/availability
        matrices built here, once (:func:`resolve_scenario` resolves them from the catalog first)."""
        shapes = tuple(sorted({o.shape for o in offers}, key=shape_order))
        regions = tuple(sorted({o.region for o in offers}))
        r_index = {r: i for i, r in enumerate(regions)}
        k_index = {s: k for k, s in enumerate(shapes)}
        prices = np.full((len(regions), len(shapes)), np.nan)
        available = np.zeros((len(regions), len(shapes)))
        for o in offers:
            prices[r_index[o.region], k_index[o.shape]] = o.price_per_hour
            available[r_index[o.region], k_index[o.shape]] = o.available
        return cls(scenario=scenario, offers=tuple(offers), specs=dict(specs), groups=tuple(groups), shapes=shapes,
                   regions=regions, prices=prices, available=available)

    def shape_columns(self, shapes: Sequence[str]) -> np.ndarray:
        """Column of each of ``shapes`` in :attr:`shapes` (−1 for a shape no region sells)."""
        index = {s: k for k, s in enumerate(self.shapes)}
        return np.array([index.get(s, -1) for s in shapes], dtype=np.int64)

    def price_matrix(self, shapes: Sequence[str]) -> np.ndarray:
        """``(len(regions), len(shapes))`` $/h per node, NaN where the shape is not sold in the region."""
        cols = self.shape_columns(shapes)
        out = np.full((len(self.regions), len(cols)), np.nan)
        ok = cols >= 0
        out[:, ok] = self.prices[:, cols[ok]]
        return out

    def availability_matrix(self, shapes: Sequence[str]) -> np.ndarray:
        """``(len(regions), len(shapes))`` nodes available (0 where the shape is not sold in the region)."""
        cols = self.shape_columns(shapes)
        out = np.zeros((len(self.regions), len(cols)))
        ok = cols >= 0
        out[:, ok] = self.available[:, cols[ok]]
        return out


def resolve_scenario(scenario: Scenario, catalog: Catalog) -> ResolvedScenario:
    """Offers, model specs, (model, phase) groups and price/availability matrices of a scenario.

    Raises
    ------
    PlanningError
        Unknown ids or nothing purchasable, naming the field and the fix.
    """
    return ResolvedScenario.from_offers(scenario, resolve_offers(scenario, catalog),
                                        resolve_models(scenario, catalog), plan_groups(scenario))


def scenario_warnings(resolved: ResolvedScenario) -> list[str]:
    """What a valid scenario should know before it is solved: hypothetical shapes (priced as a paper did), offers
    with zero availability and groups with zero demand (``planning validate``, ``planning.api.validate``)."""
    offers = resolved.offers
    warnings = []
    hypothetical = sorted({f"{o.region} {o.shape}" for o in offers if o.quality == "hypothetical"})
    if hypothetical:
        warnings.append(f"{len(hypothetical)} offers are hypothetical shapes (priced as the paper did), e.g. {hypothetical[0]}.")
    empty = [f"{o.region} {o.shape}" for o in offers if o.available == 0]
    if empty:
        warnings.append(f"{len(empty)} offers have zero availability, e.g. {empty[0]}.")
    for g in resolved.groups:
        if g.demand <= 0:
            warnings.append(f"{g.id} has zero demand; it will get no instances.")
    return warnings
