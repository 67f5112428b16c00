"""Test doubles for the console: a FakeEngine that records every command and publishes Snapshots, a
ScriptedEngine for the headless face (given snapshots, one per wait, then the outcome), and a
deterministic Snapshot factory (fixed numbers, no clocks) used by behaviour and snapshot tests."""

from __future__ import annotations

import io
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import astuple, replace
from typing import Any

from rich.console import Console
from rich.text import Text

from loadgen.run.config import RunOutcome
from loadgen.run.protocol import (
    ChangeLevel,
    ControlCommand,
    NextStep,
    Pause,
    Resume,
    SetAuto,
    SetLevel,
    SetMode,
    SetRate,
    Stop,
)
from loadgen.snapshot import (
    SLO,
    ClientHealth,
    GPUSample,
    HistogramView,
    Percentiles,
    SeriesPoint,
    ServerTelemetry,
    SLOVerdict,
    Snapshot,
    StepSummary,
    WindowStats,
)
from tui.app import RampApp
from tui.panel import SnapshotPanel


def text_of(panel: SnapshotPanel) -> str:
    """What the panel draws, as plain text, with its border titles."""
    rendered = panel.render()
    if isinstance(rendered, Text):
        body = rendered.plain
    else:
        console = Console(width=max(20, panel.size.width), record=True, file=io.StringIO())
        console.print(rendered)
        body = console.export_text()
    return f"{panel.border_title}\n{body}\n{panel.border_subtitle}"


def lognormal_bins(
    median: float, sigma: float, count: int, lo: float, hi: float, ratio: float = 1.15
) -> tuple[tuple[float, float, int], ...]:
    """Log-spaced bins holding ``count`` samples of a log-normal shape (integers, deterministic)."""
    bins = []
    low = lo
    while low < hi:
        high = low * ratio
        centre = math.sqrt(low * high)
        density = math.exp(-((math.log(centre) - math.log(median)) ** 2) / (2 * sigma**2))
        bins.append((low, high, density))
        low = high
    total = sum(d for _, _, d in bins)
    return tuple((a, b, int(round(count * d / total))) for a, b, d in bins)


def hist(
    metric: str, unit: str, median: float, sigma: float, count: int, lo: float, hi: float
) -> HistogramView:
    spread = math.exp(sigma)
    pct = Percentiles(
        count=count,
        mean=median * math.exp(sigma**2 / 2),
        p50=median,
        p90=median * spread**1.28,
        p95=median * spread**1.645,
        p99=median * spread**2.326,
        p999=median * spread**3.09,
        max=median * spread**3.3,
        min=median / spread**3,
    )
    return HistogramView(metric, unit, pct, lognormal_bins(median, sigma, count, lo, hi))


def window(
    name: str, scale: float, *, errors: dict[str, int] | None = None, ttft_median: float = 180.0
) -> WindowStats:
    count = int(2000 * scale)
    return WindowStats(
        window=name,
        duration_s=30.0 * scale,
        ok=count,
        errors=errors or {},
        input_tokens=count * 512,
        output_tokens=count * 256,
        cached_tokens=count * 100,
        out_tok_s=4812.5,
        prefill_tok_s=9625.0,
        req_s=18.8,
        hist={
            "ttft_ms": hist("ttft_ms", "ms", ttft_median, 0.45, count, 20.0, 5000.0),
            "itl_ms": hist("itl_ms", "ms", 14.0, 0.25, count * 50, 2.0, 200.0),
            "decode_tok_s": hist("decode_tok_s", "tok/s", 68.0, 0.18, count, 10.0, 300.0),
            "e2e_ms": hist("e2e_ms", "ms", 3900.0, 0.3, count, 500.0, 30000.0),
            "lag_ms": hist("lag_ms", "ms", 0.3, 0.6, count, 0.01, 20.0),
        },
    )


def step(index: int, level: int, out_tok_s: float, ttft_p50: float, met: bool | None) -> StepSummary:
    stats = replace(window("step", 1.0, ttft_median=ttft_p50), out_tok_s=out_tok_s, req_s=out_tok_s / 256)
    failures = () if met else (f"ttft p95 {ttft_p50 * 2.1:.0f} ms > 500 ms",)
    return StepSummary(
        index=index,
        mode="closed",
        level=level,
        rate_rps=None,
        arrival="closed",
        warmup_s=5.0,
        window_s=25.0,
        duration_s=30.0,
        stats=stats,
        verdict=SLOVerdict(met, failures),
        client_bound=False,
    )


STEPS = (
    step(0, 8, 1480.0, 95.0, True),
    step(1, 16, 2710.0, 120.0, True),
    step(2, 32, 4390.0, 210.0, True),
    step(3, 64, 5020.0, 460.0, False),
)


