"""``python -m portalctl``: the same as the ``portalctl`` script."""

from __future__ import annotations

import sys

from portalctl.cli import main

sys.exit(main())
