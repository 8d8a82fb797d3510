"""Plans already computed come back at once: a bounded on-disk cache of final PlanResults, keyed by the question.

The key is the SHA-256 of everything a plan depends on:

- the scenario's canonical dict (``Scenario.to_dict``, its options included: solver, time limit, MIP gap, K, Nmax,
  …) without ``name`` and ``description``, which change no number (a hit is returned under the asker's scenario);
- the perf model's fingerprint (``PerfModel.fingerprint``: physics version, calibration, GPU and model specs,
  profile tables);
- the catalog's content digest (every record of every table: prices, regions, availability, node configs, …);
- the engine's code: the package version and a hash of the package's source files (a code change is a miss
  even when nobody bumped a version);
- the call's flags (``with_baselines``, ``finance``).

Only **final** results are stored (:func:`is_final`): ``optimal``, ``infeasible``, or ``feasible`` with a proven
gap within ``options.mip_rel_gap``, not stopped by the time limit, with every baseline run and (a finance plan)
its commitment sizing final by the same rule. A plan a time limit
stopped is the best found *by then*; the next solve may do better, so it is never reused as if final.

Storage: one JSON file per key in ``$PLANNING_HOME/results/`` (beside the job store), written atomically; a read
touches the file's mtime, and a write removes the least recently used files beyond ``max_bytes`` (LRU by bytes). A
file that does not parse (truncated, older schema) is a miss and is removed. ``PLANNING_RESULT_CACHE=off``
turns the default cache off (:func:`default_cache`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from planning.context import EngineContext
from planning.result import PlanResult
from planning.scenario import Scenario

DEFAULT_MAX_BYTES = 64 * 2**20  # plans are 10-200 kB of JSON: a few hundred to thousands of answers
_IGNORED_FIELDS = ("name", "description")  # change no number of the plan

_LOCK = threading.Lock()
_CODE_DIGEST: str | None = None
_CATALOG_DIGESTS: dict[int, tuple[Any, str]] = {}  # id(catalog) → (catalog kept alive, digest)


def code_digest() -> str:
    """Hash of the package version and of every source file of ``planning`` (computed once per process)."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        from planning import __version__

        root = Path(__file__).resolve().parent
        h = hashlib.sha256(__version__.encode())
        for path in sorted(root.rglob("*.py")):
            h.update(path.relative_to(root).as_posix().encode())
            h.update(path.read_bytes())
        _CODE_DIGEST = h.hexdigest()[:16]
    return _CODE_DIGEST


def catalog_digest(catalog: Any) -> str:
    """Hash of every record of a loaded catalog (catalogs are frozen: computed once per catalog object)."""
    with _LOCK:
        known = _CATALOG_DIGESTS.get(id(catalog))
        if known is not None and known[0] is catalog:
            return known[1]
    h = hashlib.sha256()
    for name in sorted(vars(catalog)):
        value = getattr(catalog, name)
        items = sorted(value.items()) if isinstance(value, dict) else sorted(value) if isinstance(
            value, frozenset) else value
        h.update(f"{name}={items!r};".encode())
    digest = h.hexdigest()[:16]
    with _LOCK:
        if len(_CATALOG_DIGESTS) > 16:
            _CATALOG_DIGESTS.clear()
        _CATALOG_DIGESTS[id(catalog)] = (catalog, digest)
    return digest


