"""GPU sharing for long-tail models (Prism): KVPR placement, exact packing, Moore–Hodgson admission, shared plans."""

from planning.sharing.admission import Admission, QueuedRequest, fcfs, moore_hodgson
from planning.sharing.kvpr import KvprModel, KvprPlacement, exact_kvpr_placement, kvpr_placement
from planning.sharing.packing import (
    NodeType,
    Packing,
    TailModel,
    brute_force_packing,
    exact_packing,
    kvpr_packing,
)
from planning.sharing.plan import solve_shared, split_models, threshold_sweep
from planning.sharing.result import SharedModel, SharedNode, SharingResult

__all__ = [
    "Admission",
    "KvprModel",
    "KvprPlacement",
    "NodeType",
    "Packing",
    "QueuedRequest",
    "SharedModel",
    "SharedNode",
    "SharingResult",
    "TailModel",
    "brute_force_packing",
    "exact_kvpr_placement",
    "exact_packing",
    "fcfs",
    "kvpr_packing",
    "kvpr_placement",
    "moore_hodgson",
    "solve_shared",
    "split_models",
    "threshold_sweep",
]
