"""A mistyped command or flag is named with the nearest right one, under the usage of the command it was
given to (exit 2); a key on the command line is refused; ``ramp completion`` completes the built-in profile
names and ``ramp sim``'s own flags (issue 30, "Outside view")."""

from __future__ import annotations

import pytest

from loadgen.cli.commands import main
from loadgen.exits import EXIT_USAGE
from loadgen.profile import builtin_profile_names


def usage_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as ended:
        main(args)
    assert ended.value.code == EXIT_USAGE
    return capsys.readouterr().err


def test_a_mistyped_command_is_named_not_read_as_a_url(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reprot", "runs/a.jsonl"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == "ramp: no command 'reprot': did you mean 'ramp report'? (ramp --help lists them)\n"
    assert main(["profils"]) == EXIT_USAGE
    assert "did you mean 'ramp profiles'?" in capsys.readouterr().err


def test_an_unknown_flag_is_said_under_its_commands_usage_with_the_nearest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = usage_error(["run", "http://127.0.0.1:1", "--stpes", "4"], capsys)
    assert err.startswith("usage: ramp run ")
    assert err.endswith("ramp run: error: unrecognized arguments: --stpes 4; did you mean --steps?\n")
    err = usage_error(["report", "a.jsonl", "--fromat", "csv"], capsys)
    assert err.startswith("usage: ramp report ") and "did you mean --format?" in err
    err = usage_error(["--verison"], capsys)
    assert err.startswith("usage: ramp ") and "did you mean --version?" in err


def test_two_unknown_flags_each_get_their_nearest(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(["run", "http://127.0.0.1:1", "--stpes", "4", "--wramup=1"], capsys)
    assert "did you mean --steps (for --stpes), --warmup (for --wramup)?" in err


def test_an_unknown_secret_looking_flags_value_is_not_echoed(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(["run", "http://127.0.0.1:1", "--hf-token", "hf_s3cret"], capsys)
    assert "hf_s3cret" not in err and "--hf-token ***" in err


@pytest.mark.parametrize("given", [["--api-key", "sk-s3cret"], ["--api-key=sk-s3cret"]])
def test_a_key_on_the_command_line_is_refused_not_read_as_a_variables_name(
    given: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # argparse alone took `--api-key K` as --api-key-env K
    assert main(["run", "http://127.0.0.1:1", *given]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "ramp takes no --api-key" in err and "OPENAI_API_KEY" in err and "--api-key-env" in err
    assert "sk-s3cret" not in err


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_offers_profile_names_and_the_simulators_flags(
    shell: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    names = builtin_profile_names()
    assert len(names) >= 3 and all(name in script for name in names)
    assert "fault-stall-rate" in script and "max-num-seqs" in script  # `ramp sim`'s flags
