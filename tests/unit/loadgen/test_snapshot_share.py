"""What a running ramp shares with ``ramp attach`` (``loadgen.observe.share``, ``loadgen.observe.snapshot_json``):
the snapshot comes back equal, field for field, whatever its strings hold; no secret of the run is in
what is shared; what is shared is bounded, and says what it left out; a snapshot of the wrong shape is
refused with the field's path."""

from __future__ import annotations

import json
import math
import threading
from dataclasses import replace
from typing import Any

import pytest
from tui_fakes import judged_steps, make_snapshot

from loadgen.exits import UsageError
from loadgen.observe.remote import AttachError, decode, snapshot_url
from loadgen.observe.share import SnapshotShare, encode, shared_snapshot, target_secrets
from loadgen.observe.snapshot_json import (
    MAX_TEXT,
    SnapshotFormatError,
    SnapshotReader,
    plain,
    snapshot_from_plain,
)
from loadgen.snapshot import ClientHealth, ReplicaStats, Snapshot
from loadgen.types import Target

MARKUP = "[bold red]loud[/] [/INST] [@click=app.quit]bye[/]"
KEY = "sk-live-0123456789abcdef"


def wire(snapshot: Snapshot) -> Any:
    """The snapshot as it goes over the wire and is parsed again on the other side."""
    return json.loads(json.dumps(plain(snapshot)))


def test_the_snapshot_comes_back_equal_field_for_field() -> None:
    snap = make_snapshot(
        steps=judged_steps(),
        model=MARKUP,
        recent_errors=(MARKUP,),
        latest_errors={"http_status": MARKUP},
        replicas=(ReplicaStats("A", "http://a:8000", requests=3, out_tok_s=12.5, kv_usage=None),),
        health=ClientHealth(loop_lag_ms_p99=math.inf, cpu_pct=(41.0, 12.0)),
        notices=((3, "level 32: the plan's next"),),
        marks=((75.0, MARKUP),),
    )
    back = snapshot_from_plain(wire(snap))
    assert back == snap
    assert back.model == MARKUP  # data: the characters as they are, nothing escaped or styled
    assert back.health.loop_lag_ms_p99 == math.inf
    assert back.windows["run"].errors == snap.windows["run"].errors
    assert back.steps[3].carried_share == 0.23 and back.steps[3].ended_by == "level"


def test_a_shared_snapshot_never_carries_the_run_s_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAMP_TEST_KEY", KEY)
    target = Target(
        url="http://user:hunter2pass@gpu1:8000/v1?api_key=qwerty123",
        api_key_env="RAMP_TEST_KEY",
        headers=(("X-Api-Key", "hdr-secret-999"), ("Accept", "application/json")),
    )
    leaky = make_snapshot(
        url=target.url,
        recent_errors=(f"HTTP 401: bad key {KEY}", "echoed: Authorization: Bearer abc.def.ghi"),
        latest_errors={"http_status": "x-api-key hdr-secret-999 refused"},
        server_log=(f"vllm serve --api-key {KEY}", "proxy http://u:hunter2pass@proxy:3128"),
        message="connect to http://user:hunter2pass@gpu1:8000 failed",
    )
    body = SnapshotShare(target_secrets(target)).reply(leaky)[0].decode()
    for secret in (KEY, "hunter2pass", "qwerty123", "hdr-secret-999", "abc.def.ghi"):
        assert secret not in body
    shared = decode(body.encode(), "peer")
    assert shared is not None and "application/json" not in target_secrets(target)
    assert shared.recent_errors[0] == "HTTP 401: bad key ***" and shared.level == leaky.level


