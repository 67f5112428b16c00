"""``python -m loadgen.cli``: the ``ramp`` command without its installed script."""

import sys

from loadgen.cli import main

sys.exit(main())
