"""CLI sub-commands for the job store: list, show and cancel background jobs."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import Any

from planning.jobs.record import STATUSES, JobRecord
from planning.jobs.store import JobStore


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def _line(r: JobRecord) -> str:
    elapsed = f"{r.elapsed:.1f}s" if r.elapsed is not None else "-"
    flags = [f"attempt {r.attempt}: its worker died before" if r.attempt > 1 and r.status != "failed" else "",
             r.attention() or ""]
    text = " · ".join([*(f"[{f}]" for f in flags if f), r.error or r.message])
    return (
        f"{r.id}  {r.kind:<10} {r.status:<9} {100 * r.progress:5.1f}%  {elapsed:>8}  "
        f"{_when(r.created)}  {r.owner or '-':<12} {text}"
    )


def _open(args: argparse.Namespace) -> JobStore:
    store = JobStore(args.store)
    if store.notice:  # a damaged file was moved aside and recovered, or the store is read-only
        print(f"warning: {store.notice}", file=sys.stderr)
    return store


def _list(args: argparse.Namespace) -> int:
    from planning.cli import print_json

    with _open(args) as store:
        records = store.list_jobs(owner=args.owner, limit=args.limit, kind=args.kind, status=args.status)
    if args.json:
        print_json([r.to_dict(with_result=False) for r in records])
        return 0
    if not records:
        print(f"No jobs in {args.store or 'the default store'}.")
        return 0
    print(
        f"{'id':<16}  {'kind':<10} {'status':<9} {'done':>6}  {'elapsed':>8}  {'created':<19}  {'owner':<12} message"
    )
    for r in records:
        print(_line(r))
    return 0


def _show(args: argparse.Namespace) -> int:
    from planning.cli import print_json

    with _open(args) as store:
        record = store.get(args.job_id)
    payload: dict[str, Any] = record.to_dict(with_result=not args.no_result)
    if args.json:
        print_json(payload)
        return 0
    print(_line(record))
    if record.error_detail:
        print(record.error_detail)
    if record.notes:
        print(record.notes)
    if record.result is not None and not args.no_result:
        print_json(record.result)
    return 0 if record.status not in ("failed", "lost") else 1


def _cancel(args: argparse.Namespace) -> int:
    with _open(args) as store:
        accepted = store.request_cancel(args.job_id)
        status = store.get(args.job_id).status
    print(f"{args.job_id}: {'cancel requested' if accepted else 'not active'} (status {status})")
    return 0 if accepted else 1


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``planning jobs list|show|cancel`` to the CLI.

    Parameters
    ----------
    subparsers:
        The object returned by ``ArgumentParser.add_subparsers()``.
    """
    jobs = subparsers.add_parser("jobs", help="background jobs: list, show, cancel")
    jobs.add_argument("--store", default=None, help="job store file (default: $PLANNING_HOME/jobs.sqlite)")
    sub = jobs.add_subparsers(dest="jobs_command", metavar="ACTION")
    sub.required = True

    p_list = sub.add_parser("list", help="most recent jobs first")
    p_list.add_argument("--owner", default=None)
    p_list.add_argument("--kind", default=None)
    p_list.add_argument("--status", choices=STATUSES, default=None)
    p_list.add_argument("--limit", type=int, default=20)
    p_list.add_argument("--json", action="store_true")
    p_list.set_defaults(func=_list)

    p_show = sub.add_parser("show", help="one job with its result or error (exit 1 when it failed or was lost)")
    p_show.add_argument("job_id")
    p_show.add_argument("--json", action="store_true")
    p_show.add_argument("--no-result", action="store_true", help="leave the result out")
    p_show.set_defaults(func=_show)

    p_cancel = sub.add_parser("cancel", help="ask a queued or running job to stop (any process)")
    p_cancel.add_argument("job_id")
    p_cancel.set_defaults(func=_cancel)
