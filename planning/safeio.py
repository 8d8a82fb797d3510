"""Bounded readers for untrusted files: size, encoding, depth, node and alias limits, string keys; clean errors."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
import yaml.composer
import yaml.constructor
import yaml.parser
import yaml.reader
import yaml.resolver
import yaml.scanner

from planning.errors import PlanningError, quote

MAX_DEPTH = 64
"""Deepest nesting of lists/mappings accepted (real scenarios nest 5 levels; 1 KB of brackets must not recurse)."""

MAX_NODES = 200_000
"""Most values (scalars + collections) a document may expand to, aliases counted at their expanded size."""

MAX_ALIASES = 100
"""Most YAML alias references (``*name``) per document; each is also charged its expanded size."""

MAX_NUMBER_CHARS = 1_000
"""Longest numeric literal read; longer ones are refused before Python converts them (no 4300-digit error)."""


@dataclass(frozen=True)
class Limits:
    """Bounds applied by :func:`load_yaml` / :func:`load_json`.

    ``max_bytes`` bounds the file, ``max_depth`` the nesting, ``max_nodes`` the expanded number of values,
    ``max_aliases`` the YAML alias references (0 refuses aliases).
    """

    max_bytes: int = 2_000_000
    max_depth: int = MAX_DEPTH
    max_nodes: int = MAX_NODES
    max_aliases: int = MAX_ALIASES


DEFAULT_LIMITS = Limits()


class _LimitHit(Exception):
    """Internal: a bound was exceeded while composing/constructing; carries a YAML mark when known."""

    def __init__(self, problem: str, fix: str, mark: Any = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix
        self.mark = mark


def json_safe(obj: Any) -> Any:
    """``obj`` with every non-finite float (NaN, ±inf) replaced by None, tuples as lists: standard JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    return obj


def _where(mark: Any) -> str:
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


# --------------------------------------------------------------------------------------------------------------
# bytes -> text
# --------------------------------------------------------------------------------------------------------------
def decode_text(data: bytes, *, field: str, origin: str) -> str:
    """Decode file bytes as UTF-8 (a UTF-8 BOM is dropped), naming the first bad byte's line and column.

    Parameters
    ----------
    data:
        The raw bytes.
    field, origin:
        Field path and file name used in the error.

    Returns
    -------
    str
        The text.

    Raises
    ------
    PlanningError
        UTF-16/32 text, a NUL byte (binary file) or bytes that are not UTF-8 (e.g. Latin-1).
    """
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise PlanningError(field, f"{origin} is UTF-16 text.", "save it as UTF-8 (most editors: 'Save with encoding').")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise PlanningError(field, f"{origin} holds a NUL byte at line {line}: it is a binary file, not text.",
                            "pass the text (YAML/JSON/CSV) file.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise PlanningError(
            field,
            f"{origin} is not UTF-8: byte 0x{data[exc.start]:02x} at line {line}, column {column} "
            "(Latin-1 or Windows-1252 text?).",
            "save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8 IN > OUT`).",
        ) from None


def read_text(path: str | os.PathLike[str], *, field: str, max_bytes: int, what: str = "file") -> str:
    """Read a small untrusted text file: must exist, be a regular file, at most ``max_bytes``, UTF-8.

    Parameters
    ----------
    path:
        The file.
    field:
        Field path named in errors (``"scenario"``, ``"--profiles"``).
    max_bytes:
        Largest size accepted; reading stops one byte past it even if the file grows meanwhile.
    what:
        What the file should be, for the messages (``"scenario file"``).

    Returns
    -------
    str
        The decoded text (BOM removed).

    Raises
    ------
    PlanningError
        Missing path, a directory or device, too large, unreadable, or not UTF-8.
    """
    p = Path(path)
    shown = quote(str(p), 120)
    try:
        if not p.exists():
            raise PlanningError(field, f"{shown} is not a file: it does not exist.", "check the path.")
        if p.is_dir():
            raise PlanningError(field, f"{shown} is a directory, not a file.", f"pass the path of the {what}.")
        if not p.is_file():
            raise PlanningError(field, f"{shown} is not a regular file.", f"pass the path of the {what}.")
        size = p.stat().st_size
        if size > max_bytes:
            raise PlanningError(field, f"{shown} is {size:,} bytes, above the {max_bytes:,}-byte limit for a {what}.",
                                "use a smaller file; these are short text files.")
        with p.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise PlanningError(field, f"cannot read {shown}: {exc.strerror or exc}.",
                            "check the path and its permissions.") from None
    if len(data) > max_bytes:
        raise PlanningError(field, f"{shown} is larger than the {max_bytes:,}-byte limit for a {what}.",
                            "use a smaller file.")
    return decode_text(data, field=field, origin=p.name)


