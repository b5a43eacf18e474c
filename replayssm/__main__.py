"""``python -m replayssm``: the ``replayssm-verify`` command line."""

import sys

from replayssm.cli import main

sys.exit(main())