def series(points: int = 150) -> tuple[SeriesPoint, ...]:
    """A run of 4 steps of 30 s with throughput that rises per step and wiggles deterministically."""
    out = []
    for i in range(points):
        t = float(i)
        level_index = min(4, i // 30)
        level = 8 * 2**level_index
        base = (1480.0, 2710.0, 4390.0, 5020.0, 4812.0)[level_index]
        wiggle = 1 + 0.05 * math.sin(i * 0.7)
        ramp = min(1.0, (i % 30 + 1) / 5)  # each step starts from a dip
        out_tok_s = base * wiggle * (0.6 + 0.4 * ramp)
        out.append(SeriesPoint(t, out_tok_s, out_tok_s * 2, out_tok_s / 256, min(level, 60), level))
    return tuple(out)


def server_telemetry() -> ServerTelemetry:
    """A vLLM server at 62% KV cache on one H200, every source answering."""
    return ServerTelemetry(
        runtime="vllm",
        kv_cache_usage=0.624,
        running=61.0,
        waiting=0.0,
        preemptions_per_s=0.0,
        preemptions_total=0.0,
        prefix_cache_hit_rate=0.452,
        server_ttft_ms_p50=380.0,
        server_ttft_ms_p95=610.0,
        step_ttft_ms_p50=371.0,
        step_ttft_ms_p95=598.0,
        gen_tok_s=4790.0,
        prompt_tok_s=9600.0,
        gpus=(
            GPUSample(
                0, "H200", mem_used_mib=128_000.0, mem_total_mib=143_771.0, util_pct=97.0, power_w=612.0
            ),
        ),
        sources={"vllm /metrics": "ok", "nvml": "ok"},
    )


def make_snapshot(**overrides: Any) -> Snapshot:
    """A mid-run snapshot in closed loop (step 5 of 8, level 64), with every panel populated."""
    errors = {"http_429": 3, "stream_cut": 1}
    values: dict[str, Any] = dict(
        seq=1,
        elapsed_s=150.0,
        state="running",
        url="http://127.0.0.1:8000/v1",
        model="meta-llama/Llama-3.1-8B-Instruct",
        runtime="vllm",
        runtime_version="0.8.5",
        profile="chat-short",
        mode="closed",
        level=64,
        rate_rps=None,
        achieved_rps=None,
        arrival="closed",
        paused=False,
        auto_ramp=True,
        step_index=4,
        step_count=8,
        step_elapsed_s=30.0,
        step_remaining_s=12.0,
        warming_up=False,
        in_flight=61,
        queued=0,
        windows={
            "step": window("step", 0.4, errors={"http_429": 1}, ttft_median=420.0),
            "rolling": window("rolling", 0.3, errors={"http_429": 1}, ttft_median=430.0),
            "run": window("run", 4.0, errors=errors, ttft_median=200.0),
        },
        rolling_s=10.0,
        series=series(),
        step_starts_s=(0.0, 30.0, 60.0, 90.0, 120.0),
        steps=STEPS,
        best_step=2,
        slo=SLO(ttft_p95_ms=500.0, decode_p50_tok_s=40.0, e2e_p95_s=8.0, max_error_rate=0.01),
        health=ClientHealth(loop_lag_ms_p99=0.8, loop_lag_ms_max=3.1, cpu_pct=(41.0,)),
        recent_errors=(
            "HTTP 429 Too Many Requests: rate limit exceeded (step 4)",
            "stream cut after 112 tokens: connection reset by peer",
        ),
        server=server_telemetry(),
        record_path="runs/ramp-demo.jsonl",
        marks=((75.0, "bumped max_num_seqs"),),
        next_load=128.0,  # the plan's next level
    )
    values.update(overrides)
    return Snapshot(**values)


def command_name(cmd: ControlCommand) -> str:
    """``SetLevel(8)`` → ``set_level``: the name a test looks for in ``FakeEngine.calls``."""
    name = type(cmd).__name__
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


class ScriptedEngine:
    """Hands out the given snapshots, one per wait, then the outcome (``loadgen.cli.headless.WatchedRun``)."""

    def __init__(self, snaps: list[Snapshot], outcome: RunOutcome) -> None:
        self.snaps: Iterator[Snapshot] = iter(snaps)
        self.current: Snapshot | None = None
        self.outcome = outcome
        self.stopped = False

    def wait(self, timeout: float | None = None) -> RunOutcome | None:
        self.current = next(self.snaps, None)
        return self.outcome if self.current is None else None

    def latest(self) -> Snapshot | None:
        return self.current

    def stop(self, cancel: bool = True) -> None:
        self.stopped = True

    def interrupt(self, signum: int) -> None:
        pass


class FakeEngine:
    """Records every command; keeps a little state so that snapshots reflect commands like the real
    engine's would, and publishes a new snapshot through ``on_snapshot`` after each command."""

    def __init__(
        self, snapshot: Snapshot | None = None, on_snapshot: Callable[[Snapshot], None] | None = None
    ) -> None:
        self.calls: list[
            tuple[str, tuple[Any, ...]]
        ] = []  # every call, commands by name: ("set_level", (8,))
        self.commands: list[ControlCommand] = []  # every command sent, as the value sent
        self.on_snapshot = on_snapshot
        self.snapshot = snapshot or make_snapshot()
        self.started = threading.Event()
        self.stopped = threading.Event()
        self.hang_on_wait = False  # simulate an engine that does not finish in time

    # lifecycle
    def start(self) -> None:
        self.calls.append(("start", ()))
        self.started.set()
        self.publish()

    def wait(self, timeout: float | None = None) -> None:
        self.calls.append(("wait", (timeout,)))
        if not self.hang_on_wait:
            self.stopped.wait(timeout)

    def stop(self, cancel: bool = True) -> None:
        self.calls.append(("stop", (cancel,)))
        self._update(state="stopped")
        self.stopped.set()

    def interrupt(self, signum: int) -> None:
        self.calls.append(("interrupt", (signum,)))
        self.stop(cancel=True)

    def latest(self) -> Snapshot | None:
        return self.snapshot

    @property
    def done(self) -> bool:
        return self.stopped.is_set()

    # commands
    def send(self, cmd: ControlCommand) -> None:
        """Keep ``cmd`` (tests assert on the values), log it by name, and show what the engine would."""
        self.commands.append(cmd)
        self.calls.append((command_name(cmd), astuple(cmd)))
        snap = self.snapshot
        match cmd:
            case SetLevel(level=level):
                self._update(level=level)
            case ChangeLevel(delta=delta):
                self._update(level=max(0, snap.level + delta))
            case SetRate(rate_rps=rate):
                self._update(rate_rps=rate)
            case SetMode(mode=mode):
                self._update(mode=mode, rate_rps=snap.rate_rps or 1.0)
            case Pause():
                self._update(paused=True, state="paused")
            case Resume():
                self._update(paused=False, state="running")
            case NextStep():
                self._update(step_index=snap.step_index + 1)
            case SetAuto(on=on):
                self._update(auto_ramp=on)
            case Stop():
                self._update(state="stopped")
                self.stopped.set()

    # helpers for tests
    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def _update(self, **changes: Any) -> None:
        self.snapshot = replace(self.snapshot, seq=self.snapshot.seq + 1, **changes)
        self.publish()

    def publish(self) -> None:
        if self.on_snapshot is not None:
            self.on_snapshot(self.snapshot)

    def publish_from_thread(self, snapshot: Snapshot) -> None:
        """Deliver ``snapshot`` the way the real engine does: from another thread."""
        self.snapshot = snapshot
        thread = threading.Thread(target=self.publish, name="fake-engine")
        thread.start()
        thread.join(timeout=5)


def judged_steps() -> tuple[StepSummary, ...]:
    """Steps whose verdicts stand on something to show: a client-bound step, one cut by a manual change
    (23 % of its requests ran into the next load), one missing the SLO on ITL p99, and a clean best."""
    server = {
        "server_ttft_p50_ms": 402.0,
        "server_ttft_p95_ms": 655.0,
        "kv_usage_max": 0.71,
        "preemptions": 0.0,
    }
    return (
        STEPS[0],
        replace(
            STEPS[1],
            client_bound=True,
            bound_reason="worker event loop lag over 5 ms in 3% of samples, max 21 ms: timings may read high",
        ),
        replace(STEPS[2], closing_s=2.4, server=server, marks=("bumped max_num_seqs",)),
        replace(STEPS[3], carried_share=0.23, ended_by="level"),
        replace(
            step(4, 128, 5110.0, 470.0, False),
            verdict=SLOVerdict(False, ("ITL p99 128 ms > 100 ms", "TTFT p95 985 ms > 500 ms")),
            stats=replace(
                step(4, 128, 5110.0, 470.0, False).stats, errors={"http_status": 2, "stream_cut": 1}
            ),
        ),
    )


def make_app(**changes: Any) -> tuple[RampApp, FakeEngine]:
    """A console on a ``FakeEngine`` that serves ``make_snapshot(**changes)``."""
    app = RampApp(refresh_hz=4.0)
    engine = FakeEngine(make_snapshot(**changes), on_snapshot=app.snapshot_callback)
    app.attach(engine)
    return app, engine
