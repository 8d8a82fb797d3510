"""The catalog as plain records (one row builder for the CLI's ``planning catalog`` and ``api.catalog_frames``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from planning.catalog.schema import Catalog


def catalog_rows(catalog: Catalog, kind: str) -> list[dict[str, Any]]:
    """Records of one catalog table as plain dicts (JSON-ready), with derived fields added.

    Parameters
    ----------
    catalog:
        Loaded catalog.
    kind:
        One of ``gpus``, ``configs``, ``models``, ``regions``, ``slos``.

    Returns
    -------
    list[dict]
        One dict per record; configs add ``shape``, ``region_key`` and ``available_nodes``; models add
        ``params_total_b``/``params_active_b`` (billions) and ``weight_gb``.
    """
    rows: list[dict[str, Any]] = []
    if kind == "gpus":
        rows = [dataclasses.asdict(g) for g in catalog.gpus.values()]
    elif kind == "configs":
        for cfg in catalog.configs.values():
            row = dataclasses.asdict(cfg)
            avail = catalog.availability.get(cfg.id)
            row.update(
                shape=cfg.shape, region_key=cfg.region_key, available_nodes=avail.nodes if avail else None
            )
            rows.append(row)
    elif kind == "models":
        for model in catalog.models.values():
            row = dataclasses.asdict(model)
            row["layer_types"] = list(model.layer_types)
            row.update(
                params_total_b=round(model.params_total / 1e9, 3),
                params_active_b=round(model.params_active / 1e9, 3),
                weight_gb=round(model.weight_bytes() / 1e9, 2),
            )
            rows.append(row)
    elif kind == "regions":
        rows = [dataclasses.asdict(r) for r in catalog.regions.values()]
    elif kind == "slos":
        rows = [dataclasses.asdict(s) for s in catalog.slo_presets.values()]
    for row in rows:
        row["overridden"] = row.get("id", row.get("key")) in catalog.overridden
    return rows
