"""The real ``ramp`` command in a subprocess: profiles, usage errors, an unreachable target, headless runs
with their exit codes and records, Ctrl-C in the middle of a run, and the API key kept out of every output."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from ramp_cli import ramp as run_ramp

from loadgen.record import read_record

SECRET = "sk-secret-test-0123456789"
SMALL = """
name = "cli-small"
[[bucket]]
input = 16
output = 16
[sampling]
ignore_eos = true
[slo]
ttft_p95_ms = {ttft}
"""


ramp = partial(run_ramp, api_key=SECRET)


def no_secret(*texts: str) -> None:
    for text in texts:
        assert SECRET not in text


pytestmark = pytest.mark.sim("h200-llama8b", seed=9, process=True)


def small_profile(tmp_path: Path, ttft_ms: float = 5000) -> str:
    path = tmp_path / "small.toml"
    path.write_text(SMALL.format(ttft=ttft_ms))
    return str(path)


def test_profiles_lists_the_builtins() -> None:
    proc = ramp("profiles")
    assert proc.returncode == 0, proc.stderr
    names = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    assert {"chat", "decode-heavy", "rag-prefill-heavy"} <= set(names)


def test_profiles_show_prints_the_toml() -> None:
    proc = ramp("profiles", "show", "chat")
    assert proc.returncode == 0, proc.stderr
    assert 'name = "chat"' in proc.stdout and "[[bucket]]" in proc.stdout


def test_bad_profile_is_one_line_naming_file_line_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\n\n[[bucket]]\ninput = "lots"\noutput = 16\n')
    proc = ramp("run", "http://127.0.0.1:9", "--headless", "--profile", str(bad))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "bad.toml:4" in lines[0] and "input" in lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout


def test_unreachable_target_exits_3(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    proc = ramp("run", url, "--headless", "--steps", "1", "--out", str(tmp_path / "r.jsonl"), timeout=60)
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert f"127.0.0.1:{port}" in proc.stderr and "Traceback" not in proc.stderr
    no_secret(proc.stdout, proc.stderr)


def test_headless_run_then_report(sim: Any, tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    args = ["--steps", "1,2", "--step-seconds", "1.2", "--warmup", "0.2", "--no-metrics"]
    proc = ramp("run", sim.url, "--headless", "--profile", small_profile(tmp_path), *args, "--out", str(out))
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    record = read_record(out)
    assert [s["level"] for s in record.steps] == [1, 2]
    assert record.events[-1]["kind"] == "end" and record.events[-1]["state"] == "finished"
    report = ramp("report", str(out))
    assert report.returncode == 0, report.stderr
    table = report.stdout
    assert "TTFT" in table.upper() and len([ln for ln in table.splitlines() if ln.strip()]) >= 3
    no_secret(proc.stdout, proc.stderr, out.read_text(), report.stdout)


def test_impossible_slo_exits_1(sim: Any, tmp_path: Path) -> None:
    out = tmp_path / "slo.jsonl"
    profile = small_profile(tmp_path, ttft_ms=0.001)
    args = ["--steps", "1", "--step-seconds", "1.2", "--warmup", "0", "--no-metrics", "--out", str(out)]
    proc = ramp("run", sim.url, "--headless", "--profile", profile, *args)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    (step,) = read_record(out).steps
    assert step["slo_met"] is False and step["slo_failures"]


def test_ctrl_c_keeps_finished_steps_and_ends_the_record(sim: Any, tmp_path: Path) -> None:
    out = tmp_path / "interrupted.jsonl"
    args = ["--steps", "1,2,4,8", "--step-seconds", "1.2", "--warmup", "0", "--no-metrics", "--out", str(out)]
    env = dict(os.environ, OPENAI_API_KEY=SECRET)
    cmd = [
        sys.executable,
        "-m",
        "loadgen.cli",
        "run",
        sim.url,
        "--headless",
        "--profile",
        small_profile(tmp_path),
    ]
    proc = subprocess.Popen(cmd + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if out.exists() and '"type":"step"' in out.read_text():
                break
            time.sleep(0.05)  # polling a file with a deadline: there is nothing to wait on across processes
        assert proc.poll() is None, "the run ended before it could be interrupted"
        assert '"type":"step"' in out.read_text(), "no step finished within 60 s"
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "Traceback" not in stderr, stderr
    assert "Ctrl-C" in stderr
    record = read_record(out)
    assert not record.truncated
    assert len(record.steps) >= 1 and record.steps[0]["level"] == 1
    assert all(s["ended_by"] in ("plan", "stop") for s in record.steps)
    end = record.events[-1]
    assert end["kind"] == "end" and end["state"] == "stopped" and end["steps"] == len(record.steps)
    no_secret(stdout, stderr, out.read_text())


OPEN_PROFILE = """
name = "cli-open"
[[bucket]]
input = 16
output = 16
[sampling]
ignore_eos = true
[ramp]
mode = "open"
levels = [2, 4]
step_seconds = 1.5
warmup_seconds = 0.2
"""


def test_a_profile_in_open_mode_ramps_rates(sim: Any, tmp_path: Path) -> None:
    profile = tmp_path / "open.toml"
    profile.write_text(OPEN_PROFILE)
    out = tmp_path / "open.jsonl"
    args = ["--arrival", "constant", "--no-metrics", "--out", str(out)]
    proc = ramp("run", sim.url, "--headless", "--profile", str(profile), *args)
    assert proc.returncode in (0, 1), (proc.stdout, proc.stderr)
    record = read_record(out)
    assert record.header["mode"] == "open"
    assert [(s["mode"], s["rate_rps"]) for s in record.steps] == [("open", 2.0), ("open", 4.0)]
    assert all(s["ok"] > 0 for s in record.steps)


def test_version() -> None:
    from loadgen import __version__

    proc = ramp("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"ramp {__version__}"


def ramp_into_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    """``ramp ARGS | head -0``, made certain: the reading end is closed before ramp writes a byte."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "loadgen.cli", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)


def test_output_into_a_closed_pipe_exits_0_without_a_traceback(tmp_path: Path) -> None:
    from loadgen.record import RecordWriter

    record = tmp_path / "header-only.jsonl"
    with RecordWriter(record) as writer:
        writer.write_header({"model": "m", "profile": "p", "target_url": "http://127.0.0.1:1"})
    for args in (("profiles",), ("profiles", "show", "chat"), ("report", str(record))):
        proc = ramp_into_closed_pipe(*args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, (args, proc.stderr)


def test_ramp_sim_takes_every_simulator_flag(tmp_path: Path) -> None:
    """`ramp sim` passes the engine flags on (the README's spec-decoding comparison needs them)."""
    import httpx

    proc = subprocess.Popen(
        [sys.executable, "-m", "loadgen.cli", "sim", "--preset", "tiny-cpu", "--model", "m", "--port", "0",
         "--num-speculative-tokens", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline().split()
        assert ready[0] == "READY", ready
        url = ready[1]
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
        assert httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30).status_code == 200
        metrics = httpx.get(f"{url}/metrics", timeout=30).text
        drafts = [ln for ln in metrics.splitlines() if ln.startswith("vllm:spec_decode_num_drafts")]
        assert drafts and float(drafts[0].split()[-1]) > 0, drafts
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    bad = subprocess.run(
        [sys.executable, "-m", "loadgen.cli", "sim", "--no-such-flag"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "--no-such-flag" in bad.stderr
