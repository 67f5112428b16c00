"""The exporter's answer probes (issue 34): a finished step's answer agreement is a step figure like the
others (``ramp_step_figure{figure="quality_agree"}`` with ``_lower``/``_upper`` its Wilson interval and
``_trusted`` 1), verifiable tasks' share passed likewise (``quality_tasks_ok``), and
``ramp_step_quality_probes`` counts each step's probes compared and failed; a run without probes has none."""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from tui_fakes import judged_steps, make_snapshot

from loadgen.analysis.quality import QualityBook
from loadgen.observe.exporter import SnapshotCollector
from loadgen.snapshot import Snapshot

Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def scrape(snapshot: Snapshot) -> Samples:
    collector = SnapshotCollector()
    collector.feed(snapshot)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    out: Samples = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def key(step: int, figure: str) -> tuple[tuple[str, str], ...]:
    return (("figure", figure), ("step", str(step)))


def test_each_probed_steps_agreement_and_its_interval_and_its_probe_counts() -> None:
    book = QualityBook()
    first = book.step([(0, "alpha"), (1, "beta"), (0, "alpha"), (1, "beta")])  # sets the reference
    second = book.step([(0, "alpha"), (1, "bXta"), (0, "gamma"), (1, "beta"), (0, None), (1, None)])
    assert first is not None and second is not None
    second["tasks_ok"], second["tasks_ok_lo"], second["tasks_ok_hi"], second["tasks_n"] = 0.5, 0.15, 0.85, 4
    steps = judged_steps()
    probed = (replace(steps[0], quality=first), replace(steps[1], quality=second), *steps[2:])
    s = scrape(make_snapshot(steps=probed, best_step=0))
    assert s["ramp_step_figure"][key(1, "quality_agree")] == 1.0
    assert s["ramp_step_figure"][key(2, "quality_agree")] == 0.5
    assert s["ramp_step_figure_lower"][key(2, "quality_agree")] == pytest.approx(second["agree_lo"])
    assert s["ramp_step_figure_upper"][key(2, "quality_agree")] == pytest.approx(second["agree_hi"])
    assert s["ramp_step_figure_trusted"][key(2, "quality_agree")] == 1.0
    assert s["ramp_step_figure_lower"][key(2, "quality_tasks_ok")] == 0.15
    assert key(1, "quality_tasks_ok") not in s["ramp_step_figure"]  # no tasks: no figure
    assert key(3, "quality_agree") not in s["ramp_step_figure"]  # a step without probes
    probes = s["ramp_step_quality_probes"]
    assert probes[(("outcome", "compared"), ("step", "2"))] == 4.0
    assert probes[(("outcome", "failed"), ("step", "2"))] == 2.0  # apart from the load's errors
    assert probes[(("outcome", "failed"), ("step", "1"))] == 0.0


def test_no_quality_series_without_probes() -> None:
    s = scrape(make_snapshot(steps=judged_steps(), best_step=0))
    assert "ramp_step_quality_probes" not in s
    assert not any(dict(k).get("figure", "").startswith("quality") for k in s.get("ramp_step_figure", {}))
