"""Issue 20, case 8: the workers' logs go to a private folder per run (``mkdtemp``, mode 0700), not to
predictable names in the shared temp dir; a run that did not fail leaves nothing behind, one whose worker
died keeps the folder and names the log in its error."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

from fault_servers import answering

PROFILE = "[[bucket]]\ninput = 8\noutput = 2\n"


def start(url: str, tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], Path]:
    temp = tmp_path / "tmp"
    temp.mkdir()
    profile = tmp_path / "tiny.toml"
    profile.write_text(PROFILE)
    env = dict(os.environ, TMPDIR=str(temp), OPENAI_API_KEY="")
    cmd = [
        sys.executable,
        "-m",
        "loadgen.cli",
        "run",
        url,
        "--headless",
        "--no-metrics",
        "--profile",
        str(profile),
    ]
    proc = subprocess.Popen(
        [*cmd, "--warmup", "0", *args, "--out", str(tmp_path / "r.jsonl")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    return proc, temp


def ramp_entries(temp: Path) -> list[Path]:
    return sorted(p for p in temp.iterdir() if p.name.startswith("ramp"))


def test_a_run_that_did_not_fail_leaves_no_log_behind(tmp_path: Path) -> None:
    server = answering()
    try:
        proc, temp = start(server.url, tmp_path, "--steps", "1,2", "--step-seconds", "1", "--workers", "2")
        seen: set[tuple[str, int]] = set()
        while proc.poll() is None:  # while it runs: its folder is private
            seen |= {(p.name, stat.S_IMODE(p.stat().st_mode)) for p in ramp_entries(temp) if p.is_dir()}
            time.sleep(0.05)  # polling a folder's listing, not synchronising on it
        out, err = proc.communicate()
    finally:
        server.stop()
    assert proc.returncode in (0, 1), err
    assert seen and all(name.startswith("ramp-run-") and mode == 0o700 for name, mode in seen), seen
    assert ramp_entries(temp) == [], ramp_entries(temp)


def worker_pids(pid: int) -> list[int]:
    found = []
    children = [
        c for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()
    ]
    for child in children:
        cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        if b"spawn_main" in cmdline and b"resource_tracker" not in cmdline:
            found.append(int(child))
    return found


def test_a_run_whose_worker_died_keeps_its_logs_and_names_them(tmp_path: Path) -> None:
    server = answering()
    try:
        proc, temp = start(server.url, tmp_path, "--steps", "1", "--step-seconds", "30")
        deadline = time.monotonic() + 30
        while not worker_pids(proc.pid) or not server.requests("/v1/chat/completions"):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        (worker,) = worker_pids(proc.pid)
        os.kill(worker, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        server.stop()
    (folder,) = ramp_entries(temp)
    assert folder.name.startswith("ramp-run-") and stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert f"{folder}/worker-0.log" in err, err
