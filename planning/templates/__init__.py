"""Serving Templates: exact placement of a model on a node multiset, Coral's ILP as reference, the library."""

from planning.templates.library import LibraryCache, build_library, library_key
from planning.templates.placement import METHODS, Placement, Stage, evaluate, place

__all__ = [
    "METHODS",
    "LibraryCache",
    "Placement",
    "Stage",
    "build_library",
    "evaluate",
    "library_key",
    "place",
]
