"""``python -m planning.cli …``: the same as the ``planning`` command."""

import sys

from planning.cli import main

sys.exit(main())
