"""``ramp completion bash`` completes in a real bash: a command, a flag of ``ramp sim`` (which parses its own
flags), a built-in profile name after ``--profile`` and after ``ramp profiles show``."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "loadgen.cli", "completion", "bash"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    path = tmp_path_factory.mktemp("completion") / "ramp.bash"
    path.write_text(done.stdout)
    return str(path)


def complete(script: str, line: str) -> set[str]:
    """What bash offers for the last word of ``line``, as it would on a tab."""
    probe = (
        'source "$1"; read -ra COMP_WORDS <<< "$2"; COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); '
        'COMP_LINE="$2"; COMP_POINT=${#COMP_LINE}; _shtab_ramp; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(
        ["bash", "-c", probe, "_", script, line], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


@pytest.mark.parametrize(
    ("line", "offered"),
    [
        ("ramp rep", {"report", "replay"}),
        ("ramp sim --fault-st", {"--fault-stall-rate", "--fault-stall-s"}),
        ("ramp run --profile fix", {"fixed-7k-1k"}),
        ("ramp check http://h --profile decode", {"decode-heavy"}),
        ("ramp profiles show rag", {"rag-prefill-heavy"}),
    ],
)
def test_bash_offers_it(script: str, line: str, offered: set[str]) -> None:
    assert complete(script, line) == offered
