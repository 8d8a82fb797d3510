"""The admin role (who may see the whole queue and cancel any job) and per-user usage of the job runner.

Who is an admin
---------------
* Without sign-in configured (one user on localhost, ``make run``), the local user is, unless
  ``PLANNING_ADMINS`` is set: then only the users it lists.
* With sign-in, a signed-in user whose id (the provider's subject), e-mail or owner key is in ``PLANNING_ADMINS``
  (a comma-separated list), or whose claims match ``PLANNING_ADMIN_CLAIM``: ``NAME`` (the claim is true) or
  ``NAME=VALUE`` (the claim equals VALUE, or is a list holding it, e.g. ``groups=planning-admins``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from planning.jobs.record import JobRecord

__all__ = ["ENV_ADMINS", "ENV_ADMIN_CLAIM", "Identity", "UserUsage", "admin_list", "is_admin", "usage"]

ENV_ADMINS = "PLANNING_ADMINS"
ENV_ADMIN_CLAIM = "PLANNING_ADMIN_CLAIM"


@dataclass(frozen=True)
class Identity:
    """Who is asking: their owner key (session or workspace id), whether sign-in is configured and done, and the
    identity provider's claims (``sub``, ``email``, groups...) when signed in."""

    key: str | None
    signin_configured: bool = False
    signed_in: bool = False
    claims: Mapping[str, Any] = field(default_factory=dict)


def admin_list(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The user ids / e-mails in ``PLANNING_ADMINS`` (trimmed, e-mails compared in lower case)."""
    env = os.environ if environ is None else environ
    return frozenset(part.strip().lower() for part in str(env.get(ENV_ADMINS, "")).split(",") if part.strip())


def _claim_matches(claims: Mapping[str, Any], rule: str) -> bool:
    name, sep, wanted = rule.partition("=")
    value = claims.get(name.strip())
    if not sep:
        return value is True or str(value).strip().lower() in ("true", "1", "yes")
    if isinstance(value, (list, tuple, set, frozenset)):
        return wanted.strip() in {str(v) for v in value}
    return value is not None and str(value) == wanted.strip()


def is_admin(identity: Identity, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``identity`` has the admin role (see the module's rules)."""
    env = os.environ if environ is None else environ
    admins = admin_list(env)
    names = {str(v).strip().lower() for v in (identity.key, identity.claims.get("sub"),
                                               identity.claims.get("email")) if v}
    if not identity.signin_configured:
        return not admins or bool(names & admins)
    if not identity.signed_in:
        return False
    rule = str(env.get(ENV_ADMIN_CLAIM, "")).strip()
    return bool(names & admins) or (bool(rule) and _claim_matches(identity.claims, rule))


@dataclass(frozen=True)
class UserUsage:
    """One user's jobs in the store: how many by status, and the seconds their jobs have run (wall-clock from
    start to end, summed: the store records no CPU time)."""

    owner: str | None
    jobs: int
    queued: int
    running: int
    done: int
    failed: int
    cancelled: int
    run_seconds: float


def usage(records: Iterable[JobRecord]) -> list[UserUsage]:
    """Per-user usage from job records, the busiest user (most queued + running, then most run time) first."""
    by_owner: dict[str | None, list[JobRecord]] = {}
    for record in records:
        by_owner.setdefault(record.owner, []).append(record)
    rows = []
    for owner, mine in by_owner.items():
        count = {s: sum(1 for r in mine if r.status == s) for s in ("queued", "running", "done", "cancelled")}
        rows.append(UserUsage(
            owner=owner, jobs=len(mine), queued=count["queued"], running=count["running"], done=count["done"],
            failed=sum(1 for r in mine if r.status in ("failed", "lost")), cancelled=count["cancelled"],
            run_seconds=round(sum(r.elapsed or 0.0 for r in mine), 3)))
    return sorted(rows, key=lambda u: (-(u.queued + u.running), -u.run_seconds, str(u.owner)))
