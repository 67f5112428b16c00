"""loadgen.runtimes: one adapter per runtime name, each consistent with itself, and the lookup."""

from __future__ import annotations

from typing import get_args

import pytest

from loadgen import runtimes
from loadgen.runtimes import GENERIC, RUNTIMES, SGLANG, SIM, VLLM, Runtime, RuntimeName, lookup, named
from loadgen.serverproc import KINDS


def test_every_name_of_the_closed_set_has_exactly_one_adapter() -> None:
    assert sorted(r.name for r in RUNTIMES) == sorted(get_args(RuntimeName))


@pytest.mark.parametrize("runtime", RUNTIMES, ids=lambda r: r.name)
def test_every_metric_name_of_a_runtime_carries_its_prefix(runtime: Runtime) -> None:
    if runtime.metrics is None:
        return
    m = runtime.metrics
    names = [n for candidates, _ in m.gauges.values() for n in candidates]
    names += [n for candidates in (*m.counters.values(), *m.histograms.values()) for n in candidates]
    names += [name for name, _, _ in m.breakdowns.values()]
    assert names and all(n.startswith(m.prefix) for n in names), [
        n for n in names if not n.startswith(m.prefix)
    ]
    assert m.prefix == f"{runtime.name}:"


def test_the_lookup_takes_any_case_and_knows_nothing_else() -> None:
    assert lookup("vllm") is VLLM and lookup("SGLang") is SGLANG and lookup("ramp-sim") is SIM
    assert lookup("tgi") is None and lookup(None) is None and lookup(3) is None
    assert named("tgi") is GENERIC and named(None) is GENERIC and named("sglang") is SGLANG


def test_the_launch_kinds_are_the_launchable_runtimes() -> None:
    assert KINDS == {
        "vllm": ("vllm.entrypoints.openai.api_server", "--model"),
        "sglang": ("sglang.launch_server", "--model-path"),
    }
    assert list(runtimes.LAUNCHABLE) == ["vllm", "sglang"]


def test_an_unnamed_server_is_asked_every_known_cache_reset_in_turn() -> None:
    paths = [route.path for route in GENERIC.cache_resets]
    assert paths == ["/reset_prefix_cache?reset_running_requests=true", "/flush_cache"]
    assert [route.path for route in SIM.cache_resets] == paths


def test_the_kv_capacity_key_is_the_runtimes_own() -> None:
    assert (VLLM.kv_capacity_key, SGLANG.kv_capacity_key) == ("kv_cache_size_tokens", "max_total_num_tokens")
    assert GENERIC.kv_capacity_key == "kv_cache_size_tokens"
