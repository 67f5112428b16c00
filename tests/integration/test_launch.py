"""``ramp launch`` and ``loadgen.serverproc`` against stand-in servers (tests/vllm/fake_server.py).

SGLang cannot run on these CPU machines and vLLM is slow to start, so everything here runs the real
command lines (``python -m vllm.entrypoints.openai.api_server ...``, ``python -m sglang.launch_server ...``)
against fake modules of those names put on the child's PYTHONPATH: health handling, cold-start figures,
port clashes, a server that exits, Ctrl-C and SIGTERM, a server dying under load. The real vLLM is
exercised in tests/e2e/test_vllm_real.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from loadgen.childproc import own_process_group
from loadgen.record import read_record
from loadgen.serverproc import LaunchError, launch_and_wait, launch_server, redact_argv, server_argv

ROOT = Path(__file__).resolve().parents[2]
FAKES = ROOT / "tests" / "vllm" / "fake_pkgs"

pytestmark = pytest.mark.timeout(120)


def fake_env(**extra: object) -> dict[str, str]:
    env = {"PYTHONPATH": os.pathsep.join([str(FAKES), str(ROOT)])}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def wait_for(cond: Callable[[], object], timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill 0; it is gone for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


# ---- command lines ------------------------------------------------------------------------------


def test_server_argv_vllm_and_sglang() -> None:
    assert server_argv("vllm", "/m/tiny", ["--enforce-eager"], "/py", "127.0.0.1", 8123) == [
        "/py", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m/tiny",
        "--host", "127.0.0.1", "--port", "8123", "--enforce-eager",
    ]  # fmt: skip
    assert server_argv("sglang", "org/model", ["--tp", "2"], "/py", "0.0.0.0", 30000) == [
        "/py", "-m", "sglang.launch_server", "--model-path", "org/model",
        "--host", "0.0.0.0", "--port", "30000", "--tp", "2",
    ]  # fmt: skip


@pytest.mark.parametrize("extra", [["--port", "9"], ["--port=9"], ["--host", "x"], ["--model", "other"]])
def test_server_argv_refuses_what_ramp_owns(extra: list[str]) -> None:
    with pytest.raises(LaunchError, match="set by ramp launch"):
        server_argv("vllm", "m", extra, "/py", "127.0.0.1", 1)


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(LaunchError, match="vllm, sglang"):
        server_argv("tgi", "m", [], "/py", "127.0.0.1", 1)


def test_redact_argv_hides_secret_values() -> None:
    argv = ["py", "--api-key", "sk-very-secret", "--hf-token=hf_abcdefgh", "--max-model-len", "2048"]
    assert redact_argv(argv) == ["py", "--api-key", "***", "--hf-token=***", "--max-model-len", "2048"]


# ---- health, first token, stop ------------------------------------------------------------------


def test_sglang_command_line_health_wait_and_stop(tmp_path: Path) -> None:
    progress: list[tuple[float, str]] = []
    log = tmp_path / "server.log"
    srv = launch_and_wait(
        "sglang",
        "org/tiny",
        ["--mem-fraction-static", "0.5", "--api-key", "sk-secret-value-123"],
        env=fake_env(FAKE_DELAY_S=1.0),
        log_path=str(log),
        timeout=60,
        progress_cb=lambda t, line: progress.append((t, line)),
    )
    try:
        # /health said 503 for a second before it said 200: the wait saw both.
        assert srv.healthy_after_s is not None and srv.healthy_after_s >= 1.0
        assert progress, "the progress callback was never called while /health answered 503"
        assert srv.url == f"http://127.0.0.1:{srv.port}"
        argv_line = next(line for line in srv.tail(50) if line.startswith("FAKE-ARGV "))  # its key masked
        assert json.loads(argv_line[len("FAKE-ARGV ") :]) == [
            "--model-path", "org/tiny", "--host", "127.0.0.1", "--port", str(srv.port),
            "--mem-fraction-static", "0.5", "--api-key", "***",
        ]  # fmt: skip
        first = srv.measure_first_token()
        assert first is not None and first >= srv.healthy_after_s
        cold = srv.cold_start
        assert cold["server"] == "sglang" and cold["healthy_after_s"] == srv.healthy_after_s
        assert "sk-secret-value-123" not in cold["command"] and "--api-key '***'" in cold["command"]
        assert cold["command"].split()[1:3] == ["-m", "sglang.launch_server"]
    finally:
        code = srv.stop()
    assert code is not None and not alive(srv.pid)
    text = log.read_text()
    assert "sk-secret-value-123" not in text  # the header line the launcher writes, and the server's lines
    assert "FAKE-ARGV" in text and "fake sglang serving org/tiny" in text


def test_a_server_that_exits_before_health_is_reported_with_its_output() -> None:
    with pytest.raises(LaunchError) as err:
        launch_and_wait("vllm", "m", [], env=fake_env(FAKE_EXIT=3), timeout=60)
    msg = str(err.value)
    assert "exited with code 3" in msg and "out of memory" in msg and "/health" in msg


def test_health_timeout_stops_the_server() -> None:
    srv = launch_server("vllm", "m", [], env=fake_env(FAKE_DELAY_S=3600))
    try:
        with pytest.raises(LaunchError, match="did not answer .*/health within 1 s"):
            srv.wait_healthy(timeout=1.0)
        assert srv.poll() is None
    finally:
        srv.stop(grace=5)
    assert srv.poll() is not None and not alive(srv.pid)


def test_a_stop_cut_short_by_a_second_signal_still_kills_the_server() -> None:
    """Ctrl-C while ``stop`` waits out the grace of a server that ignores SIGTERM: the wait ends at once, and
    the server's process group is killed on the way out instead of being left running."""
    srv = launch_and_wait("vllm", "m", [], env=fake_env(FAKE_IGNORE_TERM=1), timeout=60)

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)  # well inside the grace
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            srv.stop(grace=60)
        assert time.monotonic() - started < 30
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        try:
            srv.proc.wait(timeout=10)  # SIGKILL is not ignored: it is gone within moments, if it was sent
        except subprocess.TimeoutExpired:
            os.killpg(srv.pid, signal.SIGKILL)
            srv.proc.wait(10)
            pytest.fail("the interrupted stop left the server running")
    assert srv.poll() == -signal.SIGKILL


