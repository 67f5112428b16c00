"""Flags that cannot work are refused before any load: one line naming the flag and what to do, exit 2 (a
usage error; 1 is kept for "SLO not met", 3 for an unreachable target). Also the URL's edge cases: any case of
``HTTP://``, a port out of range, and a query string kept after the API path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.cli.commands import build_parser
from loadgen.cli.headless import finish
from loadgen.cli.resolve import build_config
from loadgen.exits import EXIT_UNREACHABLE, EXIT_USAGE, UsageError
from loadgen.run.config import RunConfig, RunOutcome
from loadgen.types import Target

URL = "http://127.0.0.1:8000"
CLOSED_PROFILE = (
    "[[bucket]]\ninput = 16\noutput = 16\n[ramp]\nlevels = [1, 2]\nstep_seconds = 4\nwarmup_seconds = 1\n"
)


def config(*argv: str, url: str = URL) -> RunConfig:
    return build_config(build_parser().parse_args(["run", url, *argv]), url)


REFUSED = [
    # (flags, words the one line must hold)
    (["--rolling", "0"], ["--rolling", "positive"]),
    (["--rolling", "-1"], ["--rolling"]),
    (["--step-seconds", "0", "--steps", "1"], ["--step-seconds"]),
    (["--step-seconds", "-1", "--steps", "1"], ["--step-seconds"]),
    (["--steps", "1", "--step-seconds", "5", "--warmup", "5"], ["--warmup", "--step-seconds"]),
    (["--steps", "1", "--step-seconds", "5", "--warmup", "9"], ["--warmup"]),
    (["--steps", "1", "--warmup", "-1"], ["--warmup"]),
    (["--ttft-timeout", "0"], ["--ttft-timeout"]),
    (["--ttft-timeout", "-1"], ["--ttft-timeout"]),
    (["--idle-timeout", "-5"], ["--idle-timeout"]),
    (["--total-timeout", "0"], ["--total-timeout"]),
    (["--refresh", "0"], ["--refresh"]),
    (["--rate", "5"], ["--rate", "--open-loop"]),
    (["--open-loop", "--rate", "0"], ["--rate"]),
    (["--burstiness", "0.5"], ["--burstiness", "--arrival gamma"]),
    (["--open-loop", "--rate", "2", "--arrival", "gamma", "--burstiness", "0"], ["--burstiness"]),
    (["--level", "-3"], ["--level"]),
    (["--max-concurrency", "-1"], ["--max-concurrency"]),
]


@pytest.mark.parametrize(("argv", "words"), REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_a_flag_that_cannot_work_is_refused(argv: list[str], words: list[str]) -> None:
    with pytest.raises(UsageError) as err:
        config(*argv)
    text = str(err.value)
    assert "\n" not in text and all(w in text for w in words), text


def test_a_warmup_as_long_as_the_profiles_step_names_both_sources(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(CLOSED_PROFILE)
    with pytest.raises(UsageError, match="--warmup.*the profile's step_seconds"):
        config("--profile", str(path), "--warmup", "4")
    with pytest.raises(UsageError, match="the profile's warmup_seconds.*--step-seconds"):
        config("--profile", str(path), "--step-seconds", "1")
    assert config("--profile", str(path), "--warmup", "3").plan is not None


def test_what_still_works() -> None:
    assert config("--open-loop", "--rate", "2", "--arrival", "gamma", "--burstiness", "0.5").burstiness == 0.5
    assert config("--steps", "1", "--step-seconds", "5", "--warmup", "0").plan is not None
    assert config("--rolling", "0.5").rolling_s == 0.5


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://127.0.0.1:99999", ["port", "99999", "1-65535"]),
        ("http://127.0.0.1:0", ["port"]),
        ("ftp://127.0.0.1:8000", ["http://"]),
        ("http://", ["host"]),
        ("127.0.0.1:8000", ["http://"]),
    ],
)
def test_a_bad_url_is_refused(url: str, words: list[str]) -> None:
    with pytest.raises(UsageError) as err:
        config(url=url)
    assert all(w in str(err.value) for w in words), str(err.value)


def test_the_scheme_is_accepted_in_any_case() -> None:
    cfg = config(url="HTTP://127.0.0.1:8000")
    assert cfg.target.url == "http://127.0.0.1:8000"
    assert config(url="Https://example.com/v1").target.url == "https://example.com/v1"


def test_a_query_string_stays_after_the_api_path() -> None:
    target = Target(url="http://h:8000/v1?api_key=abc&x=1")
    assert target.base_url == "http://h:8000"
    assert target.endpoint("/v1/models") == "http://h:8000/v1/models?api_key=abc&x=1"
    assert Target(url="http://h:8000/").endpoint("/metrics") == "http://h:8000/metrics"
    assert Target(url="http://h:8000/gw/v1/").endpoint("/v1/models") == "http://h:8000/gw/v1/models"


def test_an_unusable_record_path_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UsageError, match="--out"):
        config("--out", str(blocker / "run.jsonl"))
    with pytest.raises(UsageError, match="--out"):
        config("--out", str(tmp_path))  # a directory
    assert config("--out", str(tmp_path / "new" / "run.jsonl")).out is not None


def test_a_run_that_failed_before_its_first_step_is_not_an_slo_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    failed = RunOutcome(state="failed", steps=(), best_step=None, record_path=None, message="no model")
    assert finish(failed) == EXIT_USAGE
    raw = "FileExistsError: [Errno 17] File exists: 'runs/x'"
    assert finish(RunOutcome(state="failed", steps=(), best_step=None, record_path=None, message=raw)) == 2
    err = capsys.readouterr().err
    assert "ramp: File exists: 'runs/x'" in err and "FileExistsError" not in err and "Errno" not in err
    down = RunOutcome(state="failed", steps=(), best_step=None, record_path=None, unreachable=True)
    assert finish(down) == EXIT_UNREACHABLE


def _ramp(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OPENAI_API_KEY="")
    return subprocess.run(
        [sys.executable, "-m", "loadgen.cli", *args], capture_output=True, text=True, timeout=60, env=env
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "http://127.0.0.1:99999", "--headless", "--steps", "1"],
        ["run", "http://127.0.0.1:9", "--headless", "--rolling", "0"],
        ["run", "http://127.0.0.1:9", "--headless", "--steps", "1", "--step-seconds", "2", "--warmup", "2"],
    ],
)
def test_the_command_says_one_line_and_exits_2(argv: list[str], tmp_path: Path) -> None:
    proc = _ramp(*argv, "--out", str(tmp_path / "r.jsonl"))
    assert proc.returncode == EXIT_USAGE, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ramp: "), proc.stderr
    assert "Traceback" not in proc.stderr and "Error:" not in proc.stderr
    assert not (tmp_path / "r.jsonl").exists()
