"""``python -m digits_core``: the same as the ``digits`` command."""

import sys

from .cli import main

sys.exit(main())
