"""Seeded mutators of presets, HF configs and profile CSVs, shared by the hypothesis suite and tools/fuzz.py."""

from __future__ import annotations

import copy
import json
import os
import random
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from planning.errors import PlanningError
from planning.templates.cache import META_KEY

ROOT = Path(__file__).resolve().parents[2]
PRESETS_DIR = ROOT / "data" / "presets"
HF_FIXTURES = sorted((ROOT / "tests" / "catalog" / "fixtures").glob("*.json"))
PROFILE_FILES = sorted((ROOT / "sample_profiles").glob("*.csv"))

ALIAS_BOMB = "".join(
    f"{k}: &{k} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['lol'] * 9)}]\n"
    for p, k in zip(["", "a", "b", "c", "d", "e", "f", "g", "h"], "abcdefghi", strict=True)
)
"""A ~400-byte "billion laughs" document: nine levels of nine aliases each (9^9 values if expanded)."""

HOSTILE_SCALARS: list[Any] = [
    None, True, False, 0, -1, 1, 7, 2**31, 2**63, int("9" * 400), -int("9" * 400), 1e308, -1e308, 1e-320,
    float("nan"), float("inf"), float("-inf"), -0.0, 0.5, "", " ", "0", "1e999", "nan", "inf", "-5", "0x10",
    "１２", "٣", "²", "2xL40S", "２xL40S", "1xA100-80G", "x" * 5000, "\x00", "\u202e", "a\nb", "é", "🙂",
    "${HOME}", "../../etc/passwd", "llama-3-8b", "aws:us-east-2", [], {}, [[[]]], {"a": 1}, {1: 2}, {None: 1},
    [1, "a", None], {"id": "x"}, {"prefill_ms": 1}, ["2xL40S"] * 50,
]


def load_presets() -> dict[str, dict[str, Any]]:
    """The shipped presets as raw dicts (name → data)."""
    return {p.stem: yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(PRESETS_DIR.glob("*.yaml"))}


