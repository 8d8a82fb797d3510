"""An impossible SLO answered "infeasible" at once (issue 37 §4): TPOT 1 ms on llama-3-70b, target ≤ 2 s.

Prints the median of ``--runs`` wall times of (a) ``api.solve`` in a process whose engine context is loaded (what
the app's worker does: the precheck alone), and (b) ``planning solve FILE`` as a fresh CLI process (Python start-up
and imports included: the CLI answers a refused scenario before importing ``planning.api``, pandas or a solver),
beside ``planning --help`` (every command's imports), with the status, exit code and message; the CLI lines also
give each process's CPU seconds (user + system), which other work on the machine inflates less than the wall time.
Each line ends with ``target met`` or ``TARGET MISSED`` (≤ 2 s); the script exits 1 when a median misses it.

Run: ``python -m benchmarks.bench_precheck [--runs 3]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from planning import api
from planning.scenario import Scenario

TARGET_S = 2.0
IMPOSSIBLE = {
    "name": "impossible-tpot",
    "regions": ["aws:us-east-1", "aws:us-east-2", "gcp:us-central1"],
    "models": [{"id": "llama-3-70b", "slo": {"prefill_ms": 2000, "decode_ms": 1},
                "demand": {"rate_rps": 2, "input_len": 1024, "output_len": 256}}],
    "options": {"time_limit_s": 60},
}


def _wall(argv: list[str]) -> tuple[float, int, float]:
    """One fresh process: its wall seconds, exit code and CPU seconds (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, done.returncode, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> int:
    """Measure and print; 1 when the in-process median misses the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    scenario = Scenario.from_dict(IMPOSSIBLE)
    api.engine_context()  # loaded once, as in a running app
    walls, result = [], None
    for _ in range(args.runs):
        t0 = time.perf_counter()
        result = api.solve(scenario)
        walls.append(time.perf_counter() - t0)
    assert result is not None
    here = statistics.median(walls)
    print(f"in process: median {here:.3f} s (runs {', '.join(f'{w:.3f}' for w in walls)})  status {result.status}  "
          f"{'target met' if here <= TARGET_S else 'TARGET MISSED'}")
    print(f"    {result.message}")
    exe = str(Path(sys.executable).with_name("planning"))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "impossible.json"
        path.write_text(json.dumps(IMPOSSIBLE), encoding="utf-8")
        cli = [_wall([exe, "solve", str(path)]) for _ in range(args.runs)]
        help_ = [_wall([exe, "--help"]) for _ in range(args.runs)]
    cli_med, help_med = statistics.median(w for w, _, _ in cli), statistics.median(w for w, _, _ in help_)
    print(f"CLI planning solve (fresh process): median {cli_med:.2f} s (runs {', '.join(f'{w:.2f}' for w, _, _ in cli)}"
          f"; CPU median {statistics.median(c for _, _, c in cli):.2f} s), exit codes {sorted({c for _, c, _ in cli})}"
          f"  {'target met' if cli_med <= TARGET_S else 'TARGET MISSED'}")
    print(f"CLI planning --help (every command's imports): median {help_med:.2f} s (CPU median "
          f"{statistics.median(c for _, _, c in help_):.2f} s)")
    return 0 if here <= TARGET_S and cli_med <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
