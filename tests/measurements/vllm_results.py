"""vLLM result files written by vLLM itself: the default suite's ``data/vllm-0.33.0-*.json``.

``make vllm-fixtures`` runs vLLM 0.33.0's own CLI, ``vllm bench serve --save-result`` (vllm/benchmarks/serve.py),
against tools/vllmbench/fake_server.py: an OpenAI-compatible completions server on 127.0.0.1 that streams each
request's ``max_tokens`` tokens at the TTFT and ITL it is given, every second request at a slower ITL (no model
runs). The prompts come from vLLM's own
``random`` dataset through a word-level tokenizer written here into a temporary folder, so nothing is fetched from
Hugging Face. Every byte of a file is vLLM's; the latencies are the fake server's as this machine served them, so
a rewrite changes the numbers but not the layout. The environment (tools/vllmbench, ``make install-vllmbench``)
is vLLM 0.33.0 installed without resolving its GPU extras, beside PyPI's torch 2.14.0 (the CUDA build, which
imports and runs the client on a machine without a GPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
VLLM_VERSION = "0.33.0"
MODEL = "llama-3-8b"
TTFT_MS, ITL_MS, SLOW_ITL_MS = 150.0, 30.0, 45.0  # what the fake server is told to serve; every 2nd request slow
INPUT_LEN, OUTPUT_LEN, PROMPTS = 32, 16, 12
PORT = 8798
METADATA = {"gpu": "A10G", "count": "1", "tp": "1", "engine": "vllm", "engine_version": VLLM_VERSION}
# name -> vllm bench serve's load and reporting arguments (each file one run)
RUNS: dict[str, list[str]] = {
    # closed loop, the default report; the setup comes from import flags
    "concurrency": ["--max-concurrency", "4", "--request-rate", "inf"],
    # Poisson at 4 req/s as the export recipes measure, percentiles, per-request lists, setup as metadata; the TPOT
    # SLO (40 ms) lies between the fast and the slow requests' ITL, so about half miss it
    "goodput": ["--request-rate", "4", "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles",
                "50,90,99", "--goodput", "ttft:300", "tpot:40", "--save-detailed", "--metadata",
                *(f"{k}={v}" for k, v in METADATA.items())],
}
TOOL = Path(__file__).resolve().parents[2] / "tools" / "vllmbench"


def write_tokenizer(folder: Path) -> Path:
    """A word-level tokenizer of 500 words (``w0``..``w499``) that ``AutoTokenizer`` loads from ``folder``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {"[UNK]": 0, **{f"w{i}": i + 1 for i in range(500)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 4096}),
        encoding="utf-8")
    return folder


def _wait_ready(url: str, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the fake server did not answer {url} within {deadline_s:g} s")


def _bench(tokenizer: Path, folder: Path, name: str, load: list[str]) -> Path:
    path = folder / f"vllm-{VLLM_VERSION}-{name}.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    subprocess.run([str(Path(sys.executable).with_name("vllm")), "bench", "serve", "--backend", "openai",
                    "--base-url", f"http://127.0.0.1:{PORT}", "--endpoint", "/v1/completions", "--model", MODEL,
                    "--tokenizer", str(tokenizer), "--dataset-name", "random", "--random-input-len",
                    str(INPUT_LEN), "--random-output-len", str(OUTPUT_LEN), "--num-prompts", str(PROMPTS),
                    "--ignore-eos", "--seed", "0", "--disable-tqdm", *load, "--save-result", "--result-dir",
                    str(folder), "--result-filename", path.name], check=True, timeout=600, env=env,
                   stdout=subprocess.DEVNULL)
    return path


def write_results(folder: Path) -> list[Path]:
    """Run every :data:`RUNS` against a fresh fake server and keep vLLM's result files in ``folder``."""
    server = subprocess.Popen([sys.executable, str(TOOL / "fake_server.py"), "--port", str(PORT), "--model", MODEL,
                               "--ttft-ms", str(TTFT_MS), "--itl-ms", str(ITL_MS), "--slow-itl-ms", str(SLOW_ITL_MS),
                               "--slow-every", "2"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_ready(f"http://127.0.0.1:{PORT}/v1/models", 60.0)
        with tempfile.TemporaryDirectory() as tmp:
            tokenizer = write_tokenizer(Path(tmp) / "word-tokenizer")
            return [_bench(tokenizer, folder, name, load) for name, load in RUNS.items()]
    finally:
        server.terminate()
        server.wait(timeout=30)


def main(argv: list[str]) -> None:
    if argv != ["--write"]:
        raise SystemExit("usage: python -m tests.measurements.vllm_results --write")
    from importlib.metadata import version

    if version("vllm") != VLLM_VERSION:
        raise SystemExit(f"vllm {version('vllm')} is installed; these files are {VLLM_VERSION}'s "
                         "(make install-vllmbench)")
    DATA.mkdir(exist_ok=True)
    for path in write_results(DATA):
        print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