def test_a_snapshot_past_the_limit_is_cut_and_says_so() -> None:
    steps = tuple(replace(judged_steps()[i % 5], index=i) for i in range(120))
    snap = make_snapshot(steps=steps)
    whole = encode(snap, ())
    barless = shared_snapshot(snap, (), limit=len(whole) - 1)
    cut = decode(barless, "peer")
    assert cut is not None and len(barless) < len(whole) and len(cut.steps) == 120
    assert all(not view.bins for step in cut.steps for view in step.stats.hist.values())
    assert cut.steps[7].stats.pct("ttft_ms") == snap.steps[7].stats.pct("ttft_ms")  # the table's numbers
    assert any("bars left out" in warning for warning in cut.warnings)
    fewer = decode(shared_snapshot(snap, (), limit=len(barless) // 2), "peer")
    assert fewer is not None and [s.index for s in fewer.steps] == list(range(88, 120))
    assert any("88 older steps" in warning for warning in fewer.warnings)
    assert decode(shared_snapshot(snap, (), limit=100), "peer") is None  # nothing fits: none, not a lie


def test_the_share_encodes_each_snapshot_once_and_names_it() -> None:
    share = SnapshotShare()
    snap = make_snapshot()
    first, tag = share.reply(snap)
    again, same = share.reply(snap)
    assert again is first and same == tag
    assert share.reply(replace(snap, seq=2))[1] != tag
    assert decode(share.reply(None)[0], "peer") is None


@pytest.mark.parametrize(
    ("where", "value", "named"),
    [
        (("level",), "64", "snapshot.level: not an integer"),
        (("paused",), 1, "snapshot.paused: not true or false"),
        (("state",), "exploded", "snapshot.state: not one of"),
        (("windows", "step", "ok"), 1.5, "snapshot.windows.step.ok: not an integer"),
        (("steps",), {"0": 1}, "snapshot.steps: not an array"),
        (("marks",), [[1.0, "a", "extra"]], "snapshot.marks[0]: 3 items, not 2"),
        (("health",), None, "snapshot.health: not an object"),
    ],
)
def test_a_snapshot_of_the_wrong_shape_names_the_field(
    where: tuple[str, ...], value: object, named: str
) -> None:
    data = wire(make_snapshot())
    holder = data
    for key in where[:-1]:
        holder = holder[key]
    holder[where[-1]] = value
    with pytest.raises(SnapshotFormatError, match=named.replace("[", r"\[")):
        snapshot_from_plain(data)


def test_missing_and_unknown_fields_and_long_strings() -> None:
    data = wire(make_snapshot())
    del data["worker_hosts"]  # an older ramp: the default
    data["from_a_newer_ramp"] = {"x": 1}
    data["model"] = "m" * (MAX_TEXT * 3)
    data["selected"] = 2  # never a replay's step, whatever the peer says
    back = snapshot_from_plain(data)
    assert back.worker_hosts == () and len(back.model) == MAX_TEXT and back.selected is None
    del data["seq"]
    with pytest.raises(SnapshotFormatError, match="snapshot.seq: missing"):
        snapshot_from_plain(data)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"<html>hello</html>", "sent no JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "sent no JSON"),
        (b'{"data": []}', "not a ramp's snapshot"),
        (b'{"ramp_snapshot": 99, "snapshot": null}', "format '99'; this ramp reads 1"),
        (b'{"ramp_snapshot": 1, "snapshot": {"seq": "x"}}', "malformed snapshot: snapshot.seq"),
        (b'{"ramp_snapshot": 1, "snapshot": 7}', "malformed snapshot: snapshot: not an object"),
    ],
)
def test_a_body_that_is_no_snapshot_says_what_it_is(body: bytes, said: str) -> None:
    with pytest.raises(AttachError, match=said):
        decode(body, "http://peer:1/snapshot")


@pytest.mark.parametrize(
    ("target", "url"),
    [
        ("127.0.0.1:9464", "http://127.0.0.1:9464/snapshot"),
        ("9464", "http://127.0.0.1:9464/snapshot"),
        ("http://gpu1:9464/metrics", "http://gpu1:9464/snapshot"),
        ("http://[::1]:9464/", "http://[::1]:9464/snapshot"),
        ("https://ramp.lab/snapshot", "https://ramp.lab/snapshot"),
    ],
)
def test_the_target_names_the_share(target: str, url: str) -> None:
    assert snapshot_url(target) == url


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("", "HOST:PORT"),
        ("/tmp/ramp.sock", "not a socket file"),
        ("gpu1", "no port"),
        ("gpu1:99999", "not a port number"),
        ("ftp://gpu1:21", "HOST:PORT or http"),
    ],
)
def test_a_target_that_names_no_share_is_a_usage_error(target: str, said: str) -> None:
    with pytest.raises(UsageError, match=said):
        snapshot_url(target)


def test_at_the_run_s_end_the_share_waits_for_its_readers_to_read_the_last_snapshot() -> None:
    share = SnapshotShare()
    live, final = make_snapshot(), make_snapshot(seq=2, state="finished")
    assert share.linger(final, timeout_s=5.0)  # nobody ever read: no wait at all
    share.reply(live)  # a console reads
    assert not share.linger(final, timeout_s=0.05)  # it has not read the end (yet): bounded wait
    reader = threading.Thread(target=share.reply, args=(final,))
    reader.start()
    assert share.linger(final, timeout_s=5.0)
    reader.join()


def test_finished_steps_are_encoded_and_decoded_once_and_read_back_the_same() -> None:
    """A long run's snapshot is mostly its finished steps, which never change: each is encoded once by the
    share and decoded once by the reader; a step that differs (another run's) is read anew."""
    share, reader = SnapshotShare(), SnapshotReader()
    snap = make_snapshot(steps=judged_steps())
    first = decode(share.reply(snap)[0], "peer", reader)
    later = replace(snap, seq=2, level=65)
    second = decode(share.reply(later)[0], "peer", reader)
    assert first == snap and second == later
    assert first is not None and second is not None
    assert all(a is b for a, b in zip(first.steps, second.steps, strict=True))  # not decoded again
    other = replace(later, seq=3, steps=(replace(later.steps[0], window_t0_ns=123),))
    third = decode(share.reply(other)[0], "peer", reader)
    assert third is not None and third.steps == other.steps and third.steps[0] is not first.steps[0]
