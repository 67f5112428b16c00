"""Issue 19, defect 10 — the smaller ones against a fault server: with ``--model``, an empty /v1/models
lets the run go on with a warning (a gateway that lists nothing routes the name, as one that answers 404
does); a ``--reset-prefix-cache`` the server cannot do is said on the terminal, not only in the record."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_servers import FaultServer, answering, json_models

from loadgen.cli import main
from loadgen.exits import EXIT_OK, EXIT_SLO, EXIT_UNREACHABLE
from loadgen.record import read_record

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def empty() -> Iterator[FaultServer]:
    srv = answering(models=json_models({"object": "list", "data": []}))
    yield srv
    srv.stop()


def short_run(url: str, out: Path, *extra: str) -> list[str]:
    return ["run", url, "--headless", "--steps", "2", "--step-seconds", "1.5", "--warmup", "0.2"] + [
        "--no-metrics",
        "--out",
        str(out),
        *extra,
    ]


def test_an_empty_model_list_with_model_given_goes_on(
    empty: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "empty.jsonl"
    code = main(short_run(empty.url, out, "--model", "routed"))
    err = capsys.readouterr().err
    assert code in (EXIT_OK, EXIT_SLO), err  # it ran: an SLO verdict (the 2-token reply has no decode rate)
    assert "warning:" in err and "lists no model: going on with --model 'routed'" in err, err
    (step,) = read_record(str(out)).steps
    assert step["ok"] >= 1 and step["error_count"] == 0, step
    # Without --model there is nothing to ask for: exit 3, saying what to do.
    assert main(short_run(empty.url, tmp_path / "none.jsonl")) == EXIT_UNREACHABLE
    assert "serves no model (empty /v1/models)" in capsys.readouterr().err


def test_a_failed_prefix_cache_reset_is_said_on_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    srv = answering()  # no reset endpoint: every one it is asked answers 404
    try:
        out = tmp_path / "reset.jsonl"
        code = main(short_run(srv.url, out, "--reset-prefix-cache", "run"))
    finally:
        srv.stop()
    err = capsys.readouterr().err
    assert code in (EXIT_OK, EXIT_SLO), err  # it ran: an SLO verdict (the 2-token reply has no decode rate)
    assert "ramp: warning: --reset-prefix-cache: the prefix cache was not reset (" in err, err
    record = read_record(str(out))
    (reset,) = [e for e in record.events if e["kind"] == "cache_reset"]
    assert reset["done"] is False
    (step,) = record.steps
    assert step["cache"] == "kept" and "404" in step["cache_how"], step
