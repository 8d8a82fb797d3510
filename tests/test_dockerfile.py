"""The Dockerfile builds from the lock alone: its install steps use only tools/uv-requirements.txt (hashed) and
`uv sync --locked`, and replayed here in a fresh venv they install exactly uv.lock's runtime set. (No Docker engine
runs on the machines that test this project, so the image itself is not built here.)"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.markers import Marker
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
# bootstrapped by `make` from tools/uv-requirements.txt, else yours (`make test UV=uv`), if it is the same version
UV = next((p for p in (Path(sys.executable).parent / "uv", Path(shutil.which("uv") or "/nonexistent"))
           if p.exists()), Path(sys.executable).parent / "uv")
PROJECT_VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def _instructions() -> list[tuple[str, str]]:
    """(KEYWORD, arguments) of each Dockerfile instruction, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        keyword, _, args = (pending + line).strip().partition(" ")
        out.append((keyword.upper(), " ".join(args.split())))
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    return out


def _env() -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, args in _instructions():
        if keyword == "ENV":
            env.update(item.split("=", 1) for item in shlex.split(args))
    return env


def _uv_pin() -> str:
    match = re.search(r"^uv==(\S+)", (ROOT / "tools" / "uv-requirements.txt").read_text(), re.MULTILINE)
    assert match, "tools/uv-requirements.txt pins no uv version"
    return match.group(1)


def test_every_install_step_uses_only_the_lock() -> None:
    steps = _instructions()
    base = next(args for keyword, args in steps if keyword == "FROM")
    match = re.fullmatch(r"python:3\.(\d+)-slim", base)
    assert match and 11 <= int(match.group(1)) <= 14, f"{base}: a slim Python that uv.lock covers (3.11-3.14)"
    runs = [args for keyword, args in steps if keyword == "RUN"]
    installs = [r for r in runs if re.search(r"\b(pip|uv|conda|apt-get|easy_install)\b", r)]
    pip_steps = [r for r in installs if re.search(r"\bpip install\b", r)]
    assert len(pip_steps) == 1, pip_steps
    pip_args = shlex.split(pip_steps[0].split("pip install", 1)[1])
    assert {"--require-hashes", "--no-deps"} <= set(pip_args)
    assert [a for a in pip_args if not a.startswith("-")] == ["tools/uv-requirements.txt"], pip_args  # nothing else
    syncs = [r for r in installs if r not in pip_steps]
    assert syncs and all(re.fullmatch(r"uv sync --locked( --no-install-project)?", r) for r in syncs), syncs
    env = _env()
    assert env["UV_PROJECT_ENVIRONMENT"] and env["PLANNING_HOME"] == "/data"
    assert env["PATH"].startswith(env["UV_PROJECT_ENVIRONMENT"] + "/bin:")
    copied_before_first_sync = " ".join(args for keyword, args in steps[:[a for _, a in steps].index(syncs[0])]
                                        if keyword == "COPY")
    assert "uv.lock" in copied_before_first_sync.split() and "pyproject.toml" in copied_before_first_sync.split()
    assert ("VOLUME", '["/data"]') in steps and ("EXPOSE", "8501") in steps
    cmd = json.loads(next(args for keyword, args in steps if keyword == "CMD"))
    assert cmd[:3] == ["streamlit", "run", "app.py"] and "--server.port=8501" in cmd
    entry = json.loads(next(args for keyword, args in steps if keyword == "ENTRYPOINT"))
    assert entry == ["python", "tools/container_start.py"] and (ROOT / entry[1]).is_file()


