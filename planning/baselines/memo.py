"""Baselines already answered come back at once: each baseline's result keyed by the inputs it reads (issue 41).

A what-if re-plans every baseline, yet most of them do not change: dropping L40S leaves single:A100-80G's problem
as it was (4.5 CPU-s of coral-extended's what-if), and a slider moved back to a position asks every baseline the
same question again. A baseline's answer is a pure function of its own problem: its ILPs stop on HiGHS nodes
(``base.BASELINE_NODES``), never on a clock, so the same problem gives the same answer in any process. This memo
keys each result by :func:`fingerprint`, the SHA-256 of exactly what the baseline reads:

- its name and strategy options (memP's model sizes, GPU memory and request rates; Homo's order);
- its own problem (:func:`planning.baselines.beside.own_part`: a ``single:<gpu>`` baseline sees only that GPU
  type's templates and running instances), every field of it in order — templates (usage, throughput), classes,
  links, transfers, commitments, running and start counts, K, objective, solver, builder, gaps, work limits —
  but the solve's time limit and its stop token, which bind only as clocks (a result a clock stopped is never
  stored: :func:`cacheable`), and its objective and budget, which every baseline replaces (``from_allocation``
  solves for cost, each strategy drops the budget: a budget what-if re-plans none of them);
- of the offers, for a ``single:<gpu>`` baseline on the matrix builder, only those whose shape one of its templates
  uses, and the regions of all of them: the matrix model has an availability row only for an offer some pair uses
  (``matrix_model.availability``, in offer order) and indexes pairs by the sorted regions of every offer, so the
  offers of other GPU types change nothing else (every other baseline keys on all offers);
- a salt naming the engine (:func:`salt_of`: the package's source digest, ``resultcache.code_digest``, passed in
  by the pipeline, and HiGHS's version): a code change or another solver is a miss.

Nothing else enters (no catalog, no perf model): they reach a baseline only through its problem's numbers, which
the key holds. Storage: in memory (``max_entries``, least recently used first out) and, given a folder, one JSON
file per key beside the result cache (``$PLANNING_HOME/results/baselines``, at most ``max_bytes``, LRU by mtime),
so that a job worker's answer serves the next process too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from planning.allocate.problem import AllocationProblem
from planning.baselines.base import BaselineResult

MAX_ENTRIES = 512
"""Results kept in memory per memo (a result is a few kB: a plan's counts and served fractions)."""
MAX_BYTES = 16 * 2**20
"""Bytes of the memo's folder on disk before the least recently used files go."""
_CLOCKS = ("time_limit_s", "stop", "dump_model")  # bind only as clocks (a clock-stopped result is never stored)
_OVERRIDDEN = ("objective", "budget_per_hour")  # every baseline solves for cost without a budget (base.from_allocation)
_LOCK = threading.Lock()
_MEMOS: dict[tuple[str, str], BaselineMemo] = {}


def _canon(value: Any) -> Any:
    """``value`` as nested tuples of plain values whose ``repr`` keeps every distinction a solve could see: the
    order of sequences and mappings (HiGHS's path depends on column order), exact floats (``repr`` round-trips),
    the type of each dataclass."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _FIELDS.get(type(value))
        if names is None:
            names = _FIELDS[type(value)] = tuple(f.name for f in dataclasses.fields(value))
        return (type(value).__name__, *(_canon(getattr(value, n)) for n in names))
    if isinstance(value, Mapping):
        return ("map", *((_canon(k), _canon(v)) for k, v in value.items()))
    if isinstance(value, (frozenset, set)):
        return ("set", *sorted(repr(_canon(v)) for v in value))
    if isinstance(value, (list, tuple)):
        return tuple(_canon(v) for v in value)
    if value is None or isinstance(value, (bool, str, int, float)):
        return value
    if hasattr(value, "item"):
        return value.item()  # a numpy scalar: its Python value
    return ("repr", repr(value))


_FIELDS: dict[type, tuple[str, ...]] = {}
_TEMPLATE_FIELDS = ("id", "group", "usage", "throughput", "single_shape", "gpu_types")


def _flat_template(t: Any) -> Any:
    """One template as :func:`_canon` gives it, without its per-value dispatch (a 9,000-template problem is keyed in
    tens of milliseconds): ids, the usage and throughput mappings as item tuples in order (``repr`` keeps a float
    exact and a numpy scalar distinct), the rest as they are. Any other dataclass, or a template type with other
    fields, takes the general path."""
    if _FIELDS.get(type(t)) != _TEMPLATE_FIELDS:
        names = tuple(f.name for f in dataclasses.fields(t)) if dataclasses.is_dataclass(t) else ()
        if names != _TEMPLATE_FIELDS:
            return _canon(t)
        _FIELDS[type(t)] = names
    return (t.id, t.group, tuple(t.usage.items()), tuple(t.throughput.items()), t.single_shape, t.gpu_types)
_SEEN: dict[int, tuple[Any, str]] = {}  # id(templates tuple) → (the tuple, kept alive; its digest)


def _templates_digest(templates: tuple[Any, ...]) -> str:
    """The digest of a problem's templates, once per tuple: the baselines that read the whole problem (Homo,
    Homo-ILP, Cauchy, memP) share it, so 6,000-9,000 templates are hashed once, not four times."""
    with _LOCK:
        seen = _SEEN.get(id(templates))
        if seen is not None and seen[0] is templates:
            return seen[1]
    flat = [_flat_template(t) for t in templates]
    digest = hashlib.sha256(repr(flat).encode()).hexdigest()
    with _LOCK:
        if len(_SEEN) > 8:  # each entry keeps a problem's templates alive
            _SEEN.clear()
        _SEEN[id(templates)] = (templates, digest)
    return digest


def _read_offers(name: str, problem: AllocationProblem) -> Any:
    """The offers ``name`` reads from ``problem`` (the module docstring: a ``single:<gpu>`` baseline on the matrix
    builder reads only the offers of its templates' shapes, and the regions of all offers)."""
    from planning.allocate.solve import resolve_builder

    if not name.startswith("single:") or resolve_builder(problem) != "matrix" or problem.commitments:
        return _canon(problem.offers)
    shapes = {s for t in problem.templates for s in t.usage}
    return ("used", _canon(tuple(o for o in problem.offers if o.shape in shapes)),
            "regions", tuple(sorted({o.region for o in problem.offers})))


def fingerprint(name: str, problem: AllocationProblem, options: Mapping[str, Any], salt: str) -> str:
    """The key of baseline ``name`` on its own ``problem`` with its strategy ``options`` under the engine ``salt``
    (the module docstring says what it covers and why)."""
    fields = tuple((f.name, _canon(getattr(problem, f.name))) for f in dataclasses.fields(problem)
                   if f.name not in (*_CLOCKS, *_OVERRIDDEN, "offers", "templates"))
    data = (name, _canon(dict(sorted(options.items()))), salt, _templates_digest(problem.templates), fields,
            _read_offers(name, problem))
    return hashlib.sha256(repr(data).encode()).hexdigest()


def cacheable(result: BaselineResult) -> bool:
    """Whether ``result`` is the answer its problem always gets: not skipped by the solve's deadline, and no ILP
    of it stopped by a wall clock (``details["time_limited"]``)."""
    return not result.details.get("skipped") and not result.details.get("time_limited")


def _encode(value: Any) -> Any:
    """JSON for a result's fields: mappings with tuple keys (nodes by (region, shape), counts by (template,
    region)) as pair lists, tuples tagged, so that :func:`_decode` gives back the same values."""
    if isinstance(value, Mapping):
        return {"__map__": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()  # a numpy scalar
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if "__map__" in value:
            return {_decode(k): _decode(v) for k, v in value["__map__"]}
        if "__tuple__" in value:
            return tuple(_decode(v) for v in value["__tuple__"])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def to_json(result: BaselineResult) -> str:
    """``result`` as one JSON document (:func:`from_json` reads it back equal)."""
    return json.dumps({f.name: _encode(getattr(result, f.name)) for f in dataclasses.fields(result)},
                      separators=(",", ":"))


def from_json(text: str) -> BaselineResult:
    """The result :func:`to_json` wrote."""
    data = json.loads(text)
    return BaselineResult(**{f.name: _decode(data[f.name]) for f in dataclasses.fields(BaselineResult)})


class BaselineMemo:
    """Baseline results by :func:`fingerprint`: in memory (at most ``max_entries``) and, with a ``folder``, on disk
    (at most ``max_bytes``), both least recently used first out. ``hits``/``misses`` count the look-ups."""

    def __init__(self, salt: str, folder: str | os.PathLike[str] | None = None, *, max_entries: int = MAX_ENTRIES,
                 max_bytes: int = MAX_BYTES) -> None:
        self.salt = salt
        self.folder = Path(folder) if folder is not None else None
        self.max_entries = int(max_entries)
        self.max_bytes = int(max_bytes)
        self.hits = 0
        self.misses = 0
        self._kept: OrderedDict[str, BaselineResult] = OrderedDict()
        self._lock = threading.Lock()

    def key(self, name: str, problem: AllocationProblem, options: Mapping[str, Any]) -> str:
        """:func:`fingerprint` under this memo's salt."""
        return fingerprint(name, problem, options, self.salt)

    def get(self, key: str, *, count: bool = True) -> BaselineResult | None:
        """The result stored under ``key``, or None (a miss); ``count=False``: a look-ahead that is not an answer
        (``beside.EarlyStart`` asking whether to start a baseline), left out of ``hits``/``misses``."""
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
        if found is None and self.folder is not None:
            found = self._read(key)
            if found is not None:
                self._remember(key, found)
        if count:
            with self._lock:
                if found is None:
                    self.misses += 1
                else:
                    self.hits += 1
        return found

    def put(self, key: str, result: BaselineResult) -> bool:
        """Store ``result`` under ``key`` when :func:`cacheable`; True when stored."""
        if not cacheable(result):
            return False
        self._remember(key, result)
        if self.folder is not None:
            self._write(key, result)
        return True

    def _remember(self, key: str, result: BaselineResult) -> None:
        with self._lock:
            self._kept[key] = result
            self._kept.move_to_end(key)
            while len(self._kept) > self.max_entries:
                self._kept.popitem(last=False)

    def _path(self, key: str) -> Path:
        assert self.folder is not None
        return self.folder / f"{key}.json"

    def _read(self, key: str) -> BaselineResult | None:
        path = self._path(key)
        try:
            result = from_json(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError, KeyError):
            path.unlink(missing_ok=True)  # truncated or from an older layout: recompute
            return None
        with contextlib.suppress(OSError):
            os.utime(path)
        return result

    def _write(self, key: str, result: BaselineResult) -> None:
        """One file, written atomically; then the oldest files beyond ``max_bytes`` go (a folder that cannot be
        written only makes the memo slower)."""
        assert self.folder is not None
        try:
            text = to_json(result)
        except (TypeError, ValueError):
            return  # a strategy's details JSON cannot hold: kept in memory only
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = self.folder / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, self._path(key))
            files = sorted((e.stat().st_mtime, e.stat().st_size, e.path) for e in os.scandir(self.folder)
                           if e.name.endswith(".json"))
        except OSError:
            return
        total = sum(size for _t, size, _p in files)
        for _t, size, path in files:
            if total <= self.max_bytes:
                break
            with contextlib.suppress(OSError):
                os.unlink(path)
            total -= size


def salt_of(code: str) -> str:
    """The engine's salt: ``code`` (the digest of the package's sources, ``resultcache.code_digest``) and the
    version of HiGHS, whose search decides which plan a node-limited ILP returns."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        highs = version("highspy")
    except PackageNotFoundError:
        highs = "none"
    return f"{code}:highspy={highs}"


def memo_in(folder: str | os.PathLike[str] | None, salt: str) -> BaselineMemo:
    """The process-wide memo of ``folder`` (None: memory only) under ``salt``, made on first use: every solve of
    the process that is given the same folder shares its memory part."""
    key = (str(folder), salt)
    with _LOCK:
        memo = _MEMOS.get(key)
        if memo is None:
            if len(_MEMOS) > 8:
                _MEMOS.clear()
            memo = _MEMOS[key] = BaselineMemo(salt, folder)
        return memo