# --------------------------------------------------------------------------------------------------------------
# YAML
# --------------------------------------------------------------------------------------------------------------
_CParser: Any
try:  # libyaml's event parser (C) when PyYAML was built with it: ~8x faster than the pure-Python scanner
    import yaml._yaml as _libyaml

    _CParser = _libyaml.CParser
except ImportError:  # pragma: no cover - PyYAML without libyaml
    _CParser = None


class _BoundedComposer(yaml.composer.Composer):
    """Composer (Python, so it can count) that bounds depth, nodes and aliases before anything is expanded.

    Mixed with an event source (libyaml's ``CParser`` or PyYAML's Python reader/scanner/parser), the safe
    constructor and the resolver; only the standard YAML tags are constructed (as ``yaml.safe_load``).
    """

    limits: Limits = DEFAULT_LIMITS
    if TYPE_CHECKING:  # provided by the event source mixed in
        def check_event(self, *choices: Any) -> bool: ...
        def peek_event(self) -> Any: ...

    def _init_bounds(self) -> None:
        self._depth = 0
        self._nodes = 0
        self._aliases = 0
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:
        lim = self.limits
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            self._aliases += 1
            if self._aliases > lim.max_aliases:
                raise _LimitHit(
                    "uses YAML aliases (*name)" if lim.max_aliases == 0
                    else f"uses more than {lim.max_aliases} YAML aliases (*name)",
                    "write the values out instead of referring to anchors (&name).", event.start_mark)
            target = self.anchors.get(event.anchor)
            if target is not None and id(target) not in self._sizes:
                raise _LimitHit(f"alias *{quote(event.anchor, 40, bare=True)} refers to a value that contains it "
                                "(a recursive structure)", "remove the self-reference.", event.start_mark)
            node = super().compose_node(parent, index)
            self._nodes += self._sizes.get(id(node), 1)
            if self._nodes > lim.max_nodes:
                raise _LimitHit(f"expands to more than {lim.max_nodes:,} values through aliases",
                                "write the values out; an alias must not multiply the document.", event.start_mark)
            return node
        start = self.peek_event().start_mark
        self._depth += 1
        if self._depth > lim.max_depth:
            raise _LimitHit(f"nests deeper than {lim.max_depth} levels",
                            "flatten the structure; scenarios nest only a few levels.", start)
        self._nodes += 1
        if self._nodes > lim.max_nodes:
            raise _LimitHit(f"has more than {lim.max_nodes:,} values", "use a smaller file.", start)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if isinstance(node, yaml.SequenceNode):
            size = 1 + sum(self._sizes.get(id(c), 1) for c in node.value)
        elif isinstance(node, yaml.MappingNode):
            size = 1 + sum(self._sizes.get(id(k), 1) + self._sizes.get(id(v), 1) for k, v in node.value)
            seen: set[str] = set()
            for k, _ in node.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                    if k.value in seen:
                        raise _LimitHit(f"has the key {quote(k.value, 60)} twice in one mapping",
                                        "keep one of them (YAML would silently drop the first).", k.start_mark)
                    seen.add(k.value)
        else:
            size = 1
        if size > lim.max_nodes:
            raise _LimitHit(f"expands to more than {lim.max_nodes:,} values through aliases",
                            "write the values out; an alias must not multiply the document.", start)
        self._sizes[id(node)] = size
        return node

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.ScalarNode) and len(node.value) > MAX_NUMBER_CHARS and node.tag.endswith(
                (":int", ":float")):
            raise _LimitHit(f"has a number with {len(node.value):,} characters",
                            f"numbers are at most {MAX_NUMBER_CHARS} characters long.", node.start_mark)
        try:
            return super().construct_object(node, deep=deep)  # type: ignore[misc]  # SafeConstructor's
        except (ValueError, OverflowError, TypeError) as exc:
            raise _LimitHit(f"has a value that cannot be read ({quote(str(exc), 120, bare=True)})",
                            "quote it as text or correct it.", node.start_mark) from None


