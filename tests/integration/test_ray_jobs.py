"""``ramp`` through Ray's Jobs API, as KubeRay's RayJob submits it (issue 30, blocker 5): a Ray head started
with ``ray start --head`` on 127.0.0.1 (free ports, its own temp folder and process group, killed at the end),
then ``ray job submit`` of a two-step headless ``ramp run --ray`` against the simulator. The job server is
the dashboard's, which only ``ray[default]`` has (minimal Ray logs "http server disabled" and the submit
fails to connect): the ``ray`` extra installs it, and this test skips where it is missing. The same flow in
the container image is deploy/image.sh's ``ray`` smoke test (.ci/run step g)."""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from proc_watch import wait_for

from loadgen.childproc import own_process_group
from loadgen.sim import SimHandle

HAVE_DASHBOARD = importlib.util.find_spec("ray") is not None and (
    importlib.util.find_spec("ray.dashboard") is not None
    and importlib.util.find_spec("aiohttp_cors") is not None
)
pytestmark = [
    pytest.mark.skipif(
        not HAVE_DASHBOARD, reason="Ray's job server needs ray[default] (pip install 'llm-ramp[ray]')"
    ),
    pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="ray start's process group is killed by id"
    ),
    pytest.mark.sim("fast", speed=20.0, process=True),
    pytest.mark.timeout(300),
]
BIN = Path(sys.executable).parent
# Ray 2.60 turns token authentication on for a head started where ~/.ray/auth_token exists (a local
# ``ray.init()``, such as test_ray.py's, writes it): the head and the submitter get one token of this test's
# own, as a cluster with authentication on would hand it to its submitter, whatever the home folder holds.
AUTH = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(url: str) -> bool:
    """Whether the job server answers at all: Ray 2.60 turns token authentication on for a head started where
    ``~/.ray/auth_token`` exists (``ray.init()`` of a local cluster, e.g. test_ray.py's, writes it), and then
    answers 401 without the token; ``ray job submit`` reads the token from the same file."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return reply.status == 200
    except urllib.error.HTTPError as error:
        return error.code in (401, 403)
    except OSError:
        return False


@pytest.fixture(scope="module")
def head() -> Iterator[str]:
    """A Ray head on 127.0.0.1 with its job server; the Jobs API's address."""
    temp = tempfile.mkdtemp(prefix="rj", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    dashboard = free_port()
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", **AUTH)  # every Ray server on 127.0.0.1
    args = ["--head", "--block", "--node-ip-address", "127.0.0.1", "--num-cpus", "2", "--disable-usage-stats"]
    ports = ["--port", str(free_port()), "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dashboard)]
    ports += ["--dashboard-agent-listen-port", str(free_port()), "--ray-client-server-port", str(free_port())]
    log = open(Path(temp) / "head.log", "w")  # noqa: SIM115  (closed at the end)
    proc = subprocess.Popen(
        [str(BIN / "ray"), "start", *args, *ports, "--temp-dir", temp],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        **own_process_group(),
    )
    address = f"http://127.0.0.1:{dashboard}"
    try:
        up = lambda: proc.poll() is not None or answers(f"{address}/api/version")  # noqa: E731
        wait_for(up, 120, "the Ray head's job server")
        if proc.poll() is not None:
            log.flush()
            pytest.fail("the Ray head did not start:\n" + (Path(temp) / "head.log").read_text()[-3000:])
        yield address
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # `ray start --block` ignores SIGTERM; its own group only
        proc.wait(30)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def test_a_two_step_headless_run_goes_through_the_jobs_api(head: str, sim: SimHandle, tmp_path: Path) -> None:
    out = tmp_path / "job.jsonl"
    url = sim.url
    ramp = ["ramp", "run", url, "--headless", "--ray", "--workers", "2", "--steps", "1,2"]
    ramp += ["--step-seconds", "1.5", "--warmup", "0.3", "--seed", "1", "--no-metrics", "--out", str(out)]
    ramp[0] = str(BIN / "ramp")
    done = subprocess.run(
        [str(BIN / "ray"), "job", "submit", "--address", head, "--", *ramp],
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ, **AUTH),
    )
    said = done.stdout + done.stderr
    # the job ends with ramp's exit code: 0 (every step met the SLO) or 1 (one did not) are a finished run
    assert done.returncode == 0 or "failed with exit code 1" in said, said[-3000:]
    assert "best under SLO" in said  # ramp's step table, through the job's log
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    fleet = lines[0]["fleet"]
    assert fleet["kind"] == "ray" and fleet["workers"] == 2 and fleet["address"].startswith("127.0.0.1:")
    steps = [line for line in lines if line.get("type") == "step"]
    assert [s["level"] for s in steps] == [1, 2] and all(s["ok"] > 0 for s in steps), steps
