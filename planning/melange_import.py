"""Import a Mélange solver input (``workload_distribution`` + ``gpu_info`` throughput tables) as a Scenario.

Mélange (Griggs et al., 2024) poses aggregated serving of one model as: request-size buckets (i, j) on an
input × output grid with a request-rate fraction each, and per GPU type a price and a table ``tputs[i][j]`` of
the max requests/s one GPU sustains on bucket (i, j) under the SLO. Its released solver
(``melange/config/example.json``) reads exactly these keys. The scenario this module builds says the same
thing in the planner's terms, so the allocation ILP answers the same question:

- one model in aggregated mode with a histogram: entry ``k = i × n_out + j`` is bucket (i, j) (row-major,
  zero-fraction buckets kept, so explicit class ids ``{model}/aggregated/b{k}`` line up with the grid);
- one explicit template per GPU type (one GPU), with throughput ``tputs[i][j]`` for class ``b{k}`` (a zero or
  missing value means the GPU cannot serve that bucket);
- one explicit offer per GPU type at its price; availability is an upper bound on what an optimal plan could
  use (enough GPUs of that type to serve every bucket it can alone), i.e. unconstrained as in Mélange;
- generated templates off, no initialisation penalty. Mélange's ``slice_factor`` is not needed: the planner
  routes each bucket's rate fractionally across GPUs, the exact form of Mélange's slice assignment.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from planning.errors import PlanningError, UnknownIdError
from planning.safeio import Limits, load_json_file
from planning.scenario import Scenario
from planning.scenario_fields import BOUNDS

MAX_INPUT_BYTES = 5_000_000
MAX_BUCKETS = 4096
TINY = 1e-9
"""Smallest positive fraction or req/s accepted (one request in 30 years); 0 means none."""
INPUT_LIMITS = Limits(max_bytes=MAX_INPUT_BYTES, max_nodes=500_000)
# Mélange's load-balancer buckets (lb_policies.get_size_bucket_idx): upper edges 25, 100, 250, 500, 1000, 2000
MELANGE_BUCKET_EDGES = (0.0, 25.0, 100.0, 250.0, 500.0, 1000.0, 2000.0)
# GPU names used in Mélange's configs and notebooks -> catalog ids
GPU_ALIASES = {"A100-80GB": "A100-80G", "A100": "A100-80G", "A100-40GB": "A100-40G", "H100-80GB": "H100"}
REGION = "melange:input"


def _field(data: Mapping[str, Any], key: str, path: str, fix: str) -> Any:
    if key not in data:
        raise PlanningError(f"{path}{key}", "is missing.", fix)
    return data[key]


def _number(value: Any, field: str, *, positive: bool = False, bound: str | None = None,
            tiny: float = 0.0) -> float:
    """A finite number ≥ 0 (> 0 with ``positive``), at most ``BOUNDS[bound]`` (the scenario's own bounds), and
    either 0 or at least ``tiny`` (a positive value below it is not a measurement)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PlanningError(field, f"must be a number, got {type(value).__name__}.", "write a plain JSON number.")
    x = float(value) if not isinstance(value, int) or value.bit_length() <= 1000 else math.inf
    shown = f"{x:.4g}" if math.isfinite(x) else str(value)[:40] + ("…" if len(str(value)) > 40 else "")
    if not math.isfinite(x) or x < 0 or (positive and x == 0):
        raise PlanningError(field, f"must be a finite number {'> 0' if positive else '>= 0'}, got {shown}.",
                            "write a finite, non-negative number.")
    if bound is not None and x > BOUNDS[bound][0]:
        limit, why = BOUNDS[bound]
        raise PlanningError(field, f"must be ≤ {limit:g} ({why}); got {shown}.",
                            f"check the unit and write a value ≤ {limit:g}.")
    if 0 < x < tiny:
        raise PlanningError(field, f"is {shown}: a positive value below {tiny:g} is not a measurement.",
                            f"write 0 for 'none' or a value ≥ {tiny:g}.")
    return x


def _grid(value: Any, field: str, shape: tuple[int, int] | None = None, bound: str | None = None) -> list[list[float]]:
    """A rectangular list of lists of numbers; with ``shape``, only its first rows/columns are read."""
    if not isinstance(value, list) or not value or not all(isinstance(r, list) and r for r in value):
        raise PlanningError(field, "must be a non-empty list of non-empty lists of numbers.",
                            "write rows as [[...], [...]] (rows = input-length buckets).")
    n_rows, n_cols = shape if shape is not None else (len(value), len(value[0]))
    if len(value) < n_rows:
        raise PlanningError(field, f"has {len(value)} rows; the workload grid has {n_rows}.",
                            "give one row per input-length bucket.")
    out = []
    for i in range(n_rows):
        row = value[i]
        if len(row) < n_cols or (shape is None and len(row) != n_cols):
            raise PlanningError(f"{field}[{i}]", f"has {len(row)} entries; expected {n_cols}.",
                                "give one entry per output-length bucket in every row.")
        out.append([_number(row[j], f"{field}[{i}][{j}]", bound=bound, tiny=TINY) for j in range(n_cols)])
    return out


def _midpoints(n: int, edges: Sequence[float] | None, field: str) -> list[float]:
    """Representative token count of each of ``n`` buckets: the midpoint of its edges (at least 1 token)."""
    if edges is None:
        if n > len(MELANGE_BUCKET_EDGES) - 1:
            raise PlanningError(field, f"the grid has {n} buckets per axis and no bucket edges are given.",
                                f"add \"bucket_edges\": [{n + 1} increasing token counts] to the input file.")
        edges = MELANGE_BUCKET_EDGES[: n + 1]
    e = [_number(x, f"{field}[{i}]", bound="tokens") for i, x in enumerate(edges)]
    if len(e) != n + 1 or any(b <= a for a, b in itertools.pairwise(e)):
        raise PlanningError(field, f"needs {n + 1} increasing token counts for {n} buckets, got {len(e)}.",
                            "give the lower edge of the first bucket and the upper edge of every bucket.")
    return [max(1.0, round((a + b) / 2)) for a, b in itertools.pairwise(e)]


def melange_to_scenario(data: Mapping[str, Any], *, model: str = "llama-2-7b", decode_slo_ms: float = 120.0,
                        name: str = "melange-import", source: str = "Mélange solver input",
                        gpu_map: Mapping[str, str] | None = None, normalize: bool = False) -> dict[str, Any]:
    """The scenario (as a dict for ``Scenario.from_dict``) posing a Mélange solver input exactly.

    Parameters
    ----------
    data:
        Mélange's JSON input: ``workload_distribution`` (fractions, [input][output]), ``total_request_rate``
        (req/s), ``gpu_info`` {name: {cost ($/h), tputs (req/s, [input][output], extra rows ignored)}};
        optional ``bucket_edges`` (token counts, one axis, both axes share them; default Mélange's
        0, 25, 100, 250, 500, 1000, 2000), ``slice_factor`` (ignored: routing is fractional, exact).
    model:
        Catalog model id the profiles belong to (Mélange's inputs do not name it).
    decode_slo_ms:
        The TPOT SLO the profiles were measured under (recorded only; explicit throughputs already include it).
    name, source:
        Scenario name and provenance text.
    gpu_map:
        Extra GPU-name -> catalog-id mappings (on top of Mélange's usual names).
    normalize:
        Scale the fractions to sum to 1. By default they are used as given, as Mélange's solver does (bucket
        rate = fraction × total rate): fractions summing to 1.25 (Mélange's own toy example) demand 1.25 × the
        total rate, and the scenario's description says so (:func:`fraction_note`).

    Returns
    -------
    A scenario dict (aggregated mode, histogram demand, explicit templates and offers).

    Raises
    ------
    PlanningError
        A missing key, a non-numeric or negative value, a ragged grid, fractions summing to 0.
    """
    if not isinstance(data, Mapping):
        raise PlanningError("(file)", "must be a JSON object.", "see melange/config/example.json for the layout.")
    fix = "see melange/config/example.json: workload_distribution, total_request_rate, gpu_info."
    wl, total, rate = _workload(data, normalize, fix)
    n_in, n_out = len(wl), len(wl[0])
    edges = data.get("bucket_edges")
    if edges is not None and not isinstance(edges, list):
        raise PlanningError("bucket_edges", "must be a list of token counts.", "e.g. [0, 25, 100, 250, 500, 1000, 2000].")
    lens = _midpoints(max(n_in, n_out), edges, "bucket_edges")
    gpus = _field(data, "gpu_info", "", fix)
    if not isinstance(gpus, Mapping) or not gpus:
        raise PlanningError("gpu_info", "must be a non-empty object {gpu: {cost, tputs}}.", fix)
    aliases = {**GPU_ALIASES, **dict(gpu_map or {})}
    model_id = str(model)
    # as Mélange's solver does: bucket rate = fraction × total rate (fractions used as given)
    grid = _Buckets(model_id, n_in, n_out, tuple(rate * wl[i][j] for i in range(n_in) for j in range(n_out)))
    histogram = [{"input_len": lens[i], "output_len": lens[j], "rate_rps": grid.rates[i * n_out + j]}
                 for i in range(n_in) for j in range(n_out)]
    templates: list[dict[str, Any]] = []
    offers: list[dict[str, Any]] = []
    seen: set[str] = set()
    for gname, info in gpus.items():
        path = f"gpu_info.{str(gname)[:40]}"
        if not isinstance(info, Mapping):
            raise PlanningError(path, "must be an object {cost, tputs}.", fix)
        gpu = aliases.get(str(gname), str(gname))
        if gpu in seen:
            raise PlanningError(path, f"maps to GPU {gpu!r} like another entry.", "give each GPU type once.")
        seen.add(gpu)
        template, offer = _gpu_entry(path, info, gpu, grid, f"{source} (gpu_info.{str(gname)[:40]})")
        templates.append(template)
        offers.append(offer)
    note = "" if data.get("slice_factor") in (None, 1) else f"; slice_factor {data.get('slice_factor')} not needed"
    note += fraction_note(total, rate, normalize)
    return {
        "name": name,
        "description": (f"Mélange input: {n_in}×{n_out} request-size grid at {rate:g} req/s on "
                        f"{', '.join(o['shape'] for o in offers)}; bucket (i, j) is histogram entry i×{n_out}+j{note}."),
        "source": source,
        "mode": "aggregated",
        "pricing": "on_demand",
        "models": [{"id": model_id, "slo": {"decode_ms": decode_slo_ms}, "demand": {"histogram": histogram}}],
        "regions": [REGION],
        "offers": offers,
        "explicit_templates": templates,
        "generate_templates": False,
        "options": {"nmax": 1, "K": 0.0},
        "objective": {"kind": "cost", "budget_per_hour": None},
    }


@dataclass(frozen=True)
class _Buckets:
    """The request-size grid one import poses: its model, dimensions and each bucket's rate (row-major)."""

    model_id: str
    n_in: int
    n_out: int
    rates: tuple[float, ...]

    @property
    def classes(self) -> list[str]:
        return [f"{self.model_id}/aggregated/b{k}" for k in range(self.n_in * self.n_out)]


def _workload(data: Mapping[str, Any], normalize: bool, fix: str) -> tuple[list[list[float]], float, float]:
    """(the fractions grid, their sum, the total request rate), checked; scaled to sum 1 with ``normalize``."""
    wl = _grid(_field(data, "workload_distribution", "", fix), "workload_distribution")
    n_in, n_out = len(wl), len(wl[0])
    if n_in * n_out > MAX_BUCKETS:
        raise PlanningError("workload_distribution", f"has {n_in * n_out} buckets (at most {MAX_BUCKETS}).",
                            "use coarser buckets.")
    total = sum(sum(r) for r in wl)
    if total <= 0:
        raise PlanningError("workload_distribution", "sums to 0.", "give each bucket its fraction of requests.")
    rate = _number(_field(data, "total_request_rate", "", fix), "total_request_rate", positive=True,
                   bound="rate_rps", tiny=TINY)
    if normalize:
        wl = [[v / total for v in row] for row in wl]
    for i, row in enumerate(wl):
        for j, v in enumerate(row):
            if v * rate > BOUNDS["rate_rps"][0] or 0 < v * rate < TINY:
                raise PlanningError(f"workload_distribution[{i}][{j}]",
                                    f"× total_request_rate gives {v * rate:.4g} req/s in this bucket, outside "
                                    f"{TINY:g}…{BOUNDS['rate_rps'][0]:g}.",
                                    "write fractions of requests (summing to 1), or import with --normalize.")
    return wl, total, rate


def _gpu_entry(path: str, info: Mapping[str, Any], gpu: str, grid: _Buckets,
               source: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the explicit template, the offer) of one ``gpu_info`` entry: one GPU serving the buckets it has
    throughputs for, offered at most as many times as serving every such bucket on it alone needs."""
    n_in, n_out, cls = grid.n_in, grid.n_out, grid.classes
    price = _number(_field(info, "cost", f"{path}.", "give the $/h price of one GPU."), f"{path}.cost",
                    bound="price_per_hour")
    tputs = _grid(_field(info, "tputs", f"{path}.", "give the req/s table [input][output]."), f"{path}.tputs",
                  (n_in, n_out), bound="throughput")
    thr = {cls[i * n_out + j]: tputs[i][j] for i in range(n_in) for j in range(n_out) if tputs[i][j] > 0}
    if not thr:
        raise PlanningError(f"{path}.tputs", "is zero everywhere.", "drop this GPU or give its throughputs.")
    # never more GPUs of one type than serving every bucket it can on that type alone
    need = sum(grid.rates[k] / thr[c] for k, c in enumerate(cls) if c in thr)
    shape = f"1x{gpu}"
    template = {"id": gpu, "model": grid.model_id, "phase": "aggregated", "usage": {shape: 1}, "throughput": thr}
    # capped at the scenario's bound on a region's nodes: more than that many GPUs is no plan either way
    available = min(math.ceil(need) + 1, int(BOUNDS["nodes"][0]))
    return template, {"region": REGION, "shape": shape, "price_per_hour": price, "available": available,
                      "source": source}


FRACTION_TOLERANCE = 1e-3
"""How far the workload fractions may sum from 1 before the import says so (rounding in Mélange's files)."""


def fraction_note(total: float, rate: float, normalized: bool = False) -> str:
    """What the scenario says when the fractions do not sum to 1 (empty when they do, within rounding)."""
    if abs(total - 1.0) <= FRACTION_TOLERANCE:
        return ""
    if normalized:
        return f"; fractions summed to {total:.4g} and were scaled to 1"
    return (f"; fractions sum to {total:.4g}, used as given (Mélange's rule: bucket rate = fraction × total rate),"
            f" so the histogram totals {rate * total:.4g} req/s, not {rate:g}; import with --normalize to scale them to 1")


def read_melange_file(path: str | Path, field: str = "file") -> dict[str, Any]:
    """The JSON object of a Mélange input file, read with the bounded loader (:mod:`planning.safeio`).

    Raises
    ------
    PlanningError
        Missing, too large, not UTF-8, not JSON, a duplicate key, an over-long number (where it is), or not an
        object, naming ``field``, the file and the fix.
    """
    p = Path(path)
    data = load_json_file(p, field=field, limits=INPUT_LIMITS, what="Mélange JSON input")
    if not isinstance(data, dict):
        raise PlanningError(field, f"{p.name[:120]} must hold a JSON object, not a {type(data).__name__}.",
                            "see melange/config/example.json.")
    return data


def import_melange(path: str | Path, *, tputs: str | Path | None = None, rate: float | None = None,
                   model: str = "llama-2-7b", gpu_map: Mapping[str, str] | None = None,
                   normalize: bool = False) -> Scenario:
    """A validated Scenario from a Mélange input file (see :func:`melange_to_scenario`).

    Parameters
    ----------
    path:
        Mélange solver input (``example.json`` layout).
    tputs:
        Optional throughput-table file whose ``gpu_info`` replaces the input's (e.g. a profiling output).
    rate:
        Optional total request rate (req/s) replacing ``total_request_rate``.
    model, gpu_map, normalize:
        As in :func:`melange_to_scenario`; ``model`` must be a catalog model id.

    Raises
    ------
    PlanningError
        Bad files or values, naming the key and the fix; an unknown model or GPU with the closest ids.
    """
    data = read_melange_file(path)
    if tputs is not None:
        table = read_melange_file(tputs, "--tputs")
        data = {**data, "gpu_info": _field(table, "gpu_info", "", "the throughput file needs a gpu_info object.")}
    if rate is not None:
        data = {**data, "total_request_rate": _number(rate, "--rate", positive=True, bound="rate_rps", tiny=TINY)}
    p = Path(path)
    _check_model(model)
    _check_gpus(data, gpu_map)
    raw = melange_to_scenario(data, model=model, name=p.stem[:80] or "melange-import",
                              source=f"Mélange solver input {p.name[:120]}", gpu_map=gpu_map, normalize=normalize)
    return Scenario.from_dict(raw)


def _check_model(model: str) -> None:
    """The model the profiles belong to is a catalog model (the simulator and perf model need its architecture)."""
    from planning.catalog import load_catalog

    known = load_catalog().models
    if str(model) not in known:
        err = UnknownIdError("--model", str(model), known)
        raise PlanningError(err.field, err.problem, f"name the catalog model the profiles were measured on; {err.fix}")


def _check_gpus(data: Mapping[str, Any], gpu_map: Mapping[str, str] | None) -> None:
    """Every GPU name of ``gpu_info`` maps to a catalog GPU (else the closest ids and the ``--gpu`` fix)."""
    from planning.catalog import load_catalog

    gpus = data.get("gpu_info")
    if not isinstance(gpus, Mapping):
        return  # melange_to_scenario names the problem
    known = load_catalog().gpus
    aliases = {**GPU_ALIASES, **dict(gpu_map or {})}
    for name in gpus:
        gid = aliases.get(str(name), str(name))
        if gid not in known:
            err = UnknownIdError(f"gpu_info.{str(name)[:40]}", gid, known)
            raise PlanningError(err.field, err.problem, f"map it with --gpu {str(name)[:40]}=ID; {err.fix}")
