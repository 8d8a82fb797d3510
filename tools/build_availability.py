"""Write data/availability.csv: illustrative default node counts for every row of data/node_configs.csv.

Run by hand: ``python3 tools/build_availability.py``. Counts are NOT measurements: a tier by GPUs per node
times a relative-scarcity factor per GPU, sized so that the shipped presets are feasible.
"""

from __future__ import annotations

import csv
from pathlib import Path

AS_OF = "2026-11-21"
NODES_BY_COUNT = {1: 48, 2: 24, 4: 12, 8: 8}
SCARCITY = {
    "L4": 1.5, "A10G": 1.5, "T4": 1.0, "L40S": 1.0, "V100": 0.5, "A100-40G": 0.75, "A100-80G": 0.75,
    "H100": 0.5, "H200": 0.25, "A6000": 0.5, "RTX4090": 0.5, "L40": 0.5, "A40": 0.5,
}  # fmt: skip
SOURCE = (
    "illustrative: nodes = tier by GPUs per node (1:48, 2:24, 4:12, 8:8) x GPU scarcity factor "
    "(L4/A10G 1.5; T4/L40S 1.0; A100 0.75; H100/V100/A6000/RTX4090 0.5; H200 0.25). Relative scarcity "
    "informed by the Alibaba GFS GPU cluster trace (alibaba/clusterdata cluster-trace-v2026-spot-gpu: A10 "
    "nodes about 6x A100 nodes, H800 scarcest) and SkyPilot spot traces (8-GPU nodes obtainable less often "
    "than 1-GPU); scaled so the shipped presets are feasible. Not a measurement - edit via overrides."
)


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    with (root / "data" / "node_configs.csv").open(encoding="utf-8") as handle:
        configs = list(csv.DictReader(handle))
    with (root / "data" / "availability.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["config_id", "nodes", "illustrative", "source", "as_of"])
        for cfg in configs:
            count = int(cfg["gpu_count"])
            tier = NODES_BY_COUNT.get(count, max(1, 48 // count))
            nodes = max(1, round(tier * SCARCITY.get(cfg["gpu_id"], 0.5)))
            writer.writerow([cfg["id"], nodes, "true", SOURCE, AS_OF])
    print(f"wrote {len(configs)} rows")


if __name__ == "__main__":
    main()
