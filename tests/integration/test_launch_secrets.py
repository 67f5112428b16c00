"""A launched server's log is scrubbed before it leaves ramp (issue 30.3): ``ramp launch … -- --api-key X``
with a server that logs its arguments (vLLM logs its non-default args) put X in ``/snapshot``'s
``server_log`` for anyone who reached ``--metrics-port``. Every secret ramp knows is masked there: the
server's key-like arguments (``--api-key X``, ``--hf-token=X``), the keys in its environment
(``HF_TOKEN``), ramp's own; and in the server's log file on disk (``<record>.vllm.log``), which only its
owner may read. And an error body is scrubbed before it is cut: a body padded so that the
4,096-byte cut split an echoed Basic token showed the token's head."""

from __future__ import annotations

import base64
import json
import os
import stat
import sys
import time
from pathlib import Path

import httpx
from test_launch import fake_env, launch_args, ramp

from loadgen.stream import ERROR_BODY_BYTES, error_text
from loadgen.target.secrets import arg_secrets, env_secrets

ARG_KEY, FLAG_TOKEN, ENV_TOKEN = "sk-ARGSECRET-0451", "hf_FLAGSECRET-0452", "hf_ENVSECRET-0453"
SECRETS = (ARG_KEY, FLAG_TOKEN, ENV_TOKEN)


def test_a_launched_servers_logged_keys_never_reach_the_snapshot(tmp_path: Path) -> None:
    args = launch_args(
        tmp_path, "--steps", "1", "--step-seconds", "6", "--warmup", "0", "--metrics-port", "0"
    )
    server = ["--max-model-len", "512", "--api-key", ARG_KEY, f"--hf-token={FLAG_TOKEN}"]
    env = fake_env(FAKE_MODE="sim", FAKE_DELAY_S=0.1, FAKE_ARGV_EVERY_S=0.2, HF_TOKEN=ENV_TOKEN)
    umask = os.umask(0o022)  # a common umask: a file created with the default mode is readable by all
    try:
        proc = ramp([*args, "--", *server], env, tmp_path)
    finally:
        os.umask(umask)
    assert proc.stderr is not None
    url, seen, body = None, [], ""
    try:
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            seen.append(line)
            if "metrics on " in line:
                url = line.split("metrics on ", 1)[1].split()[0]
        assert url is not None, "".join(seen)
        while time.monotonic() < deadline:  # until the server's argument line is among the shared lines
            try:
                body = httpx.get(url.removesuffix("/metrics") + "/snapshot", timeout=5).text
            except httpx.HTTPError:
                body = ""
            if "FAKE-ARGV" in body:
                break
            time.sleep(0.2)
    finally:
        out, err = proc.communicate(timeout=90)
    logged = [line for line in json.loads(body)["snapshot"]["server_log"] if "FAKE-ARGV" in line]
    assert logged, body[-2000:]
    assert "--api-key ***" in logged[-1] or '"--api-key", "***"' in logged[-1], logged[-1]
    for secret in SECRETS:
        assert secret not in body, (secret, logged[-1])
        assert secret not in "".join(seen) + out + err
    assert proc.returncode in (0, 1), err
    log = tmp_path / "run.vllm.log"  # the record's name with the server's kind: every line it printed
    text = log.read_text()
    assert "FAKE-ARGV" in text and "--api-key" in text, text[-2000:]
    for secret in SECRETS:
        assert secret not in text, (secret, text[-2000:])
    assert stat.S_IMODE(log.stat().st_mode) == 0o600, oct(log.stat().st_mode)


def test_the_secrets_a_launch_knows() -> None:
    argv = [sys.executable, "-m", "vllm", "--api-key", "k1", "--admin-api-key=k2", "--tokenizer", "t/x"]
    argv += ["--max-num-batched-tokens", "512", "HF_TOKEN=k3", "--ssl-keyfile", "/k.pem", "--token"]
    assert arg_secrets(argv) == ("k1", "k2", "k3")
    env = {
        "HF_TOKEN": "hf_12345678",
        "OPENAI_API_KEY": "short",
        "TOKENIZERS_PARALLELISM": "false-false",
        "PATH": os.environ.get("PATH", ""),
    }
    assert env_secrets(env) == ("hf_12345678",)


def test_an_error_body_is_scrubbed_before_it_is_cut() -> None:
    """The stream keeps the first 4,096 bytes of an error body; an echoed token that the cut splits (here
    after whitespace padding, collapsed when shown) was shown up to the cut: its head, decodable."""
    token = base64.b64encode(b"alice:correct-horse-battery-staple").decode()
    pad = ERROR_BODY_BYTES - len('{"error": "auth ') - 20  # the cut falls 20 characters into the token
    body = ('{"error": "auth ' + " " * pad + token + '"}').encode()[:ERROR_BODY_BYTES]
    message = error_text(401, body, {"Authorization": f"Basic {token}"}).message
    assert token[:8] not in message, message
    assert message == 'HTTP 401: {"error": "auth ***', message
