"""The profile CSV importer on malformed files: each case is a PlanningError naming file, row and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from planning.errors import PlanningError, UnknownIdError
from planning.perf import load_profiles

HEADER = "model_id,gpu_id,count,tp,phase,batch,input_len,context_len,layers,time_ms,dtype,source,as_of"
GOOD = "llama-3-8b,H100,1,1,decode,8,512,1024,all,12.5,bf16,test,2025-01-01"


def _row(**changes: str) -> str:
    cells = dict(zip(HEADER.split(","), GOOD.split(","), strict=True))
    cells.update(changes)
    return ",".join(cells.values())


# (case id, file bytes, text the error's field must contain, text the message must contain)
CASES: list[tuple[str, bytes, str, str]] = [
    ("ragged-short", f"{HEADER}\n{GOOD}\nllama-3-8b,H100,1\n".encode(), ":3", "fields"),
    ("ragged-long", f"{HEADER}\n{GOOD},extra\n".encode(), ":2", "fields"),
    ("latin-1", f"{HEADER}\n{_row(source='café')}\n".encode("latin-1"), "profiles", "line 2"),
    ("utf-16", f"{HEADER}\n{GOOD}\n".encode("utf-16"), "profiles", "UTF-16"),
    ("binary", b"\x00\x01\x02\x03", "profiles", "binary"),
    ("empty-file", b"", "", "missing columns"),
    ("header-only", f"{HEADER}\n".encode(), "", "no rows"),
    ("missing-column", HEADER.replace(",time_ms", "").encode() + b"\n", "", "missing columns"),
    ("unknown-column", f"{HEADER},colour\n{GOOD},red\n".encode(), ":1", "unknown column"),
    ("duplicate-column", f"{HEADER},tp\n{GOOD},1\n".encode(), ":1", "twice"),
    ("unknown-model", f"{HEADER}\n{_row(model_id='llama-3-8', source='x')}\n".encode(), ":2:model_id", "llama-3-8b"),
    ("unknown-gpu", f"{HEADER}\n{_row(gpu_id='H10O')}\n".encode(), ":2:gpu_id", "H100"),
    ("nan-time", f"{HEADER}\n{_row(time_ms='nan')}\n".encode(), ":2:time_ms", "not a number"),
    ("inf-time", f"{HEADER}\n{_row(time_ms='inf')}\n".encode(), ":2:time_ms", "not a number"),
    ("huge-batch", f"{HEADER}\n{_row(batch='9' * 400)}\n".encode(), ":2:batch", "out of range"),
    ("big-batch", f"{HEADER}\n{_row(batch='1e9')}\n".encode(), ":2:batch", "out of range"),
    ("unicode-digits", f"{HEADER}\n{_row(count='２')}\n".encode(), ":2:count", "ASCII"),
    ("fraction-count", f"{HEADER}\n{_row(count='1.5')}\n".encode(), ":2:count", "whole"),
    ("zero-tp", f"{HEADER}\n{_row(tp='0')}\n".encode(), ":2:tp", "out of range"),
    ("tp-not-dividing", f"{HEADER}\n{_row(count='4', tp='3')}\n".encode(), ":2:tp", "does not divide"),
    ("bad-phase", f"{HEADER}\n{_row(phase='training')}\n".encode(), ":2:phase", "not a phase"),
    ("bad-dtype", f"{HEADER}\n{_row(dtype='int3')}\n".encode(), ":2:dtype", "not a dtype"),
    ("negative-context", f"{HEADER}\n{_row(context_len='-1')}\n".encode(), ":2:context_len", "out of range"),
    ("empty-source", f"{HEADER}\n{_row(source='')}\n".encode(), ":2:source", "empty"),
    ("zero-time", f"{HEADER}\n{_row(time_ms='0')}\n".encode(), ":2:time_ms", "out of range"),
    ("layers-word", f"{HEADER}\n{_row(layers='some')}\n".encode(), ":2:layers", "not a number"),
    ("unterminated-quote", f'{HEADER}\n{GOOD}\n"llama-3-8b,H100\n'.encode(), "", "fields"),
    ("huge-field", f"{HEADER}\n{_row(source='x' * 200_000)}\n".encode(), "", "CSV"),
]


def test_at_least_24_cases() -> None:
    assert len(CASES) >= 24
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("case", "data", "field", "message"), CASES, ids=[c[0] for c in CASES])
def test_malformed_profile_is_a_clean_error(tmp_path: Path, case: str, data: bytes, field: str,
                                            message: str) -> None:
    path = tmp_path / "profile.csv"
    path.write_bytes(data)
    with pytest.raises(PlanningError) as err:
        load_profiles(path)
    assert field in err.value.field, (case, str(err.value))
    assert message in str(err.value), (case, str(err.value))
    assert err.value.fix and len(str(err.value)) < 1500, case


def test_unknown_ids_list_the_closest(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text(f"{HEADER}\n{_row(model_id='lama-3-70b')}\n", encoding="utf-8")
    with pytest.raises(UnknownIdError) as err:
        load_profiles(path)
    assert "llama-3-70b" in err.value.closest


def test_directory_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PlanningError, match="directory"):
        load_profiles(tmp_path)
    with pytest.raises(PlanningError, match="does not exist"):
        load_profiles(tmp_path / "missing.csv")


def test_bom_and_blank_lines_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_bytes(b"\xef\xbb\xbf" + f"{HEADER}\r\n{GOOD}\r\n\r\n{_row(batch='16')}\r\n".encode())
    profiles = load_profiles(path)
    assert [p.batch for p in profiles.points] == [8, 16]
    assert profiles.points[0].model_id == "llama-3-8b"
