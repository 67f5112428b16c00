"""One declaration per run flag (``loadgen/cli/flags.py``): each ``RunFlags`` field carries its group, its
help and how argparse reads it, and ``ramp run``/``demo``/``launch`` build their flags from the fields alone:
a field is a flag under its group's heading, and a flag is a field."""

from __future__ import annotations

import argparse
import re
from dataclasses import fields

import pytest

from loadgen.cli.commands import build_parsers
from loadgen.cli.flags import RUN_GROUPS, Flag, RunFlags, flag_of

URL = "http://127.0.0.1:9"


def sections(parser: argparse.ArgumentParser) -> dict[str, set[str]]:
    """The options ``--help`` shows under each section's heading (an option starts its line)."""
    shown: dict[str, set[str]] = {}
    heading = ""
    for line in parser.format_help().splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            heading = line[:-1]
        elif match := re.match(r"  (--[\w-]+)", line):
            shown.setdefault(heading, set()).add(match[1])
    return shown


def test_every_field_declares_its_flag_in_a_help_group() -> None:
    undeclared = [f.name for f in fields(RunFlags) if not isinstance(f.metadata.get("flag"), Flag)]
    assert undeclared == []
    assert {flag_of(f.name).group for f in fields(RunFlags)} == set(RUN_GROUPS)


@pytest.mark.parametrize("command", ["run", "demo", "launch"])
def test_each_field_is_a_flag_under_its_own_group_and_each_run_flag_a_field(command: str) -> None:
    parser = build_parsers()[1][command]
    shown = sections(parser)
    with_url = command == "run"
    for f in fields(RunFlags):
        spec = flag_of(f.name)
        if spec.with_url and not with_url:
            assert spec.option(f.name) not in {o for options in shown.values() for o in options}
            continue
        assert spec.option(f.name) in shown[spec.group], (f.name, spec.group)
    run_options = {o for title in RUN_GROUPS for o in shown[title]}
    declared = {flag_of(f.name).option(f.name) for f in fields(RunFlags)}
    only_run = {flag_of(f.name).option(f.name) for f in fields(RunFlags) if flag_of(f.name).with_url}
    assert run_options == (declared if with_url else declared - only_run)


def test_the_parsed_flags_are_the_fields_defaults_and_their_values() -> None:
    parser = build_parsers()[1]["run"]
    assert RunFlags.from_namespace(parser.parse_args([URL])) == RunFlags()
    given = parser.parse_args(
        [URL, "--tag", "gpu=H200", "--url", URL, "--find-max", "--reset-prefix-cache", "--ray", "--insecure"]
    )
    flags = RunFlags.from_namespace(given)
    assert flags.tag == (("gpu", "H200"),) and flags.urls == (URL,)
    assert (flags.find_max, flags.reset_prefix_cache, flags.ray, flags.insecure) == (
        (1.0, 512.0),
        "step",
        "",
        True,
    )


def test_a_help_that_names_its_default_reads_the_field() -> None:
    text = build_parsers()[1]["run"].format_help()
    assert f"(default {RunFlags().ttft_timeout:g})" in " ".join(text.split())
    assert f"(default {RunFlags().max_event_bytes})" in " ".join(text.split())
