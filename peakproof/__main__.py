"""``python -m peakproof``: the same command line as ``peakproof`` (peakproof.cli)."""

import sys

from .cli import main

sys.exit(main())