def tree_paths(tree: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (tuple of keys/indices) to a node of ``tree``, the root included."""
    out = [prefix]
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.extend(tree_paths(v, (*prefix, k)))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out.extend(tree_paths(v, (*prefix, i)))
    return out


def get_at(tree: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def set_at(tree: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of ``tree`` with the node at ``path`` replaced (the root when ``path`` is empty)."""
    if not path:
        return value
    new = copy.deepcopy(tree)
    parent = get_at(new, path[:-1])
    parent[path[-1]] = value
    return new


def delete_at(tree: Any, path: tuple[Any, ...]) -> Any:
    if not path:
        return None
    new = copy.deepcopy(tree)
    parent = get_at(new, path[:-1])
    del parent[path[-1]]
    return new


def nested(depth: int, leaf: Any = 1, kind: str = "list") -> Any:
    value = leaf
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


def mutate_tree(tree: Any, rng: random.Random, n_ops: int = 1) -> tuple[Any, str]:
    """Apply ``n_ops`` random structural/value mutations; returns (new tree, description)."""
    notes = []
    for _ in range(n_ops):
        paths = tree_paths(tree)
        path = rng.choice(paths)
        op = rng.choice(["hostile", "hostile", "hostile", "delete", "unknown_key", "wrap", "deep", "dup",
                         "number_noise", "swap"])
        where = ".".join(map(str, path)) or "<root>"
        if op == "hostile":
            value = rng.choice(HOSTILE_SCALARS)
            tree = set_at(tree, path, copy.deepcopy(value))
            notes.append(f"{where}={_short(value)}")
        elif op == "delete" and path:
            tree = delete_at(tree, path)
            notes.append(f"del {where}")
        elif op == "unknown_key":
            target = get_at(tree, path)
            if isinstance(target, dict):
                key = rng.choice(["extra", 1, None, True, "x" * 300, "１", ""])
                tree = set_at(tree, path, {**target, key: rng.choice(HOSTILE_SCALARS[:12])})
                notes.append(f"{where}[{_short(key)}]+")
        elif op == "wrap":
            tree = set_at(tree, path, [get_at(tree, path)])
            notes.append(f"wrap {where}")
        elif op == "deep":  # deeper nesting is fuzzed as text: copy/paths here recurse on trees
            depth = rng.choice([40, 100, 300])
            tree = set_at(tree, path, nested(depth, get_at(tree, path), rng.choice(["list", "dict"])))
            notes.append(f"deep{depth} {where}")
            break
        elif op == "dup":
            target = get_at(tree, path)
            if isinstance(target, list) and target:
                tree = set_at(tree, path, target + [copy.deepcopy(rng.choice(target))] * rng.choice([1, 3, 200]))
                notes.append(f"dup {where}")
        elif op == "number_noise":
            target = get_at(tree, path)
            if isinstance(target, int | float) and not isinstance(target, bool):
                factor = rng.choice([-1, 0, 1e-9, 10, 1e6, 1e12, 1e300])
                tree = set_at(tree, path, target * factor)
                notes.append(f"{where}*{factor:g}")
        elif op == "swap" and path:
            other = rng.choice(paths)
            tree = set_at(tree, path, copy.deepcopy(get_at(tree, other)))
            notes.append(f"{where}<-{'.'.join(map(str, other))}")
    return tree, "; ".join(notes) or "no-op"


def mutate_text(text: str, rng: random.Random) -> tuple[str, str]:
    """A text-level mutation of a YAML/JSON/CSV document; returns (text, description)."""
    op = rng.choice(["truncate", "insert", "delete", "brackets", "alias_bomb", "anchor", "bignum", "tab",
                     "dup_line", "int_key", "unicode_digit", "control"])
    pos = rng.randrange(len(text) + 1)
    if op == "truncate":
        return text[:pos], f"truncate@{pos}"
    if op == "insert":
        chunk = rng.choice([":", "- ", "{", "}", "[", "]", '"', "'", "&", "*", "!!", "#", ",", "\n  ", "%", "|",
                            "!!python/object:os.system", "? ", "<<: *x\n", "\t", "\\u0000"])
        return text[:pos] + chunk + text[pos:], f"insert {chunk!r}@{pos}"
    if op == "delete":
        end = min(len(text), pos + rng.randrange(1, 40))
        return text[:pos] + text[end:], f"delete {pos}:{end}"
    if op == "brackets":
        n = rng.choice([100, 1000, 5000])
        return text[:pos] + "[" * n + "]" * n + text[pos:], f"brackets{n}@{pos}"
    if op == "alias_bomb":
        return ALIAS_BOMB + text, "alias bomb"
    if op == "anchor":
        return text.replace("slo:", "slo: &s", 1).replace("objective:", "objective: *s\nx_objective:", 1), "anchor"
    if op == "bignum":
        digits = "9" * rng.choice([400, 5000])
        out, n = _replace_number(text, rng, digits)
        return out, f"bignum x{n}"
    if op == "tab":
        return text.replace("  ", "\t", rng.randrange(1, 5)), "tabs"
    if op == "dup_line":
        lines = text.splitlines(keepends=True)
        i = rng.randrange(len(lines)) if lines else 0
        return "".join(lines[: i + 1] + lines[i:]), f"dup line {i}"
    if op == "int_key":
        return "1: 2\nnull: 3\n" + text, "int keys"
    if op == "unicode_digit":
        return text.replace("1", "١", rng.randrange(1, 4)).replace("2x", "２x", 1), "unicode digits"
    return text[:pos] + rng.choice(["\x00", "\x1b[31m", "\ufeff", "\ud800", "\x85"]) + text[pos:], "control"


def _replace_number(text: str, rng: random.Random, digits: str) -> tuple[str, int]:
    import re

    matches = list(re.finditer(r"(?<![\w.])\d+(\.\d+)?(?![\w.])", text))
    if not matches:
        return text + digits, 0
    chosen = rng.sample(matches, k=min(len(matches), rng.choice([1, 3, 1000])))
    out = text
    for m in sorted(chosen, key=lambda m: m.start(), reverse=True):
        out = out[: m.start()] + digits + out[m.end():]
    return out, len(chosen)


def mutate_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """An encoding-level mutation (Latin-1, UTF-16, BOM, NUL, random bytes)."""
    op = rng.choice(["latin1", "utf16", "bom", "nul", "flip", "utf8"])
    if op == "latin1":
        return data.decode("utf-8", "replace").replace("e", "é", 3).encode("latin-1", "replace"), "latin-1"
    if op == "utf16":
        return data.decode("utf-8", "replace").encode("utf-16"), "utf-16"
    if op == "bom":
        return b"\xef\xbb\xbf" + data, "bom"
    if op == "nul":
        pos = rng.randrange(len(data) + 1)
        return data[:pos] + b"\x00" + data[pos:], "nul"
    if op == "flip" and data:
        arr = bytearray(data)
        for _ in range(rng.randrange(1, 8)):
            arr[rng.randrange(len(arr))] = rng.randrange(256)
        return bytes(arr), "flip"
    return data, "unchanged"


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 200 else f"<{value.bit_length()}-bit int>"
    return text if len(text) <= 40 else text[:37] + "..."


def dump_yaml(tree: Any) -> str | None:
    """YAML text of a mutated tree, or ``None`` when PyYAML cannot represent it."""
    try:
        return yaml.safe_dump(tree, allow_unicode=True, sort_keys=False)
    except (yaml.YAMLError, RecursionError, ValueError):
        return None


def dump_json(tree: Any) -> str | None:
    try:
        return json.dumps(tree)
    except (TypeError, ValueError, RecursionError):
        return None


# ----------------------------------------------------------------------------------------------------------------
# The oracle: a result or a clean PlanningError, nothing else
# ----------------------------------------------------------------------------------------------------------------
MAX_MESSAGE = 2_000


@dataclass
class Outcome:
    """One case's verdict: ``ok`` (a result), ``rejected`` (clean PlanningError) or ``crash``."""

    target: str
    kind: str
    description: str
    seconds: float
    detail: str = ""
    cpu: float = 0.0
    """CPU seconds of this process (the wall time on a shared machine includes waiting for a core)."""


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def add(self, o: Outcome) -> None:
        self.outcomes.append(o)

    @property
    def crashes(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.kind == "crash"]


def judge(target: str, description: str, fn: Callable[[], Any]) -> Outcome:
    """Run ``fn``; a PlanningError must name a field and stay short, any other exception is a crash."""
    t0, c0 = time.perf_counter(), time.process_time()
    kind, detail = "ok", ""
    try:
        fn()
    except PlanningError as exc:
        text = str(exc)
        kind, detail = "rejected", str(exc.field)
        if not exc.field or not str(exc.field).strip():
            kind, detail = "crash", f"PlanningError without a field: {text[:300]}"
        elif len(text) > MAX_MESSAGE:
            kind, detail = "crash", f"message of {len(text):,} characters"
    except Exception as exc:  # the point of the fuzzer: anything else is a finding
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-3))
        kind, detail = "crash", f"{type(exc).__name__}: {str(exc)[:200]}\n{tb}"
    return Outcome(target, kind, description, time.perf_counter() - t0, detail, time.process_time() - c0)


