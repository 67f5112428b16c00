"""``python -m llm_ramp``: the ``ramp`` command without its installed script."""

import sys

from llm_ramp.cli import main

sys.exit(main())
