"""Where ``ramp launch``'s flags travel: the files they cross and the climbs back up, measured on a real run.

Runs ``ramp launch vllm fake/tiny --headless ...`` in this interpreter against the stand-in vLLM of
tests/vllm/fake_pkgs, with a profiler hook on the main thread, and follows every value that carries the
command line: the parsed ``argparse.Namespace``, ``RunFlags``, the launch flags, and the ``RunConfig`` made
of them until the run starts.

- a file is *crossed* when a function of it (loadgen/ or tui/) is called with such a value in hand;
- a *climb* is such a value handed back up to a caller in another file that goes on working on it (a
  function of file B returns flags or a config to file A); a path that goes flags -> resolve -> RunConfig
  climbs once per step it returns from.

    python scripts/flag_path.py          # prints the files in order, then the two counts
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]
CARRIERS = {"Namespace", "RunFlags", "LaunchFlags", "ServerFlags", "RunConfig"}
STOP_AT = "start"  # Engine.start: from here on the run has its config; the flags' path is over


_FILES: dict[str, str | None] = {}


def _ours(frame: FrameType | None) -> str | None:
    """The frame's file relative to the checkout when it is under loadgen/ or tui/ (cached: called a lot)."""
    if frame is None:
        return None
    name = frame.f_code.co_filename
    if name not in _FILES:
        rel = os.path.relpath(os.path.realpath(name), ROOT)
        _FILES[name] = rel if rel.split(os.sep)[0] in ("loadgen", "tui") else None
    return _FILES[name]


def _carries(value: object) -> bool:
    return type(value).__name__ in CARRIERS


def trace(argv: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    crossed: list[str] = []
    climbs: list[tuple[str, str]] = []
    done = False

    def hook(frame: FrameType, event: str, arg: object) -> None:
        nonlocal done
        if done:
            return
        here = _ours(frame)
        if here is None:
            return
        if event == "call":
            if frame.f_code.co_name == STOP_AT and here.endswith("run/engine.py"):
                done = True
                return
            if any(_carries(v) for v in frame.f_locals.values()) and here not in crossed:
                crossed.append(here)
        elif event == "return" and _carries(arg):
            caller = _ours(frame.f_back)
            if caller is not None and caller != here:
                climbs.append((here, caller))

    try:
        from loadgen.cli.commands import main  # imported before the hook: imports are no part of the path
    except ImportError:  # a checkout from before loadgen/cli/ (to measure the old path)
        from loadgen.cli import main  # type: ignore[no-redef]

    sys.setprofile(hook)
    try:
        main(argv)
    finally:
        sys.setprofile(None)
    return crossed, climbs


def main() -> int:
    fakes = ROOT / "tests" / "vllm" / "fake_pkgs"
    os.environ["PYTHONPATH"] = os.pathsep.join([str(fakes), str(ROOT)])
    os.environ["FAKE_MODE"] = "sim"
    with tempfile.TemporaryDirectory() as tmp:
        argv = ["launch", "vllm", "fake/tiny", "--python", sys.executable, "--headless", "--level", "1",
                "--step-seconds", "1", "--warmup", "0", "--out", os.path.join(tmp, "run.jsonl")]  # fmt: skip
        crossed, climbs = trace(argv)
    print("files crossed, in order:", *crossed, sep="\n  ")
    print("climbs back up:", *(f"{a} -> {b}" for a, b in climbs), sep="\n  ")
    print(f"ramp launch's flags cross {len(crossed)} files with {len(climbs)} climbs back up")
    return 0


if __name__ == "__main__":
    sys.exit(main())
