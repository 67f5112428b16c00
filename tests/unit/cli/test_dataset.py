"""Datasets (``--dataset``, ``[dataset]``): each format read (and detected), each bad file refused in one
line naming the file, the line (or record) and the field, and multi-turn conversations replayed turn by
turn with their history resent (the recorded replies, or the server's)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from loadgen.cli.commands import main
from loadgen.cli.flags import RunFlags
from loadgen.cli.resolve import resolve
from loadgen.exits import EXIT_USAGE, UsageError
from loadgen.profile import ProfileError, load_profile, parse_profile
from loadgen.sources import DatasetOptions, load_dataset
from loadgen.types import Outcome, RequestResult, RequestSpec
from loadgen.workload import PromptSizer, Workload

URL = "http://127.0.0.1:8000"
EXACT = PromptSizer(words_per_token=1.0, exact=True)  # one word = one token: lengths check by hand

SHAREGPT = [
    {
        "id": "a",
        "conversations": [
            {"from": "system", "value": "be brief"},
            {"from": "human", "value": "hello there"},
            {"from": "gpt", "value": "hi how can I help"},
            {"from": "human", "value": "tell me a story"},
            {"from": "gpt", "value": "once upon a time"},
        ],
    },
    {"id": "b", "conversations": [{"from": "gpt", "value": "leading reply"}, {"from": "user", "value": "q"}]},
    {"id": "empty", "conversations": []},
]


def write(path: Path, lines: list[object] | str) -> str:
    if isinstance(lines, str):
        path.write_text(lines, encoding="utf-8")
    else:
        path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return str(path)


def refused(path: str, **flags: object) -> str:
    with pytest.raises(UsageError) as err:
        resolve(RunFlags(dataset=path, **flags), URL)  # type: ignore[arg-type]
    message = str(err.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_sharegpt_json_array_and_jsonl_are_read_and_detected(tmp_path: Path) -> None:
    as_array = tmp_path / "share.json"
    as_array.write_text(json.dumps(SHAREGPT), encoding="utf-8")
    for path in (str(as_array), write(tmp_path / "share.jsonl", SHAREGPT)):
        source = load_dataset(DatasetOptions(path))
        assert source.format == "sharegpt" and source.skipped == 1  # the empty conversation
        first, second = source.conversations
        assert first.system == "be brief"
        assert [(t.user, t.reply) for t in first.turns] == [
            ("hello there", "hi how can I help"),
            ("tell me a story", "once upon a time"),
        ]
        assert [(t.user, t.reply) for t in second.turns] == [("q", None)]  # a leading reply answers nothing
        assert "2 sharegpt records, 3 turns (1 without a user turn skipped)" == source.note


def test_openai_messages_prompt_and_max_tokens(tmp_path: Path) -> None:
    path = write(
        tmp_path / "oa.jsonl",
        [
            {"messages": [{"role": "user", "content": "one"}], "max_tokens": 7},
            {"prompt": "complete this", "max_completion_tokens": 3},
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "parts"}]}]},
            {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a b c"}]},
        ],
    )
    source = load_dataset(DatasetOptions(path))
    assert source.format == "openai"
    turns = [c.turns[0] for c in source.conversations]
    assert [(t.user, t.reply, t.max_tokens) for t in turns] == [
        ("one", None, 7),
        ("complete this", None, 3),
        ("parts", None, None),
        ("q", "a b c", None),
    ]
    assert source.conversations[1].raw and not source.conversations[0].raw


def test_plain_text_lines(tmp_path: Path) -> None:
    path = write(tmp_path / "prompts.txt", "first prompt\n\n  \nsecond prompt\n")
    source = load_dataset(DatasetOptions(path))
    assert source.format == "text"
    assert [(c.turns[0].user, c.line) for c in source.conversations] == [
        ("first prompt", 1),
        ("second prompt", 4),
    ]
    # no extension, not JSON: text too
    assert load_dataset(DatasetOptions(write(tmp_path / "plain", "just words\n"))).format == "text"


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("bad.jsonl", '{"conversations": []}\n{"conversations": [\n', "bad.jsonl:2: json: not valid JSON"),
        (
            "who.jsonl",
            [{"conversations": [{"from": "robot", "value": "x"}]}],
            "who.jsonl:1: conversations[0].from",
        ),
        (
            "val.jsonl",
            [{"conversations": [{"from": "human", "value": 3}]}],
            "val.jsonl:1: conversations[0].value",
        ),
        ("role.jsonl", [{"messages": [{"role": "boss", "content": "x"}]}], "role.jsonl:1: messages[0].role"),
        ("mt.jsonl", [{"prompt": "x"}, {"prompt": "y", "max_tokens": 0}], "mt.jsonl:2: max_tokens"),
        ("what.jsonl", [{"text": "x"}], "what.jsonl:1: neither 'conversations' (ShareGPT) nor"),
        ("none.jsonl", [{"conversations": []}], "none.jsonl: no usable sharegpt record"),
        (
            "arr.json",
            '[{"conversations": [{"from": "human"}]}]',
            "arr.json: record #1: conversations[0].value",
        ),
        ("empty.txt", "\n\n", "empty.txt: no usable text record"),
    ],
)
def test_bad_files_are_one_line_errors_with_file_line_and_field(
    tmp_path: Path, name: str, content: list[object] | str, expected: str
) -> None:
    message = refused(write(tmp_path / name, content))
    assert message.startswith(str(tmp_path / expected.split(":")[0].split(" ")[0])), message
    assert expected.split(name, 1)[1] in message, message


def test_not_utf8_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "latin.txt").write_bytes(b"ok\ncaf\xe9\n")
    assert refused(str(tmp_path / "latin.txt")).endswith(
        "latin.txt:2: not UTF-8 text (byte 6); save it as UTF-8"
    )
    assert "cannot read" in refused(str(tmp_path / "nope.jsonl"))
    assert "--dataset-format names the format" in str(
        pytest.raises(UsageError, resolve, RunFlags(dataset_format="text"), URL).value
    )


def test_the_command_line_exits_2_with_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "bad.jsonl", [{"messages": "hello"}])
    assert main(["run", URL, "--headless", "--dataset", path]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"{path}:1: messages: expected a list" in err and "Traceback" not in err


def test_a_profile_dataset_table_reads_a_file_beside_it(tmp_path: Path) -> None:
    write(tmp_path / "data.txt", "a prompt\n")
    profile_path = tmp_path / "p.toml"
    profile_path.write_text(
        '[dataset]\npath = "data.txt"\nformat = "text"\nmax_tokens = 5\nsampling = "random"\n\n'
        "[[bucket]]\ninput = 1\noutput = 1\n",
        encoding="utf-8",
    )
    profile = load_profile(str(profile_path))
    assert profile.replay is not None and profile.replay.dataset is not None
    assert profile.replay.dataset.max_tokens == 5 and profile.replay.dataset.sampling == "random"
    described = profile.to_dict()["replay"]
    assert (
        isinstance(described, dict)
        and described["kind"] == "dataset"
        and len(str(described["content_hash"])) == 64
    )
    with pytest.raises(
        ProfileError, match=r"p.toml:3: \[dataset\] key 'histroy': unknown key; did you mean 'history'"
    ):
        parse_profile(
            '[dataset]\npath = "x"\nhistroy = "server"\n[[bucket]]\ninput = 1\noutput = 1\n', display="p.toml"
        )
    # a --dataset flag beats the table's file and keeps its options
    other = write(tmp_path / "other.txt", "x\ny\n")
    config = resolve(RunFlags(profile=str(profile_path), dataset=other), URL)
    assert config.profile.replay is not None and config.profile.replay.count == 2
    assert config.profile.replay.dataset is not None and config.profile.replay.dataset.max_tokens == 5


def ok(text: str, tokens: int = 4) -> RequestResult:
    return RequestResult(Outcome.OK, 0, 0, 1, output_tokens=tokens, output_text=text)


def replay(tmp_path: Path, table: str, api: str = "chat") -> Workload:
    data = tmp_path / "share.json"
    data.write_text(json.dumps(SHAREGPT[:1]), encoding="utf-8")
    profile = parse_profile(
        f'[target]\napi = "{api}"\n[dataset]\npath = "{data}"\n{table}\n[[bucket]]\ninput = 1\noutput = 9\n'
    )
    return Workload(profile, EXACT, "m", seed=1)


def turns(workload: Workload, replies: list[str] | None = None) -> list[RequestSpec]:
    session = workload.new_session(random.Random(0))
    out = []
    while (spec := session.next_request()) is not None:
        out.append(spec)
        if replies is not None:
            session.on_result(ok(replies[len(out) - 1]))
    return out


def test_multi_turn_replays_in_order_with_the_recorded_replies(tmp_path: Path) -> None:
    first, second = turns(replay(tmp_path, ""), replies=["server one", "server two"])
    assert first.messages == (("system", "be brief"), ("user", "hello there"))
    assert second.messages == (
        ("system", "be brief"),
        ("user", "hello there"),
        ("assistant", "hi how can I help"),  # recorded, not the server's "server one"
        ("user", "tell me a story"),
    )
    assert (first.turn, second.turn, first.session_id) == (0, 1, second.session_id)
    assert (first.max_tokens, second.max_tokens) == (5, 4)  # each turn's recorded reply length (EXACT sizer)
    assert not first.keep_text
    # without on_result (a replay that never heard back) the recorded reply stands in: the same prompts
    assert [s.messages for s in turns(replay(tmp_path, ""))] == [first.messages, second.messages]


def test_history_server_resends_the_servers_replies_and_max_tokens_override(tmp_path: Path) -> None:
    first, second = turns(replay(tmp_path, 'history = "server"\nmax_tokens = 3'), replies=["server one", "x"])
    assert first.keep_text and second.messages[2] == ("assistant", "server one")
    assert first.max_tokens == second.max_tokens == 3
    drawn = turns(replay(tmp_path, "use_output_len = false"))
    assert [s.max_tokens for s in drawn] == [9, 9]  # the profile's bucket output


def test_completions_replay_is_a_transcript(tmp_path: Path) -> None:
    first, second = turns(replay(tmp_path, "", api="completions"))
    assert first.prompt == "be brief\n\nUser: hello there\n\nAssistant:"
    assert second.prompt == (
        "be brief\n\nUser: hello there\n\nAssistant: hi how can I help\n\nUser: tell me a story\n\nAssistant:"
    )


def test_sequential_sampling_gives_each_worker_its_share_and_wraps(tmp_path: Path) -> None:
    data = write(tmp_path / "p.txt", "".join(f"prompt {i}\n" for i in range(5)))
    profile = parse_profile(f'[dataset]\npath = "{data}"\n[[bucket]]\ninput = 1\noutput = 2\n')
    config = resolve(RunFlags(dataset=data, workers=2), URL)
    assert config.profile.replay is not None and config.profile.replay.workers == 2

    def sent(worker: int, n: int) -> list[str]:
        w = Workload(config.profile, EXACT, "m", seed=1, worker=worker)
        return [
            s.messages[-1][1] for s in (w.new_session(random.Random(0)).next_request() for _ in range(n)) if s
        ]

    assert sent(0, 4) == ["prompt 0", "prompt 2", "prompt 4", "prompt 0"]
    assert sent(1, 3) == ["prompt 1", "prompt 3", "prompt 1"]
    assert profile.replay is not None and profile.replay.workers == 1  # one worker: the whole file in order
