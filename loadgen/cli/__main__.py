"""``python -m loadgen.cli``: the ``ramp`` command without its installed script."""

import sys

from loadgen.cli.main import main

sys.exit(main())
