"""Errors that read as instructions: what was asked, why it failed, and the nearest thing that would work."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class PlanningError(ValueError):
    """A user-facing error naming the offending field and how to fix it.

    Parameters
    ----------
    field:
        Dotted path of the input that is wrong (``"models[0].slo.ttft_ms"``, ``"gpu"``).
    problem:
        What is wrong, in one sentence.
    fix:
        What the user can do instead (nearest valid value, relaxation, command).
    """

    def __init__(self, field: str, problem: str, fix: str = "") -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        message = f"{field}: {problem}"
        if fix:
            message += f" Fix: {fix}"
        super().__init__(message)


class UnknownIdError(PlanningError):
    """An id that is not in the catalog; the message lists the closest known ids."""

    def __init__(self, field: str, value: str, known: Iterable[str]) -> None:
        known_list = sorted(set(known))
        close = difflib.get_close_matches(value, known_list, n=3, cutoff=0.4)
        if not close:
            lower = value.lower()
            close = [k for k in known_list if lower in k.lower() or k.lower() in lower][:3]
        hint = f"did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        listing = ", ".join(known_list[:20]) + (" …" if len(known_list) > 20 else "")
        fix = (hint + " " if hint else "") + f"Known ids: {listing}."
        super().__init__(field, f"unknown id {value!r}.", fix)
        self.value = value
        self.closest = close
