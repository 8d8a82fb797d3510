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

    def __reduce__(self) -> tuple[object, ...]:
        """Pickle as (class, field, problem, fix, attributes), whatever a subclass's ``__init__`` takes: an error
        raised in a pool worker or a Ray task reaches the caller as itself (a subclass with other arguments
        would otherwise fail to unpickle, and the pool would report a broken process instead)."""
        return (_rebuild, (type(self), self.field, self.problem, self.fix, dict(self.__dict__)))


def _rebuild(cls: type[PlanningError], field: str, problem: str, fix: str, state: dict[str, object]) -> PlanningError:
    err = cls.__new__(cls)
    PlanningError.__init__(err, field, problem, fix)
    err.__dict__.update(state)
    return err


class UnknownIdError(PlanningError):
    """An id that is not in the catalog; the message lists the closest known ids."""

    def __init__(self, field: str, value: str, known: Iterable[str]) -> None:
        known_list = sorted(set(known))
        probe = str(value)[:QUOTE_LIMIT]  # a huge value must not make difflib quadratic
        close = difflib.get_close_matches(probe, known_list, n=3, cutoff=0.4)
        if not close:
            lower = probe.lower()
            close = [k for k in known_list if lower in k.lower() or k.lower() in lower][:3]
        hint = f"did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        listing = ", ".join(known_list[:20]) + (" …" if len(known_list) > 20 else "")
        fix = (hint + " " if hint else "") + f"Known ids: {listing}."
        super().__init__(field, f"unknown id {quote(value)}.", fix)
        self.value = value
        self.closest = close


QUOTE_LIMIT = 200
"""Most characters of a user's value repeated in a message (a 22 MB value must not be echoed)."""


def quote(value: object, limit: int = QUOTE_LIMIT, *, bare: bool = False) -> str:
    """``repr`` of a value for an error message, clipped to ``limit`` characters with its full length noted.

    Parameters
    ----------
    value:
        Anything the user wrote (text, number, list …).
    limit:
        Most characters of the value shown.
    bare:
        For text, show it without quotes.

    Returns
    -------
    str
        E.g. ``'abc'`` or ``'aaaa…' (22,000,000 characters)``; containers show their type and length when long.
    """
    if isinstance(value, str):
        head = value[:limit]
        shown = head if bare else repr(head)
        return shown if len(value) <= limit else f"{shown}… ({len(value):,} characters)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        try:
            return f"an integer of {len(str(abs(value))):,} digits"
        except ValueError:  # above Python's 4,300-digit str() limit
            return f"an integer of about {int(value.bit_length() * 0.30103) + 1:,} digits"
    if isinstance(value, list | tuple | dict | set | frozenset) and len(value) > 20:
        return f"a {type(value).__name__} of {len(value):,} items"
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # recursive containers, exotic objects
        text = f"a {type(value).__name__}"
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"
