"""A permanent 4xx is not hammered (issue 19, defect 8): a user that gets the same error twice in a row
backs off (100 ms doubling to 5 s), and when every answer is the same rejection for 10 s the run ends —
exit 3, the status and the server's message (secrets scrubbed) on the terminal and in the record."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from fault_servers import FaultServer, models_ok

from loadgen.cli import main
from loadgen.exits import EXIT_UNREACHABLE
from loadgen.record import read_record
from loadgen.run.loops import Backoff
from loadgen.types import ErrorKind, Outcome, RequestResult

pytestmark = pytest.mark.timeout(90)
BODY = {"error": {"message": "Unrecognized request argument: ignore_eos (Authorization: Bearer sk-leak42)"}}


@pytest.fixture
def server() -> Iterator[FaultServer]:
    async def reject(req: web.Request) -> web.StreamResponse:
        return web.json_response(BODY, status=400)

    srv = FaultServer(
        {
            ("POST", "/v1/chat/completions"): reject,
            ("POST", "/v1/completions"): reject,
            ("GET", "/v1/models"): models_ok,
        }
    ).start()
    yield srv
    srv.stop()


def rejected(status: int) -> RequestResult:
    return RequestResult(
        request_id=1,
        outcome=Outcome.ERROR,
        intended_ns=0,
        sent_ns=0,
        end_ns=1,
        error_kind=ErrorKind.HTTP_STATUS,
        http_status=status,
    )


def test_the_same_error_twice_backs_off_a_different_one_does_not() -> None:
    backoff = Backoff(random.Random(2))
    assert backoff.after(rejected(400)) == 0.0  # a one-off 400 is about that request
    pauses = [backoff.after(rejected(400)) for _ in range(10)]
    assert 0.05 <= pauses[0] <= 0.1 and pauses[-1] >= 2.5 and max(pauses) <= 5.0, pauses
    assert backoff.after(rejected(404)) == 0.0  # not the same error: no pause


def test_a_server_that_rejects_everything_is_backed_off_and_the_run_ends(
    server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rejected.jsonl"
    argv = [
        "run",
        server.url,
        "--headless",
        "--level",
        "4",
        "--no-metrics",
        "--out",
        str(out),
        "--warmup",
        "0",
    ]
    code = main(argv)
    err = capsys.readouterr().err
    sent = server.requests("/v1/chat/completions")
    assert code == EXIT_UNREACHABLE, err
    # 4 streams for 10 s: without backoff tens of thousands; with it each stream ~9 (0.1 s doubling to 5 s).
    span = max(sent) - min(sent)
    assert 8 <= len(sent) < 50 and 7.0 <= span <= 15.0, (len(sent), span)
    assert "rejected every request the same way" in err and "HTTP 400" in err, err
    assert "Unrecognized request argument: ignore_eos" in err and "sk-leak42" not in err, err
    record = read_record(str(out))
    end = record.events[-1]
    assert end["kind"] == "end" and end["state"] == "failed", end
    assert "HTTP 400" in end["message"] and "sk-leak42" not in end["message"], end
    (step,) = record.steps
    assert step["errors"] == {"http_status": len(sent)} and step["ok"] == 0, step
