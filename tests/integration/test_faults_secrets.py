"""Credentials in the target URL (``http://user:secret@host``, ``?api_key=secret``) are sent where they belong
and never shown: not in stderr, not in the snapshot the console draws (its header, its SVG screenshots), not
in the record."""

from __future__ import annotations

import socket
from functools import partial
from pathlib import Path

import pytest
from fault_servers import answering
from ramp_cli import ramp as run_ramp
from snapshot_watch import Watch

from loadgen.cli.headless import finish
from loadgen.profile import parse_profile
from loadgen.run.config import RunConfig, RunOutcome
from loadgen.run.engine import Engine
from loadgen.types import Target

PASSWORD = "hunter2-pw-77"
QUERY_KEY = "s3cr3t-q-88"
PROFILE = parse_profile("[[bucket]]\ninput = 8\noutput = 2\n", source="<secrets>")


def secret_url(port: int, scheme: str = "http") -> str:
    return f"{scheme}://ops:{PASSWORD}@127.0.0.1:{port}/v1?api_key={QUERY_KEY}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean(*texts: str) -> None:
    for text in texts:
        assert PASSWORD not in text and QUERY_KEY not in text, text


ramp = partial(run_ramp, timeout=60)


@pytest.mark.parametrize(
    "url",
    [
        secret_url(free_port()),  # nothing listens: unreachable
        f"http://ops:{PASSWORD}@127.0.0.1:99999/?api_key={QUERY_KEY}",  # a usage error naming the URL
        f"ftp://ops:{PASSWORD}@127.0.0.1:8000/?token={QUERY_KEY}",
    ],
    ids=["unreachable", "bad-port", "not-http"],  # the free port differs per process (pytest-xdist workers)
)
def test_stderr_of_a_failing_run_holds_no_credential(url: str, tmp_path: Path) -> None:
    proc = ramp("run", url, "--headless", "--steps", "1", "--out", str(tmp_path / "r.jsonl"))
    assert proc.returncode in (2, 3), proc.stderr
    assert "127.0.0.1" in proc.stderr
    clean(proc.stdout, proc.stderr)


def test_the_end_message_is_scrubbed(capsys: pytest.CaptureFixture[str]) -> None:
    message = f"target {secret_url(8000)} stopped answering"
    finish(
        RunOutcome(
            state="failed", steps=(), best_step=None, record_path=None, message=message, unreachable=True
        )
    )
    err = capsys.readouterr().err
    assert "stopped answering" in err and "127.0.0.1:8000" in err
    clean(err)


def test_credentials_reach_the_server_and_nothing_shows_them(tmp_path: Path) -> None:
    server = answering()
    out = tmp_path / "run.jsonl"
    watch = Watch()
    config = RunConfig(
        target=Target(url=secret_url(server.port)), profile=PROFILE, level=1, out=str(out), warmup_s=0.0
    )
    engine = Engine(config, watch)
    try:
        engine.start()
        snap = watch.until(lambda s: s.windows["step"].ok >= 3, 30, "successes")
    finally:
        engine.stop(cancel=True)
        outcome = engine.wait(30)
        server.stop()
    assert outcome is not None
    # the console's header draws Snapshot.url; its screenshots are drawn from the same snapshot
    assert "127.0.0.1" in snap.url
    clean(snap.url, repr(snap.recent_errors), repr(snap.latest_errors), repr(snap.warnings))
    clean(out.read_text())
    # the query string went where a server reads it: after the API path, on every request
    posts = [q for _, method, path, q in server.seen if method == "POST"]
    assert posts and all(q == f"api_key={QUERY_KEY}" for q in posts), server.seen[:3]
    assert any(path == "/v1/models" and q == f"api_key={QUERY_KEY}" for _, _, path, q in server.seen)
