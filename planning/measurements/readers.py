"""Read benchmark files as the tools write them: ``vllm bench serve --save-result`` JSON (``--save-detailed``
lists too), GuideLLM's benchmark report JSON, and the plain CSV of :data:`schema.COLUMNS`.

Every file is untrusted: read through ``planning.safeio`` (size, depth, node count, duplicate keys, over-long
numbers), every value type-checked and bounded (``schema.check_measurement``), and what the file does not state
(GPU, count, TP, engine version, dtype) comes from a :class:`Setup` — the CLI flags or a sidecar YAML next to the
file (``FILE.yaml``, e.g. ``bench.json.yaml``) — never from a guess.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from planning.catalog.schema import Catalog
from planning.errors import PlanningError, quote
from planning.measurements.schema import COLUMNS, REQUIRED, Measurement
from planning.safeio import Limits, load_data_file, load_json, read_text

MAX_FILE_BYTES = 64 * 1024 * 1024  # a --save-detailed run of a few thousand requests is tens of MB
JSON_LIMITS = Limits(max_bytes=MAX_FILE_BYTES, max_nodes=8_000_000)
SIDECAR_LIMITS = Limits(max_bytes=64 * 1024, max_nodes=1_000)
MAX_CSV_ROWS = 100_000
FORMATS = ("auto", "vllm", "guidellm", "csv")


@dataclass(frozen=True)
class Setup:
    """What a file may not say, from flags or a sidecar: None = take it from the file (or fail if absent)."""

    model: str | None = None
    gpu: str | None = None
    count: int | None = None
    tp: int | None = None
    engine: str | None = None
    engine_version: str | None = None
    dtype: str | None = None
    instance: str | None = None

    def over(self, other: Setup) -> Setup:
        """This setup with ``other``'s values where this one has none (flags over a sidecar)."""
        return Setup(**{f.name: getattr(self, f.name) if getattr(self, f.name) is not None else getattr(other, f.name)
                        for f in fields(self)})


_SETUP_FIELDS = tuple(f.name for f in fields(Setup))


def sidecar(path: Path) -> Setup:
    """The sidecar ``<file>.yaml`` next to ``path`` (empty Setup when there is none).

    Raises
    ------
    PlanningError: an unreadable sidecar or an unknown key.
    """
    side = path.with_name(path.name + ".yaml")
    if not side.is_file():
        return Setup()
    data = load_data_file(side, field=side.name, limits=SIDECAR_LIMITS, what="sidecar YAML")
    if not isinstance(data, Mapping):
        raise PlanningError(side.name, "is not a mapping.", f"write keys among {', '.join(_SETUP_FIELDS)}.")
    unknown = sorted(set(data) - set(_SETUP_FIELDS))
    if unknown:
        raise PlanningError(f"{side.name}.{unknown[0]}", "is not a sidecar key.", f"use {', '.join(_SETUP_FIELDS)}.")
    values: dict[str, Any] = {}
    for k, v in data.items():
        if k in ("count", "tp"):
            values[k] = _int(v, f"{side.name}.{k}")
        elif v is not None:
            values[k] = str(v)
    return Setup(**values)