def _runtime_set(lock: dict[str, Any]) -> dict[str, str]:
    """uv.lock's runtime closure for this interpreter and platform: the project's dependencies (no extras),
    followed through each package's dependencies, markers evaluated here."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for package in lock["package"]:
        by_name.setdefault(package["name"], []).append(package)
    chosen: dict[str, str] = {}
    todo = [dict(d) for d in by_name["planning"][0]["dependencies"]]
    while todo:
        dep = todo.pop()
        if "marker" in dep and not Marker(dep["marker"]).evaluate():
            continue
        candidates = [p for p in by_name[dep["name"]] if "version" not in dep or p["version"] == dep["version"]]
        assert len(candidates) == 1, (dep, [p["version"] for p in candidates])
        package = candidates[0]
        extras = dep.get("extra", [])
        key = f"{package['name']}[{','.join(extras)}]"
        if key in chosen:
            continue
        chosen[key] = package["version"]
        todo += package.get("dependencies", [])
        for extra in extras:
            todo += package.get("optional-dependencies", {}).get(extra, [])
    return {k.split("[")[0]: v for k, v in chosen.items()}


def _docker_ignored(name: str, rel: str) -> bool:
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]
    return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(name, p.removeprefix("**/")) for p in patterns)


def _copy(src: str, dst: Path) -> None:
    """Docker's COPY from the build context (this checkout, less .dockerignore) to ``dst``."""
    if src == ".":
        def ignore(folder: str, names: list[str]) -> set[str]:
            rel = os.path.relpath(folder, ROOT)
            return {n for n in names if _docker_ignored(n, os.path.normpath(os.path.join(rel, n)))}
        shutil.copytree(ROOT, dst, ignore=ignore, dirs_exist_ok=True)
    else:
        target = dst / Path(src).name if dst.is_dir() or str(dst).endswith("/") else dst
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / src, target)


@pytest.mark.slow
def test_the_install_steps_replayed_in_a_fresh_venv_give_the_locked_runtime_set(tmp_path: Path) -> None:
    """Each COPY and `uv sync` of the Dockerfile, in order, into an empty folder and a venv that does not exist
    yet, with the Dockerfile's ENV (the venv moved to tmp). The one difference from a build: uv's cache is kept
    (a build downloads the same files; UV_NO_CACHE only keeps them out of the image)."""
    assert UV.exists(), f"{UV} missing: run `make install-dev` (it bootstraps uv from tools/uv-requirements.txt)"
    version = subprocess.run([str(UV), "--version"], capture_output=True, text=True, check=True).stdout.split()[1]
    assert version == _uv_pin(), f"{UV} is uv {version}; the Dockerfile installs {_uv_pin()} (`make install-dev`)"
    app, venv = tmp_path / "app", tmp_path / "venv"
    app.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_NO_CACHE", "UV_COMPILE_BYTECODE")}
    env.update({k: v for k, v in _env().items() if k not in ("PATH", "UV_NO_CACHE", "UV_COMPILE_BYTECODE")})
    env.update(UV_PROJECT_ENVIRONMENT=str(venv), UV_PYTHON=sys.executable, UV_PYTHON_DOWNLOADS="never")
    workdir = "/"
    for keyword, args in _instructions():
        if keyword == "WORKDIR":
            workdir = args
        elif keyword == "COPY":
            *sources, dst = shlex.split(args)
            assert workdir == "/app" and not dst.startswith("/"), "replay knows COPY into WORKDIR /app only"
            for src in sources:
                _copy(src, app / dst if dst not in (".", "./") else app)
        elif keyword == "RUN" and args.startswith("uv sync"):
            done = subprocess.run([str(UV), *shlex.split(args)[1:]], cwd=app, env=env, capture_output=True,
                                  text=True, timeout=900)
            assert done.returncode == 0, done.stderr[-3000:]
    listed = subprocess.run([str(venv / "bin" / "python"), "-c",
                             "import importlib.metadata as m, json; "
                             "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"],
                            capture_output=True, text=True, check=True)
    installed = {canonicalize_name(k): v for k, v in json.loads(listed.stdout).items()}
    lock = tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))
    expected = {canonicalize_name(k): v for k, v in _runtime_set(lock).items()} | {"planning": PROJECT_VERSION}
    assert installed == expected, {"not in the lock's runtime set": sorted(set(installed) - set(expected)),
                                   "missing": sorted(set(expected) - set(installed)),
                                   "versions": {k: (installed[k], expected[k]) for k in set(installed) & set(expected)
                                                if installed[k] != expected[k]}}
    assert not {"ray", "skypilot", "pytest", "mypy", "ruff", "playwright"} & set(installed)  # light: no extras
    imports = subprocess.run([str(venv / "bin" / "python"), "-c",
                              "import planning.catalog.load as c, streamlit, highspy; print(c.DATA_DIR)"],
                             capture_output=True, text=True, cwd=tmp_path)  # from the venv, not this checkout
    assert imports.returncode == 0 and Path(imports.stdout.strip()) == app / "data", imports.stderr
