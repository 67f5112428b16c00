"""Every failure kind through the whole engine: the simulator injects it into a share of the requests, the
client classifies it, the worker counts it, the step and the record show it under the right kind, and the
run goes on (successes keep coming)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from snapshot_watch import Watch

from loadgen.profile import parse_profile
from loadgen.record import read_record
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.sim import build_config, run_sim_in_thread, spawn_sim_process
from loadgen.snapshot import Snapshot
from loadgen.types import Target

PROFILE = parse_profile(
    "[[bucket]]\ninput = 16\noutput = 16\n[sampling]\nignore_eos = true\n", source="<faults>"
)


def _step_has(kind: str, errors: int = 2, ok: int = 2) -> Callable[[Snapshot], bool]:
    def pred(s: Snapshot) -> bool:
        w = s.windows["step"]
        # A step shorter than a second is not reported: hold it at least that long.
        return w.errors.get(kind, 0) >= errors and w.ok >= ok and s.step_elapsed_s >= 1.1

    return pred


def _run_until(
    target: Target, out: Path, kind: str, level: int = 4, on_running: Any = None
) -> dict[str, Any]:
    watch = Watch()
    engine = Engine(
        RunConfig(target=target, profile=PROFILE, level=level, out=str(out), warmup_s=0.0), on_snapshot=watch
    )
    engine.start()
    try:
        if on_running is not None:
            watch.until(lambda s: s.windows["step"].ok >= 2, 20, "first successes")
            on_running()
        snap = watch.until(_step_has(kind), 20, f"{kind} errors and successes in the step")
        assert snap.state == "running", "the run must go on through the failures"
        assert any(e.startswith(kind) for e in snap.recent_errors), snap.recent_errors
    finally:
        engine.stop(cancel=True)
        outcome = engine.wait(30)
    assert outcome is not None and outcome.state == "stopped", outcome
    steps = read_record(out).steps
    assert len(steps) == 1
    return steps[0]


FAULTS = {
    # kind counted: (simulator fault settings, target timeouts)
    "http_status": ({"error_rate": 0.3}, {}),
    "http_429": ({"rate_429": 0.3}, {}),
    "idle_timeout": ({"stall_rate": 0.3, "stall_s": 3.0, "stall_after_tokens": 3}, {"idle_timeout_s": 0.3}),
    "stream_cut": ({"disconnect_rate": 0.3, "disconnect_after_tokens": 3}, {}),
    "malformed": ({"malformed_rate": 0.3, "malformed_after_tokens": 2}, {}),
    "empty_output": ({"empty_rate": 0.3}, {}),
    "ttft_timeout": ({"slow_ttft_rate": 0.3, "slow_ttft_s": 3.0}, {"ttft_timeout_s": 0.3}),
}


@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_fault_is_counted_under_its_kind(kind: str, tmp_path: Path) -> None:
    faults, timeouts = FAULTS[kind]
    sim = run_sim_in_thread(build_config("h200-llama8b", seed=11, **faults))
    try:
        target = replace(Target(url=sim.url), **timeouts)
        step = _run_until(target, tmp_path / "run.jsonl", kind)
    finally:
        sim.stop()
    assert step["errors"].get(kind, 0) >= 2, step["errors"]
    assert set(step["errors"]) == {kind}, f"other kinds counted too: {step['errors']}"
    assert step["ok"] >= 2 and 0 < step["success_rate"] < 1
    assert step["cancelled"] >= 0 and step["error_count"] == sum(step["errors"].values())
    # Failed requests never count toward the tokens or latencies of the successes.
    assert step["output_tokens"] == 16 * step["ok"]
    assert step["ttft_ms"]["p50"] is not None


def test_connection_refused_is_counted_as_connect(tmp_path: Path) -> None:
    sim = spawn_sim_process(build_config("h200-llama8b", seed=12))
    try:
        # The server dies mid-run (SIGKILL: the kernel closes its sockets at once): a stream in flight is cut,
        # every later connection is refused.
        step = _run_until(
            Target(url=sim.url), tmp_path / "run.jsonl", "connect", level=1, on_running=sim.proc.kill
        )
    finally:
        sim.stop()
    print("errors after the server died:", step["errors"], "ok:", step["ok"], "window_s:", step["window_s"])
    assert step["errors"]["connect"] >= 2
    assert set(step["errors"]) <= {"connect", "stream_cut"}, step["errors"]
    assert step["ok"] >= 2