# ----------------------------------------------------------------------------------------------------------------
# Case generators: (target, description, thunk); the thunk returns a result or raises
# ----------------------------------------------------------------------------------------------------------------
Case = tuple[str, str, Callable[[], Any]]


def scenario_tree_case(rng: random.Random, presets: dict[str, dict[str, Any]]) -> Case:
    from planning.scenario import Scenario, parse_scenario_text

    name = rng.choice(sorted(presets))
    tree, note = mutate_tree(presets[name], rng, rng.choice([1, 1, 2, 3]))
    via_text = rng.random() < 0.5
    text = dump_yaml(tree) if via_text else None

    def run() -> Any:
        if text is not None:
            return parse_scenario_text(text, origin=f"{name}.yaml")
        return Scenario.from_dict(tree)

    return "scenario-tree", f"{name}: {note}{' (yaml)' if text is not None else ''}", run


def scenario_text_case(rng: random.Random, texts: dict[str, str]) -> Case:
    from planning.scenario import parse_scenario_text

    name = rng.choice(sorted(texts))
    text, note = mutate_text(texts[name], rng)
    return "scenario-text", f"{name}: {note}", lambda: parse_scenario_text(text, origin=f"{name}.yaml")


def scenario_file_case(rng: random.Random, texts: dict[str, str], folder: Path) -> Case:
    from planning.scenario import load_scenario

    name = rng.choice(sorted(texts))
    data, note = mutate_bytes(texts[name].encode("utf-8"), rng)
    path = folder / f"case-{rng.randrange(10**9)}.yaml"

    def run() -> Any:
        path.write_bytes(data)
        try:
            return load_scenario(path)
        finally:
            path.unlink(missing_ok=True)

    return "scenario-file", f"{name}: {note}", run


