"""Progress lines in the user's words (issue 41 §4): a long job names what the user asked for ("planning hour 12 of
24"), never a solver's internals ("epoch 12/24", "cut master: step 148"). A leaf: it imports nothing of the house.

The timeline's epochs are periods of ``epoch_hours`` each; a line counts them in the unit the user chose: hours
(1 h epochs), days (24 h), ranges of hours (2 h, 6 h, …) or, for other lengths, periods with their length.
"""

from __future__ import annotations


def _unit(epoch_hours: float) -> tuple[str, float] | None:
    """(unit, epochs' length in it) when an epoch is a whole number of days or hours, else ``None``."""
    if epoch_hours > 0 and epoch_hours % 24 == 0:
        return "day", epoch_hours / 24
    if epoch_hours > 0 and float(epoch_hours).is_integer():
        return "hour", float(epoch_hours)
    return None


def period(done: int, total: int, epoch_hours: float) -> str:
    """Which period of the horizon ``done`` (1-based) is: "hour 12 of 24", "hours 3–4 of 48", "day 2 of 7",
    "period 5 of 96 (0.25 h each)"."""
    unit = _unit(epoch_hours)
    if unit is None:
        return f"period {done} of {total} ({epoch_hours:g} h each)"
    name, length = unit
    if length == 1:
        return f"{name} {done} of {total}"
    first, last, all_ = (done - 1) * length + 1, done * length, total * length
    return f"{name}s {first:g}–{last:g} of {all_:g}"


def planning_period(done: int, total: int, epoch_hours: float) -> str:
    """"planning hour 12 of 24": the timeline has planned ``done`` of its ``total`` epochs."""
    return f"planning {period(done, total, epoch_hours)}"


def sizing_check(detail: str) -> str:
    """The commitment sizing's last stage (the cut master over the reservation sizes) in words; ``detail`` is its
    step line ("step 148: bound …, best plan …")."""
    return f"checking that no other reservation size is cheaper ({detail})"
