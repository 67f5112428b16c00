"""``ramp attach`` against peers that are not a well-behaved ramp (``loadgen.observe.remote``), faked with httpx's
MockTransport (no socket): garbage, a body too big (said or not said in advance, gzip-inflated), a reply
that trickles, another status, a refused connection. Each is told apart (the ramp cannot be reached now,
or what answers is no ramp) and said in one line naming the URL. Plus the ETag exchange (a poll between
two snapshots carries no body) and the web driver's rule: under textual-serve a load run refuses to start
unless ``--allow-web``; ``ramp attach`` is allowed."""

from __future__ import annotations

import asyncio
import gzip
import sys
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from tui_fakes import make_snapshot

from loadgen.cli import headless
from loadgen.cli.commands import main
from loadgen.exits import EXIT_UNREACHABLE, EXIT_USAGE
from loadgen.observe.remote import MAX_READ_BYTES, AttachError, Fetched, LinkDown, fetch, first_contact
from loadgen.observe.share import SnapshotShare, encode
from loadgen.run.config import RunConfig

URL = "http://peer:9464/snapshot"
WEB = "textual.drivers.web_driver:WebDriver"  # what textual-serve sets for each tab's process


def client(handler: Callable[[httpx.Request], httpx.Response]) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def one(handler: Callable[[httpx.Request], httpx.Response], etag: str = "", total_s: float = 2.0) -> Fetched:
    async def go() -> Fetched:
        async with client(handler) as c:
            return await fetch(c, URL, etag, total_s=total_s)

    return asyncio.run(go())


async def megabytes(count: int) -> AsyncIterator[bytes]:
    """A body sent in 1 MiB chunks, its length not said in advance."""
    for _ in range(count):
        yield b"x" * (1 << 20)


class Trickle(httpx.AsyncByteStream):
    """A body that never ends, a byte at a time: no single read ever times out."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            await asyncio.sleep(0.01)
            yield b" "


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (httpx.Response(200, content=b"\x00\xff\xfe garbage"), "sent no JSON"),
        (httpx.Response(200, html="<html>a dashboard</html>"), "sent no JSON (it begins '<html>"),
        (httpx.Response(404, text="not found"), "answered HTTP 404: not a ramp's /snapshot"),
        (httpx.Response(200, json={"status": "ok"}), "JSON that is not a ramp's snapshot"),
        (
            httpx.Response(200, content=b"[]", headers={"Content-Length": str(MAX_READ_BYTES + 1)}),
            "more than 16 MiB",
        ),
        (httpx.Response(200, content=megabytes(17)), "more than 16 MiB"),
        (
            httpx.Response(
                200,
                content=gzip.compress(b" " * (MAX_READ_BYTES + 10)),
                headers={"Content-Encoding": "gzip"},
            ),
            "more than 16 MiB",
        ),
    ],
    ids=["garbage", "html", "404", "other-json", "said-too-big", "streamed-too-big", "gzip-bomb"],
)
def test_a_peer_that_is_no_ramp_is_refused_in_one_line(reply: httpx.Response, said: str) -> None:
    with pytest.raises(AttachError, match=said.replace("(", r"\(")) as caught:
        one(lambda request: reply)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 300


def test_a_reply_that_trickles_is_cut_at_its_time_limit() -> None:
    with pytest.raises(LinkDown, match="timeout after 0.3 s"):
        one(lambda request: httpx.Response(200, stream=Trickle()), total_s=0.3)


def test_a_ramp_that_cannot_be_reached_says_so_and_how_to_attach() -> None:
    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused")

    with pytest.raises(LinkDown):
        one(refused)
    with pytest.raises(AttachError, match="cannot attach: .*peer:9464.*--metrics-port"):
        first_contact(URL, lambda: client(refused))


def test_a_poll_between_two_snapshots_carries_no_body() -> None:
    share = SnapshotShare()
    snap = make_snapshot()
    seen: list[str] = []

    def ramp(request: httpx.Request) -> httpx.Response:  # the exporter's rule (loadgen.observe.exporter)
        body, etag = share.reply(snap)
        seen.append(request.headers.get("If-None-Match", ""))
        if request.headers.get("If-None-Match") == etag:
            return httpx.Response(304, headers={"ETag": etag})
        return httpx.Response(200, content=body, headers={"ETag": etag})

    first = one(ramp)
    assert first.snapshot == snap and first.etag
    again = one(ramp, first.etag)
    assert again.unchanged and again.snapshot is None and seen == ["", first.etag]


def test_a_hostile_etag_is_not_sent_back() -> None:
    body = encode(make_snapshot(), ())
    got = one(lambda request: httpx.Response(200, content=body, headers={"ETag": "x" * 500}))
    assert got.snapshot is not None and got.etag == ""


@pytest.mark.parametrize("command", [["http://127.0.0.1:1"], ["run", "http://127.0.0.1:1"], ["demo"]])
def test_a_load_run_refuses_to_start_under_the_web_driver(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    probed: list[str] = []

    def reachable(config: RunConfig) -> bool:  # what would come next: the probe before the load
        probed.append(config.target.url)
        return False

    shown: list[str] = []  # what the browser tab shows (a Textual app of one message, tui.attach.Notice)
    cli = sys.modules["loadgen.cli.commands"]  # the package's main() shadows the module's name
    monkeypatch.setattr(headless, "reachable", reachable)  # main imports it on use
    monkeypatch.setattr(cli, "refuse_in_browser", shown.append)
    monkeypatch.setenv("TEXTUAL_DRIVER", WEB)
    assert main(command) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "one load per browser tab" in err and "ramp attach" in err and "--allow-web" in err
    assert probed == [] and shown == [err.removeprefix("ramp: ").strip()]
    if command[0] != "demo":  # (the demo would start its simulator first)
        assert main([*command, "--allow-web"]) == EXIT_UNREACHABLE
        assert probed == ["http://127.0.0.1:1"]


@pytest.mark.parametrize("command", [["http://127.0.0.1:1"], ["run", "http://127.0.0.1:1"]])
def test_a_stray_web_driver_variable_does_not_refuse_a_headless_run(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    probed: list[str] = []

    def reachable(config: RunConfig) -> bool:
        probed.append(config.target.url)
        return False

    monkeypatch.setattr(headless, "reachable", reachable)
    monkeypatch.setenv("TEXTUAL_DRIVER", WEB)  # left in the environment: --headless draws nothing
    assert main([*command, "--headless"]) == EXIT_UNREACHABLE
    assert probed == ["http://127.0.0.1:1"]
    assert "browser tab" not in capsys.readouterr().err


def test_attach_is_allowed_under_the_web_driver(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TEXTUAL_DRIVER", WEB)
    assert main(["attach", "127.0.0.1:1"]) == EXIT_UNREACHABLE  # port 1: nothing listens
    err = capsys.readouterr().err
    assert err.startswith("ramp attach: cannot attach: ") and "browser tab" not in err
    assert err.count("\n") == 1
