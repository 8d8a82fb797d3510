"""Field validators of the scenario spec: bounds with reasons, size limits, and the typed readers every
``from_dict`` in :mod:`planning.scenario` uses (each error names the field path and the fix)."""

from __future__ import annotations

import contextlib
import math
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import asdict, fields
from typing import Any

from planning.errors import PlanningError, quote

# Bounds on every number a scenario holds: (largest value, why). Above them a plan is meaningless or the
# search would allocate without limit (nmax and max_stages size the template enumeration and stage tables,
# workers the process pool).
BOUNDS: dict[str, tuple[float, str]] = {
    "rate_rps": (1e7, "10 million requests/s is beyond any single deployment"),
    "tokens": (1e7, "10 million tokens is longer than any model's context window"),
    "slo_ms": (3.6e6, "one hour; latency targets are in milliseconds"),
    "price_per_hour": (1e6, "$1,000,000/h per node is beyond any cloud price"),
    "nodes": (1e6, "a million nodes is more than any region holds"),
    "usage": (64, "a template is one serving instance of a few nodes (options.nmax is at most 16)"),
    "throughput": (1e12, "10^12 per second is beyond any instance"),
    "nmax": (16, "templates enumerate node multisets of up to nmax nodes; their number grows combinatorially "
                 "(Coral uses 6)"),
    "rho": (1000, "rho caps a template's memory at rho × the model's weights (Coral uses 12)"),
    "K": (1e6, "K weighs the cost of starting new instances against their hourly price"),
    "max_stages": (32, "stage tables hold max_stages × layers entries per shape; deeper pipelines are not served"),
    "time_limit_s": (86400, "one day; the solver stops at this limit"),
    "mip_rel_gap": (1, "a relative gap is a fraction"),
    "workers": (256, "workers sizes the process pool for template libraries"),
    "lookahead_epochs": (168, "each look-ahead step solves one MILP over this many epochs (a week of hours at most)"),
    "availability_scale": (1e6, "it multiplies catalog availability; 10^6 already means unlimited"),
    "price_scale": (1e6, "it multiplies catalog prices"),
    "budget_per_hour": (1e9, "a $10^9/h budget is unlimited"),
    "scale": (1e6, "a what-if factor above 10^6 leaves every bound"),
    "term_years": (10, "clouds sell 1- and 3-year commitments; a 10-year term outlives the hardware"),
    "years": (30, "amortising GPUs over more than 30 years is not a depreciation schedule"),
    "usd": (1e10, "$10^10 is beyond any GPU cluster's price"),
    "usd_per_hour": (1e6, "$1,000,000/h per node is beyond any cost"),
    "recovery_hours": (24, "a replacement node serves within a day"),
    "growth": (10, "demand growing more than 10× a year is not a forecast"),
    "epoch_hours": (8760, "a profile epoch is at most a year"),
    "factor": (1e6, "a demand factor above 10^6 leaves every rate bound"),
}
MAX_TEXT = 200
"""Longest id, region, shape or name accepted (ids are short; messages quote at most 200 characters)."""
MAX_DESCRIPTION = 20_000
MAX_ITEMS = 10_000
"""Longest list (offers, templates, overrides) in a scenario."""
MAX_MODELS = 256
"""Most models in one scenario (long-tail hosting: Perplexity serves 46, the Prism study 58, the sharing
benchmark 104); each model multiplies the planner's work, so this stays far below MAX_ITEMS."""
_NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,4})?")
_SHAPE_TEXT = re.compile(r"[1-9][0-9]{0,3}x[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _number(value: Any, field_path: str, *, minimum: float | None = None, allow_none: bool = False,
            strict_min: bool = False, integer: bool = False, bound: str | None = None) -> Any:
    """A finite number (ASCII text digits accepted) within ``[minimum, BOUNDS[bound]]``; never overflows."""
    if value is None:
        if allow_none:
            return None
        raise PlanningError(field_path, "is required.", "give a number.")
    shown = quote(value)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise PlanningError(field_path, f"must be a number, got {type(value).__name__} {shown}.", "write a plain number.")
    if isinstance(value, str):
        text = value.strip()
        if len(text) > 40 or not _NUMBER_TEXT.fullmatch(text):
            raise PlanningError(field_path, f"must be a number, got {shown}.",
                                "write a plain number with ASCII digits (e.g. 1500 or 2.5e3).")
        value = float(text)
    if isinstance(value, int):
        number = float(value) if value.bit_length() <= 1000 else (math.inf if value > 0 else -math.inf)
    else:
        number = float(value)
        if not math.isfinite(number):
            raise PlanningError(field_path, f"must be finite, got {shown}.", "write a finite number.")
    if minimum is not None and (number <= minimum if strict_min else number < minimum):
        op = ">" if strict_min else "≥"
        raise PlanningError(field_path, f"must be {op} {minimum:g}, got {shown}.", f"use a value {op} {minimum:g}.")
    if bound is not None:
        maximum, why = BOUNDS[bound]
        if number > maximum:
            raise PlanningError(field_path, f"must be ≤ {maximum:g} ({why}); got {shown}.",
                                f"use a value ≤ {maximum:g}.")
    if not math.isfinite(number):  # an integer of hundreds of digits
        raise PlanningError(field_path, f"is too large: {shown}.", "write a realistic value.")
    if integer:
        if number != math.floor(number):
            raise PlanningError(field_path, f"must be a whole number, got {shown}.", "round it.")
        return int(number)
    return value if isinstance(value, int) else number


