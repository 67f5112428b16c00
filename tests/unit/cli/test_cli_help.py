"""``ramp run --help`` (and demo, launch) in named argument groups, every flag with its help; ``ramp
completion bash|zsh|fish`` generated from the parser; ``OPENAI_BASE_URL`` as the target when none is given."""

from __future__ import annotations

import argparse

import pytest

from loadgen.cli.commands import SHELLS, build_parsers, main, target_url
from loadgen.cli.flags import RUN_GROUPS, RunFlags

UNNAMED = {"options", "optional arguments", "positional arguments"}  # argparse's own (3.10+, before)


class SectionRecorder(argparse.HelpFormatter):
    """Remembers, for each action the help shows, the heading of the section it is shown under."""

    seen: list[tuple[str | None, argparse.Action]] = []

    def start_section(self, heading: str | None) -> None:
        self.heading = heading
        super().start_section(heading)

    def add_argument(self, action: argparse.Action) -> None:
        SectionRecorder.seen.append((self.heading, action))
        super().add_argument(action)


def shown(parser: argparse.ArgumentParser) -> list[tuple[str | None, argparse.Action]]:
    SectionRecorder.seen = []
    parser.formatter_class = SectionRecorder
    parser.format_help()
    return list(SectionRecorder.seen)


@pytest.mark.parametrize("command", ["run", "demo", "launch"])
def test_every_flag_has_help_and_sits_in_a_named_group(command: str) -> None:
    sections = shown(build_parsers()[1][command])
    flags = [(heading, action) for heading, action in sections if action.option_strings != ["-h", "--help"]]
    assert len(flags) > 50
    no_help = [a.option_strings or a.dest for _, a in flags if not a.help or a.help == argparse.SUPPRESS]
    assert no_help == []
    ungrouped = [a.option_strings or a.dest for heading, a in flags if heading is None or heading in UNNAMED]
    assert ungrouped == []
    headings = {heading for heading, _ in flags}
    assert set(RUN_GROUPS) <= headings


def test_run_help_names_its_groups_in_order() -> None:
    text = build_parsers()[1]["run"].format_help()
    at = [text.index(f"\n{title}:\n") for title in RUN_GROUPS]
    assert at == sorted(at)
    assert "--step-seconds" in text.split("\nsteps:\n")[1].split("\nworkload:\n")[0]


@pytest.mark.parametrize("shell", SHELLS)
def test_completion_scripts_come_from_the_parser(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    assert "step-seconds" in script and "open-loop" in script and "selftest" in script  # fish: -l open-loop
    assert {"bash": "complete", "zsh": "#compdef", "fish": "complete -c ramp"}[shell] in script


def test_openai_base_url_is_the_target_when_none_is_given(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://u:pw@10.0.0.5:8000/v1")
    assert target_url(RunFlags(), "") == "http://u:pw@10.0.0.5:8000/v1"
    said = capsys.readouterr().err
    assert said == "ramp: target http://***@10.0.0.5:8000/v1 (from OPENAI_BASE_URL)\n"
    assert target_url(RunFlags(), "http://127.0.0.1:9") == "http://127.0.0.1:9"
    assert target_url(RunFlags(urls=("http://127.0.0.1:9",)), "") == ""
    assert capsys.readouterr().err == ""
