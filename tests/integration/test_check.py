"""``ramp check``: every check passes against the simulator (the ramp through ramp's own engine included), the
right check fails with the right reason against a server with one flaw, JSON output, exit codes, the key
never shown, rate-limit headers read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fault_servers import CountingProxy, Flaws, openai_like

from loadgen.check.main import run_checks
from loadgen.check.results import CheckReport
from loadgen.cli.commands import main
from loadgen.sim import SimHandle, build_config, run_sim_in_thread
from loadgen.types import Target

REQUIRED = {
    "models",
    "chat",
    "chat stream",
    "run request",
    "usage chunk",
    "max_tokens",
    "error shape",
    "ramp",
}


pytestmark = pytest.mark.sim("h200-llama8b", seed=12, speed=4.0)


def by_name(report: CheckReport) -> dict[str, tuple[str, str]]:
    return {c.name: (c.status, c.reason) for c in report.checks}


def test_every_check_passes_against_the_simulator(sim: SimHandle) -> None:
    report = run_checks(Target(sim.url), ramp_seconds=2.0, streams=4)
    checks = by_name(report)
    assert report.ok, report.text()
    assert {c.name for c in report.checks if c.required} == REQUIRED
    # What the simulator does, every one of them passes; reasoning and rate limits it has none of.
    for name, (status, reason) in checks.items():
        want = "n/a" if name in ("reasoning", "rate limits") else "pass"
        assert status == want, (name, status, reason)
    assert "equal to the non-streamed usage" in checks["usage chunk"][1]
    assert "finish stop" in checks["stop"][1]  # the simulator honours stop sequences
    # the Responses API through the SDK's own event types: answer deltas, then response.incomplete (cut at 16)
    assert "text deltas" in checks["responses stream"][1] and "incomplete" in checks["responses stream"][1]
    assert "HTTP 400" in checks["context overflow"][1] and "8,192" in checks["context overflow"][1]
    # tool_choice "required": the call streamed in tool_calls deltas, its name the offered one, its
    # arguments (the simulator's JSON object) parsed, and its TTFTC
    tool = next(c for c in report.checks if c.name == "tool calls")
    assert "get_weather" in tool.reason and "arguments a JSON object" in tool.reason, tool.reason
    assert tool.data["arguments_keys"] == ["text"] and tool.data["deltas"] > 2  # type: ignore[operator]
    assert 0 < tool.data["ttftc_ms"] < 5000  # type: ignore[operator]
    assert "vllm names" in checks["/metrics"][1]
    ramp = next(c for c in report.checks if c.name == "ramp")
    steps = ramp.data["steps"]
    assert isinstance(steps, list) and [s["level"] for s in steps] == [1, 2, 4]
    assert all(s["errors"] == 0 and s["ok"] > 0 for s in steps)
    baseline = next(c for c in report.checks if c.name == "baseline")
    assert isinstance(baseline.data["sdk_ttft_ms"], float) and isinstance(
        baseline.data["ramp_ttft_ms"], float
    )
    assert baseline.data["output_tokens"] == 64  # the same prompt, the same seed: the reply hits max_tokens


def test_json_format_and_exit_zero(sim: SimHandle, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", sim.url, "--format", "json", "--ramp-seconds", "0"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["ok"] is True
    assert doc["model"] == "sim-llama-8b" and doc["runtime"] == "ramp-sim"
    ramp = next(c for c in doc["checks"] if c["name"] == "ramp")
    assert ramp["status"] == "n/a" and ramp["required"] is True and "skipped" in ramp["reason"]
    assert {"name", "status", "required", "reason", "data"} <= set(doc["checks"][0])


def test_a_reasoning_model_through_the_responses_api(capsys: pytest.CaptureFixture[str]) -> None:
    """--api responses makes the Responses check required; a reasoning model that spends the check's 16
    tokens thinking still passes it, and the reasoning check says TTFAT leaves that text out."""
    handle = run_sim_in_thread(build_config("tiny-reasoning", seed=4, speed=4.0))
    try:
        code = main(["check", handle.url, "--format", "json", "--ramp-seconds", "0", "--api", "responses"])
    finally:
        handle.stop()
    doc = json.loads(capsys.readouterr().out)
    checks = {c["name"]: c for c in doc["checks"]}
    assert code == 0 and doc["ok"] is True, [c for c in doc["checks"] if c["status"] == "fail"]
    responses = checks["responses stream"]
    assert responses["status"] == "pass" and responses["required"] is True
    assert "reasoning" in responses["reason"] and "usage" in responses["reason"]
    assert checks["reasoning"]["status"] == "pass" and "TTFAT" in checks["reasoning"]["reason"]
    assert "(responses)" in checks["run request"]["reason"]


@pytest.mark.parametrize(
    ("flaws", "name", "reason"),
    [
        (Flaws(no_usage_chunk=True), "usage chunk", "no usage chunk in the stream"),
        (Flaws(ignore_max_tokens=True), "max_tokens", "asked for at most 5 tokens, got 16"),
        (Flaws(accept_bad_request=True), "error shape", "HTTP 200 to a malformed request"),
    ],
)
def test_the_flawed_check_fails_with_its_reason(
    flaws: Flaws, name: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    server = openai_like(flaws)
    try:
        code = main(["check", server.url, "--ramp-seconds", "0", "--timeout", "10"])
    finally:
        server.stop()
    out = capsys.readouterr().out
    assert code == 1, out
    failed = [line for line in out.splitlines() if line.strip().startswith("FAIL ")]
    # the server answers text whatever the tools: the advisory tool check fails too, and says so
    ignored = [line for line in failed if "tool calls" in line]
    failed = [line for line in failed if line not in ignored]
    assert len(ignored) == 1 and 'tool_choice "required" ignored' in ignored[0], out
    assert len(failed) == 1 and name in failed[0] and reason in failed[0], out
    assert f"FAILED: 6 of 8 required checks pass, 1 n/a (failing: {name})" in out  # the ramp: skipped


def test_a_sound_server_passes_and_its_rate_limits_are_shown() -> None:
    server = openai_like(Flaws(ratelimit=True, reasoning=True))
    try:
        report = run_checks(Target(server.url), ramp_seconds=0)
    finally:
        server.stop()
    checks = by_name(report)
    assert report.ok, report.text()
    assert checks["rate limits"] == (
        "pass",
        "remaining 99/100 requests (resets in 600ms), 9,990/10,000 tokens (resets in 6ms)",
    )
    assert report.ratelimit["remaining-tokens"] == "9990"
    assert checks["reasoning"][0] == "pass" and "'reasoning_content' present" in checks["reasoning"][1]
    assert checks["max_model_len"][0] == "n/a" and checks["context overflow"][0] == "n/a"
    assert checks["/tokenize"][0] == "n/a" and "--tokenizer" in checks["/tokenize"][1]


def test_the_key_is_sent_but_never_shown(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "sk-check-0123456789abcdef"
    monkeypatch.setenv("RAMP_CHECK_KEY", secret)
    server = openai_like(Flaws(echo_auth=True))
    try:
        code = main(
            [
                "check",
                server.url,
                "--api-key-env",
                "RAMP_CHECK_KEY",
                "--ramp-seconds",
                "0",
                "--format",
                "json",
            ]
        )
    finally:
        server.stop()
    out = capsys.readouterr()
    doc = json.loads(out.out)
    shape = next(c for c in doc["checks"] if c["name"] == "error shape")
    assert (
        code == 0 and shape["status"] == "pass" and "(from Bearer " in shape["reason"]
    )  # the server quoted it
    assert secret not in out.out + out.err


def test_credentials_in_the_url_are_sent_as_a_header_and_never_shown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = openai_like(Flaws(echo_auth=True))
    url = server.url.replace("http://", "http://alice:pa55word@")
    try:
        code = main(["check", url, "--ramp-seconds", "0", "--api-key-env", "RAMP_CHECK_NO_KEY"])
    finally:
        server.stop()
    out = capsys.readouterr()
    shown = out.out + out.err
    assert code == 0, shown
    assert "(from Basic ***)" in shown  # the server got the URL's credentials as a Basic header
    assert "pa55word" not in shown and "alice:" not in shown and "YWxpY2U6cGE1NXdvcmQ" not in shown
    assert shown.startswith(f"ramp check {server.url} ")  # the URL shown without its credentials


def test_the_sdk_goes_through_the_proxy_asked_for(capsys: pytest.CaptureFixture[str]) -> None:
    server, proxy = openai_like(), CountingProxy().start()
    try:
        code = main(["check", server.url, "--proxy", proxy.url, "--ramp-seconds", "0"])
    finally:
        server.stop()
        proxy.stop()
    out = capsys.readouterr()
    assert code == 0, out.out
    assert f"through the proxy {proxy.url}" in out.err  # warned of before anything is sent
    # The proxy notes each connection's first request: the probe's and the SDK's (models.list(), then kept
    # alive for every later call) /v1/models, the edge client's /metrics, ramp's own client's chat (the run
    # request, then the baseline: a new client, a new connection each).
    seen = " ".join(proxy.lines)
    assert seen.count("GET " + server.url + "/v1/models") == 2 and "GET " + server.url + "/metrics" in seen
    assert seen.count("POST " + server.url + "/v1/chat/completions") == 2, proxy.lines


def test_unreachable_and_bad_flags(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["check", f"http://127.0.0.1:{port}", "--ramp-seconds", "0"]) == 3  # as ramp run exits
    out = capsys.readouterr().out
    assert "FAIL  models" in out and "cannot connect" in out and len(out.splitlines()) == 5
    assert main(["check", "127.0.0.1:8000"]) == 2
    assert main(["check", f"http://127.0.0.1:{port}", "--ramp-seconds", "-1"]) == 2
    err = capsys.readouterr().err
    assert (
        "URL must start with http://" in err and "--ramp-seconds must be 0" in err and "Traceback" not in err
    )


# ---- issue 19 (7): ramp check tests what ramp run will send ------------------------------------------------


def test_run_request_sends_the_runs_own_body(sim: SimHandle) -> None:
    """The check's request is the run's first request: the chat profile's sampling keys, max_tokens from
    its first draw, stream_options — the very bytes ``build_body`` makes for the run."""
    from loadgen.check.run_body import first_request
    from loadgen.client import build_body
    from loadgen.profile import load_profile

    spec = first_request(load_profile("chat"), "sim-llama-8b", None)
    body = json.loads(build_body(spec))
    assert body["ignore_eos"] is True and body["temperature"] == 0.7 and body["top_p"] == 0.95
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert 16 <= body["max_tokens"] <= 2048  # the profile's output draw
    report = run_checks(Target(sim.url), ramp_seconds=0)
    status, reason = by_name(report)["run request"]
    assert status == "pass", reason
    assert "ignore_eos" in reason and "stream_options" in reason and "max_tokens" in reason


@pytest.mark.parametrize("names_it", [True, False])
def test_a_server_refusing_ignore_eos_fails_the_check_and_says_what_to_drop(
    names_it: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    from check_servers import refusing_field

    server = refusing_field("ignore_eos", names_it=names_it)
    try:
        code = main(["check", server.url, "--ramp-seconds", "0", "--timeout", "10", "--format", "json"])
    finally:
        server.stop()
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["ok"] is False and doc["unreachable"] is False
    checks = {c["name"]: c for c in doc["checks"]}
    run = checks["run request"]
    assert run["status"] == "fail" and run["required"] is True
    assert run["data"]["field"] == "ignore_eos" and run["data"]["status"] == 400
    assert "ignore_eos = true" in run["reason"] and "ignore_eos = false" in run["reason"]
    assert "--profile FILE" in run["reason"]
    # the SDK's own requests (no ignore_eos) pass: only the run's body is refused
    assert checks["chat"]["status"] == "pass" and checks["chat stream"]["status"] == "pass"


def test_a_profile_without_ignore_eos_passes_against_that_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from check_servers import refusing_field

    profile = tmp_path / "no-eos.toml"
    profile.write_text(
        'name = "no-eos"\n[[bucket]]\ninput = 32\noutput = 16\n[sampling]\ntemperature = 0.5\n'
    )
    server = refusing_field("ignore_eos")
    try:
        code = main(
            ["check", server.url, "--ramp-seconds", "0", "--profile", str(profile), "--format", "json"]
        )
    finally:
        server.stop()
    run = next(c for c in json.loads(capsys.readouterr().out)["checks"] if c["name"] == "run request")
    assert run["status"] == "pass", run
    assert run["data"]["sent"] == ["max_tokens", "stream_options", "temperature"] and code in (0, 1)


VLLM_NO_PARSER = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'


def test_a_server_refusing_tools_makes_the_tool_check_na_with_the_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """vLLM without a tool-call parser answers tools with 400: the tool check is n/a (advisory, the check
    still passes) and says why and what to start vLLM with, in the JSON output too."""
    from check_servers import refusing_field

    server = refusing_field("tools", message=VLLM_NO_PARSER)
    try:
        code = main(["check", server.url, "--ramp-seconds", "0", "--timeout", "10", "--format", "json"])
    finally:
        server.stop()
    doc = json.loads(capsys.readouterr().out)
    tool = next(c for c in doc["checks"] if c["name"] == "tool calls")
    assert tool["status"] == "n/a" and tool["required"] is False and tool["data"] == {}
    assert tool["reason"].startswith("HTTP 400: " + VLLM_NO_PARSER)
    assert "vLLM needs --enable-auto-tool-choice --tool-call-parser NAME" in tool["reason"]
    checks = {c["name"]: c["status"] for c in doc["checks"]}
    assert checks["chat stream"] == checks["run request"] == "pass" and code in (0, 1)  # no tools: served


def test_an_unreachable_server_exits_3_and_a_flawed_one_1(capsys: pytest.CaptureFixture[str]) -> None:
    from check_servers import closed_port

    code = main(["check", f"http://127.0.0.1:{closed_port()}", "--ramp-seconds", "0", "--timeout", "3"])
    out = capsys.readouterr().out
    assert code == 3 and "cannot connect" in out
    server = openai_like(Flaws(no_usage_chunk=True))
    try:
        assert main(["check", server.url, "--ramp-seconds", "0", "--timeout", "10"]) == 1
    finally:
        server.stop()


def test_sse_to_a_non_streamed_request_is_a_clear_failed_check(capsys: pytest.CaptureFixture[str]) -> None:
    from fault_servers import answering

    server = answering()  # streams its reply whatever the request asked
    try:
        code = main(["check", server.url, "--ramp-seconds", "0", "--timeout", "10", "--format", "json"])
    finally:
        server.stop()
    captured = capsys.readouterr()
    assert code == 1 and "Traceback" not in captured.err
    checks = {c["name"]: c for c in json.loads(captured.out)["checks"]}
    for name in ("chat", "max_tokens"):
        assert checks[name]["status"] == "fail"
        reason = checks[name]["reason"]
        assert "non-streamed request (stream false) with an SSE stream" in reason, reason
        assert "AttributeError" not in reason and "'str' object" not in reason
    assert checks["chat stream"]["status"] == "pass"
