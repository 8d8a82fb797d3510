"""`streamlit run` with the stand-in engine (PLANNING_FAKE_ENGINE=1 only): exercises the browser flow early."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

if __name__ == "__main__":
    import pytest
    from streamlit.web import cli

    from tests.app import fake_engine

    patcher = pytest.MonkeyPatch()
    fake_engine.install(patcher)
    sys.argv = ["streamlit", "run", *sys.argv[1:]]
    sys.exit(cli.main())
