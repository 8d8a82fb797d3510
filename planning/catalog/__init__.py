"""Catalog: GPU types, purchasable node configs, regions, models, SLO presets, availability."""

from planning.catalog.availability import cheapest_configs, load_availability_series, shape_availability
from planning.catalog.load import load_catalog
from planning.catalog.models import model_from_hf_config
from planning.catalog.presets import list_presets, load_preset

__all__ = [
    "cheapest_configs",
    "list_presets",
    "load_availability_series",
    "load_catalog",
    "load_preset",
    "model_from_hf_config",
    "shape_availability",
]
