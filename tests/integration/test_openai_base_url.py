"""``OPENAI_BASE_URL`` (the OpenAI SDK's convention, ``/v1`` included) is the target of a ``ramp run`` given
no URL, and the run's first line says so; with neither, the usage error names it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from loadgen.record import read_record
from loadgen.sim import build_config, spawn_sim_process


def test_a_run_without_a_url_ramps_openai_base_url(tmp_path: Path) -> None:
    out = tmp_path / "env.jsonl"
    # --seed 1: a fresh seed drew, 1 run in 12, two replies longer than the step, which then had no request of
    # its own (as test_no_terminal once did); seed 1 draws 3 requests inside the step.
    args = ["run", "--headless", "--steps", "2", "--step-seconds", "3", "--warmup", "0.5", "--no-metrics", "--seed", "1"]  # fmt: skip
    with spawn_sim_process(build_config("fast")) as sim:
        env = dict(os.environ, OPENAI_BASE_URL=sim.url + "/v1")
        proc = subprocess.run(
            [sys.executable, "-m", "loadgen.cli", *args, "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=90,
            env=env,
        )
    assert proc.stderr.splitlines()[0] == f"ramp: target {sim.url}/v1 (from OPENAI_BASE_URL)"
    record = read_record(out)
    (step,) = record.steps
    assert proc.returncode == (0 if step["slo_met"] else 1) and step["ok"] > 0
    assert str(record.header["target_url"]).startswith(sim.url)


def test_no_url_and_no_openai_base_url_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    proc = subprocess.run(
        [sys.executable, "-m", "loadgen.cli", "run", "--headless", "--steps", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and "OPENAI_BASE_URL" in proc.stderr and "Traceback" not in proc.stderr
