"""Issue 20, case 3: a server that echoes every request header back in its error body must not get the
credentials ramp sent it (the Basic header a URL's ``user:password@`` becomes, its base64, the password, a
Bearer key, an ``api_key`` query) into stdout, stderr, the record or any ``ramp report`` format."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_servers import echoing_headers

PASSWORD = "pw-S3cr3t-9z"
USER = "ops"
KEY = "sk-bearer-K3y-42"
QUERY_KEY = "q-Key-77"
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
PROFILE = "[[bucket]]\ninput = 8\noutput = 2\n"


def ramp(*args: str, key: str = "") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OPENAI_API_KEY=key)
    return subprocess.run(
        [sys.executable, "-m", "loadgen.cli", *args], capture_output=True, text=True, timeout=90, env=env
    )


def leaks(text: str) -> list[str]:
    return [s for s in (PASSWORD, TOKEN, f"Basic {TOKEN}", KEY, QUERY_KEY) if s in text]


@pytest.mark.parametrize("key", ["", KEY], ids=["basic-from-url", "bearer-from-env"])
def test_an_echoing_server_gets_no_credential_shown_or_stored(key: str, tmp_path: Path) -> None:
    server = echoing_headers()
    profile = tmp_path / "tiny.toml"
    profile.write_text(PROFILE)
    out = tmp_path / "run.jsonl"
    url = f"http://{USER}:{PASSWORD}@127.0.0.1:{server.port}/v1?api_key={QUERY_KEY}"
    args = ["--steps", "1", "--step-seconds", "1", "--warmup", "0", "--no-metrics", "--profile", str(profile)]
    try:
        proc = ramp("run", url, "--headless", *args, "--out", str(out), key=key)
    finally:
        server.stop()
    assert out.exists(), proc.stderr
    record = out.read_text()
    assert "bad request (headers" in record, record[-2000:]  # the echo reached the record, masked
    texts = {"stdout": proc.stdout, "stderr": proc.stderr, "record": record}
    for fmt in ("text", "csv", "json", "md", "html"):
        report = ramp("report", str(out), "--format", fmt)
        assert report.returncode in (0, 2), report.stderr
        texts[fmt] = report.stdout + report.stderr
    found = {where: leaks(text) for where, text in texts.items() if leaks(text)}
    assert not found, found
