"""A calibration re-run re-dates only the rows whose values moved (``planning.perf.calibration.kept_dates``)."""

from __future__ import annotations

from pathlib import Path

from planning.perf.calibration import kept_dates

HEADER = "gpu,param,value,source,n_points,fitted_on,as_of"


def test_an_unchanged_row_keeps_its_date_and_a_moved_or_new_one_takes_today(tmp_path: Path) -> None:
    """Unchanged (value, source, points) keeps the file's date; a new value, a new source or a new row is dated
    today; a file that does not exist yet leaves every line as written."""
    path = tmp_path / "calibration.csv"
    path.write_text("\n".join([
        HEADER,
        'L4,eff_bw,0.9129,"fit: helix_layer (held out 1 in 5)",313,reference/perf,2026-11-23',
        'L4,ar_eff,0.1374,"fit: helix_layer (held out 1 in 5)",313,reference/perf,2026-11-23',
        'V100,band_decode,0.394,"p90 held-out |error|, min 0.10",212,held-out,2026-11-20',
    ]) + "\n", encoding="utf-8")
    fresh = [
        HEADER,
        'L4,eff_bw,0.9129,"fit: helix_layer (held out 1 in 5)",313,reference/perf,2026-11-29',
        'L4,ar_eff,0.5832,"fit: helix_layer (held out 1 in 5)",313,reference/perf,2026-11-29',
        'V100,band_decode,0.394,"p90 held-out |error|, min 0.10 (new reason)",212,held-out,2026-11-29',
        'H100,eff_bw,0.8,"fit: aic",10,reference/perf,2026-11-29',
    ]
    out = kept_dates(fresh, path)
    assert out[0] == HEADER
    assert out[1].endswith(",2026-11-23")  # the same value: its date stays
    assert out[2].endswith(",2026-11-29")  # a value that moved
    assert out[3].endswith(",2026-11-29")  # a new reason (the comma inside the quotes is not a field)
    assert out[4].endswith(",2026-11-29")  # a new row
    assert kept_dates(fresh, tmp_path / "missing.csv") == fresh
