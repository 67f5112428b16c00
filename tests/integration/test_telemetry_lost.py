"""Issue 30: telemetry lost mid-run is said on headless stderr once, not only as a record event. A server
whose ``/metrics`` answers well at the start and then turns to junk (a proxy's HTML error page), trickles
a line a second or answers only after a minute (a busy server: the scrape's time limit cuts it): the real
``ramp run --headless`` says so on stderr exactly once, the record carries the same warning as an event,
and the load runs on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hostile_servers import ramp_measured, serving, souring_metrics
from telemetry_fakes import vllm_text

from loadgen.telemetry.sources import DEFAULT_TIMEOUT_S

PROFILE = "[[bucket]]\ninput = 8\noutput = 2\n"


@pytest.mark.parametrize(
    ("then", "said"),
    [
        ("junk", "lost mid-run: not Prometheus text"),
        ("trickle", ""),
        ("slow", f"timeout after {DEFAULT_TIMEOUT_S:g} s"),
    ],
)
def test_telemetry_lost_mid_run_is_said_on_stderr_once(then: str, said: str, tmp_path: Path) -> None:
    page = vllm_text("metrics-after-load.prom")
    server = serving(metrics=souring_metrics(page, answers=2, then=then))
    profile = tmp_path / "tiny.toml"
    profile.write_text(PROFILE)
    out = tmp_path / "r.jsonl"
    args = ["--profile", str(profile), "--steps", "1,1", "--step-seconds", "6", "--warmup", "0"]
    try:
        ran = ramp_measured(["run", server.url, "--headless", *args, "--out", str(out)], tmp_path, 90)
    finally:
        server.stop()
    assert ran.returncode == 0, ran.stderr
    # junk: two bad scrapes after good ones; trickle: the page is cut at the source's time limit
    marker = said or "(telemetry dropped)"
    told = [line for line in ran.stderr.splitlines() if "telemetry source" in line]
    assert len(told) == 1 and marker in told[0], ran.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    notes = [str(x.get("note")) for x in lines if x.get("kind") == "warning"]
    (note,) = [n for n in notes if "telemetry source" in n]
    assert note in told[0], (note, told)
    steps = [x for x in lines if x.get("type") == "step"]
    assert len(steps) == 2 and all(int(s["ok"]) > 0 for s in steps), lines[-2:]  # the load ran on
