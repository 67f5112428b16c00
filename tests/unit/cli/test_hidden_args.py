"""Secrets off ``ramp``'s command line (``loadgen.cli.hidden_args``): what is masked, what comes back in the
re-executed process (and only when it fits), and the variable gone from the environment at once. The
re-execution itself, with ``ps``'s view of every ramp process, is tests/integration/test_hidden_args_ps.py's."""

from __future__ import annotations

import json
import os

import pytest

from loadgen.cli import hidden_args
from loadgen.cli.hidden_args import ENV, arguments, masked, restored


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        (["run", "http://alice:pa55@h:8000"], ["run", "http://alice:***@h:8000"]),
        (["http://tok3n@h"], ["http://***@h"]),
        (["--url=https://a:b@h1", "--url", "http://h2"], ["--url=https://a:***@h1", "--url", "http://h2"]),
        (["http://a:b@h1,http://c:d@h2"], ["http://a:***@h1,http://c:***@h2"]),
        (["check", "http://h/v1?api_key=sk-1&x=2"], ["check", "http://h/v1?api_key=***&x=2"]),
        (
            ["launch", "vllm", "m", "--", "--api-key", "sk-1"],
            ["launch", "vllm", "m", "--", "--api-key", "***"],
        ),
        (
            ["--", "--hf-token=hf_x", "--admin-api-key", "k"],
            ["--", "--hf-token=***", "--admin-api-key", "***"],
        ),
        # not secrets: a variable's name, a token budget, an e-mail-like tag, a plain URL
        (
            ["--api-key-env", "MY_KEY", "--max-tokens", "512"],
            ["--api-key-env", "MY_KEY", "--max-tokens", "512"],
        ),
        (["--tag", "owner=a@b.c", "http://h:8000/v1"], ["--tag", "owner=a@b.c", "http://h:8000/v1"]),
    ],
)
def test_each_secret_is_masked_and_nothing_else(given: list[str], shown: list[str]) -> None:
    assert masked(given) == shown
    assert masked(shown) == shown  # masking twice changes nothing: the re-executed process does not loop


def test_the_real_arguments_come_back_and_the_variable_goes(monkeypatch: pytest.MonkeyPatch) -> None:
    typed = ["run", "http://alice:pa55@h:8000", "--", "--api-key", "sk-1"]
    shown = masked(typed)
    monkeypatch.setenv(ENV, json.dumps({"1": typed[1], "4": typed[4]}))
    assert arguments(shown) == typed
    assert ENV not in os.environ  # no child (worker, server) inherits it


@pytest.mark.parametrize(
    "given",
    [
        "not json",
        json.dumps(["http://alice:pa55@h"]),
        json.dumps({"1": "http://mallory:x@evil"}),  # does not mask to what the command line holds
        json.dumps({"9": "http://alice:pa55@h"}),  # no such argument
    ],
)
def test_a_stray_or_forged_variable_changes_nothing(given: str, monkeypatch: pytest.MonkeyPatch) -> None:
    shown = ["run", "http://alice:***@h"]
    monkeypatch.setenv(ENV, given)
    assert restored(shown) == shown
    assert ENV not in os.environ


def test_a_secret_on_the_command_line_reexecutes_with_it_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    execs: list[tuple[str, list[str], str]] = []

    def execv(path: str, argv: list[str]) -> None:
        execs.append((path, argv, os.environ[ENV]))
        raise OSError("not here")  # a failed exec: the process goes on as before

    typed = ["run", "http://alice:pa55@h:8000", "--headless"]
    monkeypatch.setattr(hidden_args.os, "execv", execv)
    monkeypatch.setattr(
        hidden_args.sys, "orig_argv", ["/venv/bin/python", "-X", "utf8", "/venv/bin/ramp", *typed]
    )
    monkeypatch.delenv(ENV, raising=False)
    assert arguments(typed) == typed
    ((path, argv, moved),) = execs
    assert path == hidden_args.sys.executable
    assert argv[1:] == ["-X", "utf8", "/venv/bin/ramp", "run", "http://alice:***@h:8000", "--headless"]
    assert json.loads(moved) == {"1": "http://alice:pa55@h:8000"}
    assert ENV not in os.environ  # taken back after the failed exec
    execs.clear()
    assert arguments(["run", "http://h:8000"]) == ["run", "http://h:8000"] and execs == []  # nothing to hide