def _int(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise PlanningError(where, f"{quote(v)} is not a whole number.", "write e.g. 1, 2, 4 or 8.")
    try:
        f = float(v)
    except ValueError:
        raise PlanningError(where, f"{quote(v)} is not a whole number.", "write e.g. 1, 2, 4 or 8.") from None
    if not (math.isfinite(f) and f == int(f) and abs(f) < 1e9):
        raise PlanningError(where, f"{quote(v)} is not a whole number.", "write e.g. 1, 2, 4 or 8.")
    return int(f)


def _num(data: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> float | None:
    """A number of a JSON mapping (None when absent or null); refuses text, booleans and non-finite values."""
    v = data.get(key)
    if v is None:
        if required:
            raise PlanningError(f"{where}.{key}", "is missing.", "use the file exactly as the benchmark wrote it.")
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise PlanningError(f"{where}.{key}", f"{quote(v)} is not a number.", "use the file as the benchmark wrote it.")
    if not math.isfinite(v):
        raise PlanningError(f"{where}.{key}", f"{quote(v)} is not finite.", "rerun the benchmark; a run that "
                            "completed writes finite numbers.")
    return float(v)


def _norm(name: str) -> str:
    base = name.strip().lower().rsplit("/", 1)[-1]
    base = re.sub(r"^meta-", "", base)
    base = re.sub(r"-(instruct|chat|hf|it)(-.*)?$", "", base)
    return base.replace("_", "-").replace(".", "-")


def catalog_model(catalog: Catalog, name: str, where: str) -> str:
    """The catalog model id a file's model name means (an id, or a Hugging Face repo of one, instruct or not).

    Raises
    ------
    PlanningError: the name matches no catalog model, or several.
    """
    if name in catalog.models:
        return name
    key = _norm(name)
    hits = sorted({mid for mid, spec in catalog.models.items() if key in (_norm(mid), _norm(spec.hf_repo))})
    if len(hits) == 1:
        return hits[0]
    raise PlanningError(where, f"model {quote(name)} is {'ambiguous' if hits else 'not in the catalog'}.",
                        f"pass --model with a catalog id ({', '.join(hits or sorted(catalog.models)[:6])}, …).")


def _resolve(catalog: Catalog, setup: Setup, file_model: str | None, where: str) -> dict[str, Any]:
    """Model, GPU, count, TP, engine, version, dtype: the setup's, else the file's; nothing silently assumed."""
    model = setup.model or file_model
    if not model:
        raise PlanningError(f"{where}.model", "the file does not name the model.", "pass --model (a catalog id).")
    model = catalog_model(catalog, model, f"{where}.model")
    if not setup.gpu:
        raise PlanningError(f"{where}.gpu", "the file does not say which GPU ran it.",
                            "pass --gpu (e.g. A10G) or write gpu: in the sidecar <file>.yaml.")
    if setup.gpu not in catalog.gpus:
        raise PlanningError(f"{where}.gpu", f"unknown GPU {quote(setup.gpu)}.", f"use one of {', '.join(catalog.gpus)}.")
    count = setup.count if setup.count is not None else setup.tp
    if count is None:
        raise PlanningError(f"{where}.count", "the file does not say how many GPUs served it.",
                            "pass --count and --tp (or write them in the sidecar <file>.yaml).")
    return {"model": model, "gpu": setup.gpu, "count": count, "tp": setup.tp if setup.tp is not None else count,
            "engine": setup.engine or "vllm", "engine_version": setup.engine_version or "",
            "dtype": setup.dtype or catalog.models[model].dtype, "instance": setup.instance or ""}


# ----------------------------------------------------------------------------------------------- vLLM
_VLLM_METADATA = {"gpu", "count", "tp", "engine", "engine_version", "dtype", "instance"}


def _vllm_setup(data: Mapping[str, Any]) -> Setup:
    """The setup a ``--metadata KEY=VALUE`` list wrote into the result (the recipes' benchmark command does)."""
    values: dict[str, Any] = {}
    for k in _VLLM_METADATA & set(data):
        values[k] = _int(data[k], k) if k in ("count", "tp") else str(data[k])
    return Setup(**values)


def _vllm_stats(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for metric in ("ttft", "itl", "tpot"):
        out[f"{metric}_ms_mean"] = _num(data, f"mean_{metric}_ms", where)
        out[f"{metric}_ms_p50"] = _num(data, f"median_{metric}_ms", where)
        out[f"{metric}_ms_p99"] = _num(data, f"p99_{metric}_ms", where)
    out["output_tokens_per_s"] = _num(data, "output_throughput", where)
    out["requests_per_s"] = _num(data, "request_throughput", where)
    goodput = _num(data, "request_goodput", where)  # with --goodput: requests/s that met every SLO
    rps = out["requests_per_s"]
    out["slo_attainment"] = min(1.0, goodput / rps) if goodput is not None and rps else None
    return out


def _check_detailed(data: Mapping[str, Any], stats: Mapping[str, float | None], where: str) -> None:
    """A ``--save-detailed`` file's per-request TTFTs (seconds) must agree with its mean (ms)."""
    ttfts = data.get("ttfts")
    if not isinstance(ttfts, list) or not ttfts or stats.get("ttft_ms_mean") is None:
        return
    vals = [t for t in ttfts if isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t)]
    if len(vals) != len(ttfts) or any(t < 0 for t in vals):
        raise PlanningError(f"{where}.ttfts", "holds a negative or non-numeric time.", "use the file as vLLM wrote it.")
    mean_ms = 1e3 * sum(vals) / len(vals)
    stated = float(stats["ttft_ms_mean"] or 0.0)
    if abs(mean_ms - stated) > 0.05 * stated + 1.0:
        raise PlanningError(f"{where}.mean_ttft_ms", f"{stated:g} ms contradicts the per-request ttfts (mean "
                            f"{mean_ms:g} ms).", "the file was edited or merged from two runs; use one run's file.")


def _vllm_per_request(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    """A ``--save-detailed`` file's successful requests: TTFT (``ttfts``, s → ms) and TPOT, the mean of each
    request's inter-token latencies (``itls``, s → ms; None for a one-token output); empty without the lists."""
    ttfts, itls = data.get("ttfts"), data.get("itls")
    if not isinstance(ttfts, list) or not ttfts or not isinstance(itls, list):
        return {}
    errors = data.get("errors")
    ok = [not e for e in errors] if isinstance(errors, list) and len(errors) == len(ttfts) else [True] * len(ttfts)
    if len(itls) != len(ttfts):
        raise PlanningError(f"{name}.itls", f"{len(itls)} requests' inter-token latencies for {len(ttfts)} TTFTs.",
                            "use the file as vLLM wrote it (one list per request).")
    ttft_ms: list[float] = []
    tpot_ms: list[float | None] = []
    for t, gaps, good in zip(ttfts, itls, ok, strict=True):
        if not good:
            continue
        if not isinstance(t, int | float) or isinstance(t, bool):
            raise PlanningError(f"{name}.ttfts", f"holds {quote(t)}, not a time.", "use the file as vLLM wrote it.")
        if not isinstance(gaps, list) or not all(isinstance(g, int | float) and not isinstance(g, bool) for g in gaps):
            raise PlanningError(f"{name}.itls", "holds a request whose inter-token latencies are not a list of "
                                "numbers.", "use the file as vLLM wrote it.")
        ttft_ms.append(1e3 * t)
        tpot_ms.append(1e3 * sum(gaps) / len(gaps) if gaps else None)
    return {"ttft_ms_each": tuple(ttft_ms), "tpot_ms_each": tuple(tpot_ms)}


def read_vllm(data: Mapping[str, Any], setup: Setup, catalog: Catalog, name: str) -> list[Measurement]:
    """A ``vllm bench serve --save-result`` JSON (vllm/benchmarks/serve.py ``result_json``) as one point."""
    completed = _num(data, "completed", name, required=True) or 0.0
    if completed < 1:
        raise PlanningError(f"{name}.completed", "no request completed.", "rerun the benchmark against a live server.")
    given = setup.over(_vllm_setup(data))
    model_id = data.get("model_id")
    ids = _resolve(catalog, given, str(model_id) if isinstance(model_id, str) else None, name)
    total_in = _num(data, "total_input_tokens", name, required=True) or 0.0
    total_out = _num(data, "total_output_tokens", name, required=True) or 0.0
    rate = data.get("request_rate", "inf")
    if rate == "inf":
        rate_f: float | None = math.inf
    else:
        rate_f = _num(data, "request_rate", name)
    conc = data.get("max_concurrency")
    stats = _vllm_stats(data, name)
    _check_detailed(data, stats, name)
    date = data.get("date")
    return [Measurement(
        **ids, input_len=total_in / completed, output_len=total_out / completed,
        concurrency=_int(conc, f"{name}.max_concurrency") if conc is not None else None,
        request_rate=None if conc is not None and rate_f == math.inf else rate_f, requests=int(completed),
        **stats, source="vllm-bench-serve", date=str(date) if date is not None else "", file=name,
        **_vllm_per_request(data, name))]


# ----------------------------------------------------------------------------------------------- GuideLLM
def _dist(metrics: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any] | None:
    """The ``successful`` DistributionSummary of one GuideLLM metric (None when absent)."""
    m = metrics.get(key)
    if m is None:
        return None
    if not isinstance(m, Mapping) or not isinstance(m.get("successful"), Mapping):
        raise PlanningError(f"{where}.{key}", "is not a StatusDistributionSummary.", "use GuideLLM's report as written.")
    return m["successful"]


def _dist_stats(d: Mapping[str, Any] | None, where: str) -> tuple[float | None, float | None, float | None]:
    """(mean, median, p99) of a DistributionSummary; a summary of no samples is None."""
    if d is None or not _num(d, "count", where):
        return None, None, None
    pct = d.get("percentiles")
    p99 = _num(pct, "p99", f"{where}.percentiles") if isinstance(pct, Mapping) else None
    return _num(d, "mean", where, required=True), _num(d, "median", where), p99


def _guidellm_load(cfg: Mapping[str, Any], where: str) -> tuple[int | None, float | None]:
    """(concurrency, request rate) of a GuideLLM scheduling strategy."""
    strategy = cfg.get("strategy")
    if not isinstance(strategy, Mapping):
        raise PlanningError(f"{where}.strategy", "is missing.", "use GuideLLM's report as written.")
    kind = strategy.get("type_")
    if kind == "synchronous":
        return 1, None
    if kind == "concurrent":
        return _int(strategy.get("streams"), f"{where}.strategy.streams"), None
    if kind in ("constant", "poisson"):
        return None, _num(strategy, "rate", f"{where}.strategy", required=True)
    if kind == "throughput":
        return None, math.inf
    raise PlanningError(f"{where}.strategy.type_", f"strategy {quote(kind)} has no fixed load.",
                        "import the synchronous, concurrent, constant, poisson or throughput benchmarks.")


def _guidellm_setup(bench: Mapping[str, Any], name: str) -> tuple[Mapping[str, Any], str, str | None]:
    """(the mapping holding ``strategy``, its path, the model served) of one benchmark: GuideLLM 0.8 keeps both in
    ``config`` (``config.strategy``, ``config.backend.model``); 0.3 in ``args.strategy`` and
    ``worker.backend_model``."""
    if "config" in bench or "args" not in bench:
        cfg, where = bench.get("config") or {}, f"{name}.config"
        backend = cfg.get("backend") if isinstance(cfg, Mapping) else None
        model = backend.get("model") if isinstance(backend, Mapping) else None
    else:
        cfg, where = bench.get("args"), f"{name}.args"
        worker = bench.get("worker")
        model = worker.get("backend_model") if isinstance(worker, Mapping) else None
    if not isinstance(cfg, Mapping):
        raise PlanningError(where, "is not a mapping.", "use GuideLLM's report as written.")
    return cfg, where, model if isinstance(model, str) else None


def _guidellm_date(bench: Mapping[str, Any]) -> str:
    """The UTC date a GuideLLM 0.3 benchmark started (``start_time``, seconds since the epoch), '' when absent."""
    t = bench.get("start_time")
    if isinstance(t, int | float) and not isinstance(t, bool) and 0 < t < 1e11:
        return datetime.fromtimestamp(t, tz=UTC).date().isoformat()
    return ""


def _guidellm_point(bench: Mapping[str, Any], setup: Setup, catalog: Catalog, name: str, date: str) -> Measurement:
    metrics = bench.get("metrics")
    if not isinstance(metrics, Mapping):
        raise PlanningError(f"{name}.metrics", "is missing.", "use GuideLLM's report as written.")
    cfg, where, file_model = _guidellm_setup(bench, name)
    ids = _resolve(catalog, setup, file_model, name)
    conc, rate = _guidellm_load(cfg, where)
    stats: dict[str, Any] = {}
    for field, key in (("ttft", "time_to_first_token_ms"), ("itl", "inter_token_latency_ms"),
                       ("tpot", "time_per_output_token_ms")):
        stats[f"{field}_ms_mean"], stats[f"{field}_ms_p50"], stats[f"{field}_ms_p99"] = _dist_stats(
            _dist(metrics, key, f"{name}.metrics"), f"{name}.metrics.{key}.successful")
    lens = [_dist_stats(_dist(metrics, k, f"{name}.metrics"), f"{name}.metrics.{k}.successful")[0]
            for k in ("prompt_token_count", "output_token_count")]
    if lens[0] is None or lens[1] is None:
        raise PlanningError(f"{name}.metrics.prompt_token_count", "no successful request.", "rerun the benchmark.")
    totals = metrics.get("request_totals", bench.get("request_totals"))  # 0.8 keeps them in metrics, 0.3 beside
    done = _num(totals, "successful", f"{name}.request_totals") if isinstance(totals, Mapping) else None
    return Measurement(
        **ids, input_len=lens[0], output_len=lens[1], concurrency=conc, request_rate=rate,
        requests=int(done) if done else None, **stats,
        output_tokens_per_s=_dist_stats(_dist(metrics, "output_tokens_per_second", f"{name}.metrics"),
                                        f"{name}.metrics.output_tokens_per_second.successful")[0],
        requests_per_s=_dist_stats(_dist(metrics, "requests_per_second", f"{name}.metrics"),
                                   f"{name}.metrics.requests_per_second.successful")[0],
        source="guidellm", date=date, file=name)


def read_guidellm(data: Mapping[str, Any], setup: Setup, catalog: Catalog, name: str) -> list[Measurement]:
    """A GuideLLM ``GenerativeBenchmarksReport`` JSON (``guidellm benchmark --output-path x.json`` up to
    0.3, ``guidellm run --output kind=json,path=x.json`` from 0.8): one point
    per benchmark (strategy) of the report."""
    benches = data.get("benchmarks")
    if not isinstance(benches, list) or not benches:
        raise PlanningError(f"{name}.benchmarks", "holds no benchmark.", "use GuideLLM's report as written.")
    meta = data.get("metadata")
    version = str(meta.get("guidellm_version", "")) if isinstance(meta, Mapping) else ""
    out = []
    for i, bench in enumerate(benches):
        if not isinstance(bench, Mapping):
            raise PlanningError(f"{name}.benchmarks[{i}]", "is not a benchmark.", "use GuideLLM's report as written.")
        point = _guidellm_point(bench, setup, catalog, f"{name}.benchmarks[{i}]", "")
        out.append(replace(point, file=name, date=f"guidellm {version}" if version else _guidellm_date(bench)))
    return out


# ----------------------------------------------------------------------------------------------- CSV
_INT_COLUMNS = {"count", "tp", "concurrency", "requests"}
_TEXT_COLUMNS = {"model", "gpu", "engine", "engine_version", "dtype", "source", "date", "file", "instance"}


def _csv_value(col: str, text: str, where: str) -> Any:
    text = text.strip()
    if col in _TEXT_COLUMNS:
        return text
    if text == "":
        return None
    if col in _INT_COLUMNS:
        return _int(text, where)
    try:
        v = float(text)
    except ValueError:
        raise PlanningError(where, f"{quote(text)} is not a number.", "write a plain decimal number.") from None
    if math.isnan(v) or (math.isinf(v) and col != "request_rate"):
        raise PlanningError(where, f"{quote(text)} is not a finite number.", "write a plain decimal number.")
    return v


def read_csv(text: str, setup: Setup, catalog: Catalog, name: str) -> list[Measurement]:
    """The plain CSV: a header of :data:`schema.COLUMNS` names (model … tp from flags when absent), one point a row."""
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in reader.fieldnames or []]
    unknown = [h for h in header if h not in COLUMNS]
    if unknown:
        raise PlanningError(f"{name}.header", f"unknown column {quote(unknown[0])}.", f"use columns among {', '.join(COLUMNS)}.")
    out = []
    for i, raw in enumerate(reader, start=2):
        if i > MAX_CSV_ROWS + 1:
            raise PlanningError(name, f"has more than {MAX_CSV_ROWS:,} rows.", "split the file.")
        row = {k.strip(): _csv_value(k.strip(), v or "", f"{name}:{i}.{k.strip()}") for k, v in raw.items()
               if k is not None}
        given = setup.over(Setup(**{k: row.get(k) or None for k in _SETUP_FIELDS}))
        ids = _resolve(catalog, given, None, f"{name}:{i}")
        missing = [c for c in REQUIRED if c not in ids and row.get(c) is None]
        if missing:
            raise PlanningError(f"{name}:{i}.{missing[0]}", "is empty.", f"fill the {missing[0]} column.")
        rest = {k: v for k, v in row.items() if k not in ids}
        rest["source"] = rest.get("source") or "csv"
        rest["file"] = rest.get("file") or name
        out.append(Measurement(**ids, **{"concurrency": None, "request_rate": None, "requests": None, **rest}))
    if not out:
        raise PlanningError(name, "has no rows.", "write one row per measured point under the header.")
    return out


# ----------------------------------------------------------------------------------------------- dispatch
def detect(data: Any, name: str = "file") -> str:
    """``vllm`` or ``guidellm`` for a parsed JSON document (``name``: the file, for the error)."""
    if isinstance(data, Mapping) and isinstance(data.get("benchmarks"), list):
        return "guidellm"
    if isinstance(data, Mapping) and ("completed" in data and ("output_throughput" in data or "duration" in data)):
        return "vllm"
    raise PlanningError(name, "is neither a vLLM bench serve result nor a GuideLLM report.",
                        "import the JSON written by `vllm bench serve --save-result`, `guidellm benchmark` (GuideLLM "
                        "0.3) or `guidellm run` (0.8), "
                        "or a CSV with the documented columns.")


def read_file(path: str | Path, setup: Setup | None = None, catalog: Catalog | None = None,
              fmt: str = "auto") -> list[Measurement]:
    """The measured points of one benchmark file.

    Parameters
    ----------
    path: a vLLM / GuideLLM JSON or a plain CSV (by content; ``fmt`` forces one).
    setup: flags; filled from the sidecar ``<file>.yaml`` where they are None.
    catalog: the catalog model and GPU ids are checked against (default: the shipped one).

    Returns
    -------
    The points, each with ``file`` = the file's name and ``source`` = the tool.

    Raises
    ------
    PlanningError: unreadable, oversized or malformed files; values out of range; setup the file lacks.
    """
    if fmt not in FORMATS:
        raise PlanningError("format", f"unknown format {quote(fmt)}.", f"use one of {', '.join(FORMATS)}.")
    p = Path(path)
    if catalog is None:
        from planning.catalog import load_catalog

        catalog = load_catalog()
    given = (setup or Setup()).over(sidecar(p))
    text = read_text(p, field=p.name, max_bytes=MAX_FILE_BYTES, what="benchmark file")
    if fmt == "csv" or (fmt == "auto" and not text.lstrip().startswith(("{", "["))):
        return read_csv(text, given, catalog, p.name)
    data = load_json(text, field=p.name, origin=p.name, limits=JSON_LIMITS)
    kind = detect(data, p.name) if fmt == "auto" else fmt
    reader = read_vllm if kind == "vllm" else read_guidellm
    return reader(data, given, catalog, p.name)


def read_files(paths: Iterable[str | Path], setup: Setup | None = None, catalog: Catalog | None = None,
               fmt: str = "auto") -> list[Measurement]:
    """:func:`read_file` over several files, in order."""
    return [m for p in paths for m in read_file(p, setup, catalog, fmt)]