def hf_config_case(rng: random.Random, configs: dict[str, dict[str, Any]], folder: Path) -> Case:
    from planning.catalog.models import model_from_hf_config

    name = rng.choice(sorted(configs))
    tree, note = mutate_tree(configs[name], rng, rng.choice([1, 1, 2]))
    mode = rng.choice(["dict", "file", "text"])
    if mode == "dict":
        return "hf-config", f"{name}: {note} (dict)", lambda: model_from_hf_config(tree, "fuzz-model")
    text = dump_json(tree) or "{}"
    if mode == "text":
        text, more = mutate_text(json.dumps(configs[name], indent=1), rng)
        note = more
    path = folder / f"config-{rng.randrange(10**9)}.json"

    def run() -> Any:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            return model_from_hf_config(path, "fuzz-model")
        finally:
            path.unlink(missing_ok=True)

    return "hf-config", f"{name}: {note} ({mode})", run


def profile_csv_case(rng: random.Random, csvs: dict[str, str], folder: Path) -> Case:
    from planning.perf import load_profiles

    name = rng.choice(sorted(csvs))
    text = csvs[name]
    op = rng.choice(["cell", "cell", "ragged", "text", "bytes"])
    lines = text.splitlines()
    if op == "cell" and len(lines) > 1:
        i = rng.randrange(len(lines))
        cells = lines[i].split(",")
        j = rng.randrange(len(cells))
        value = rng.choice(HOSTILE_SCALARS)
        cells[j] = value if isinstance(value, str) else repr(value)
        lines[i] = ",".join(cells)
        data = ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")
        note = f"cell {i}:{j}={_short(value)}"
    elif op == "ragged" and len(lines) > 1:
        i = rng.randrange(1, len(lines))
        lines[i] = lines[i].rsplit(",", rng.randrange(1, 4))[0] if rng.random() < 0.5 else lines[i] + ",x"
        data, note = ("\n".join(lines) + "\n").encode(), f"ragged row {i}"
    elif op == "text":
        new, note = mutate_text(text, rng)
        data = new.encode("utf-8", "surrogatepass")
    else:
        data, note = mutate_bytes(text.encode("utf-8"), rng)
    path = folder / f"profile-{rng.randrange(10**9)}.csv"

    def run() -> Any:
        path.write_bytes(data)
        try:
            return load_profiles(path)
        finally:
            path.unlink(missing_ok=True)

    return "profile-csv", f"{name}: {note}", run


# ----------------------------------------------------------------------------------------------------------------
# Template cache files: damaged, foreign and altered copies (issue 30); each must give the clean plan
# ----------------------------------------------------------------------------------------------------------------
def cache_footer(path: Path) -> dict[str, Any]:
    """The ``planning.library`` footer of a cached library file."""
    import pyarrow.parquet as pq

    meta = pq.read_metadata(path).metadata
    return dict(json.loads(meta[META_KEY.encode()]))


def _rewrite(path: Path, df: Any, footer: dict[str, Any] | None) -> None:
    """Write ``df`` over ``path`` keeping ``footer`` (what a tool that edits the data but copies the metadata does)."""
    df.write_parquet(path, metadata={META_KEY: json.dumps(footer)} if footer is not None else None)


def _times_ten(path: Path) -> None:
    _rewrite(path, pl.read_parquet(path).with_columns(pl.col("throughput") * 10), cache_footer(path))


