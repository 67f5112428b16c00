"""``ramp run --headless --find-max`` on what it cannot answer (issue 32): a range whose low end already
misses, a server that fails every request, an SLO that judges nothing. Each ends in one line naming what to
change, exit 2 (the range or the SLO) or 3 (the server), and a valid record holding the search's probes.
The server is the steep simulator of tests/integration/test_search.py (the knee of "decode p50 >= 105 tok/s" is 8
streams)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen.cli.commands import main
from loadgen.record import read_record
from loadgen.sim import SimHandle, build_config, spawn_sim_process
from loadgen.sim.handle import ProcessSimHandle
from loadgen.sim.params import StepCost

STEEP = StepCost(2.0, 1.0, 0.0, ((0, 0.5), (128, 1.0)), spec_draft_ms=0.5)
SIM = {"seed": 3, "max_num_seqs": 256, "cost": STEEP, "kv_capacity_tokens": 1 << 22, "max_model_len": 4096}
pytestmark = pytest.mark.sim("tiny-cpu", **SIM, process=True)


def profile(tmp_path: Path, slo: str) -> Path:
    path = tmp_path / "steep.toml"
    path.write_text(
        f'name = "steep"\n[[bucket]]\ninput = 16\noutput = 50\n[sampling]\nignore_eos = true\n[slo]\n{slo}\n'
    )
    return path


def search(
    sim: SimHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str], slo: str, bounds: str, *more: str
) -> tuple[int, str, list[dict[str, object]]]:
    out = tmp_path / "run.jsonl"
    code = main(
        [
            "run", sim.url, "--headless", "--profile", str(profile(tmp_path, slo)), "--find-max", bounds,
            "--step-seconds", "2", "--warmup", "0.3", "--out", str(out), "--no-metrics", *more,
        ]
    )  # fmt: skip
    ramp_lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("ramp: ")]
    record = read_record(out)  # valid: read back whole
    events = [e for e in record.events if e.get("kind") == "find_max"]
    assert len(events) == 1 and events[0]["probes"], events
    return code, ramp_lines[-1], events


def test_a_range_whose_low_end_misses_says_so_in_one_line_and_exits_2(
    sim: ProcessSimHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, line, events = search(sim, tmp_path, capsys, "decode_p50_tok_s = 105", "20:32")
    assert code == 2, line
    assert line.startswith(
        "ramp: --find-max 20:32 cannot be met: even 20 streams misses the SLO (decode p50"
    ), line
    assert "lower the range's low end" in line
    levels = [p["level"] for p in events[0]["probes"]]  # bisected down from the middle: 26, 23, 21, 20
    assert levels[-1] == 20.0 and min(levels) == 20.0 and not any(p["met"] for p in events[0]["probes"])


def test_a_server_failing_every_request_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failing = spawn_sim_process(build_config("tiny-cpu", **SIM, error_rate=1.0))  # type: ignore[arg-type]
    try:
        code, line, _ = search(failing, tmp_path, capsys, "ttft_p95_ms = 500", "1:8")
    finally:
        failing.stop()
    assert code == 3, line
    assert "answered no request successfully at any level probed (1, 2, 4 streams)" in line, line
    assert "ramp check" in line


def test_a_server_failing_every_request_in_open_loop_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same over a rate: the low bound fails every request, so nothing above it is probed."""
    failing = spawn_sim_process(build_config("tiny-cpu", **SIM, error_rate=1.0))  # type: ignore[arg-type]
    try:
        code, line, events = search(failing, tmp_path, capsys, "ttft_p95_ms = 500", "2:8", "--open-loop")
    finally:
        failing.stop()
    assert code == 3, line
    assert "answered no request successfully at any level probed (2 req/s)" in line, line
    assert {p["level"] for p in events[0]["probes"]} == {2.0}  # type: ignore[union-attr]


def test_find_max_without_an_slo_is_refused_before_the_run(
    sim: ProcessSimHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = tmp_path / "bare.toml"
    bare.write_text('name = "bare"\n[[bucket]]\ninput = 16\noutput = 50\n')
    out = tmp_path / "run.jsonl"
    code = main(
        ["run", sim.url, "--headless", "--profile", str(bare), "--find-max", "1:8", "--out", str(out)]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "--find-max needs an SLO to meet: profile 'bare' has no [slo] table" in err, err
    assert not out.exists()  # refused before the run: no record


def test_an_slo_that_judges_nothing_exits_2(
    sim: ProcessSimHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # TTFTC is judged over the requests that call a tool: this profile has none, so the clause is n/a
    code, line, _ = search(sim, tmp_path, capsys, "ttftc_p95_ms = 500", "1:8")
    assert code == 2, line
    assert "the SLO judged nothing at any level probed" in line and "n/a" in line


def test_a_client_too_weak_for_the_range_says_add_workers_and_exits_2(
    sim: ProcessSimHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every step client-bound (the CPU threshold below any reading): 11 streams, the middle of 2:20, miss
    "decode p50 >= 105 tok/s" by about 20 % (about 1000 / 12 = 83 tok/s), a miss a faster client could flip.
    Probed again, still so: the search stops there with one line, exit 2, the record holding both probes."""
    monkeypatch.setattr("loadgen.run.health.CLIENT_BOUND_CPU_PCT", -1.0)
    code, line, events = search(sim, tmp_path, capsys, "decode_p50_tok_s = 105", "2:20")
    assert code == 2, line
    assert line.startswith(
        "ramp: find-max: the client is the limit at 11 streams: add --workers (or a bigger machine) before "
        "probing further (step 2: load worker at"
    ), line
    probes = events[0]["probes"]
    assert [(p["level"], p["met"], p["client_bound"]) for p in probes] == [(11.0, False, True)] * 2, probes
    assert "client-bound" in probes[1]["why"]
    limit = events[0]["client_limit"]
    assert limit["level"] == 11.0 and limit["step"] == 2 and -0.5 < limit["margin"] < 0, limit
    assert "CPU" in limit["reason"]
