"""Tool calls without a server: what the classifier reads of chat ``tool_calls`` deltas and the Responses
API's function-call events, the ``[tools]`` table (good and bad), the request body of a tool round in both
APIs, and a session's tool rounds (the messages it sends, the cap) from replies made by hand."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from loadgen.client import build_body
from loadgen.profile import ProfileError, load_profile, parse_profile
from loadgen.sse import TEXT_CHUNK, TOOL_ARGS_CHUNK, classify, classify_slow
from loadgen.types import Outcome, RequestResult, RequestSpec, ToolCall
from loadgen.workload import PromptSizer, Workload

pytestmark = pytest.mark.unit


def chat_tool(call: dict[str, object], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": {"tool_calls": [call]}, "logprobs": None, "finish_reason": finish}
    return json.dumps(
        {"object": "chat.completion.chunk", "choices": [choice]}, separators=(",", ":")
    ).encode()


HEAD = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
ARGS = {"index": 0, "function": {"arguments": '{"city"'}}


def test_a_chat_call_opens_with_its_name_then_streams_arguments() -> None:
    head, args = classify(chat_tool(HEAD)), classify(chat_tool(ARGS))
    assert head.has_text and head.tool and not head.tool_args and not head.reasoning
    assert args.has_text and args.tool and args.tool_args
    # the parts, only when the text is kept (a session answers the call next turn)
    assert classify(chat_tool(HEAD), want_text=True).tool_parts == ((0, "call_1", "get_weather", ""),)
    assert classify(chat_tool(ARGS), want_text=True).tool_parts == ((0, None, None, '{"city"'),)
    assert classify(chat_tool(ARGS)).tool_parts == ()
    empty = classify(chat_tool({"index": 0, "function": {"arguments": ""}}, "tool_calls"))
    assert not empty.tool and not empty.has_text and empty.finish_reason == "tool_calls"


def test_a_plain_chunk_is_no_tool_call() -> None:
    plain = b'{"choices":[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":null}]}'
    assert classify(plain) is TEXT_CHUNK and not classify_slow(plain).tool


def responses(kind: str, **fields: object) -> bytes:
    return json.dumps({"type": kind, **fields}, separators=(",", ":")).encode()


def test_the_responses_api_function_call_events() -> None:
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_9",
        "name": "get_weather",
        "arguments": "",
    }
    added = classify(responses("response.output_item.added", output_index=0, item=item))
    assert added.tool and added.has_text and not added.tool_args
    delta = responses("response.function_call_arguments.delta", item_id="fc_1", output_index=0, delta='{"a"')
    assert classify(delta) is TOOL_ARGS_CHUNK  # the byte test, no json.loads
    assert classify_slow(delta) == TOOL_ARGS_CHUNK
    assert classify(delta, want_text=True).tool_parts == ((0, None, None, '{"a"'),)
    assert classify(responses("response.output_item.added", item={"type": "message"})).has_text is False
    done = responses("response.function_call_arguments.done", item_id="fc_1", arguments='{"a":1}')
    assert not classify(done).has_text
    output = [item]
    completed = classify(responses("response.completed", response={"output": output, "usage": {}}))
    assert completed.finish_reason == "tool_calls"
    cut = classify(responses("response.incomplete", response={"output": output, "usage": {}}))
    assert cut.finish_reason == "length"  # cut by max_output_tokens mid-call: not a finished call


TOOLS = """
[[bucket]]
input = 16
output = 32

[session]
turns = 2

[tools]
choice = "{choice}"
result = '{{"temperature": 21}}'
max_rounds = 2

