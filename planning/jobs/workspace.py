"""Workspaces: a signed-in user (OIDC issuer + subject) mapped to a private folder and a job-owner id.

Without sign-in there is one *local* workspace: ``PLANNING_HOME`` itself, today's layout (saved scenarios in
``PLANNING_HOME/scenarios``), owner id ``"local"`` — the same on every reload, so one's earlier jobs stay listed.
With sign-in each user gets ``PLANNING_HOME/workspaces/<id>/``, where ``<id>`` is a hash of the provider's issuer
and subject: stable for a user, the same whatever their e-mail becomes, safe as a folder name, and telling
nothing about who it is. Shipped presets and the template cache (``PLANNING_HOME/templates``) stay shared: they
hold no user data.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from planning.errors import PlanningError

LOCAL_ID = "local"
"""The owner id of the one workspace a workbench without sign-in has."""
WORKSPACES = "workspaces"
"""The folder under ``PLANNING_HOME`` that holds the signed-in users' workspaces."""


@dataclass(frozen=True)
class Workspace:
    """Where one user's files live and whose jobs they see.

    Attributes
    ----------
    id:
        The owner id recorded with the user's jobs (``"local"`` without sign-in, ``u-<hash>`` with it).
    root:
        The user's folder: saved scenarios under ``root/scenarios``.
    private:
        True for a signed-in user: only jobs granted to ``id`` are visible. The local workspace sees every job
        of its ``PLANNING_HOME`` (a single user's machine, as before sign-in existed).
    label:
        Who it is, for the sidebar (a name or an e-mail); never used to find files.
    """

    id: str
    root: Path
    private: bool
    label: str = ""

    @property
    def scenarios_dir(self) -> Path:
        """Saved scenarios of this workspace."""
        return self.root / "scenarios"


def workspace_id(issuer: str, subject: str) -> str:
    """The stable, folder-safe id of the user ``subject`` of the identity provider ``issuer``.

    Parameters
    ----------
    issuer, subject:
        The ID token's ``iss`` and ``sub`` claims (the provider's own, unchangeable user key — never the e-mail).

    Returns
    -------
    str
        ``u-`` and 32 hex digits of SHA-256 over issuer and subject.

    Raises
    ------
    PlanningError
        If either claim is empty.
    """
    for field, value in (("iss", issuer), ("sub", subject)):
        if not isinstance(value, str) or not value.strip():
            raise PlanningError(f"user.{field}", "the identity provider's ID token has no such claim.",
                                "Configure an OpenID Connect provider (its ID tokens carry iss and sub); "
                                "see docs/team.md.")
    digest = hashlib.sha256(f"{issuer.strip()}\n{subject.strip()}".encode()).hexdigest()
    return f"u-{digest[:32]}"


def local_workspace(home: Path) -> Workspace:
    """The one workspace of a workbench without sign-in: ``home`` itself (today's layout, nothing moves)."""
    return Workspace(LOCAL_ID, Path(home), private=False)


def user_workspace(home: Path, issuer: str, subject: str, label: str = "") -> Workspace:
    """A signed-in user's private workspace ``home/workspaces/<id>`` (see :func:`workspace_id`)."""
    wid = workspace_id(issuer, subject)
    return Workspace(wid, Path(home) / WORKSPACES / wid, private=True, label=label)
