"""The Scenario page's option widgets, derived from the options' field metadata (``planning.scenario.OptionSpec``):
label, help, bounds, step and choices come from the one description the validator and the JSON schema also read."""

from __future__ import annotations

from typing import Any

from planning.scenario import option_specs

WIDGET_RESOLUTION = 0.01
"""The least value a number widget offers above a strict bound (``> 0``): the step of its two-decimal display."""

PAGE_OPTIONS = ("nmax", "rho", "K", "time_limit_s", "solver", "kv_transfer")
"""The options the Scenario page sets, in the order of its columns (the rest are set in the file or the CLI)."""


def widget_kwargs(name: str, value: Any, cls: type | None = None) -> dict[str, Any]:
    """Keyword arguments of the widget for option ``name`` holding ``value``: ``st.selectbox`` for a choice
    (``options``, ``index``, ``format_func``), ``st.number_input`` for a number (``min_value``, ``max_value``,
    ``value``, ``step``); both with ``label`` and ``help``. ``cls`` is the options class (default ``Options``)."""
    spec = option_specs(cls)[name]
    kwargs: dict[str, Any] = {"label": spec.label, "help": spec.help or None}
    if spec.choices:
        labels = dict(spec.choice_labels)
        kwargs.update(options=list(spec.choices), index=list(spec.choices).index(value),
                      format_func=lambda choice: labels.get(choice, choice))
        return kwargs
    kind = int if spec.integer else float
    least = spec.minimum
    if least is not None and spec.strict_min:
        least += 1 if spec.integer else WIDGET_RESOLUTION
    kwargs.update(min_value=None if least is None else kind(least),
                  max_value=None if spec.maximum is None else kind(spec.maximum),
                  value=None if value is None else kind(value))
    if spec.step is not None:
        kwargs["step"] = kind(spec.step)
    return kwargs


def option_inputs(columns: list[Any], below: Any, options: Any) -> dict[str, Any]:
    """One widget per :data:`PAGE_OPTIONS` entry of ``options``: in ``columns`` one each, the rest in ``below``
    (the page, full width). Returns ``{name: value}``."""
    chosen: dict[str, Any] = {}
    for i, name in enumerate(PAGE_OPTIONS):
        kwargs = widget_kwargs(name, getattr(options, name))
        host = columns[i] if i < len(columns) else below
        widget = host.selectbox if "options" in kwargs else host.number_input
        chosen[name] = widget(**kwargs)
    return chosen
