"""Catalog: GPU types, purchasable node configs, regions, models, SLO presets, availability."""
