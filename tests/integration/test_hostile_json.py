"""JSON from outside that the standard decoder cannot hold (issue 30.4): nesting past the recursion limit
(``RecursionError``) and an integer of more than 4,300 digits (a plain ``ValueError``, "Exceeds the limit").
Each face ends in one line naming the URL or the file:line:field, exit 3 (a server) or 2 (a file), never a
traceback: ``loadgen.strict_json`` decodes every outside document. Before it, each of these printed a
~47-line traceback."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from check_servers import closed_port
from fault_servers import FaultServer
from ramp_cli import ramp

from loadgen import strict_json

BIG = "9" * 5000  # past Python's int_max_str_digits (4,300)
DEEP = "[" * 200_000 + "]" * 200_000  # 400 KB, nested far past the recursion limit


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    err = proc.stderr
    assert "Traceback" not in err, err[-2000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err[-2000:]
    return lines[0]


def models_server(body: str) -> Iterator[FaultServer]:
    async def models(req: web.Request) -> web.StreamResponse:
        return web.Response(text=body, content_type="application/json")

    server = FaultServer({("GET", "/v1/models"): models}).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["nested", "long integer"])
def hostile_models(request: pytest.FixtureRequest) -> Iterator[tuple[str, FaultServer]]:
    if request.param == "nested":
        body = '{"object": "list", "data": ' + DEEP + "}"
        said = "nested too deeply to read"
    else:
        card = '{"id": "tiny", "object": "model", "owned_by": "test", "max_model_len": ' + BIG + "}"
        body = '{"object": "list", "data": [' + card + "]}"
        said = "an integer of 5,000 digits"
    for server in models_server(body):
        yield said, server


@pytest.mark.parametrize("command", ["run", "check"])
def test_a_hostile_model_list_is_one_line_naming_the_url_exit_3(
    command: str, hostile_models: tuple[str, FaultServer]
) -> None:
    said, server = hostile_models
    args = ["--headless"] if command == "run" else ["--ramp-seconds", "0"]
    proc = ramp(command, server.url, *args, timeout=60)
    where = proc.stderr if command == "run" else proc.stdout + proc.stderr
    assert proc.returncode == 3, (proc.returncode, where[-2000:])
    assert "Traceback" not in proc.stdout + proc.stderr
    assert f"{server.url}/v1/models did not return a model list" in where and said in where, where[-2000:]
    if command == "run":
        one_line(proc)


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


CHAT = '"messages": [{"role": "user", "content": "hi"}]'


@pytest.mark.parametrize(
    ("flag", "name", "text", "where"),
    [
        (
            "--trace",
            "trace.jsonl",
            '{"timestamp": 0, "input_length": 10, "output_length": 5}\n'
            f'{{"timestamp": 1, "input_length": {BIG}, "output_length": 5}}\n',
            "trace.jsonl:2: input_length: an integer of 5,000 digits",
        ),
        (
            "--trace",
            "deep.jsonl",
            '{"timestamp": 0, "input_length": 10, "output_length": 5}\n{"x": ' + DEEP + "}\n",
            "deep.jsonl:2: json: nested too deeply to read",
        ),
        (
            "--dataset",
            "data.jsonl",
            f'{{{CHAT}, "max_tokens": 5}}\n{{{CHAT}, "max_tokens": {BIG}}}\n',
            "data.jsonl:2: max_tokens: an integer of 5,000 digits",
        ),
        (
            "--dataset",
            "data.json",
            f'[{{{CHAT}, "max_tokens": 5}}, {{"messages": [{{"role": "user", "content": {BIG}}}]}}]',
            "data.json: record #2: messages[0].content: an integer of 5,000 digits",
        ),
        (
            "--dataset",
            "deep.json",
            f'[{{{CHAT}}}, {{"x": {DEEP}}}]',
            "deep.json: record #2: json: nested too deeply to read",
        ),
        (
            "--requests",
            "requests.jsonl",
            f'{{"t_s": 0, "api": "chat", "model": "m", "max_tokens": {BIG}, {CHAT}}}\n',
            "requests.jsonl:1: max_tokens: an integer of 5,000 digits",
        ),
        (
            "--profile",
            "profile.toml",
            f'name = "x"\n[[bucket]]\ninput = {BIG}\noutput = 5\n',
            "profile.toml:3: key 'input': an integer of more than 4,300 digits",
        ),
    ],
    ids=["trace-int", "trace-deep", "jsonl-int", "array-int", "array-deep", "requests-int", "profile-int"],
)
def test_a_hostile_file_is_one_line_naming_file_line_field_exit_2(
    tmp_path: Path, flag: str, name: str, text: str, where: str
) -> None:
    path = write(tmp_path / name, text)
    proc = ramp("run", f"http://127.0.0.1:{closed_port()}", flag, path, "--headless", timeout=60)
    line = one_line(proc)
    assert proc.returncode == 2, (proc.returncode, line)
    assert f"{tmp_path}/{where}" in line, line


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        (f'{{"type": "x", "t": {BIG}}}', "line 2: t: an integer of 5,000 digits"),
        ('{"x": ' + DEEP + "}", "line 2: nested too deeply"),
    ],
    ids=["int", "deep"],
)
def test_a_hostile_record_is_one_line_exit_2(tmp_path: Path, bad: str, said: str) -> None:
    fixture = Path(__file__).parents[1] / "fixtures" / "report" / "demo-h200-10-steps.jsonl"
    lines = fixture.read_text().splitlines()
    path = write(tmp_path / "rec.jsonl", "\n".join([lines[0], bad, *lines[1:]]) + "\n")
    proc = ramp("report", path, timeout=60)
    line = one_line(proc)
    assert proc.returncode == 2 and f"{path} {said}" in line, (proc.returncode, line)


def test_strict_decode_keeps_valid_json_and_its_errors() -> None:
    """The helper is ``json.loads`` for everything else: the same values, the same JSONDecodeError."""
    doc = {"a": [1, -2, 3.5, "x" * 5000, int("9" * 4300)], "b": None}
    assert strict_json.loads(json.dumps(doc)) == doc
    assert strict_json.loads(json.dumps(doc).encode()) == doc
    assert strict_json.raw_decode(" [1] tail", 1) == ([1], 4)
    with pytest.raises(json.JSONDecodeError):
        strict_json.loads('{"a": 1')
    with pytest.raises(strict_json.JsonError) as err:
        strict_json.loads('{"a": [0, {"b": -' + BIG + "}]}")
    assert err.value.field == "a[1].b" and "5,000 digits" in str(err.value)
