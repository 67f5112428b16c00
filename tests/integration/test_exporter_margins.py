"""The exporter's margins of error (issue 31): after a real run against the simulator, a scrape carries each
finished step's figures with their 95 % intervals (``ramp_step_figure``, ``_lower``, ``_upper``,
``_trusted``, labels step and figure) equal to the record's step lines, and the measuring step's so far and
--precision's target and time left (``ramp_live_figure*``, ``ramp_precision_*``); ``promtool check metrics``
finds nothing to say of either."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from loadgen.config import RampPlan
from loadgen.observe.exporter import SnapshotCollector
from loadgen.profile import parse_profile
from loadgen.record import read_record
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.snapshot import Precision, Snapshot
from loadgen.types import Target

pytestmark = [pytest.mark.timeout(90), pytest.mark.sim("h200-llama8b", seed=3)]
PROFILE = 'name = "m"\n[[bucket]]\ninput = 32\noutput = 24\n[sampling]\nignore_eos = true\n'


def scrape(snapshot: Snapshot) -> tuple[str, dict[str, dict[tuple[tuple[str, str], ...], float]]]:
    collector = SnapshotCollector()
    collector.feed(snapshot)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return text, out


def finished_run(sim: Any, out: Path) -> Snapshot:
    seen: list[Snapshot] = []
    config = RunConfig(
        Target(sim.url), parse_profile(PROFILE, source="<m>"), plan=RampPlan((2, 4), 4.0, 0.5), out=str(out)
    )
    engine = Engine(config, on_snapshot=seen.append)
    engine.start()
    outcome = engine.wait(60)
    assert outcome is not None and outcome.state == "finished", outcome
    return seen[-1]


def test_a_scrape_carries_each_steps_figures_with_their_intervals(sim: Any, tmp_path: Path) -> None:
    last = finished_run(sim, tmp_path / "r.jsonl")
    text, s = scrape(last)
    lines = read_record(tmp_path / "r.jsonl").steps
    assert len(lines) == 2
    for number, line in enumerate(lines, start=1):
        margins = line["margins"]
        assert isinstance(margins, dict) and "out_tok_s" in margins and "ttft_p95_ms" in margins
        for figure, iv in margins.items():
            key = (("figure", figure), ("step", str(number)))
            assert s["ramp_step_figure"][key] == pytest.approx(iv["value"], rel=1e-9)
            if iv["lo"] is not None:
                assert s["ramp_step_figure_lower"][key] == pytest.approx(iv["lo"], rel=1e-9)
                assert s["ramp_step_figure_trusted"][key] == (1.0 if iv["trusted"] else 0.0)
            if iv["hi"] is not None:
                assert s["ramp_step_figure_upper"][key] == pytest.approx(iv["hi"], rel=1e-9)
            else:  # open above (too few values to bound a tail) or none: no upper end
                assert key not in s["ramp_step_figure_upper"]
    assert "ramp_live_figure" not in s and "ramp_precision_target_ratio" not in s  # nothing measuring now
    if shutil.which("promtool") is not None:
        lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        assert (lint.returncode, lint.stdout + lint.stderr) == (0, ""), lint.stdout + lint.stderr
    # the measuring step's figures so far, under --precision: its live margins, the target and the time left
    live = dict(last.steps[-1].margins)
    text, s = scrape(replace(last, live_margins=live, precision=Precision(5.0, 12.5)))
    assert s["ramp_live_figure"][(("figure", "out_tok_s"),)] == pytest.approx(live["out_tok_s"].value)
    assert s["ramp_precision_target_ratio"][()] == 0.05 and s["ramp_precision_eta_seconds"][()] == 12.5
    if shutil.which("promtool") is not None:
        lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        assert (lint.returncode, lint.stdout + lint.stderr) == (0, ""), lint.stdout + lint.stderr
