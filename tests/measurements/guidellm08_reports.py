"""GuideLLM 0.8 reports written by GuideLLM itself: the default suite's ``data/guidellm-0.8.1-*.json``.

GuideLLM 0.8 builds a benchmark only while it runs one (an accumulator fed by its scheduler), so these files come
from real runs of its own CLI, ``guidellm run``, against its own mock server (``guidellm mock-server``: an
OpenAI-compatible server on 127.0.0.1 that streams ``OUTPUT_TOKENS`` tokens at the TTFT and ITL it is given).
Every byte of a file is GuideLLM's; the latencies in it are the mock server's as this machine served them, so a
rewrite changes the numbers but not the layout. GuideLLM 0.8 imports torch with its report classes, and PyPI's
Linux torch is the CUDA build, so its environment (tools/guidellm08, ``make install-guidellm08``) runs on
Debian's Python with Debian's CPU ``python3-torch``; ``make guidellm08-fixtures`` rewrites the files and ``make
test-guidellm08`` loads them with GuideLLM's own report model.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
GUIDELLM08_VERSION = "0.8.1"
MODEL = "llama-3-8b"
TTFT_MS, ITL_MS, OUTPUT_TOKENS = 150.0, 30.0, 24  # what the mock server is told to serve
PORT = 8799
# name -> guidellm run's profile arguments and its request count (each file one run; "concurrent" two benchmarks)
RUNS: dict[str, tuple[list[str], int]] = {
    "synchronous": (["--profile", "kind=synchronous"], 6),
    "concurrent": (["--profile", "kind=concurrent", "--override", "profile.streams", "2,4"], 12),
    "poisson": (["--profile", "kind=poisson,rate=3"], 12),
}


def _guidellm() -> str:
    return str(Path(sys.executable).with_name("guidellm"))


def _wait_ready(url: str, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"GuideLLM's mock server did not answer {url} within {deadline_s:g} s")


def write_reports(folder: Path) -> list[Path]:
    """Run every :data:`RUNS` against a fresh mock server and keep GuideLLM's JSON reports in ``folder``."""
    server = subprocess.Popen([_guidellm(), "mock-server", "--host", "127.0.0.1", "--port", str(PORT), "--model", MODEL,
                               "--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--output-tokens",
                               str(OUTPUT_TOKENS)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = []
    try:
        _wait_ready(f"http://127.0.0.1:{PORT}/v1/models", 60.0)
        with tempfile.TemporaryDirectory() as tmp:
            prompts = Path(tmp) / "prompts.json"
            prompts.write_text(json.dumps([{"prompt": f"Request {i}: shall I compare thee to a summer's day? " * 24}
                                           for i in range(64)]), encoding="utf-8")
            for name, (profile, requests) in RUNS.items():
                path = folder / f"guidellm-{GUIDELLM08_VERSION}-{name}.json"
                subprocess.run([_guidellm(), "run", "--backend",
                                f"kind=openai_http,target=http://127.0.0.1:{PORT},model={MODEL}", *profile,
                                "--constraint", f"kind=max_requests,count={requests}", "--data",
                                f"kind=json_file,path={prompts}", "--output", f"kind=json,path={path}",
                                "--disable-progress", "--disable-console"], check=True, timeout=300,
                               stdout=subprocess.DEVNULL)
                out.append(path)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return out


def main(argv: list[str]) -> None:
    if argv != ["--write"]:
        raise SystemExit("usage: python -m tests.measurements.guidellm08_reports --write")
    from importlib.metadata import version

    if version("guidellm") != GUIDELLM08_VERSION:
        raise SystemExit(f"guidellm {version('guidellm')} is installed; these files are {GUIDELLM08_VERSION}'s "
                         "(make install-guidellm08)")
    DATA.mkdir(exist_ok=True)
    for path in write_reports(DATA):
        print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
