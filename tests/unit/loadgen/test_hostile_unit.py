"""Issue 20's pure pieces (no process, no server): credential masking, CSV and Markdown neutralising, the
SSE event-size bound, the checks on lengths and timestamps read from files."""

from __future__ import annotations

import base64
from pathlib import Path

from loadgen.target.http import scrub, url_secrets

PASSWORD = "pw-S3cr3t-9z"
USER = "ops"
KEY = "sk-bearer-K3y-42"
QUERY_KEY = "q-Key-77"
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def leaks(text: str) -> list[str]:
    return [s for s in (PASSWORD, TOKEN, f"Basic {TOKEN}", KEY, QUERY_KEY) if s in text]


def test_scrub_masks_every_form_a_url_credential_takes() -> None:
    url = f"http://{USER}:{PASSWORD}@h:1/v1?api_key={QUERY_KEY}"
    text = (
        f"Authorization: Basic {TOKEN}; bare {TOKEN}; raw {PASSWORD}; Bearer {KEY}; "
        f"url {url}; authorization=basic {TOKEN}"
    )
    shown = scrub(text, url_secrets(url))
    assert not leaks(shown), shown
    assert "Basic ***" in shown and "Bearer ***" in shown and "h:1" in shown


def test_an_error_body_is_scrubbed_before_it_is_cut() -> None:
    from loadgen.stream import ERROR_TEXT_CHARS, error_text
    from loadgen.target.http import url_auth_headers

    headers = url_auth_headers(f"http://{USER}:{PASSWORD}@h:1")
    # the password straddles the 200-character cut: cut first, its first half would show
    body = ("E" * (ERROR_TEXT_CHARS - 15) + f" {PASSWORD} {TOKEN}").encode()
    message = error_text(400, body, headers).message
    assert PASSWORD[:6] not in message and TOKEN[:6] not in message, message
    assert message.startswith("HTTP 400: EEE")


def test_csv_text_neutralises_formula_leads_and_keeps_numbers() -> None:
    from loadgen.format import csv_text

    for lead in ("=", "+", "-", "@", "\t", "\r"):
        assert csv_text(lead + "cmd") == "'" + lead + "cmd"
    assert csv_text("-1.5") == "-1.5" and csv_text("+3") == "+3" and csv_text(-1.5) == -1.5
    assert csv_text("plain") == "plain" and csv_text(None) is None


def test_a_profile_length_past_any_context_is_refused() -> None:
    import pytest

    from loadgen.profile import ProfileError, parse_profile

    with pytest.raises(
        ProfileError, match=r"<p>:3: .*output.*past any model's context \(at most 10,000,000\)"
    ):
        parse_profile("[[bucket]]\ninput = 8\noutput = 1000000000000\n", source="<p>")


def test_the_sse_parser_bounds_an_unfinished_event() -> None:
    import pytest

    from loadgen.sse import EventTooLarge, SSEParser

    parser = SSEParser(1000)
    assert parser.feed(b"data: " + b"x" * 990 + b"\n\n") == [b"x" * 990]  # under the bound: read
    parser.feed(b"data: " + b"y" * 500)
    with pytest.raises(EventTooLarge, match="larger than 1,000 bytes"):
        parser.feed(b"y" * 500)  # the same event, over two reads
    parser = SSEParser(1000)
    with pytest.raises(EventTooLarge):  # a complete event then an endless one, in one read
        parser.feed(b"data: a\n\ndata: " + b"z" * 2000)


def test_a_dataset_max_tokens_past_the_servers_context_is_named(tmp_path: Path) -> None:
    import json

    from loadgen.sources import DatasetOptions, load_dataset
    from loadgen.sources.model import first_overflow

    path = tmp_path / "d.jsonl"
    rows = [{"prompt": "a", "max_tokens": 100}, {"prompt": "b", "max_tokens": 5000}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    source = load_dataset(DatasetOptions(str(path)))
    assert first_overflow(source, 8192) is None
    assert first_overflow(source, 2048) == (
        f"{path}:2: max_tokens: 5,000 tokens is past the server's max_model_len 2,048: "
        "--fit-context clamps such requests"
    )
