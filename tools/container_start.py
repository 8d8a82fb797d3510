"""The container's entry point: Streamlit's ``[auth]`` sign-in settings from environment variables, then the
image's command (``streamlit run app.py ...``).

Streamlit reads sign-in settings only from a secrets file. A container usually takes its settings from the
environment (``docker run -e``, a Kubernetes secret as variables), so when ``PLANNING_AUTH_*`` are set this writes
them to ``~/.streamlit/secrets.toml`` (mode 0600, atomically; or ``PLANNING_AUTH_SECRETS_PATH``) before it runs
the command. All five variables or none: a partial set stops the container with the names of the missing ones.
Without them nothing is written and sign-in stays as configured (off, or from a mounted file: docs/team.md).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path

# [auth] key -> the environment variable that gives it
FIELDS = {
    "redirect_uri": "PLANNING_AUTH_REDIRECT_URI",
    "cookie_secret": "PLANNING_AUTH_COOKIE_SECRET",
    "client_id": "PLANNING_AUTH_CLIENT_ID",
    "client_secret": "PLANNING_AUTH_CLIENT_SECRET",
    "server_metadata_url": "PLANNING_AUTH_SERVER_METADATA_URL",
}
PATH_VARIABLE = "PLANNING_AUTH_SECRETS_PATH"


def secrets_text(environ: Mapping[str, str]) -> str | None:
    """The ``[auth]`` table the variables give, as TOML; ``None`` when none is set.

    Raises
    ------
    SystemExit
        When only some are set: names the missing ones and the fix.
    """
    given = {key: environ.get(name, "").strip() for key, name in FIELDS.items()}
    if not any(given.values()):
        return None
    missing = [FIELDS[key] for key, value in given.items() if not value]
    if missing:
        raise SystemExit(f"sign-in: {', '.join(missing)} not set. Fix: set all of {', '.join(FIELDS.values())} "
                         "(docs/team.md), or none of them for a workbench without sign-in.")
    # JSON strings are TOML basic strings (quotes, backslashes and control characters escaped)
    text = "[auth]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in given.items())
    if tomllib.loads(text)["auth"] != given:  # never write a file Streamlit would read differently
        raise SystemExit("sign-in: a PLANNING_AUTH_* value cannot be written as TOML. Fix: remove odd characters.")
    return text


def write_secrets(text: str, path: Path) -> None:
    """``text`` to ``path``, readable by its owner only, replaced atomically (a crash never leaves half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".secrets-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str], environ: Mapping[str, str]) -> None:
    """Write the secrets when the variables are set, then replace this process with ``argv`` (if given)."""
    text = secrets_text(environ)
    if text is not None:
        write_secrets(text, Path(environ.get(PATH_VARIABLE) or Path.home() / ".streamlit" / "secrets.toml"))
    if argv:
        os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:], os.environ)
