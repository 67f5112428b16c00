"""The URL's password is not on any ramp process's command line while it runs (issue 30, blocker 2): the
real ``ramp run http://alice:PASSWORD@host`` with two load workers, every process of it read through
``/proc/PID/cmdline`` (what ``ps`` shows every local user) from the moment its workers are up until it ends,
against a server that answers only the right Basic credentials — so the run's finished requests prove the
real password was still the one sent."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest
from aiohttp import web
from fault_servers import FaultServer, Handler, openai_like
from proc_watch import children, cmdline, kill_group, start_ramp, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

PASSWORD = "pa55-w0rd-not-shown"
SENT = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()


def needing_the_password() -> FaultServer:
    """The OpenAI-like server, 401 to any request without the right Basic credentials."""
    plain = openai_like()
    routes, _ = plain.routes, plain.stop()

    def guarded(handler: Handler) -> Handler:
        async def check(req: web.Request) -> web.StreamResponse:
            if req.headers.get("Authorization") != SENT:
                return web.json_response({"error": {"message": "bad credentials"}}, status=401)
            return await handler(req)

        return check

    return FaultServer({key: guarded(handler) for key, handler in routes.items()}).start()


def descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        for child in children(todo.pop()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def test_the_password_is_on_no_command_line_while_ramp_runs(tmp_path: Path) -> None:
    server = needing_the_password()
    out = tmp_path / "run.jsonl"
    url = server.url.replace("http://", f"http://alice:{PASSWORD}@")
    args = ["run", url, "--steps", "1,2", "--step-seconds", "1.5", "--warmup", "0.3", "--workers", "2"]
    proc = start_ramp([*args, "--headless", "--out", str(out)], env={"OPENAI_API_KEY": ""})
    seen: dict[int, str] = {}
    try:
        # once both workers are up (the re-execution is long done), until the run ends
        wait_for(lambda: len(descendants(proc.pid)) >= 2 or proc.poll() is not None, 60, "the load workers")
        while proc.poll() is None:
            for pid in {proc.pid} | descendants(proc.pid):
                seen.setdefault(pid, cmdline(pid))
                assert PASSWORD not in cmdline(pid), f"pid {pid}: the password is on its command line"
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        kill_group(proc)
        server.stop()
    assert proc.returncode in (0, 1), stderr
    assert len(seen) >= 3, seen  # ramp and its two workers, at least
    assert f"alice:***@127.0.0.1:{server.port}" in seen[proc.pid]  # the one ramp shows, masked
    steps = [json.loads(line) for line in out.read_text().splitlines() if '"type":"step"' in line]
    assert len(steps) == 2 and all(step["ok"] > 0 for step in steps), steps  # the server took the password
    assert PASSWORD not in stdout + stderr + out.read_text()