def _choice(value: Any, field_path: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise PlanningError(field_path, f"must be one of {', '.join(choices)}; got {quote(value)}.",
                            f"use one of {', '.join(choices)}.")
    return value


def _mapping(value: Any, field_path: str, *, max_items: int = MAX_ITEMS) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise PlanningError(field_path, f"must be a mapping (key: value), got {type(value).__name__}.",
                            "write it as `key: value` lines.")
    if len(value) > max_items:
        raise PlanningError(field_path, f"has {len(value):,} entries, more than the {max_items:,} accepted.",
                            "remove entries; scenarios are small.")
    for key in value:
        if not isinstance(key, str):
            raise PlanningError(field_path, f"has the key {quote(key, 60)} ({type(key).__name__}); keys must be text.",
                                "quote the key.")
    return value


def _list(value: Any, field_path: str, *, max_items: int = MAX_ITEMS) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise PlanningError(field_path, f"must be a list, got {type(value).__name__}.", "write it as a YAML list.")
    if len(value) > max_items:
        raise PlanningError(field_path, f"has {len(value):,} items, more than the {max_items:,} accepted.",
                            "remove items; scenarios are small.")
    return list(value)


def _text(value: Any, field_path: str, *, default: str = "", max_len: int = MAX_TEXT, required: bool = False) -> str:
    """Text of at most ``max_len`` characters (a short number is accepted and written as text)."""
    if value is None or (required and value == ""):
        if required:
            raise PlanningError(field_path, "is required (text).", "write it as text.")
        return default
    if isinstance(value, int | float) and not isinstance(value, bool) and len(quote(value)) <= 40:
        value = str(value)
    if not isinstance(value, str):
        raise PlanningError(field_path, f"must be text, got {type(value).__name__} {quote(value, 60)}.",
                            "write it as text (quote it).")
    if len(value) > max_len:
        raise PlanningError(field_path, f"is {len(value):,} characters long, more than the {max_len:,} accepted: "
                            f"{quote(value, 60)}.", f"shorten it to at most {max_len} characters.")
    if any(ord(c) < 32 and c not in "\t\n\r" for c in value):
        raise PlanningError(field_path, f"holds control characters: {quote(value)}.", "remove them.")
    return value


def _shape(value: Any, field_path: str) -> str:
    """A node shape ``"{count}x{GPU}"`` in ASCII (Unicode digits such as ``"２xL4"`` are refused)."""
    text = _text(value, field_path, required=True)
    if not _SHAPE_TEXT.fullmatch(text):
        raise PlanningError(field_path, f"{quote(text)} is not a node shape.",
                            'write "{count}x{GPU}" with ASCII digits, e.g. "2xL40S".')
    return text


def _bool(value: Any, field_path: str, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise PlanningError(field_path, f"must be true or false, got {quote(value)}.", "write true or false.")
    return value


def _reject_unknown(data: Mapping[str, Any], field_path: str, cls: type) -> None:
    known = {f.name for f in fields(cls)}
    for key in data:
        if not isinstance(key, str):
            raise PlanningError(field_path or "scenario", f"has the key {quote(key, 60)} ({type(key).__name__}); "
                                "keys must be text.", f"remove it; known fields: {', '.join(sorted(known))}.")
    extra = sorted(set(data) - known)
    if extra:
        name = quote(extra[0], 60, bare=True) or "(empty key)"
        raise PlanningError(f"{field_path}.{name}" if field_path else name,
                            f"is not a known field of {cls.__name__}.",
                            f"remove it; known fields: {', '.join(sorted(known))}.")


_REVALIDATING = threading.local()


@contextlib.contextmanager
def _revalidating() -> Iterator[None]:
    depth = getattr(_REVALIDATING, "depth", 0)
    _REVALIDATING.depth = depth + 1
    try:
        yield
    finally:
        _REVALIDATING.depth = depth


def _revalidate(obj: Any, path: str) -> None:
    """``__post_init__`` of every spec: validate the constructed object with the same ``from_dict`` validators,
    so ``dataclasses.replace(...)`` and direct construction are checked like parsed files. Objects built
    while a revalidation runs are skipped (it already covers them).

    Raises
    ------
    PlanningError
        Naming the offending field and the fix.
    """
    if getattr(_REVALIDATING, "depth", 0):
        return
    data = obj.to_dict() if hasattr(obj, "to_dict") else asdict(obj)
    with _revalidating():
        if path:
            type(obj).from_dict(data, path)
        else:
            type(obj).from_dict(data)