[[tools.function]]
name = "get_weather"
description = "The weather in a city"
parameters = {{ type = "object", properties = {{ city = {{ type = "string" }} }}, required = ["city"] }}
"""


def test_tools_go_into_the_body_in_each_apis_shape() -> None:
    tools = parse_profile(TOOLS.format(choice="get_weather")).tools
    assert tools is not None and tools.max_rounds == 2
    chat = dict(tools.extra_body("chat"))
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert chat["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The weather in a city",
                "parameters": {
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                    "type": "object",
                },
            },
        }
    ]
    flat = dict(tools.extra_body("responses"))
    assert flat["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert flat["tools"][0]["name"] == "get_weather" and flat["tools"][0]["type"] == "function"  # type: ignore[index]
    assert dict(parse_profile(TOOLS.format(choice="auto")).tools.extra_body("chat"))["tool_choice"] == "auto"  # type: ignore[union-attr]


BAD = [
    (TOOLS.format(choice="lookup"), r":10: \[tools\] key 'choice': expected \"auto\" \| \"none\" \| \"required\" \| \"get_weather\""),
    (TOOLS.format(choice="auto").replace('name = "get_weather"', 'name = "get weather"'), r":15: \[\[tools.function\]\] #1 \"get weather\" key 'name': .*letters, digits"),
    (TOOLS.format(choice="auto").replace('type = "object", properties', 'type = "array", properties'), r":17: .*key 'parameters': expected a JSON-Schema object"),
    (TOOLS.format(choice="auto").replace("max_rounds = 2", "max_round = 2"), r"key 'max_round': unknown key; did you mean 'max_rounds'"),
    (TOOLS.format(choice="auto").replace("max_rounds = 2", "max_rounds = 0"), r"key 'max_rounds': expected an integer >= 1"),
    (TOOLS.format(choice="auto").replace("[[tools.function]]", "[tools.function]"), r"key 'function': write \[\[tools.function\]\]"),
    (TOOLS.format(choice="auto").split("[[tools.function]]")[0], r"\[tools\]: no \[\[tools.function\]\]"),
    ('[target]\napi = "completions"\n' + TOOLS.format(choice="auto"), r"\[tools\]: tools need a chat-like API"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "fragment"), BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_tools_are_one_line_naming_file_line_and_key(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ProfileError) as caught:
        load_profile(str(path))
    message = str(caught.value)
    assert "\n" not in message and len(message) < 240 and message.startswith(str(path)), message
    assert re.search(fragment, message), message


def spec_with_round(api: str) -> RequestSpec:
    calls = [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}]
    return RequestSpec(
        api=api,  # type: ignore[arg-type]
        model="m",
        max_tokens=8,
        messages=(("user", "hi"), ("assistant", ""), ("tool", '{"ok": true}')),
        message_extras=((1, (("tool_calls", calls),)), (2, (("tool_call_id", "call_1"),))),
    )


def test_a_tool_round_in_the_chat_body() -> None:
    body = json.loads(build_body(spec_with_round("chat")))
    assistant, tool = body["messages"][1], body["messages"][2]
    assert assistant["tool_calls"][0]["id"] == "call_1" and assistant["role"] == "assistant"
    assert tool == {"role": "tool", "content": '{"ok": true}', "tool_call_id": "call_1"}


def test_a_tool_round_in_the_responses_body() -> None:
    body = json.loads(build_body(spec_with_round("responses")))
    assert body["input"] == [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": '{"x":1}'},
        {"type": "function_call_output", "call_id": "call_1", "output": '{"ok": true}'},
    ]


def reply(spec: RequestSpec, called: bool) -> RequestResult:
    calls = (ToolCall(f"call_{spec.turn}", "get_weather", '{"city":"Oslo"}'),) if called else ()
    return RequestResult(
        outcome=Outcome.OK, intended_ns=0, sent_ns=0, end_ns=1, first_token_ns=1, last_token_ns=1,
        chunk_times_ns=(1,), output_tokens=5, input_tokens=20, tokens_exact=True,
        output_text="" if called else "done", tool_calls=calls, first_tool_ns=1 if called else None,
    )  # fmt: skip


def run_session(called: list[bool]) -> list[RequestSpec]:
    profile = parse_profile(TOOLS.format(choice="auto"))
    sizer = PromptSizer(words_per_token=1.0, exact=True)
    session = Workload(profile, sizer, "m", seed=1).new_session(random.Random(2))
    specs: list[RequestSpec] = []
    while (spec := session.next_request()) is not None:
        specs.append(spec)
        session.on_result(reply(spec, called[len(specs) - 1]))
    return specs


def test_a_session_answers_tool_calls_up_to_its_cap() -> None:
    """Every reply calls a tool: each of the 2 user turns gets its 2 tool rounds (the cap), 6 requests."""
    specs = run_session([True] * 10)
    roles = [[role for role, _ in s.messages] for s in specs]
    assert [r.count("tool") for r in roles] == [0, 1, 2, 2, 3, 4]
    assert [r.count("user") for r in roles] == [1, 1, 1, 2, 2, 2]
    last = json.loads(build_body(specs[-1]))["messages"]
    ids = [m["tool_call_id"] for m in last if m["role"] == "tool"]
    called = [m["tool_calls"][0]["id"] for m in last if m.get("tool_calls")]
    assert ids == called == ["call_0", "call_1", "call_3", "call_4"]  # each result answers its own call
    assert all(m["content"] == '{"temperature": 21}' for m in last if m["role"] == "tool")
    assert all(dict(s.extra_body)["tool_choice"] == "auto" for s in specs)


def test_a_reply_without_a_call_goes_on_to_the_next_user_turn() -> None:
    specs = run_session([True, False, False, False])
    assert [[r for r, _ in s.messages].count("tool") for s in specs] == [0, 1, 1]
    assert [s.turn for s in specs] == [0, 1, 2]


def run_dialog(tmp_path: Path, called: list[bool]) -> list[RequestSpec]:
    """A dataset's 2-turn conversation replayed with [tools] (recorded history), each reply calling a tool
    or not as ``called`` says."""
    data = tmp_path / "chats.jsonl"
    said = [("human", "hello there"), ("gpt", "hi how can I help"), ("human", "a story"), ("gpt", "once")]
    data.write_text(json.dumps({"conversations": [{"from": f, "value": v} for f, v in said]}) + "\n")
    text = TOOLS.format(choice="auto").replace("[session]\nturns = 2\n", f'[dataset]\npath = "{data}"\n')
    sizer = PromptSizer(words_per_token=1.0, exact=True)
    session = Workload(parse_profile(text), sizer, "m", seed=1).new_session(random.Random(2))
    specs: list[RequestSpec] = []
    while (spec := session.next_request()) is not None:
        specs.append(spec)
        session.on_result(reply(spec, called[len(specs) - 1]))
    return specs


def test_a_replayed_conversation_answers_tool_calls_then_its_recorded_reply_follows(tmp_path: Path) -> None:
    specs = run_dialog(tmp_path, [True, False, True, True, True])
    assert [[r for r, _ in s.messages] for s in specs] == [
        ["user"],
        ["user", "assistant", "tool"],  # the round: the call and its canned result, no new user text
        ["user", "assistant", "tool", "assistant", "user"],  # the recorded reply, then the next turn
        [*["user", "assistant", "tool", "assistant", "user"], "assistant", "tool"],
        [*["user", "assistant", "tool", "assistant", "user"], "assistant", "tool", "assistant", "tool"],
    ]  # the last reply's call is past the cap (2 rounds): the conversation is over
    assert specs[2].messages[3] == ("assistant", "hi how can I help")  # recorded, not the server's "done"
    assert [s.turn for s in specs] == list(range(5)) and all(s.keep_text for s in specs)
    assert [s.max_tokens for s in specs] == [5, 5, 1, 1, 1]  # a round keeps its turn's recorded length
    last = json.loads(build_body(specs[-1]))["messages"]
    ids = [m["tool_call_id"] for m in last if m["role"] == "tool"]
    assert (
        ids
        == [m["tool_calls"][0]["id"] for m in last if m.get("tool_calls")]
        == [
            "call_0",
            "call_2",
            "call_3",
        ]
    )
    assert all(m["content"] == '{"temperature": 21}' for m in last if m["role"] == "tool")
    # no call at all: the conversation as before, one request a turn
    assert [[r for r, _ in s.messages].count("tool") for s in run_dialog(tmp_path, [False] * 2)] == [0, 0]
