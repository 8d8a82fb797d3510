"""Build the shipped day-long demand samples and the spot-availability slice in data/demand/ (run by hand).

    python tools/build_demand_sample.py REFERENCE_DIR

REFERENCE_DIR holds ``traces/azure_llm_2023_{code,conv}.csv`` (Azure/AzurePublicDataset, Splitwise) and
``availability/skypilot_spot_availability_hourly.csv`` (skypilot-org/spot-traces, hourly). The runtime never
reads them: this script restates what it needs into data/demand/*.csv, each row with its source.

Daily shape (hour of day, UTC) — see data/demand/README.md for the sources:
- hours 00–09: requests per hour of the Azure LLM inference trace 2024 (DynamoLLM, HPCA'25), coding service,
  Friday 2024-05-10, as printed in a public analysis notebook of the week-long trace;
- trough 08:00 UTC (the lowest of those hours); weekday peak-to-trough ratio 8.6 (that Friday; the weekday mean
  is 10.0:1 for coding and 2.0:1 for conversation, same analysis);
- hours 10–23 are not published as numbers: a raised cosine from the measured 09:00 value up to the peak at an
  assumed 17:00 UTC (mid US business day) and down to the measured 00:00 value, which the day wraps to.
Conversation uses the same phase with its own 2.0:1 ratio. Absolute level: the rate of the 2023 one-hour
traces (18:15–19:14 UTC) is placed at hour 18; request sizes are the 2023 traces' means.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planning.traces import read_trace

OUT = Path(__file__).resolve().parents[1] / "data" / "demand"
CODE_FRI_00_09 = [77540, 76895, 66953, 57781, 46575, 38670, 32595, 29267, 25758, 28504]  # req/hour, 2024-05-10
PEAK_HOUR = 17
SHAPE_SOURCE = ("Azure LLM inference trace 2024 (DynamoLLM HPCA'25, Azure/AzurePublicDataset): 00-09 UTC measured "
                "(coding, 2024-05-10) and weekday peak/trough ratio, via a public analysis notebook; 10-23 UTC raised "
                "cosine to an assumed 17:00 UTC peak (see README)")


def code_shape(ratio: float = 8.6) -> np.ndarray:
    """Relative requests per hour 00..23 UTC (trough = 1)."""
    trough = min(CODE_FRI_00_09)
    rel = [v / trough for v in CODE_FRI_00_09]
    peak = ratio
    out = list(rel)
    a, b = rel[9], peak
    for h in range(10, PEAK_HOUR + 1):  # rise 09 → 17
        x = (h - 9) / (PEAK_HOUR - 9)
        out.append(a + (b - a) * (1 - math.cos(math.pi * x)) / 2)
    a, b = peak, rel[0]
    for h in range(PEAK_HOUR + 1, 24):  # fall 17 → 24 (= 00 of the next day)
        x = (h - PEAK_HOUR) / (24 - PEAK_HOUR)
        out.append(a + (b - a) * (1 - math.cos(math.pi * x)) / 2)
    return np.asarray(out)


def burst_factor(trace_path: Path, window_s: float = 300.0) -> float:
    t = read_trace(trace_path)
    counts = np.bincount((t.arrival_s // window_s).astype(int))[:-1]  # drop the partial last window
    return float(counts.max() / counts.mean())


def write_day(name: str, shape: np.ndarray, anchor_rps: float, inp: float, out: float, burst: float, src: str) -> None:
    rate = anchor_rps * shape / shape[18]
    lines = ["epoch_start,rate_rps,input_len,output_len,source"]
    for h in range(24):
        lines.append(f"{h},{rate[h]:.4f},{inp:.0f},{out:.0f},\"{src}\"")
    (OUT / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{name}: mean {rate.mean():.3f} req/s, peak {rate.max():.3f}, trough {rate.min():.3f}, "
          f"peak/mean {rate.max() / rate.mean():.2f}, 5-min burst factor of the hour {burst:.2f}")


def main(ref: Path) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    code = read_trace(ref / "traces" / "azure_llm_2023_code.csv")
    conv = read_trace(ref / "traces" / "azure_llm_2023_conv.csv")
    cs = code_shape(8.6)
    conv_shape = 1 + (cs - 1) * (2.0 - 1) / (cs.max() - 1)
    for name, tr, shape, path in (("azure_code_day.csv", code, cs, "azure_llm_2023_code.csv"),
                                  ("azure_conv_day.csv", conv, conv_shape, "azure_llm_2023_conv.csv")):
        src = (f"shape: {SHAPE_SOURCE}; level and sizes: {path} (Azure LLM inference trace 2023, Splitwise ISCA'24), "
               f"{len(tr)} requests, {tr.mean_rate:.2f} req/s at 18 UTC")
        write_day(name, shape, tr.mean_rate, float(tr.input_tokens.mean()), float(tr.output_tokens.mean()),
                  burst_factor(ref / "traces" / path), src)
    # spot availability: SkyPilot aws-08-27-2023, us-east-2b, 16-node probe of p3.2xlarge, hours 24..47
    import csv

    rows = [r for r in csv.DictReader((ref / "availability" / "skypilot_spot_availability_hourly.csv").open())
            if r["trace"] == "aws-08-27-2023" and r["zone"] == "us-east-2b" and 24 <= int(r["hour_index"]) < 48]
    rows.sort(key=lambda r: int(r["hour_index"]))
    lines = ["timestamp,region,shape,nodes,pricing,source"]
    for r in rows:
        frac = float(r["mean_available"]) / 16.0
        h = int(r["hour_index"]) - 24
        src = (f"skypilot-org/spot-traces aws-08-27-2023 us-east-2b p3.2xlarge x16, hour {r['hour_index']}: "
               f"mean {float(r['mean_available']):.2f}/16 obtainable; scaled to the catalog count")
        for shape, full in (("1xL40S", 48), ("4xL40S", 12), ("1xL4", 72), ("4xL4", 18)):
            lines.append(f"{h},aws:us-east-2,{shape},{math.floor(full * frac)},spot,\"{src}\"")
    (OUT / "availability_spot_day.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"availability_spot_day.csv: {len(rows)} hours")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]))
