"""loadgen.target.tokenize: the /tokenize body, the count in its reply, and why there is none."""

from __future__ import annotations

import json

import httpx
import pytest

from loadgen.target.tokenize import (
    TokenizeError,
    count_tokens,
    read_count,
    tokenize_body,
    tokenize_count,
    tokenize_url,
)
from loadgen.types import Target


def test_tokenize_body() -> None:
    assert tokenize_body("m", "hi") == {"model": "m", "prompt": "hi"}
    assert tokenize_body("m", None) == {"model": "m", "prompt": ""}
    chat = tokenize_body("m", messages=[("system", "s"), {"role": "user", "content": "u"}])
    assert chat == {
        "model": "m",
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
    }
    templated = tokenize_body("m", messages=[("user", "u")], add_generation_prompt=True)
    assert templated["add_generation_prompt"] is True
    assert tokenize_url(Target(url="http://h:8000/v1/")) == "http://h:8000/tokenize"


@pytest.mark.parametrize(
    ("reply", "count"),
    [
        ({"count": 7, "tokens": [1]}, 7),
        ({"tokens": [1, 2, 3]}, 3),
        ({"input_ids": [1, 2]}, 2),
        ({"count": True}, None),
        ({"count": "7"}, None),
        ([1, 2], None),
        ({}, None),
    ],
)
def test_read_count(reply: object, count: int | None) -> None:
    assert read_count(reply) == count


async def test_count_tokens_says_why_there_is_no_count() -> None:
    replies = {
        "/ok": httpx.Response(200, content=json.dumps({"count": 12})),
        "/absent": httpx.Response(404),
        "/text": httpx.Response(200, content=b"<html>"),
        "/nocount": httpx.Response(200, content=b"{}"),
        "/tokenize": httpx.Response(200, content=json.dumps({"tokens": [1, 2, 3, 4, 5]})),
    }

    def handler(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content) == {"model": "m", "prompt": "x"}
        return replies[request.url.path]

    body = tokenize_body("m", "x")
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        assert await count_tokens(client, "http://h/ok", body) == 12
        for path, why in (
            ("/absent", "returned HTTP 404"),
            ("/text", "not JSON"),
            ("/nocount", "no token count"),
        ):
            with pytest.raises(TokenizeError, match=why) as caught:
                await count_tokens(client, "http://h" + path, body)
            assert str(caught.value).startswith("http://h" + path)
        assert await tokenize_count(Target(url="http://h/v1"), "m", "x", client=client) == 5
        assert not client.is_closed  # a client passed in stays open for the caller's next call
