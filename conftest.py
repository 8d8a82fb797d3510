"""Root conftest: puts the project root on sys.path so `planning` imports without installation.

The result cache (``planning.resultcache``) is off for the suite, so that a test whose engine is monkeypatched is
never answered by another test's plan, and nothing is written under the user's home; its own tests turn it on.
"""

import os

os.environ.setdefault("PLANNING_RESULT_CACHE", "off")
