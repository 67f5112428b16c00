"""``ramp check`` against servers that answer every request in a shape it does not expect (issue 30.1): an
SSE stream to a non-streamed request, fields of the wrong type, an HTML page, a JSON ``null``. Every check
kind still gets its row in the table, a failure says what came back, and nothing raises: before, the
context-overflow check read ``.usage`` off the SDK's ``str`` for an SSE answer and the command died with a
37-line traceback and no table."""

from __future__ import annotations

import re

import pytest
from check_servers import HOSTILE, hostile

from loadgen.cli.commands import main

CHECKS = (
    "models",
    "max_model_len",
    "chat",
    "chat stream",
    "run request",
    "completions",
    "completions stream",
    "responses stream",
    "tool calls",
    "usage chunk",
    "max_tokens",
    "stop",
    "role chunk",
    "reasoning",
    "error shape",
    "context overflow",
    "/metrics",
    "/tokenize",
    "baseline",
    "ramp",
    "rate limits",
)
ROW = re.compile(r"^  (PASS|FAIL|n/a ) {2}(.+?) {2,}(required|advisory)  (.*)$")


def rows(text: str) -> dict[str, tuple[str, str]]:
    found = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            found[m.group(2).strip()] = (m.group(1).strip(), m.group(4))
    return found


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_every_check_kind_turns_a_hostile_answer_into_a_row(
    kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    server = hostile(HOSTILE[kind])
    ramp = (
        ["--ramp-seconds", "1", "--streams", "1"] if kind == "sse to everything" else ["--ramp-seconds", "0"]
    )
    try:
        code = main(["check", server.url, *ramp, "--timeout", "5"])
    finally:
        server.stop()
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    table = rows(out)
    assert sorted(table) == sorted(CHECKS), out
    assert code == 1 and "FAILED:" in out.splitlines()[-1]
    for name, (_, reason) in table.items():
        assert reason.strip(), name
        assert "\n" not in reason and "'str' object" not in reason, (name, reason)
    chat_status, chat_reason = table["chat"]
    assert chat_status == "FAIL"
    if kind == "sse to everything":
        assert "with an SSE stream, not one JSON object" in chat_reason
        status, reason = table["context overflow"]
        assert status == "FAIL" and "with an SSE stream, not one JSON object" in reason, reason
    elif kind == "an HTML page":
        assert "'text/html" in chat_reason and "not one JSON object" in chat_reason, chat_reason
    elif kind == "fields of the wrong type":
        # what came back is shown: the status, the type and the body's first bytes
        assert chat_reason.startswith("a reply of the wrong shape: message.content is dict"), chat_reason
        unread = [
            r for s, r in table.values() if s == "FAIL" and ("could not read" in r or "wrong shape" in r)
        ]
        assert len(unread) >= 5 and all("the latest: HTTP 200 " in r for r in unread), out
