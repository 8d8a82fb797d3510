"""Held-out calibration error of the committed constants against ../shared/reference/perf (run by `make calibrate`).

Not part of the default test suite (a user's clone has no ../shared): `make calibrate` refits
data/calibration.csv from the reference when it is present and then runs this check:

    python tools/check_calibration.py [--reference ../shared/reference]

Exit code 0 when every source's held-out median |error| is within GOAL_MEDIAN and p90 within GOAL_P90.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_MEDIAN = 0.15
GOAL_P90 = 0.6
SOURCES = {"aic_gemm", "aic_attention", "aic_nccl", "vidur_linear", "helix_layer", "splitwise_e2e"}


def _tool():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("calibrate_perf", ROOT / "tools" / "calibrate_perf.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses in the tool resolve their module through sys.modules
    spec.loader.exec_module(module)
    return module


def _kernels_tool():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("calibrate_kernels", ROOT / "tools" / "calibrate_kernels.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def moe_table_matches(reference: Path) -> bool:
    """data/moe_kernels.csv is what tools/calibrate_kernels.py restates from the reference today (same rows)."""
    import numpy as np
    import pandas as pd

    tool = _kernels_tool()
    if not (reference / "perf" / tool.MOE_FILE).exists():
        return True
    fresh = tool.moe_rows(reference).reset_index(drop=True)
    shipped = pd.read_csv(ROOT / "data" / "moe_kernels.csv")
    keys = tool.COLUMNS[:9]
    same = (len(fresh) == len(shipped) and bool((fresh[keys].to_numpy() == shipped[keys].to_numpy()).all())
            and bool(np.allclose(fresh["latency_ms"], shipped["latency_ms"], rtol=1e-5)))
    print(f"data/moe_kernels.csv: {len(shipped)} rows, {'matches' if same else 'DIFFERS FROM'} the reference")
    return same


def allreduce_table_matches(reference: Path) -> bool:
    """data/allreduce.csv is what tools/calibrate_allreduce.py restates from the reference today (same rows)."""
    import numpy as np
    import pandas as pd

    spec = importlib.util.spec_from_file_location("calibrate_allreduce", ROOT / "tools" / "calibrate_allreduce.py")
    assert spec and spec.loader
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    if not (reference / "perf" / tool.NCCL_FILE).exists():
        return True
    fresh = tool.allreduce_rows(reference)
    shipped = pd.read_csv(ROOT / "data" / "allreduce.csv")
    keys = ["gpu", "engine", "tp", "bytes"]
    same = (len(fresh) == len(shipped) and bool((fresh[keys].to_numpy() == shipped[keys].to_numpy()).all())
            and bool(np.allclose(fresh["latency_us"], shipped["latency_us"], rtol=1e-5)))
    print(f"data/allreduce.csv: {len(shipped)} rows, {'matches' if same else 'DIFFERS FROM'} the reference")
    return same


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(os.environ.get("PLANNING_REFERENCE_DIR", ROOT.parent / "shared" / "reference"))
    parser.add_argument("--reference", type=Path, default=default)
    args = parser.parse_args(argv)
    if not (args.reference / "perf").is_dir():
        print(f"reference data not found at {args.reference}/perf: nothing to check (pass --reference).")
        return 0
    report = _tool().check(args.reference, ROOT / "data" / "calibration.csv")
    by_source = report["by_source"]
    failures = []
    if set(by_source) != SOURCES:
        failures.append(f"sources {sorted(by_source)} != {sorted(SOURCES)}")
    for source, r in sorted(by_source.items()):
        print(f"{source:15s} held out {r['n_held_out']:5d}  median {100 * r['median_ape']:5.1f} %  "
              f"p90 {100 * r['p90_ape']:5.1f} %")
        if r["n_held_out"] < 20 or r["median_ape"] > GOAL_MEDIAN or r["p90_ape"] > GOAL_P90:
            failures.append(source)
    if not moe_table_matches(args.reference):
        failures.append("data/moe_kernels.csv (run make calibrate)")
    if not allreduce_table_matches(args.reference):
        failures.append("data/allreduce.csv (run make calibrate)")
    if failures:
        print(f"FAILED: {failures}")
        return 1
    print("calibration check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
