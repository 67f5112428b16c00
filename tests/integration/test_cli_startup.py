"""``ramp --version``, ``ramp --help`` and a usage error start without the engine: none of numpy, textual,
rich, hdrhistogram or the HTTP clients is imported (issue 30: 0.38-0.42 s of CPU before, 0.07-0.08 s after,
on the 2-core machine). The real command in a subprocess, its modules read at exit."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# asyncio and ssl: 40-100 ms of the start-up on their own, brought back once by a module-level import of
# loadgen.target.http (the scrubber) in loadgen.cli.launch
HEAVY = {"numpy", "textual", "rich", "hdrh", "httpx", "aiohttp", "openai", "loadgen.run.engine", "tui"}
HEAVY |= {"asyncio", "ssl"}
# the ramp entry point as its console script runs it, the loaded modules written to stderr at exit
PROBE = (
    "import atexit, json, sys\n"
    "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + json.dumps(sorted(sys.modules))))\n"
    "from loadgen.cli import main\n"
    "sys.exit(main())\n"
)


def loaded(*args: str) -> tuple[int, str, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    said, _, modules = done.stderr.rpartition("\nMODULES ")
    return done.returncode, done.stdout + said, set(json.loads(modules))


@pytest.mark.parametrize(
    ("args", "code", "shows"),
    [
        (["--version"], 0, "ramp "),
        (["--help"], 0, "usage: ramp"),
        (["run", "--help"], 0, "--step-seconds"),
        (["run", "http://127.0.0.1:1", "--stpes", "4"], 2, "did you mean --steps?"),
        (["reprot"], 2, "did you mean 'ramp report'?"),
    ],
)
def test_the_command_line_alone_imports_nothing_heavy(args: list[str], code: int, shows: str) -> None:
    returncode, output, modules = loaded(*args)
    assert returncode == code and shows in output, output
    heavy = {name for name in modules if name.split(".")[0] in HEAVY or name in HEAVY}
    assert heavy == set()
