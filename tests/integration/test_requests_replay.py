"""The same requests against any endpoint: ``--save-requests`` writes every request as it was sent,
``--requests`` replays exactly that set (same prompts, same order, same lengths) against another server,
and ``compare``'s conditions treat two replays of one request file as the same workload."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadgen.analysis.conditions import conditions_of, differences
from loadgen.analysis.runs import load_run
from loadgen.cli.commands import build_parser
from loadgen.cli.flags import RunFlags
from loadgen.cli.resolve import build_config, resolve
from loadgen.exits import UsageError
from loadgen.run.engine import Engine
from loadgen.sim import SimHandle, run_sim_in_thread
from loadgen.sim import build_config as sim_config
from loadgen.sources import RequestLog, load_requests
from loadgen.types import RequestSpec

URL = "http://127.0.0.1:8000"
SHAREGPT = [
    {
        "conversations": [
            {"from": "human", "value": f"question {i} about the river and the old bridge"},
            {"from": "gpt", "value": "a short recorded answer " * (i + 1)},
            {"from": "human", "value": f"and a follow-up {i}"},
            {"from": "gpt", "value": "done"},
        ]
    }
    for i in range(4)
]


def test_a_saved_file_reads_back_in_intended_order_across_workers(tmp_path: Path) -> None:
    path = str(tmp_path / "r.jsonl")
    logs = [RequestLog(path, 0), RequestLog(path, 1)]
    chat = RequestSpec(
        "chat", "m", 5, messages=(("user", "hi"),), session_id=3, turn=1, extra_body=(("t", 0),)
    )
    logs[1].write(chat, 2_000_000_000)
    logs[0].write(chat, 1_000_000_000)
    logs[0].write(RequestSpec("chat", "m", 9, messages=(("system", "s"), ("user", "x"))), 1_500_000_000)
    for log in logs:
        log.close()
    source = load_requests(path)
    assert [(r.t_s, r.max_tokens, r.session, r.turn) for r in source.requests] == [
        (0.0, 5, 3, 1),
        (0.5, 9, 0, 0),
        (1.0, 5, 3, 1),
    ]
    assert source.requests[1].messages == (("system", "s"), ("user", "x"))
    assert source.duration_s == 1.0 and source.format == "chat"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"api": "chat", "max_tokens": 3}', "r.jsonl:1: messages: expected a non-empty list"),
        ('{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}', "r.jsonl:1: max_tokens"),
        ('{"api": "completions", "max_tokens": 3}', "r.jsonl:1: prompt: expected a non-empty string"),
        ('{"api": "speech", "max_tokens": 3}', "r.jsonl:1: api: expected one of chat, completions"),
        ("not json", "r.jsonl:1: json: not valid JSON"),
    ],
)
def test_bad_request_files_name_the_line_and_field(tmp_path: Path, line: str, expected: str) -> None:
    (tmp_path / "r.jsonl").write_text(line + "\n", encoding="utf-8")
    with pytest.raises(UsageError) as err:
        resolve(RunFlags(requests=str(tmp_path / "r.jsonl")), URL)
    assert str(err.value).startswith(str(tmp_path / expected)), str(err.value)


def test_the_file_decides_the_api_and_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"api": "completions", "prompt": "x", "max_tokens": 2}\n', encoding="utf-8")
    assert resolve(RunFlags(requests=str(path)), URL).api == "completions"
    with pytest.raises(UsageError, match="holds completions requests; drop --api"):
        resolve(RunFlags(requests=str(path), api="chat"), URL)
    with pytest.raises(UsageError, match="is the file --requests replays"):
        resolve(RunFlags(requests=str(path), save_requests=str(path)), URL)
    with pytest.raises(UsageError, match="already exists; choose another path"):
        resolve(RunFlags(save_requests=str(path)), URL)  # saved requests are never overwritten
    with pytest.raises(UsageError, match="no folder"):
        resolve(RunFlags(save_requests=str(tmp_path / "none" / "x.jsonl")), URL)


# ---------------------------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def sims() -> Iterator[tuple[SimHandle, SimHandle]]:
    a = run_sim_in_thread(sim_config("h200-llama8b", seed=1, speed=4.0))
    b = run_sim_in_thread(sim_config("fast"))  # another server altogether (think: a managed endpoint)
    yield a, b
    a.stop()
    b.stop()


def run(url: str, *argv: str) -> None:
    args = ["run", url, "--headless", "--no-metrics", "--warmup", "0", *argv]
    engine = Engine(build_config(build_parser().parse_args(args), url))
    engine.start()
    outcome = engine.wait(60)
    assert outcome is not None and outcome.state == "finished", outcome


def sent(path: Path) -> list[tuple[object, ...]]:
    rows = sorted(
        (json.loads(line) for line in path.read_text().splitlines()), key=lambda r: r["intended_ns"]
    )
    return [(json.dumps(r["messages"]), r["max_tokens"], r["turn"]) for r in rows]


def test_requests_replay_sends_the_same_prompts_to_another_server(
    sims: tuple[SimHandle, SimHandle], tmp_path: Path
) -> None:
    a, b = sims
    data = tmp_path / "share.json"
    data.write_text(json.dumps(SHAREGPT), encoding="utf-8")
    first, second = tmp_path / "a.requests.jsonl", tmp_path / "b.requests.jsonl"
    run(a.url, "--dataset", str(data), "--rate", "12", "--steps", "12", "--open-loop", "--step-seconds", "1",
        "--out", str(tmp_path / "a.jsonl"), "--save-requests", str(first))  # fmt: skip
    original = sent(first)
    assert len(original) >= 8
    # multi-turn sessions, turn by turn, the recorded reply resent as the assistant's turn
    follow_up = next(m for m, _, turn in original if turn == 1)
    assert "a short recorded answer" in str(follow_up) and "and a follow-up" in str(follow_up)
    run(b.url, "--requests", str(first), "--out", str(tmp_path / "b.jsonl"), "--save-requests", str(second))
    assert sent(second) == original  # the same prompts, lengths and order
    # and each server counted the same prompt tokens for them (in arrival order two requests sent within a
    # millisecond of each other may swap: the order sent is the saved files')
    got_a = sorted((g["prompt_tokens"], g["max_tokens"]) for g in a.ground_truth())
    assert got_a == sorted((g["prompt_tokens"], g["max_tokens"]) for g in b.ground_truth())

    # compare: two replays of the file (here: this one, and it again from another profile with another
    # seed) are the same workload; the source run is not (its dataset is not the request file)
    replay_b = load_run(str(tmp_path / "b.jsonl"), "b")
    header = dict(replay_b.header)
    header["profile_content"] = {**header["profile_content"], "buckets": [{"name": "other"}]}  # type: ignore[dict-item]
    header["seed"], header["seed_source"] = 99, "given"
    (tmp_path / "c2.jsonl").write_text(
        "\n".join(
            [json.dumps({**header, "type": "header"})] + (tmp_path / "b.jsonl").read_text().splitlines()[1:]
        )
        + "\n"
    )
    replay_c2 = load_run(str(tmp_path / "c2.jsonl"), "c2")
    keys = {d.key.split(".")[0].split("[")[0] for d in differences([replay_b, replay_c2], vary=[])}
    assert not keys & {"profile", "seed", "levels", "mode", "arrival"}, keys
    source_run = load_run(str(tmp_path / "a.jsonl"), "a")
    assert conditions_of(source_run)["profile"].value != conditions_of(replay_b)["profile"].value
    assert os.path.getsize(second) > 0
