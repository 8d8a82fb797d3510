"""How much work the baselines' ILPs need (issue 37 §6): HiGHS branch-and-bound nodes per baseline solve, against
their work limit (``planning.baselines.base.BASELINE_NODES``), and whether every baseline keeps its recorded answer.

Run: ``python benchmarks/bench_baseline_work.py [--presets coral-core coral-extended catalog-wide]``.

Solves each preset as ``planning solve --preset P --json`` does (result cache off) and prints per baseline its cost,
whether it was time-limited, and whether its cost and note are the ones recorded in
``tests/baselines/data/preset_baselines.json``; then the most nodes any baseline's HiGHS solve took (read from
HiGHS's ``mip_node_count`` of every solve given a node limit: the baselines' cost, max-served and linked-part ILPs),
the number of such solves and the five largest. The margin is the work limit over that maximum. The baselines run
in this process one after another (``PLANNING_BASELINE_WORKERS=1``), so every one of their solves is counted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RECORDED = Path(__file__).resolve().parents[1] / "tests" / "baselines" / "data" / "preset_baselines.json"
NO_LIMIT = 2147483647  # HiGHS's default mip_max_nodes: a solve without a node limit (not a baseline's)


def _spy() -> list[tuple[str, int, str, float]]:
    """From now on, record every node-limited HiGHS solve's phase, node count, model status and seconds as it is
    read, in the list returned."""
    import planning.allocate.linked as linked
    import planning.allocate.matrix_model as matrix_model

    real = matrix_model.read_highs
    log: list[tuple[str, int, str, float]] = []

    def spy(h: Any, phase: str, seconds: float, gap_tol: float, sense: float = 1.0) -> Any:
        limit = h.getOptionValue("mip_max_nodes")
        limit = limit[1] if isinstance(limit, tuple) else limit
        if int(limit) < NO_LIMIT:
            log.append((phase, int(h.getInfo().mip_node_count), h.modelStatusToString(h.getModelStatus()), seconds))
        return real(h, phase, seconds, gap_tol, sense)

    matrix_model.read_highs = spy
    linked.read_highs = spy
    return log


def _same(got: dict[str, Any], want: dict[str, Any] | None) -> bool:
    return want is not None and f"{got['cost_per_hour']:.12g}" == f"{want['cost_per_hour']:.12g}" \
        and got["note"] == want["note"]


def main() -> int:
    import planning.cli
    from planning.baselines.base import BASELINE_NODES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["coral-core", "coral-extended", "catalog-wide"])
    args = ap.parse_args()
    os.environ["PLANNING_RESULT_CACHE"] = "off"
    # every baseline in this process, one after another, so that the spy sees each one's HiGHS solves (beside each
    # other they run in pool workers, where it sees none: the same answers either way, tests/baselines)
    os.environ["PLANNING_BASELINE_WORKERS"] = "1"
    print(f"# {platform.platform()}, python {platform.python_version()}, load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; work limit {BASELINE_NODES:,} nodes")
    recorded = json.loads(RECORDED.read_text())["presets"]
    all_same = True
    log = _spy()
    for preset in args.presets:
        log.clear()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            planning.cli.main(["solve", "--preset", preset, "--json"])
        doc = json.loads(out.getvalue())
        want = {b["name"]: b for b in recorded.get(preset, {}).get("baselines", [])}
        print(f"{preset}: plan {doc['status']} {doc['cost_per_hour']:.2f} $/h")
        for b in doc["baselines"]:
            same = _same(b, want.get(b["name"]))
            all_same &= same or preset not in recorded
            print(f"  {b['name']:<18} {b['cost_per_hour']:>10.4f} $/h  time-limited {b['time_limited']!s:<5} "
                  f"recorded answer {'yes' if same else 'NO' if preset in recorded else '-'}")
        most = max((n for _, n, _, _ in log), default=0)
        print(f"  most nodes {most:,} in {len(log)} node-limited HiGHS solves; margin "
              f"{BASELINE_NODES / max(most, 1):,.1f}x; largest: "
              + ", ".join(f"{phase} {n:,} ({status}, {s:.1f} s)" for phase, n, status, s in
                          sorted(log, key=lambda r: -r[1])[:5]))
        sys.stdout.flush()
    print("every baseline keeps its recorded answer" if all_same else "SOME BASELINE DIFFERS from its record")
    return 0 if all_same else 1


if __name__ == "__main__":
    raise SystemExit(main())
