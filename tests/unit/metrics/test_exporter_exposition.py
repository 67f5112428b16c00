"""ramp's Prometheus exposition (``loadgen.observe.exporter``) from a scripted snapshot: every family parsed
back with prometheus_client's own parser, the histogram buckets read from real HDR counts."""

from __future__ import annotations

from exporter_scripted import snapshot
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from loadgen.metrics.hdr import DenseHistogram, cumulative_at
from loadgen.metrics.recorder import IntervalDelta
from loadgen.metrics.windows import Accumulator
from loadgen.observe.exporter import SnapshotCollector
from loadgen.run.snapshots import worker_hosts
from loadgen.snapshot import BUCKETS


def scrape(collector: SnapshotCollector) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """name -> {sorted labels: value}, every sample of the exposition."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def test_before_any_snapshot_only_up_is_zero() -> None:
    samples = scrape(SnapshotCollector())
    assert samples == {"ramp_up": {(): 0.0}}


def test_load_step_phase_and_client_state() -> None:
    collector = SnapshotCollector()
    collector.feed(snapshot())
    s = scrape(collector)
    assert s["ramp_up"][()] == 1.0
    assert s["ramp_level"][()] == 16 and s["ramp_in_flight"][()] == 15
    assert s["ramp_step"][()] == 3 and s["ramp_plan_steps"][()] == 5  # 1-based, as the record numbers steps
    assert s["ramp_phase"][(("phase", "measure"),)] == 1.0
    assert sum(s["ramp_phase"].values()) == 1.0 and len(s["ramp_phase"]) == 5
    assert s["ramp_state"][(("state", "running"),)] == 1.0 and sum(s["ramp_state"].values()) == 1.0
    assert s["ramp_client_bound"][()] == 1.0
    assert s["ramp_worker_cpu_percent"] == {
        (("host", "gpu1"), ("worker", "0")): 40.0,
        (("host", "gpu2"), ("worker", "1")): 55.0,
    }
    assert s["ramp_workers"] == {(("host", "gpu1"),): 1, (("host", "gpu2"),): 1}
    assert "ramp_rate_rps" not in s  # closed loop: no rate, never a fake zero
    assert s["ramp_run_info"][(("arrival", "closed"), ("mode", "closed"), ("model", "m"), ("profile", "chat"),
                               ("runtime", "vllm"))] == 1.0  # fmt: skip


def test_counters_by_status_kind_and_direction() -> None:
    collector = SnapshotCollector()
    collector.feed(snapshot())
    s = scrape(collector)
    req = s["ramp_requests_total"]
    assert req[(("status", "ok"),)] == 4 and req[(("status", "error"),)] == 3
    assert req[(("status", "cancelled"),)] == 1
    assert s["ramp_errors_total"] == {(("kind", "http_5xx"),): 2, (("kind", "timeout"),): 1}
    assert s["ramp_tokens_total"][(("direction", "output"),)] == 120
    assert s["ramp_tokens_total"][(("direction", "input"),)] == 400
    rates = s["ramp_output_tokens_per_second"]
    assert rates == {(("window", "run"),): 12.0, (("window", "step"),): 30.0}  # rolling: none yet


def test_histogram_in_seconds_and_exact_quantiles_per_window() -> None:
    collector = SnapshotCollector()
    collector.feed(snapshot())
    s = scrape(collector)
    buckets = s["ramp_ttft_seconds_bucket"]
    assert buckets[(("le", "0.1"),)] == 3 and buckets[(("le", "0.3"),)] == 4
    assert buckets[(("le", "+Inf"),)] == 4 == s["ramp_ttft_seconds_count"][()]
    assert abs(s["ramp_ttft_seconds_sum"][()] - 0.55) < 1e-9
    q = s["ramp_ttft_quantile_seconds"]
    assert q[(("quantile", "0.5"), ("window", "step"))] == 0.1
    assert q[(("quantile", "0.99"), ("window", "run"))] == 0.25
    assert not any(("window", "rolling") in labels for labels in q)  # an empty window has no percentile


def test_replica_labels() -> None:
    collector = SnapshotCollector()
    collector.feed(snapshot())
    s = scrape(collector)
    req = s["ramp_replica_requests"]
    assert req[(("replica", "A"), ("url", "http://a/v1"))] == 3
    assert req[(("replica", "B"), ("url", "http://b/v1"))] == 0
    assert list(s["ramp_replica_output_tokens_per_second"]) == [(("replica", "A"), ("url", "http://a/v1"))]


def test_label_values_from_outside_are_escaped() -> None:
    collector = SnapshotCollector()
    collector.feed(snapshot(model='evil"}\nramp_level 9999 #', profile="\\x"))
    s = scrape(collector)
    assert s["ramp_level"][()] == 16  # the injected line is a label value, not a sample
    assert any(("model", 'evil"}\nramp_level 9999 #') in labels for labels in s["ramp_run_info"])


def test_cumulative_counts_are_exact_at_the_bounds() -> None:
    hist = DenseHistogram("ttft_ms")
    for value_us in (90_000, 100_000, 100_000, 250_000, 2_500_000):
        hist.hdr.record_value(value_us)
    spec = hist.spec
    got = dict(cumulative_at(hist.counts, spec.layout, spec.display_div, (50.0, 100.0, 200.0, 300.0, 5000.0)))
    assert got == {50.0: 0, 100.0: 3, 200.0: 3, 300.0: 4, 5000.0: 5}


def test_accumulator_buckets_a_window_when_asked() -> None:
    acc = Accumulator()
    hist = DenseHistogram("ttft_ms")
    hist.hdr.record_value(150_000)
    index = hist.counts.nonzero()[0]
    delta = IntervalDelta(0, 1, 0, {"ok": 1}, {"ttft_ms": (index, hist.counts[index])})
    acc.add(delta)
    assert acc.view("ttft_ms").le == ()  # only asked for (the exporter's runs)
    view = acc.with_buckets(acc.stats("run", 1.0)).hist["ttft_ms"]
    assert tuple(b for b, _ in view.le) == BUCKETS["ttft_ms"]
    assert dict(view.le)[100] == 0 and dict(view.le)[150] == 1 and view.le[-1][1] == 1


def test_a_worker_not_reporting_leaves_hosts_unsaid() -> None:
    collector = SnapshotCollector()
    collector.feed(snapshot(worker_hosts=("gpu1", "gpu2", "gpu2")))  # three workers, two CPU figures
    s = scrape(collector)
    assert set(s["ramp_worker_cpu_percent"]) == {
        (("host", ""), ("worker", "0")),
        (("host", ""), ("worker", "1")),
    }
    assert s["ramp_workers"] == {(("host", "gpu1"),): 1, (("host", "gpu2"),): 2}


def test_worker_hosts_from_the_fleet_table() -> None:
    fleet = {"kind": "ray", "hosts": [{"host": "b", "workers": [1, 2]}, {"host": "a", "workers": [0]}]}
    assert worker_hosts(fleet) == ("a", "b", "b")
    assert worker_hosts({}) == () and worker_hosts({"hosts": "junk"}) == ()
    assert worker_hosts({"hosts": [{"host": "x", "workers": [1]}]}) == ("", "x")


def test_every_steps_start_stays_to_be_scraped() -> None:
    """Issue 30: one gauge of the current step's start changed between two scrapes and was missed (at a
    15 s scrape, 0 of 3 step changes showed). Each step's start stays, labelled with its number, for the
    whole run: a scrape after three short steps still reads all three, at the same values every time."""
    collector = SnapshotCollector()
    collector.feed(snapshot(elapsed_s=1.0, step_index=0, step_starts_s=(0.5,)))
    t0 = collector.t0_unix
    assert t0 is not None
    for elapsed, starts in ((4.0, (0.5, 2.0)), (9.0, (0.5, 2.0, 6.5))):  # never scraped meanwhile
        collector.feed(snapshot(elapsed_s=elapsed, step_index=len(starts) - 1, step_starts_s=starts))
    first = scrape(collector)["ramp_step_start_timestamp_seconds"]
    assert first == {
        (("step", "1"),): round(t0 + 0.5, 3),
        (("step", "2"),): round(t0 + 2.0, 3),
        (("step", "3"),): round(t0 + 6.5, 3),
    }
    collector.feed(snapshot(elapsed_s=12.0, step_index=2, step_starts_s=(0.5, 2.0, 6.5)))
    assert scrape(collector)["ramp_step_start_timestamp_seconds"] == first
