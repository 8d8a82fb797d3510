"""Serving Templates: exact placement of a model on a node multiset, Coral's ILP as reference, the library."""

from planning.templates.placement import METHODS, Placement, Stage, evaluate, place

__all__ = ["METHODS", "Placement", "Stage", "evaluate", "place"]
