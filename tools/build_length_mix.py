"""Restate a conversational request-length mix as percentiles: data/validation/length_mixes.csv.

Run by hand from the repo root (it reads ../shared/reference, never at runtime):

    python3 tools/build_length_mix.py [--reference ../shared/reference] [--out data/validation/length_mixes.csv]

Source: the 201,570 (prompt, output) token pairs of LMSYS-Chat-1M in Mélange's release
(``melange/lmsys-chat-1m.csv``, Llama tokenizer). They are filtered with the rule vLLM's ``benchmark_serving``
applies to ShareGPT (prompt and output >= 4 tokens, prompt <= 1,024, prompt + output <= 2,048), which leaves
161,813 pairs with means 221.5 / 204.2 tokens, close to the ShareGPT runs it stands in for (215 / 198 and
206 / 202 in the published results). Prompt and output lengths are nearly independent there (Pearson 0.07,
Spearman 0.10), so the file keeps the two marginals as percentiles: every 1 %, every 0.1 % above 99 % and 99.95 / 99.99 / 100,
so the tail a drain depends on is not smeared by interpolation.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MIX = "chat-sharegpt-filter"
SOURCE = ("LMSYS-Chat-1M request sizes from Melange (litone01/melange-release lb/datasets/lmsys-chat-1m.csv "
          "@ 6f0c10c), filtered like vLLM benchmark_serving's ShareGPT sampling (>= 4 tokens each, prompt <= 1024, "
          "prompt + output <= 2048); 161,813 pairs")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", type=Path, default=ROOT.parent / "shared" / "reference")
    ap.add_argument("--out", type=Path, default=ROOT / "data" / "validation" / "length_mixes.csv")
    args = ap.parse_args()
    pairs = np.loadtxt(args.reference / "melange" / "lmsys-chat-1m.csv", delimiter=",", dtype=np.int64)
    inp, out = pairs[:, 0], pairs[:, 1]
    keep = (inp >= 4) & (out >= 4) & (inp <= 1024) & (inp + out <= 2048)
    inp, out = inp[keep], out[keep]
    pct = np.concatenate([np.arange(100.0), np.round(np.arange(99.1, 99.95, 0.1), 1), [99.95, 99.99, 100.0]])
    tmp = args.out.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["mix", "side", "percentile", "tokens", "source"])
        for side, arr in (("input", inp), ("output", out)):
            for p, v in zip(pct, np.percentile(arr, pct), strict=True):
                w.writerow([MIX, side, f"{p:g}", round(float(v), 1), SOURCE])
    tmp.replace(args.out)
    print(f"{args.out}: {keep.sum():,} pairs, means {inp.mean():.1f} / {out.mean():.1f}")


if __name__ == "__main__":
    main()
