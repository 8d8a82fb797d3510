"""Share-link tokens: signed, expiring (injected clock), tamper-evident; the server secret file is 0600."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from planning.errors import PlanningError
from planning.jobs import ShareToken, load_secret, sign, verify

SECRET = b"s" * 64


def test_round_trip_until_expiry() -> None:
    grant = ShareToken("0123456789abcdef", 1_000.0, "feedfacecafe0001")
    token = sign(SECRET, grant)
    assert verify(SECRET, token, now=999.0) == grant
    with pytest.raises(PlanningError, match="expired"):
        verify(SECRET, token, now=1_000.0)


@pytest.mark.parametrize("change", ["payload", "signature", "secret", "empty"])
def test_tampered_or_foreign_tokens_are_refused(change: str) -> None:
    token = sign(SECRET, ShareToken("0123456789abcdef", 5_000.0, "feedfacecafe0001"))
    payload, signature = token.split(".")
    secret = SECRET
    if change == "payload":  # point it at another job, keep the signature
        token = sign(SECRET, ShareToken("fedcba9876543210", 5_000.0, "feedfacecafe0001")).split(".")[0] + "." + signature
    elif change == "signature":
        token = payload + "." + ("A" if signature[0] != "A" else "B") + signature[1:]
    elif change == "secret":
        secret = b"t" * 64
    else:
        token = ""
    with pytest.raises(PlanningError, match="not valid") as err:
        verify(secret, token, now=0.0)
    assert err.value.field == "share"


def test_secret_file_is_made_once_with_mode_0600(tmp_path: Path) -> None:
    first = load_secret(tmp_path, env={})
    assert load_secret(tmp_path, env={}) == first and len(first) >= 32
    assert stat.S_IMODE((tmp_path / "share.key").stat().st_mode) == 0o600


def test_secret_from_environment_must_be_long_enough(tmp_path: Path) -> None:
    assert load_secret(tmp_path, env={"PLANNING_SHARE_SECRET": "x" * 40}) == b"x" * 40
    with pytest.raises(PlanningError) as err:
        load_secret(tmp_path, env={"PLANNING_SHARE_SECRET": "short"})
    assert err.value.field == "PLANNING_SHARE_SECRET"
    assert not (tmp_path / "share.key").exists()
