"""Share-link tokens: a job id, an expiry and a token id, signed with the server's secret (HMAC-SHA256).

A token is ``<payload>.<signature>``, both base64url: the payload is ``job_id:expires:token_id`` (expiry in Unix
seconds), the signature the first 32 bytes of HMAC-SHA256 of the payload under the server secret. Whoever holds
the link can open that one plan read-only until it expires or is revoked (the store's ``job_shares`` table); a
changed byte, another server's secret, a passed expiry or a revoked token id opens nothing.

The secret comes from ``PLANNING_SHARE_SECRET`` (a team's servers behind one address share it) or
``PLANNING_HOME/share.key``, generated on first use with mode 0600.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from planning.errors import PlanningError

SECRET_ENV = "PLANNING_SHARE_SECRET"
SECRET_FILE = "share.key"
_ID = re.compile(r"[0-9a-f]{8,64}")
_BAD_LINK = ("Ask whoever shared it for a new link; share links expire, and the plan's owner can revoke them on "
             "the Jobs page.")


@dataclass(frozen=True)
class ShareToken:
    """What a valid token grants: one job, until ``expires`` (Unix seconds); ``token_id`` names it for revoking."""

    job_id: str
    expires: float
    token_id: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signature(secret: bytes, payload: str) -> str:
    return _b64(hmac.new(secret, payload.encode(), hashlib.sha256).digest())


def sign(secret: bytes, grant: ShareToken) -> str:
    """The token of ``grant`` under ``secret`` (what goes after ``?share=`` in a link)."""
    for field, value in (("job_id", grant.job_id), ("token_id", grant.token_id)):
        if not _ID.fullmatch(value):
            raise PlanningError(f"share.{field}", f"{value!r} is not a hex id.", "Share a job by its id.")
    payload = _b64(f"{grant.job_id}:{int(grant.expires)}:{grant.token_id}".encode())
    return f"{payload}.{_signature(secret, payload)}"


def verify(secret: bytes, token: str, now: float) -> ShareToken:
    """Check a token's signature and expiry.

    Parameters
    ----------
    secret:
        The server secret (:func:`load_secret`).
    token:
        The ``share`` query parameter of a link.
    now:
        The current Unix time (injected, so tests can move the clock).

    Returns
    -------
    ShareToken

    Raises
    ------
    PlanningError
        On ``share`` when the token is malformed, its signature does not match, or it has expired. (Revocation
        is the store's to check: :meth:`JobStore.find_share`.)
    """
    payload, _, signature = (token or "").strip().partition(".")
    if not payload or not signature or not hmac.compare_digest(_signature(secret, payload), signature):
        raise PlanningError("share", "this share link is not valid (damaged, or not made by this workbench).",
                            _BAD_LINK)
    try:
        job_id, expires, token_id = _unb64(payload).decode().split(":")
        grant = ShareToken(job_id, float(int(expires)), token_id)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise PlanningError("share", "this share link is not valid (damaged).", _BAD_LINK) from None
    if now >= grant.expires:
        raise PlanningError("share", "this share link has expired.", _BAD_LINK)
    return grant


def new_token_id() -> str:
    """A fresh random token id (16 hex digits)."""
    return secrets.token_hex(8)


def load_secret(home: Path, env: Mapping[str, str] | None = None) -> bytes:
    """The server's signing secret: ``PLANNING_SHARE_SECRET``, else ``home/share.key`` (made 0600 if absent).

    Two processes creating the file at once agree: each writes a private temporary file and links it into place;
    the loser reads the winner's secret.

    Raises
    ------
    PlanningError
        On ``PLANNING_SHARE_SECRET`` when it is shorter than 32 characters; on ``share.key`` when the file is
        empty or cannot be read or written.
    """
    env = os.environ if env is None else env
    configured = env.get(SECRET_ENV, "")
    if configured:
        if len(configured) < 32:
            raise PlanningError(SECRET_ENV, f"is {len(configured)} characters long; a signing secret needs 32 or more.",
                                "Set it to e.g. the output of `python -c 'import secrets; print(secrets.token_hex(32))'`.")
        return configured.encode()
    path = Path(home) / SECRET_FILE
    try:
        if not path.exists():
            _create_secret(path)
        text = path.read_text().strip()
    except OSError as exc:
        raise PlanningError("share.key", f"{path} could not be read or written ({exc.strerror or exc}).",
                            f"Make PLANNING_HOME writable, or set {SECRET_ENV}.") from None
    if len(text) < 32:
        raise PlanningError("share.key", f"{path} holds no usable secret.",
                            "Delete the file (a new one is made; links shared so far stop working).")
    return text.encode()


def _create_secret(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: keep theirs
            os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
