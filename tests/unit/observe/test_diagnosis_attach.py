"""``ramp attach`` reads a step's diagnosis and TTFT split from another ramp's ``/snapshot``: the fields typed
``object`` decode as JSON values, bounded in depth (before, the first diagnosed step broke the decode)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from tui_fakes import judged_steps, make_snapshot

from loadgen.observe.snapshot_json import SnapshotFormatError, plain, snapshot_from_plain

DIAGNOSIS = {
    "kind": "queueing",
    "confidence": "high",
    "evidence": ["12 waiting"],
    "first_checks": ["KV capacity"],
}
SPLIT = {
    "client": {"n": 40, "mean_ms": 298.6},
    "server": {"n": 40, "mean_ms": 295.6, "p95_bucket_ms": [250.0, None]},
    "method": "means exact",
}


def test_a_diagnosed_step_survives_the_shared_snapshot() -> None:
    steps = judged_steps()
    steps = (*steps[:-1], replace(steps[-1], diagnosis=DIAGNOSIS, ttft_split=SPLIT))
    back = snapshot_from_plain(json.loads(json.dumps(plain(make_snapshot(steps=steps, best_step=0)))))
    assert back.steps[-1].diagnosis == DIAGNOSIS and back.steps[-1].ttft_split == SPLIT
    assert back.steps[0].diagnosis == {}


def test_a_split_nested_past_its_depth_is_refused_in_one_line() -> None:
    steps = judged_steps()
    data = json.loads(json.dumps(plain(make_snapshot(steps=steps, best_step=0))))
    data["steps"][0]["ttft_split"] = {"a": [[[[[[1]]]]]]}
    with pytest.raises(SnapshotFormatError, match=r"snapshot\.steps\[0\]\.ttft_split\.a.*nested too deep"):
        snapshot_from_plain(data)
