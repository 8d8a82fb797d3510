"""The container's entry point writes Streamlit's sign-in secrets from PLANNING_AUTH_* variables."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import container_start  # noqa: E402

ENV = {name: f"value of {key} with \"quotes\" and \\ and é" for key, name in container_start.FIELDS.items()}


def test_all_variables_give_the_auth_table_as_given() -> None:
    text = container_start.secrets_text(ENV)
    assert text is not None
    auth = tomllib.loads(text)["auth"]
    assert auth == {key: ENV[name] for key, name in container_start.FIELDS.items()}


def test_no_variable_writes_nothing_and_a_partial_set_names_the_missing() -> None:
    assert container_start.secrets_text({}) is None
    partial = dict(ENV)
    del partial["PLANNING_AUTH_CLIENT_SECRET"]
    with pytest.raises(SystemExit, match="PLANNING_AUTH_CLIENT_SECRET not set"):
        container_start.secrets_text(partial)


def test_the_entry_point_writes_a_private_file_then_runs_the_command(tmp_path: Path) -> None:
    target = tmp_path / "home" / ".streamlit" / "secrets.toml"
    env = {**os.environ, **ENV, "PLANNING_AUTH_SECRETS_PATH": str(target)}
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "container_start.py"), sys.executable, "-c",
                          "print('the command ran')"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "the command ran"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert tomllib.loads(target.read_text(encoding="utf-8"))["auth"]["client_id"] == ENV["PLANNING_AUTH_CLIENT_ID"]
    assert [p.name for p in target.parent.iterdir()] == ["secrets.toml"]  # no temporary file left


def test_streamlit_reads_the_written_file_as_its_auth_settings(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit import config
    from streamlit.runtime.secrets import Secrets

    target = tmp_path / "secrets.toml"
    text = container_start.secrets_text(ENV)
    assert text is not None
    container_start.write_secrets(text, target)
    real = config.get_option
    monkeypatch.setattr(config, "get_option", lambda name: [str(target)] if name == "secrets.files" else real(name))
    secrets = Secrets()  # reads the files `secrets.files` names, as the server does
    assert secrets["auth"]["server_metadata_url"] == ENV["PLANNING_AUTH_SERVER_METADATA_URL"]