def cache_key(scenario: Scenario, ctx: EngineContext, *, with_baselines: bool, finance: bool) -> str:
    """The key of ``scenario``'s plan under ``ctx`` (see the module docstring for what it covers)."""
    data = {k: v for k, v in scenario.to_dict().items() if k not in _IGNORED_FIELDS}
    parts = {"scenario": data, "perf": ctx.perf.fingerprint(), "catalog": catalog_digest(ctx.catalog),
             "code": code_digest(), "with_baselines": bool(with_baselines), "finance": bool(finance)}
    text = json.dumps(parts, sort_keys=True, default=repr, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def is_final(result: PlanResult, scenario: Scenario) -> bool:
    """Whether ``result`` is an answer the same question always gets: optimal, infeasible, or feasible within the
    scenario's ``mip_rel_gap``; never a plan a time limit stopped, nor one with baselines left unrun."""
    if result.stopped_at or any(not b.ran for b in result.baselines):
        return False
    sizing = (result.finance or {}).get("sizing")  # a finance plan: its commitment sizing must be final too
    if isinstance(sizing, dict) and sizing.get("status") is not None and not _final_status(
            str(sizing["status"]), sizing.get("gap"), scenario):
        return False
    return _final_status(result.status, result.mip_gap, scenario)


def _final_status(status: str, gap: object, scenario: Scenario) -> bool:
    """Optimal, infeasible, or feasible with a proven gap within ``options.mip_rel_gap``."""
    if status in ("optimal", "infeasible"):
        return True
    return status == "feasible" and isinstance(gap, (int, float)) and gap <= scenario.options.mip_rel_gap * (
        1 + 1e-9)


class ResultCache:
    """Final plans by :func:`cache_key`, one JSON file each in ``folder``, at most ``max_bytes`` (LRU)."""

    def __init__(self, folder: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.folder = Path(folder)
        self.max_bytes = int(max_bytes)
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def get(self, key: str, scenario: Scenario | None = None) -> PlanResult | None:
        """The cached plan of ``key`` (under ``scenario``'s name when given), or None (a miss)."""
        path = self._path(key)
        try:
            text = path.read_text(encoding="utf-8")
            result = PlanResult.from_dict(json.loads(text))
        except FileNotFoundError:
            self.misses += 1
            return None
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            path.unlink(missing_ok=True)  # truncated or from an older schema: recompute
            self.misses += 1
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used
        self.hits += 1
        if scenario is not None:
            result = replace(result, scenario=scenario.to_dict())
        return replace(result, stats={**result.stats, "result_cache_hit": 1.0})

    def put(self, key: str, result: PlanResult) -> bool:
        """Store ``result`` under ``key``; False (nothing written) when the folder is not writable."""
        from planning.errors import PlanningError
        from planning.scenario_io import atomic_write_text

        try:
            atomic_write_text(self._path(key), result.to_json(indent=None), field="result cache")
        except PlanningError:
            return False  # a cache that cannot write is only slower
        self.prune()
        return True

    def size_bytes(self) -> int:
        """Bytes of the cached plans."""
        return sum(size for _p, _t, size in self._files())

    def _files(self) -> list[tuple[Path, float, int]]:
        out = []
        try:
            entries = list(os.scandir(self.folder))
        except OSError:
            return []
        for e in entries:
            if e.name.endswith(".json"):
                try:
                    st = e.stat()
                except OSError:
                    continue
                out.append((Path(e.path), st.st_mtime, st.st_size))
        return out

    def prune(self) -> None:
        """Remove the least recently used plans until the folder holds at most ``max_bytes``."""
        files = self._files()
        total = sum(size for _p, _t, size in files)
        if total <= self.max_bytes:
            return
        for path, _t, size in sorted(files, key=lambda f: f[1]):
            if total <= self.max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size

    def clear(self) -> None:
        """Remove every cached plan."""
        for path, _t, _s in self._files():
            path.unlink(missing_ok=True)


def default_folder() -> Path:
    """``$PLANNING_HOME/results`` (else ``~/.cache/planning/results``): beside the job store."""
    from planning.jobs.dbfile import default_store_path

    return default_store_path().parent / "results"


_DEFAULT: ResultCache | None = None


def default_cache() -> ResultCache | None:
    """The process-wide cache in :func:`default_folder` (made anew when ``PLANNING_HOME`` changes); None when the
    environment turns it off (``PLANNING_RESULT_CACHE=off``; the test suite does, so that a test's monkeypatched
    engine is never answered by another test's plan)."""
    global _DEFAULT
    if os.environ.get("PLANNING_RESULT_CACHE", "").strip().lower() in ("0", "off", "no", "false"):
        return None
    folder = default_folder()
    with _LOCK:
        if _DEFAULT is None or _DEFAULT.folder != folder:
            _DEFAULT = ResultCache(folder)
        return _DEFAULT
