"""``ramp check`` reads a reply's usage by its type (``loadgen.check.session.usage_counts``), not by
``getattr``: the SDK does not check what a server sent, so a usage that is a string, or counts that are not
integers, are said as what they are."""

from __future__ import annotations

import pytest
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion

from loadgen.check.session import Reply, WrongType, typed, usage_counts


def test_a_usage_that_is_not_an_object_is_said_as_such() -> None:
    sent = ChatCompletion.model_construct(usage="abc")  # what the SDK hands back for "usage": "abc"
    assert usage_counts(sent.usage) is None
    with pytest.raises(WrongType, match=r"wrong shape: usage is str,"):
        typed(Reply(text="hi", usage=sent.usage), "message.content")


def test_counts_of_the_wrong_type_are_named() -> None:
    usage = CompletionUsage.model_construct(prompt_tokens="five", completion_tokens=2, total_tokens=7)
    assert usage_counts(usage) == ("five", 2)
    with pytest.raises(WrongType, match=r"wrong shape: usage.prompt_tokens is str,"):
        typed(Reply(text="hi", usage=usage), "message.content")


def test_a_usage_of_integers_and_none_pass() -> None:
    usage = CompletionUsage(prompt_tokens=5, completion_tokens=2, total_tokens=7)
    assert usage_counts(usage) == (5, 2)
    assert typed(Reply(text="hi", usage=usage), "message.content").usage is usage
    assert typed(Reply(text="hi"), "message.content").usage is None
