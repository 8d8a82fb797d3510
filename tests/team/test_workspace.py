"""Workspace mapping: issuer + subject hashed to a stable, safe folder; the local workspace is today's layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from planning.errors import PlanningError
from planning.jobs import LOCAL_ID, local_workspace, user_workspace, workspace_id


def test_id_is_stable_safe_and_hides_the_identity() -> None:
    wid = workspace_id("https://idp.example/realms/team", "user@example.com")
    assert wid == workspace_id("https://idp.example/realms/team", "user@example.com")
    assert wid.startswith("u-") and wid[2:].isalnum() and len(wid) == 34
    assert "example" not in wid


def test_same_subject_of_another_issuer_is_another_user() -> None:
    assert workspace_id("https://a.example", "42") != workspace_id("https://b.example", "42")


def test_user_workspace_lives_under_workspaces(tmp_path: Path) -> None:
    ws = user_workspace(tmp_path, "https://a.example", "42", label="Ada")
    assert ws.private and ws.root == tmp_path / "workspaces" / ws.id
    assert ws.scenarios_dir == ws.root / "scenarios"


def test_local_workspace_keeps_todays_layout(tmp_path: Path) -> None:
    ws = local_workspace(tmp_path)
    assert (ws.id, ws.private, ws.scenarios_dir) == (LOCAL_ID, False, tmp_path / "scenarios")


@pytest.mark.parametrize(("iss", "sub", "field"), [("", "42", "user.iss"), ("https://a.example", " ", "user.sub")])
def test_missing_claims_are_named(iss: str, sub: str, field: str) -> None:
    with pytest.raises(PlanningError) as err:
        workspace_id(iss, sub)
    assert err.value.field == field
