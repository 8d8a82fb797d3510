"""Trace readers: the three formats, ordering, rescaling, and malformed files as PlanningErrors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from planning.errors import PlanningError
from planning.traces import parse_trace, read_trace

AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:17:03.9799600,4808,10
2023-11-16 18:17:05.4799600,100,20
2023-11-16 18:17:04.0319600,3180,8
"""


def test_azure_csv_sorted_relative() -> None:
    trace = parse_trace(AZURE, source="azure")
    assert len(trace) == 3
    np.testing.assert_allclose(trace.arrival_s, [0.0, 0.052, 1.5], atol=1e-6)
    assert trace.input_tokens.tolist() == [4808, 3180, 100]
    assert trace.output_tokens.tolist() == [10, 8, 20]
    assert trace.mean_rate == pytest.approx(2 / 1.5)


def test_mooncake_jsonl_and_csv_agree(tmp_path: Path) -> None:
    jsonl = '{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [1, 2]}\n' \
            '{"timestamp": 3000, "input_length": 10, "output_length": 5}\n'
    csv_text = "timestamp_ms,input_length,output_length\n0,6758,500\n3000,10,5\n"
    a = parse_trace(jsonl)
    path = tmp_path / "m.csv"
    path.write_text(csv_text)
    b = read_trace(path)
    np.testing.assert_array_equal(a.arrival_s, b.arrival_s)
    np.testing.assert_array_equal(a.input_tokens, b.input_tokens)
    assert a.duration_s == pytest.approx(3.0)


def test_rescale_keeps_mix() -> None:
    trace = parse_trace("arrival_s,input_tokens,output_tokens\n0,1,1\n1,2,2\n2,3,3\n")
    fast = trace.rescaled(4.0)
    assert fast.mean_rate == pytest.approx(4.0)
    assert fast.input_tokens.tolist() == [1, 2, 3]
    assert len(trace.window(0.5, 2.5)) == 2


@pytest.mark.parametrize(("text", "where"), [
    ("a,b,c\n1,2,3\n", "trace"),
    ("arrival_s,input_tokens,output_tokens\n0,1\n", "row 2"),
    ("arrival_s,input_tokens,output_tokens\n0,x,1\n", "row 2, column input_tokens"),
    ("arrival_s,input_tokens,output_tokens\nnan,1,1\n", "row 2, column arrival_s"),
    ("arrival_s,input_tokens,output_tokens\n0,1e400,1\n", "row 2, column input_tokens"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,1\n", "TIMESTAMP"),
    ('{"timestamp": 0}\n', "line 1"),
    ("[" * 5000 + "\n", "trace"),
    ("", "trace"),
])
def test_malformed_rows_name_the_place(text: str, where: str) -> None:
    with pytest.raises(PlanningError) as info:
        parse_trace(text)
    assert where in str(info.value)


def test_files_not_utf8_or_directory(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"arrival_s,input_tokens,output_tokens\n0,1,\xff\n")
    with pytest.raises(PlanningError, match="UTF-8"):
        read_trace(bad)
    with pytest.raises(PlanningError, match="directory"):
        read_trace(tmp_path)
    with pytest.raises(PlanningError, match="does not exist"):
        read_trace(tmp_path / "none.csv")


def test_reading_is_streamed_and_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file without line breaks is refused at the first oversized line; the row cap is a clear error; duplicate
    JSON keys are refused like duplicate YAML keys; a BOM is dropped."""
    import planning.traces as traces

    one_line = tmp_path / "one.csv"
    one_line.write_text("arrival_s,input_tokens,output_tokens\n" + "1" * (traces.MAX_LINE_CHARS + 10))
    with pytest.raises(PlanningError, match=r"trace line 2: is longer than 1,000,000 characters"):
        read_trace(one_line)
    rows = tmp_path / "rows.csv"
    rows.write_text("arrival_s,input_tokens,output_tokens\n" + "".join(f"{i},1,1\n" for i in range(50)))
    assert len(read_trace(rows)) == 50
    monkeypatch.setattr(traces, "MAX_TRACE_ROWS", 40)
    with pytest.raises(PlanningError, match="more than 40 requests"):
        read_trace(rows)
    with pytest.raises(PlanningError, match="more than 40 requests"):
        parse_trace(rows.read_text())
    with pytest.raises(PlanningError, match="'timestamp' twice"):
        parse_trace('{"timestamp": 0, "timestamp": 9, "input_length": 1, "output_length": 1}\n')
    with pytest.raises(PlanningError, match=r"line 1.*5,001 digits"):
        parse_trace('{"timestamp": ' + "9" * 5001 + ', "input_length": 1, "output_length": 1}\n')
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbfarrival_s,input_tokens,output_tokens\n0,1,1\n")
    assert len(read_trace(bom)) == 1
    assert len(parse_trace("\ufeffarrival_s,input_tokens,output_tokens\n0,1,1\n")) == 1


def test_a_multi_line_csv_field_is_a_row_error_not_a_crash() -> None:
    with pytest.raises(PlanningError, match="trace row"):
        parse_trace('arrival_s,input_tokens,output_tokens\n0,"' + "x" * 200_000 + '",1\n')
