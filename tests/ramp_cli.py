"""The real ``ramp`` command line in a subprocess, run to its end: ``ramp(*args)`` runs
``python -m loadgen.cli ARGS`` with ``OPENAI_API_KEY`` set to ``api_key`` (empty: none) and returns what it
printed and its exit status. (``proc_watch.start_ramp`` starts one to watch while it runs.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def ramp(
    *args: str, api_key: str = "", timeout: float = 60.0, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OPENAI_API_KEY=api_key)
    return subprocess.run(
        [sys.executable, "-m", "loadgen.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
    )