_FLOW_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"|(?<![^\s\[{,])\'(?:[^\'\n]|\'\')*\'|(?<!\S)#[^\n]*|[\[\]{}]')


def _flow_depth_error(text: str, max_depth: int) -> tuple[int, int] | None:
    """(line, column) where flow brackets (``[``/``{``) nest deeper than ``max_depth``, or ``None``.

    PyYAML's scanner is quadratic in flow nesting (1,000 brackets take seconds, 10,000 minutes), so the depth is
    checked first with one regular-expression pass that skips quoted strings and comments.
    """
    if text.count("[") + text.count("{") <= max_depth:
        return None
    depth = 0
    for m in _FLOW_TOKENS.finditer(text):
        tok = m.group()
        if tok in ("[", "{"):
            depth += 1
            if depth > max_depth:
                line = text.count("\n", 0, m.start()) + 1
                return line, m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
        elif tok in ("]", "}"):
            depth = max(0, depth - 1)
    return None


if _CParser is not None:
    class _FastLoader(_BoundedComposer, _CParser, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
            self._init_bounds()


class _PyLoader(_BoundedComposer, yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser,
                yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self._init_bounds()


def _subject(field: str, origin: str) -> str:
    return "" if origin == field else f"{origin} "


def load_yaml(text: str, *, field: str = "file", origin: str = "document", limits: Limits = DEFAULT_LIMITS) -> Any:
    """Parse untrusted YAML (or JSON, a YAML subset) within ``limits``; every mapping key must be text.

    Parameters
    ----------
    text:
        The document.
    field, origin:
        Field path and file name for errors.
    limits:
        Size, depth, node and alias bounds.

    Returns
    -------
    Any
        Plain data: dict / list / str / int / float / bool / None (and dates for YAML timestamps).

    Raises
    ------
    PlanningError
        Syntax error (line and column), a bound exceeded (which and why), or a non-text mapping key (its path).
    """
    _check_size(text, field, origin, limits)
    deep = _flow_depth_error(text, limits.max_depth)
    if deep is not None:
        raise PlanningError(field, f"{_subject(field, origin)}nests brackets deeper than {limits.max_depth} levels "
                            f"at line {deep[0]}, column {deep[1]}.", "flatten the structure.")
    base: type = _FastLoader if _CParser is not None else _PyLoader
    loader_cls = type("_Loader", (base,), {"limits": limits})
    loader = None
    try:
        loader = loader_cls(text)  # the reader refuses control characters here already
        data = loader.get_single_data()
    except _LimitHit as hit:
        raise PlanningError(field, f"{_subject(field, origin)}{hit.problem}{_where(hit.mark)}.", hit.fix) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).split("\n")[0]
        raise PlanningError(field, f"{_subject(field, origin)}is not valid YAML/JSON{_where(mark)}: {quote(str(problem), 160, bare=True)}.",
                            "fix the syntax (indentation, quotes, colons, brackets).") from None
    except UnicodeEncodeError as exc:  # a lone surrogate in text handed over from Python (files are decoded first)
        raise PlanningError(field, f"{_subject(field, origin)}holds a character that is not valid Unicode "
                            f"(U+{ord(exc.object[exc.start]):04X}) at position {exc.start}.",
                            "remove it; text must be valid UTF-8.") from None
    except RecursionError:  # pragma: no cover - the depth bound is far below Python's recursion limit
        raise PlanningError(field, f"{_subject(field, origin)}nests too deeply.", "flatten the structure.") from None
    finally:
        if loader is not None and hasattr(loader, "dispose"):
            loader.dispose()
    check_plain(data, field=field, origin=origin, limits=limits)
    return data


# --------------------------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------------------------
class _NumberTooLong(_LimitHit):
    """A numeric literal longer than :data:`MAX_NUMBER_CHARS` (located in the text afterwards)."""


def _bounded_int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise _NumberTooLong(f"has an integer with {len(text):,} digits",
                             f"numbers are at most {MAX_NUMBER_CHARS} characters long; write a realistic value.")
    return int(text)


def _bounded_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _NumberTooLong(f"has a number with {len(text):,} characters",
                             f"numbers are at most {MAX_NUMBER_CHARS} characters long; write a realistic value.")
    return float(text)


_LONG_NUMBER = re.compile(rf"-?[0-9][0-9.eE+-]{{{MAX_NUMBER_CHARS},}}")
_KEY_BEFORE = re.compile(r'"((?:[^"\\\n]|\\.){1,80})"\s*:\s*[\[\]\s,0-9.eE+-]*$')


def _number_site(text: str) -> str:
    """Where the first over-long number of a JSON text is: `` (key "k", line l, column c)`` (key when found)."""
    m = _LONG_NUMBER.search(text)
    if m is None:
        return ""
    start = m.start()
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    key = _KEY_BEFORE.search(text, max(0, start - 2000), start)
    named = f"key {quote(key.group(1), 60)}, " if key else ""
    return f" ({named}line {line}, column {column})"


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        keys = [k for k, _ in pairs]
        dup = next(k for k in keys if keys.count(k) > 1)
        raise _LimitHit(f"has the key {quote(dup, 60)} twice in one object",
                        "keep one of them (JSON readers would silently drop the first).")
    return data


def _json_loads(text: str) -> Any:
    return json.loads(text, parse_int=_bounded_int, parse_float=_bounded_float, object_pairs_hook=_unique_pairs)


def load_json(text: str, *, field: str = "file", origin: str = "document", limits: Limits = DEFAULT_LIMITS) -> Any:
    """Parse untrusted JSON within ``limits`` (depth, values, number length); mapping keys are text by JSON's rules.

    ``NaN``/``Infinity`` are read as floats so that the validator names the field that holds them.

    Parameters
    ----------
    text:
        The document.
    field, origin:
        Field path and file name for errors.
    limits:
        Size, depth and node bounds.

    Returns
    -------
    Any
        dict / list / str / int / float / bool / None.

    Raises
    ------
    PlanningError
        Syntax error (line and column) or a bound exceeded.
    """
    _check_size(text, field, origin, limits)
    try:
        data = _json_loads(text)
    except _LimitHit as hit:
        site = _number_site(text) if isinstance(hit, _NumberTooLong) else ""
        raise PlanningError(field, f"{_subject(field, origin)}{hit.problem}{site}.", hit.fix) from None
    except json.JSONDecodeError as exc:
        raise PlanningError(field, f"{_subject(field, origin)}is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}.",
                            "fix the JSON syntax (quotes, commas, brackets).") from None
    except RecursionError:
        raise PlanningError(field, f"{_subject(field, origin)}nests deeper than {limits.max_depth} levels.",
                            "flatten the structure.") from None
    except ValueError as exc:  # e.g. a lone surrogate escape the decoder refuses
        raise PlanningError(field, f"{_subject(field, origin)}is not valid JSON: {quote(str(exc), 160, bare=True)}.",
                            "fix the JSON text.") from None
    check_plain(data, field=field, origin=origin, limits=limits)
    return data


def load_json_line(text: str, *, field: str) -> Any:
    """One short JSON value (a JSONL line the caller already bounded in length), with :func:`load_json`'s rules
    for numbers and duplicate keys but without its whole-document walk (3x faster on million-line files).

    Raises
    ------
    PlanningError
        Not JSON, too deep, a duplicate key or an over-long number, naming ``field``.
    """
    try:
        return _json_loads(text)
    except _LimitHit as hit:
        site = _number_site(text) if isinstance(hit, _NumberTooLong) else ""
        raise PlanningError(field, f"{hit.problem}{site}.", hit.fix) from None
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        raise PlanningError(field, "is not a JSON object.", "give one JSON object per line (JSONL).") from None


def load_data(text: str, *, field: str = "file", origin: str = "document", limits: Limits = DEFAULT_LIMITS) -> Any:
    """YAML or JSON text, bounded: text starting with ``{``/``[`` is tried as JSON first (fast), then as YAML."""
    head = text.lstrip()[:1]
    if head in ("{", "["):
        _check_size(text, field, origin, limits)
        try:
            data = _json_loads(text)
        except (json.JSONDecodeError, RecursionError):
            pass  # flow-style YAML (`{name: x}`) is not JSON; the YAML reader decides and bounds the depth
        except _LimitHit as hit:
            site = _number_site(text) if isinstance(hit, _NumberTooLong) else ""
            raise PlanningError(field, f"{_subject(field, origin)}{hit.problem}{site}.", hit.fix) from None
        else:
            check_plain(data, field=field, origin=origin, limits=limits)
            return data
    return load_yaml(text, field=field, origin=origin, limits=limits)


def load_json_file(path: str | os.PathLike[str], *, field: str, limits: Limits = DEFAULT_LIMITS,
                   what: str = "JSON file") -> Any:
    """:func:`read_text` then :func:`load_json`; the error names ``field`` and the file."""
    text = read_text(path, field=field, max_bytes=limits.max_bytes, what=what)
    return load_json(text, field=field, origin=Path(path).name, limits=limits)


def load_data_file(path: str | os.PathLike[str], *, field: str, limits: Limits = DEFAULT_LIMITS,
                   what: str = "YAML/JSON file") -> Any:
    """:func:`read_text` then :func:`load_data` (YAML or JSON by content)."""
    text = read_text(path, field=field, max_bytes=limits.max_bytes, what=what)
    return load_data(text, field=field, origin=Path(path).name, limits=limits)


def _check_size(text: str, field: str, origin: str, limits: Limits) -> None:
    if len(text) > limits.max_bytes or len(text.encode("utf-8", errors="replace")) > limits.max_bytes:
        raise PlanningError(field, f"{_subject(field, origin)}is larger than the {limits.max_bytes:,}-byte limit.",
                            "use a smaller file; split it or remove embedded data.")


def _key_path(parent: str, key: Any) -> str:
    return f"{parent}.{key}" if parent else str(key)


def check_plain(data: Any, *, field: str = "file", origin: str = "document", limits: Limits = DEFAULT_LIMITS) -> None:
    """Walk parsed data without recursion: every mapping key is text, depth and expanded size are bounded.

    Parameters
    ----------
    data:
        Parsed YAML/JSON.
    field, origin, limits:
        As for :func:`load_yaml`.

    Raises
    ------
    PlanningError
        A non-text key (named with its path), nesting deeper than ``limits.max_depth`` or more than
        ``limits.max_nodes`` values.
    """
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    seen = 0
    while stack:
        value, path, depth = stack.pop()
        seen += 1
        if seen > limits.max_nodes:
            raise PlanningError(field, f"{_subject(field, origin)}has more than {limits.max_nodes:,} values.", "use a smaller file.")
        if depth > limits.max_depth:
            raise PlanningError(field, f"{_subject(field, origin)}nests deeper than {limits.max_depth} levels (at {quote(path, 80)}).",
                                "flatten the structure.")
        if isinstance(value, Mapping):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise PlanningError(
                        path or field,
                        f"has the key {quote(key, 60)} ({type(key).__name__}); keys must be text.",
                        f'quote the key, e.g. "{quote(key, 40, bare=True)}": ...')
                stack.append((item, _key_path(path, key), depth + 1))
        elif isinstance(value, list | tuple | set | frozenset):
            for i, item in enumerate(value):
                stack.append((item, f"{path}[{i}]", depth + 1))
