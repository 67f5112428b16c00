"""A scripted ``Snapshot`` for the exporter's unit tests: a closed-loop run mid-step, with errors, a TTFT
histogram with fixed-bucket counts, two workers and two replicas."""

from __future__ import annotations

from loadgen.snapshot import ClientHealth, HistogramView, Percentiles, ReplicaStats, Snapshot, WindowStats


def ttft_view() -> HistogramView:
    pct = Percentiles(count=4, mean=137.5, p50=100.0, p90=250.0, p95=250.0, p99=250.0, p999=250.0)
    return HistogramView("ttft_ms", "ms", pct, le=((100.0, 3), (200.0, 3), (300.0, 4)))


def snapshot(**over: object) -> Snapshot:
    run = WindowStats(
        "run", 10.0, ok=4, errors={"http_5xx": 2, "timeout": 1}, cancelled=1, input_tokens=400,
        output_tokens=120, out_tok_s=12.0, req_s=0.4, hist={"ttft_ms": ttft_view()},
    )  # fmt: skip
    step = WindowStats("step", 2.0, ok=1, out_tok_s=30.0, hist={"ttft_ms": ttft_view()})
    fields: dict[str, object] = dict(
        seq=7, elapsed_s=12.0, state="running", url="http://127.0.0.1:1/v1", model="m", runtime="vllm",
        runtime_version="0.1", profile="chat", mode="closed", level=16, rate_rps=None, achieved_rps=None,
        arrival="closed", paused=False, auto_ramp=False, step_index=2, step_count=5, step_elapsed_s=3.0,
        step_remaining_s=7.0, warming_up=False, in_flight=15, queued=0,
        windows={"step": step, "rolling": WindowStats("rolling"), "run": run}, rolling_s=10.0,
        phase="measure", health=ClientHealth(cpu_pct=(40.0, 55.0), client_bound=True),
        replicas=(ReplicaStats("A", "http://a/v1", requests=3, out_tok_s=5.0), ReplicaStats("B", "http://b/v1")),
        worker_hosts=("gpu1", "gpu2"),
    )  # fmt: skip
    fields.update(over)
    return Snapshot(**fields)  # type: ignore[arg-type]
