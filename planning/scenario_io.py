"""Atomic text writes (temp file, fsync, rename): the one way the engine saves a file
(``planning.scenario.save_scenario`` writes scenarios through it)."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from planning.errors import PlanningError, quote


def _new_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write_text(path: str | os.PathLike[str], text: str, *, field: str = "path") -> Path:
    """Write ``text`` to ``path`` atomically (temp file in the same directory, fsync, rename).

    An existing file keeps its permission bits; a new file gets the usual ``0o666 & ~umask``. On any failure
    the temp file is removed and the old file is left as it was.

    Parameters
    ----------
    path:
        The file to write.
    text:
        Its new content (UTF-8).
    field:
        Name of the input that gave the path, for errors (``"--out"`` in the CLI).

    Returns
    -------
    Path
        The written file.

    Raises
    ------
    PlanningError
        The folder cannot be created (e.g. a file is in the way), the target is a directory, or writing fails.
    """
    target = Path(path)
    shown = quote(str(target), 120)
    if target.is_dir():
        raise PlanningError(field, f"{shown} is a directory.", "give a file name inside it.")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise PlanningError(field, f"cannot create the folder of {shown}: a file is in the way.",
                            "choose a path whose parent folders are folders, not files.") from None
    except OSError as exc:
        raise PlanningError(field, f"cannot create the folder of {shown}: {exc.strerror or exc}.",
                            "choose a writable location.") from None
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except OSError:
        mode = _new_file_mode()
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise PlanningError(field, f"cannot write in the folder of {shown}: {exc.strerror or exc}.",
                            "choose a writable location.") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise PlanningError(field, f"cannot write {shown}: {exc.strerror or exc}.",
                                "check the path, free space and permissions.") from None
        if isinstance(exc, UnicodeEncodeError):
            raise PlanningError(field, f"the text for {shown} is not encodable as UTF-8 ({exc.reason}).",
                                "remove the invalid characters.") from None
        raise
    return target
