"""The ``--write`` entry point the fixture writers share (vLLM, GuideLLM 0.3 and 0.8 each in its own venv).

Standard library only: it runs inside those tools' environments, where the project is not installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Writer:
    """One fixture writer: its module, the tool and version its files are from, the make target installing it."""

    module: str
    package: str
    version: str
    install: str
    write: Callable[[Path], Iterable[Path]]


def main(argv: list[str], writer: Writer, data: Path) -> None:
    """Write the fixtures into ``data`` (``--write``), refusing to run under another version of the tool."""
    if argv != ["--write"]:
        raise SystemExit(f"usage: python -m {writer.module} --write")
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version(writer.package)
    except PackageNotFoundError:
        raise SystemExit(f"{writer.package} is not installed here (make {writer.install})") from None
    if installed != writer.version:
        raise SystemExit(f"{writer.package} {installed} is installed; these files are {writer.version}'s "
                         f"(make {writer.install})")
    data.mkdir(exist_ok=True)
    for path in writer.write(data):
        print(path)