def test_a_taken_port_is_retried_on_another(tmp_path: Path) -> None:
    marker = tmp_path / "taken-once"
    srv = launch_and_wait("vllm", "m", [], env=fake_env(FAKE_PORT_TAKEN_ONCE=marker), timeout=60)
    try:
        assert marker.exists()  # the first start hit the clash; this one is the retry
        assert httpx.get(srv.url + "/health", timeout=5).status_code == 200
    finally:
        srv.stop()


def test_a_fixed_port_that_is_taken_is_not_retried(tmp_path: Path) -> None:
    marker = tmp_path / "taken-once"
    with pytest.raises(LaunchError, match="address already in use"):
        launch_and_wait("vllm", "m", [], port=1, env=fake_env(FAKE_PORT_TAKEN_ONCE=marker), timeout=60)


# ---- ramp launch ---------------------------------------------------------------------------------

PROFILE = """
name = "launch-test"
[target]
api = "chat"
model = "auto"
[[bucket]]
input = 32
output = 8
[sampling]
ignore_eos = true
"""


def ramp(args: list[str], env: dict[str, str], tmp_path: Path) -> subprocess.Popen[str]:
    full_env = dict(os.environ)
    full_env.update(env)
    return subprocess.Popen(
        [sys.executable, "-m", "loadgen.cli", *args],
        cwd=tmp_path,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **own_process_group(),
    )


def launch_args(tmp_path: Path, *extra: str) -> list[str]:
    profile = tmp_path / "p.toml"
    profile.write_text(PROFILE)
    return [
        "launch", "vllm", "fake/tiny", "--python", sys.executable, "--headless", "--profile", str(profile),
        "--out", str(tmp_path / "run.jsonl"), *extra,
    ]  # fmt: skip


def test_ramp_launch_measures_cold_start_ramps_and_stops(tmp_path: Path) -> None:
    args = launch_args(tmp_path, "--steps", "1,2", "--step-seconds", "1.5", "--warmup", "0.3")
    proc = ramp(
        [*args, "--", "--max-model-len", "512"], fake_env(FAKE_MODE="sim", FAKE_DELAY_S=0.5), tmp_path
    )
    out, err = proc.communicate(timeout=90)
    assert proc.returncode in (0, 1), err
    rec = read_record(tmp_path / "run.jsonl")
    assert rec.header["cold_start"] is True
    assert [s["level"] for s in rec.steps] == [1, 2]
    cold = next(e for e in rec.events if e["kind"] == "cold_start")
    assert cold["server"] == "vllm" and cold["model"] == "fake/tiny"
    assert cold["healthy_after_s"] >= 0.5 and cold["first_token_after_s"] >= cold["healthy_after_s"]
    assert cold["command"].endswith("--max-model-len 512")
    assert cold["log"] == str(tmp_path / "run.vllm.log")
    assert "loading weights" in Path(cold["log"]).read_text()
    assert "healthy after" in err and "stopped the vllm server" in err
    assert not alive(int(cold["pid"]))


