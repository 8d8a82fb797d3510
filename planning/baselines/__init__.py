"""Baselines behind one interface: Homo, Homo-ILP, single GPU type (Mélange), memP (LLMFabric)."""

from planning.baselines.base import BaselineResult, baseline_names, run_all_baselines, run_baseline

__all__ = ["BaselineResult", "baseline_names", "run_all_baselines", "run_baseline"]
