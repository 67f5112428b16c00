"""--precision as a profile key (issue 31): ``[ramp] precision = 5`` sets the plan's target as the flag does,
a bad value is one line naming the file, its line and the key, and the flag overrides the key; the console
(``ramp run`` without ``--headless``) gets the same plan as the headless face."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen.cli.commands import build_parser
from loadgen.cli.flags import RunFlags
from loadgen.cli.resolve import build_config, load_shape
from loadgen.profile import ProfileError, load_profile, parse_profile

URL = "http://127.0.0.1:9/v1"
MINIMAL = 'name = "t"\n[[bucket]]\ninput = 100\noutput = 10\n'


def ramp(text: str) -> str:
    return MINIMAL + "[ramp]\nlevels = [1, 2]\n" + text


def test_the_ramp_tables_precision_is_the_plans_target() -> None:
    plan = parse_profile(ramp("precision = 5\n")).ramp
    assert plan is not None and plan.precision_pct == 5.0
    assert plan.as_dict()["precision_pct"] == 5.0  # the record's header keeps it
    unset = parse_profile(ramp("")).ramp
    assert unset is not None and unset.precision_pct is None


@pytest.mark.parametrize("value", ["0", "100", "-2", "150", '"5"', "true", "nan", "inf"])
def test_a_bad_precision_names_the_file_the_line_and_the_key(tmp_path: Path, value: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(ramp(f"step_seconds = 20\nprecision = {value}\n"), encoding="utf-8")
    with pytest.raises(ProfileError) as info:
        load_profile(str(path))
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}:"), message
    assert "[ramp] key 'precision': expected a percentage > 0 and < 100" in message, message
    assert ":8:" in message, message  # the line of 'precision = ...'


def test_the_flag_overrides_the_key_and_the_key_holds_with_steps_given() -> None:
    base = parse_profile(ramp("precision = 5\n")).ramp
    shape = load_shape(RunFlags(), base)
    assert shape.plan is not None and shape.plan.precision_pct == 5.0
    shape = load_shape(RunFlags(precision=2.0), base)
    assert shape.plan is not None and shape.plan.precision_pct == 2.0
    shape = load_shape(RunFlags(steps=(4.0, 8.0)), base)  # --steps replace the levels, not the target
    assert shape.plan is not None and shape.plan.precision_pct == 5.0


def test_the_console_and_headless_runs_get_the_same_precision(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(ramp("precision = 5\n"), encoding="utf-8")
    for face in ([], ["--headless"]):
        args = build_parser().parse_args(["run", URL, "--profile", str(path), *face])
        plan = build_config(args, URL).plan
        assert plan is not None and plan.precision_pct == 5.0, face
        args = build_parser().parse_args(["run", URL, "--profile", str(path), "--precision", "3", *face])
        plan = build_config(args, URL).plan
        assert plan is not None and plan.precision_pct == 3.0, face