def _drop_90(path: Path) -> None:
    df = pl.read_parquet(path)
    _rewrite(path, df.head(max(1, df.height // 10)), cache_footer(path))


def _wrong_schema(path: Path) -> None:
    footer = cache_footer(path)
    _rewrite(path, pl.DataFrame({"template_id": ["x"], "throughput": [1e9]}), footer)


def _renamed_column(path: Path) -> None:
    _rewrite(path, pl.read_parquet(path).rename({"throughput": "tput"}), cache_footer(path))


def _no_footer_times_ten(path: Path) -> None:
    _rewrite(path, pl.read_parquet(path).with_columns(pl.col("throughput") * 10), None)


def _other_key(path: Path) -> None:
    footer = cache_footer(path)
    _rewrite(path, pl.read_parquet(path), {**footer, "key": "0" * 32})


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(4096))


def _empty(path: Path) -> None:
    path.write_bytes(b"")


CACHE_CORRUPTIONS: dict[str, Callable[[Path], None]] = {
    "truncated": _truncate, "garbage": _garbage, "empty": _empty, "wrong-schema": _wrong_schema,
    "renamed-column": _renamed_column, "throughput-x10": _times_ten, "rows-dropped-90pct": _drop_90,
    "x10-without-footer": _no_footer_times_ten, "other-key": _other_key,
}



def comparable_plan(plan_json: str) -> dict[str, Any]:
    """A plan's JSON without what differs between equal plans (timings, stats) or names the cache (diagnostics)."""
    return {k: v for k, v in json.loads(plan_json).items() if k not in ("timings", "diagnostics", "stats")}


def template_cache_cases(folder: Path, preset: str = "demystifying",
                         overrides: Mapping[str, Any] | None = None) -> list[Case]:
    """One case per :data:`CACHE_CORRUPTIONS`: damage every cached library of ``preset`` (library path), solve it
    through the CLI, and fail unless the exit code is 0/1, the plan equals the clean plan and each damaged file got
    a notice. The solves use their own cache directory under ``folder`` (the process's engine context is swapped
    for the call), so other cached libraries are never touched; the first case also plans the clean run.
    ``overrides``: top-level scenario fields replaced (``options`` merged into the preset's), e.g. a smaller
    instance with a limit no solve reaches, so that no plan is a time limit's incumbent (which a busy machine
    would not share with the clean run)."""
    from dataclasses import replace

    from planning import api, context

    folder.mkdir(parents=True, exist_ok=True)
    data = api.load_preset_scenario(preset).to_dict()
    extra = dict(overrides or {})
    data["options"] = {**data["options"], **extra.pop("options", {}), "templates": "library"}
    data.update(extra)
    scenario = folder / f"{preset}-library.yaml"
    scenario.write_text(yaml.safe_dump(data), encoding="utf-8")
    cache = folder / "templates"
    clean: dict[str, Any] = {}
    pristine: dict[Path, bytes] = {}

    def solve() -> str:
        saved = context._CTX
        context._CTX = replace(api.engine_context(), cache_dir=cache)
        try:
            code, out, err, _ = run_cli(["solve", str(scenario), "--json"])
        finally:
            context._CTX = saved
        if code not in (0, 1):
            raise AssertionError(f"exit {code}: {err[-400:]}")
        return out

    def case(name: str, corrupt: Callable[[Path], None]) -> Callable[[], Any]:
        def run() -> Any:
            if not clean:
                clean["plan"] = comparable_plan(solve())
                pristine.update({f: f.read_bytes() for f in sorted(cache.glob("*.parquet"))})
            if not pristine:
                raise AssertionError("the clean solve left no cached library")
            for f, data in pristine.items():
                f.write_bytes(data)
                corrupt(f)
            out = solve()
            notes = [d for d in json.loads(out)["diagnostics"] if "template cache file" in d]
            if comparable_plan(out) != clean["plan"]:
                raise AssertionError(f"{name}: the plan differs from the clean plan")
            if len(notes) != len(pristine):
                raise AssertionError(f"{name}: {len(notes)} cache notices for {len(pristine)} damaged files")
            return out

        return run

    return [("template-cache", f"{preset}: {name} library files", case(name, fn))
            for name, fn in CACHE_CORRUPTIONS.items()]


def corpus() -> tuple[dict[str, dict[str, Any]], dict[str, str], dict[str, dict[str, Any]], dict[str, str]]:
    """(preset dicts, preset texts, HF configs, profile CSV texts) shipped with the project."""
    presets = load_presets()
    texts = {p.stem: p.read_text(encoding="utf-8") for p in sorted(PRESETS_DIR.glob("*.yaml"))}
    configs = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in HF_FIXTURES}
    csvs = {p.stem: p.read_text(encoding="utf-8") for p in PROFILE_FILES}
    return presets, texts, configs, csvs


# ----------------------------------------------------------------------------------------------------------------
# CLI invocations through planning.cli.main with captured output
# ----------------------------------------------------------------------------------------------------------------
def run_cli(argv: list[str]) -> tuple[int, str, str, float]:
    """``planning.cli.main(argv)`` with stdout/stderr captured; argparse's SystemExit becomes the code."""
    import contextlib
    import io

    from planning.cli import main

    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue(), time.perf_counter() - t0


MELANGE_BASE: dict[str, Any] = {"workload_distribution": [[0.5, 0.5]], "total_request_rate": 10,
                                "gpu_info": {"A10G": {"cost": 1.0, "tputs": [[2.0, 1.0]]},
                                             "L4": {"cost": 0.8, "tputs": [[1.5, 0.7]]}}}


def _melange(**changes: Any) -> str:
    return json.dumps({**MELANGE_BASE, **changes})


MELANGE_HOSTILE: dict[str, str] = {
    "int-5001-digits": _melange().replace('"total_request_rate": 10', '"total_request_rate": ' + "9" * 5001),
    "rate-1e300": _melange(total_request_rate=1e300),
    "rate-nan": _melange(total_request_rate=float("nan")),
    "tputs-1e-300": _melange(gpu_info={"A10G": {"cost": 1.0, "tputs": [[1e-300, 1e-300]]}}),
    "tputs-1e300": _melange(gpu_info={"A10G": {"cost": 1.0, "tputs": [[1e300, 1e300]]}}),
    "cost-1e300": _melange(gpu_info={"A10G": {"cost": 1e300, "tputs": [[1.0, 1.0]]}}),
    "fractions-1e300": _melange(workload_distribution=[[1e300, 1e300]]),
    "fractions-1e-300": _melange(workload_distribution=[[1e-300, 1e-300]]),
    "edges-1e300": _melange(bucket_edges=[0, 1e300, 1e301]),
    "slow-gpu-huge-rate": _melange(total_request_rate=1e7, gpu_info={"A10G": {"cost": 1.0, "tputs": [[1e-9, 1e-9]]}}),
    "duplicate-key": '{"total_request_rate": 10, "total_request_rate": 20, "workload_distribution": [[1]], '
                     '"gpu_info": {"A10G": {"cost": 1, "tputs": [[1]]}}}',
    "float-1200-chars": _melange().replace('"total_request_rate": 10', '"total_request_rate": 1.' + "5" * 1200),
}
"""Mélange solver inputs the issue-30 tester found exiting 3 (plus neighbours): each must be exit 0 or 2."""

TRACE_HOSTILE: dict[str, str] = {
    "one-line.csv": "arrival_s,input_tokens,output_tokens\n" + "1" * 1_200_000,
    "dup-key.jsonl": '{"timestamp": 0, "timestamp": 9, "input_length": 1, "output_length": 1}\n',
    "int-5001.jsonl": '{"timestamp": ' + "9" * 5001 + ', "input_length": 1, "output_length": 1}\n',
    "huge-field.csv": 'arrival_s,input_tokens,output_tokens\n0,"' + "x" * 200_000 + '",1\n',
    "tokens-1e300.csv": "arrival_s,input_tokens,output_tokens\n0,1e300,1\n1,1,1\n",
}
"""Trace files: no line breaks, duplicate JSON keys, over-long numbers, a 200 kB CSV field."""


def cli_cases(folder: Path, rng: random.Random, n_random: int = 24) -> list[list[str]]:
    """About 50 hostile invocations: fixed ones for every command plus ``n_random`` mutated scenario files."""
    folder.mkdir(parents=True, exist_ok=True)
    presets, texts, _, csvs = corpus()

    def write(name: str, data: str | bytes) -> str:
        path = folder / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
        return str(path)

    blocker = write("blocker.txt", "x")
    arena = texts["melange-arena"]
    cases: list[list[str]] = [
        ["validate", write("bomb.yaml", ALIAS_BOMB + arena)],
        ["validate", write("deep.yaml", "[" * 1000 + "]" * 1000)],
        ["validate", write("bignum.yaml", arena.replace("rate_rps: 0.4743", "rate_rps: " + "9" * 400))],
        ["validate", write("latin1.yaml", arena.encode("utf-8").replace("é".encode(), "é".encode("latin-1")))],
        ["validate", write("intkey.yaml", "1: 2\n" + arena)],
        ["validate", write("nmax.yaml", arena.replace("nmax: 1", "nmax: 1e20"))],
        ["validate", write("unicode-shape.yaml", arena.replace("models:", 'shapes: ["２xL4"]\nmodels:', 1))],
        ["validate", str(folder)],
        ["validate", str(folder / "missing.yaml")],
        ["validate", "/dev/null"],
        ["validate", "--preset", "no-such-preset"],
        ["validate"],
        ["templates", write("bad-templates.yaml", "name: [unclosed")],
        ["solve", "--preset", "melange-arena", "--out", str(Path(blocker) / "sub" / "plan.txt")],
        ["solve", "--preset", "melange-arena", "--out", str(folder)],
        ["solve", "--preset", "melange-arena", "--budget", "nan"],
        ["solve", "--preset", "melange-arena", "--budget", "-5"],
        ["solve", "--preset", "melange-arena", "--budget", "1e308"],
        ["solve", write("huge-demand.yaml", arena.replace("decode_ms: 120", "decode_ms: 0.001"))],
        ["allocate", write("bad.json", "{not json")],
        ["allocate", write("deep.json", "[" * 5000 + "]" * 5000)],
        ["allocate", write("list.json", "[]")],
        ["allocate", write("empty.json", "{}")],
        ["allocate", write("types.json", json.dumps({"templates": 1, "offers": "x", "classes": None}))],
        ["allocate", write("entries.json", json.dumps({"templates": [{"id": 1, "group": [], "usage": "x",
                                                                     "throughput": 5}], "offers": [], "classes": []}))],
        ["allocate", write("nonutf8.json", b'{"templates": "\xff"}')],
        ["allocate", str(folder)],
        ["place", write("place-bad.json", '{"layers": "x", "thr": 5}')],
        ["place", write("place-deep.json", "[" * 3000 + "]" * 3000)],
        ["perf", "--model", "llama-3-8b", "--gpu", "H100", "--batch", "8", "--input-len", "512",
         "--profiles", write("p.csv", csvs[sorted(csvs)[0]].replace(",", ";", 3))],
        ["perf", "--model", "llama-3-8b", "--gpu", "H100", "--batch", "8", "--input-len", "512",
         "--profiles", str(folder)],
        ["perf", "--model", "llama-3-8", "--gpu", "H100", "--batch", "8", "--input-len", "512"],
        ["perf", "--model", "llama-3-8b", "--gpu", "H100", "--batch", "-3", "--input-len", "512"],
        ["perf", "--model", "llama-3-8b", "--gpu", "H100", "--batch", "9" * 40, "--input-len", "512"],
        ["jobs", "--store", write("jobs.sqlite", b"SQLite format 3\x00" + b"\x01" * 4000), "list"],
        ["jobs", "--store", str(folder / "jobs2.sqlite"), "show", "nope"],
        ["jobs", "--store", blocker + "/jobs.sqlite", "list"],
        ["catalog", "nonsense"],
        # saved plans and uploads read by simulate / export / import-melange / timeline
        ["simulate", write("plan-deep.json", "[" * 200_000 + "]" * 200_000)],
        ["simulate", write("plan-fake.json", json.dumps({"instances": [{"model": 1}], "status": "optimal"}))],
        ["simulate", write("plan-types.json", json.dumps({"instances": "x", "status": None}))],
        ["export", write("plan-deep2.json", '{"instances": ' + "[" * 100_000 + "]" * 100_000 + ', "status": 1}')],
        ["export", write("plan-dupe.json", '{"instances": [], "instances": [], "status": "optimal"}')],
        ["import-melange", write("melange-deep.json", "[" * 100_000 + "]" * 100_000)],
        ["timeline", "--preset", "coral-core", "--demand", "phi-4=" + write("trace-deep.jsonl", "[" * 100_000 + "\n")],
        ["timeline", "--preset", "coral-core", "--demand", "phi-4=" + write("curve.csv", "hour,rate\n0,nan\n")],
        # issue 30: Mélange inputs with absurd numbers and duplicate keys, unbounded trace files
        *[["import-melange", write(f"melange-{name}.json", text)] for name, text in MELANGE_HOSTILE.items()],
        ["import-melange", write("melange-ok.json", json.dumps(MELANGE_BASE)), "--rate", "1e300"],
        ["import-melange", write("melange-ok2.json", json.dumps(MELANGE_BASE)), "--tputs",
         write("melange-tputs.json", '{"gpu_info": {"A10G": {"cost": 1, "tputs": [[1e-300, 1]]}}}')],
        *[["simulate", "--preset", "coral-core", "--duration", "5", "--trace", write(f"trace-{name}", text)]
          for name, text in TRACE_HOSTILE.items()],
        ["timeline", "--preset", "coral-core", "--demand",
         "phi-4=" + write("trace-dup-t.jsonl", TRACE_HOSTILE["dup-key.jsonl"])],
    ]
    for i in range(n_random):
        name = rng.choice(sorted(texts))
        if rng.random() < 0.5:
            text, _ = mutate_text(texts[name], rng)
        else:
            tree, _ = mutate_tree(presets[name], rng, rng.choice([1, 2]))
            text = dump_yaml(tree) or texts[name]
        cases.append(["validate", write(f"random-{i}.yaml", text)])
    return cases
