"""Running the simulator beside a caller: in a thread, in a child process, and from its command line."""

from __future__ import annotations

import httpx
import pytest

from loadgen.sim import build_config, run_sim_in_thread, spawn_sim_process
from loadgen.sim.__main__ import main

BODY = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 5, "ignore_eos": True}


def test_run_sim_in_thread_serves_and_keeps_ground_truth() -> None:
    with run_sim_in_thread(build_config("fast", seed=2)) as sim:
        r = httpx.post(sim.url + "/v1/chat/completions", json=BODY, timeout=10)
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 5
        (truth,) = sim.ground_truth()
        assert truth["output_tokens"] == 5 and truth["status"] == 200
        assert sim.info()["preset"] == "fast"


def test_spawn_sim_process_runs_the_cli_with_the_same_config() -> None:
    config = build_config("tiny-cpu", seed=3, model="other-model", max_num_seqs=4)
    sim = spawn_sim_process(config)
    try:
        assert sim.url.startswith("http://127.0.0.1:")
        r = httpx.post(sim.url + "/v1/chat/completions", json={**BODY, "model": "other-model"}, timeout=10)
        assert r.status_code == 200
        assert sim.ground_truth()[0]["output_tokens"] == 5
        assert sim.info()["config"]["engine"]["max_num_seqs"] == 4
    finally:
        sim.stop()
    assert sim.proc.returncode == 0  # SIGTERM ends it cleanly


def test_cli_refuses_bad_settings_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--preset", "tiny-cpu", "--speed", "-1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ramp sim: error:") and "speed" in err and "\n" not in err