def test_without_out_the_server_log_is_named_for_the_record_it_sits_beside(tmp_path: Path) -> None:
    """The record's name carries the time it was named at: the flags are resolved once, before the server
    starts, so a start that takes more than a second cannot name the record after its log."""
    (tmp_path / "p.toml").write_text(PROFILE)
    runs = tmp_path / "runs"
    args = ["launch", "vllm", "fake/tiny", "--python", sys.executable, "--headless", "--profile",
            str(tmp_path / "p.toml"), "--steps", "1", "--step-seconds", "1", "--warmup", "0"]  # fmt: skip
    proc = ramp(args, fake_env(FAKE_MODE="sim", FAKE_DELAY_S=1.5, RAMP_RUNS_DIR=runs), tmp_path)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode in (0, 1), err
    (record,) = runs.glob("*.jsonl")
    cold = next(e for e in read_record(record).events if e["kind"] == "cold_start")
    assert cold["log"] == str(record.with_suffix(".vllm.log"))
    assert sorted(p.name for p in runs.iterdir()) == [record.name, record.with_suffix(".vllm.log").name]


def test_ramp_launch_reports_a_server_that_dies_mid_run(tmp_path: Path) -> None:
    args = launch_args(tmp_path, "--steps", "1,2,2", "--step-seconds", "1.5", "--warmup", "0")
    proc = ramp(args, fake_env(FAKE_MODE="sim"), tmp_path)
    record = tmp_path / "run.jsonl"
    try:
        # Kill the server as soon as the first step is in the record.
        lines = wait_for(
            lambda: record.exists() and '"type":"step"' in record.read_text() and record.read_text(),
            60,
            "the first step line",
        )
        cold = next(json.loads(x) for x in str(lines).splitlines() if '"cold_start"' in x and '"event"' in x)
        os.kill(int(cold["pid"]), signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 3, err
    assert "server process exited during the run (code -9)" in err and "killed by SIGKILL" in err
    rec = read_record(record)
    assert len(rec.steps) >= 1 and rec.steps[0]["ok"] > 0
    end = rec.events[-1]
    assert end["kind"] == "end" and end["state"] == "failed"
    marks = [e for e in rec.events if e["kind"] == "mark"]
    assert any("server process exited" in m["note"] for m in marks)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupting_ramp_while_the_server_starts_stops_it(tmp_path: Path, sig: int) -> None:
    pid_file = tmp_path / "server.pid"
    proc = ramp(launch_args(tmp_path), fake_env(FAKE_DELAY_S=3600, FAKE_PID_FILE=pid_file), tmp_path)
    try:
        server_pid = int(str(wait_for(lambda: pid_file.exists() and pid_file.read_text(), 30, "the server")))
        os.kill(proc.pid, sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + sig, err[-3000:]  # 130 for Ctrl-C, 143 for SIGTERM
    assert "interrupted while the server was starting" in err
    wait_for(lambda: not alive(server_pid), 10, "the server to be gone")


def test_a_stop_signal_whose_raise_python_swallowed_still_stops_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A signal that lands while a ``__del__`` runs raises there, and Python prints that and drops it (CI
    saw it once: the SIGINT above left ramp polling /health). The wait must end all the same, promptly,
    with the server stopped and 130."""
    from loadgen.cli.commands import main
    from loadgen.serverproc import Launched

    pid_file = tmp_path / "server.pid"
    for key, value in fake_env(FAKE_DELAY_S=3600, FAKE_PID_FILE=pid_file).items():
        monkeypatch.setenv(key, value)

    class SignalsInDel:
        def __del__(self) -> None:
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)  # this thread's
            for _ in range(100_000):  # the handler runs in here, so its raise goes nowhere
                pass

    sent: list[int] = []
    last_line = Launched.last_line

    def signal_once(self: Launched) -> str:
        if not sent and pid_file.exists():
            sent.append(int(pid_file.read_text()))
            SignalsInDel()  # made and dropped at once
        return last_line(self)

    monkeypatch.setattr(Launched, "last_line", signal_once)
    swallowed: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: swallowed.append(u.exc_value))
    started = time.monotonic()
    code = main(launch_args(tmp_path, "--health-timeout", "30"))
    err = capsys.readouterr().err
    assert sent, err
    assert [type(e).__name__ for e in swallowed] == ["Interrupted"]  # the raise was swallowed, as in CI
    assert code == 130, err[-3000:]
    assert time.monotonic() - started < 25  # not the health timeout
    assert "interrupted while the server was starting" in err
    wait_for(lambda: not alive(sent[0]), 10, "the server to be gone")


def test_ramp_launch_attach_skips_the_launch(tmp_path: Path) -> None:
    from loadgen.sim import build_config, spawn_sim_process

    (tmp_path / "p.toml").write_text(PROFILE)
    sim = spawn_sim_process(build_config("fast", seed=1))
    try:
        args = ["launch", "--attach", sim.url, "--headless", "--profile", str(tmp_path / "p.toml"),
                "--steps", "1", "--step-seconds", "1", "--warmup", "0", "--out", str(tmp_path / "a.jsonl")]  # fmt: skip
        proc = ramp(args, {}, tmp_path)
        out, err = proc.communicate(timeout=60)
    finally:
        sim.stop()
    assert proc.returncode in (0, 1), err
    rec = read_record(tmp_path / "a.jsonl")
    assert rec.header["cold_start"] is False and not [e for e in rec.events if e["kind"] == "cold_start"]


def test_ramp_launch_usage_errors(tmp_path: Path) -> None:
    for args, needle in (
        (["launch"], "ramp launch vllm|sglang MODEL"),
        (["launch", "vllm"], "ramp launch vllm|sglang MODEL"),
        (["launch", "vllm", "m", "--", "--port", "1"], "--port is set by ramp launch"),
        (["launch", "--attach", "http://127.0.0.1:1", "--", "--x"], "make no sense with --attach"),
    ):
        proc = ramp([*args, "--python", sys.executable], fake_env(), tmp_path)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode in (2, 3), (args, err)
        assert needle in err, (args, err)
        assert "Traceback" not in err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux only")
def test_a_killed_ramp_takes_its_server_down(tmp_path: Path) -> None:
    pid_file = tmp_path / "server.pid"
    proc = ramp(launch_args(tmp_path), fake_env(FAKE_DELAY_S=3600, FAKE_PID_FILE=pid_file), tmp_path)
    try:
        server_pid = int(str(wait_for(lambda: pid_file.exists() and pid_file.read_text(), 30, "the server")))
        os.kill(proc.pid, signal.SIGKILL)  # no handler runs: only the kernel can tell the server
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    wait_for(lambda: not alive(server_pid), 10, "the server to be gone")


def test_ramp_launch_serves_its_metrics_port(tmp_path: Path) -> None:
    args = launch_args(
        tmp_path, "--steps", "1", "--step-seconds", "1", "--warmup", "0", "--metrics-port", "0"
    )
    proc = ramp(
        [*args, "--", "--max-model-len", "512"], fake_env(FAKE_MODE="sim", FAKE_DELAY_S=0.1), tmp_path
    )
    out, err = proc.communicate(timeout=90)
    assert proc.returncode in (0, 1), err
    url = read_record(tmp_path / "run.jsonl").header["metrics_url"]
    assert url and url.startswith("http://127.0.0.1:") and f"ramp: metrics on {url}" in err


def _escaped_pid(pid_file: Path) -> int:
    return int(str(wait_for(lambda: pid_file.exists() and pid_file.read_text(), 30, "the escaped child")))


def test_a_server_that_ignores_term_and_left_its_group_is_said_and_ended(tmp_path: Path) -> None:
    """Issue 30: a stop waited out its grace without a word, and a child the server had set apart
    (``setsid`` and a second fork: another group, another session, handed to init) outlived the stop."""
    pid_file = tmp_path / "escaped.pid"
    env = fake_env(FAKE_IGNORE_TERM=1, FAKE_ESCAPE_PID_FILE=pid_file)
    srv = launch_and_wait("vllm", "m", [], env=env, timeout=60)
    escaped = _escaped_pid(pid_file)
    try:
        assert alive(escaped) and os.getpgid(escaped) != srv.pid and os.getsid(escaped) != os.getsid(srv.pid)
        said: list[str] = []
        assert srv.stop(grace=1, say=said.append) == -signal.SIGKILL
        assert said == [f"the vllm server (pid {srv.pid}) ignores SIGTERM; waiting 1 s then SIGKILL"]
        wait_for(lambda: not alive(escaped), 10, "the escaped child to be gone")
        assert srv.escaped_ended == 1
    finally:
        if alive(escaped):
            os.kill(escaped, signal.SIGKILL)


def test_ramp_launch_says_it_waits_on_a_server_ignoring_term_and_ends_its_escaped_child(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "escaped.pid"
    profile = tmp_path / "c.toml"
    profile.write_text(PROFILE.replace('api = "chat"', 'api = "completions"'))
    args = [
        *launch_args(tmp_path, "--steps", "1", "--step-seconds", "1", "--warmup", "0"),
        "--profile",
        str(profile),
    ]
    proc = ramp(args, fake_env(FAKE_IGNORE_TERM=1, FAKE_ESCAPE_PID_FILE=pid_file), tmp_path)
    escaped = _escaped_pid(pid_file)
    try:
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        if alive(escaped):
            os.kill(escaped, signal.SIGKILL)
            pytest.fail("the escaped child outlived ramp launch")
    assert proc.returncode in (0, 1), err
    cold = next(e for e in read_record(tmp_path / "run.jsonl").events if e["kind"] == "cold_start")
    said = f"ramp: the vllm server (pid {cold['pid']}) ignores SIGTERM; waiting 15 s then SIGKILL"
    assert said in err.splitlines(), err
    assert "ramp: ended 1 of its processes that had left its group" in err.splitlines(), err
