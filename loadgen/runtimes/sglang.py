"""SGLang: its metric names, its server info's conditions, its cache flush and how it is started.

Names come from sgl-project/sglang ``python/sglang/srt/metrics/collector.py`` (SchedulerMetricsCollector,
TokenizerMetricsCollector); the server info from ``entrypoints/http_server.py`` (``/server_info``, older
``/get_server_info``: the server args plus scheduler info). SGLang marks its models ``owned_by:
"sglang"``, states its KV capacity as ``max_total_num_tokens`` and refuses a flush (HTTP 400, or "failed"
in a 200) while any request runs or waits.
"""

from __future__ import annotations

from collections.abc import Mapping

from loadgen.runtimes.base import (
    CacheResetRoute,
    Combine,
    LaunchCommand,
    MetricIndex,
    MetricNames,
    Runtime,
)

GAUGES: dict[str, tuple[tuple[str, ...], Combine]] = {
    "running": (("sglang:num_running_reqs",), "sum"),
    "waiting": (("sglang:num_queue_reqs",), "sum"),
    "kv_usage": (("sglang:token_usage",), "mean"),
    "prefix_hit_rate": (("sglang:cache_hit_rate",), "mean"),
    "spec_accept_rate": (("sglang:spec_accept_rate",), "mean"),
    "spec_accept_length": (("sglang:spec_accept_length",), "mean"),
    "gen_throughput": (("sglang:gen_throughput",), "sum"),
    "used_tokens": (("sglang:num_used_tokens",), "sum"),
    "max_total_tokens": (("sglang:max_total_num_tokens",), "sum"),
}
COUNTERS: dict[str, tuple[str, ...]] = {
    "preemptions": ("sglang:num_retracted_requests",),
    "gen_tokens": ("sglang:generation_tokens",),
    "prompt_tokens": ("sglang:prompt_tokens",),
    "cached_prompt_tokens": ("sglang:cached_tokens",),
    "requests_finished": ("sglang:num_requests",),
    "requests_aborted": ("sglang:num_aborted_requests",),
}
HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft_s": ("sglang:time_to_first_token_seconds",),
    "itl_s": ("sglang:inter_token_latency_seconds",),
    "queue_s": ("sglang:queue_time_seconds",),
    "e2e_s": ("sglang:e2e_request_latency_seconds",),
}

# ServerArgs / scheduler_info field -> condition key
FIELDS = {
    "version": "version",
    "model_path": "model_path",
    "served_model_name": "model",
    "context_length": "max_model_len",
    "tp_size": "tp_size",
    "pp_size": "pp_size",
    "dp_size": "dp_size",
    "ep_size": "ep_size",
    "dtype": "dtype",
    "quantization": "quantization",
    "kv_cache_dtype": "kv_cache_dtype",
    "page_size": "block_size",
    "max_total_num_tokens": "kv_cache_tokens",
    "speculative_algorithm": "speculative_algorithm",
    "speculative_num_draft_tokens": "speculative_num_draft_tokens",
    "speculative_draft_model_path": "speculative_draft_model",
}


def finish(
    ix: MetricIndex, gauges: dict[str, float], counters: dict[str, float], info: dict[str, object]
) -> None:
    """Token rates from the scheduler's counter, the speculative gauges only with speculation, the model
    and the KV capacity into the conditions."""
    # The scheduler's per-iteration token counter moves while requests run; the tokenizer's counters
    # move only when a request finishes. Prefer the former for rates.
    realtime = ix.breakdown("sglang:realtime_tokens", "mode")
    if "decode" in realtime:
        counters["gen_tokens"] = realtime["decode"]
    if "prefill_compute" in realtime or "prefill_cache" in realtime:
        compute, cache = realtime.get("prefill_compute", 0.0), realtime.get("prefill_cache", 0.0)
        counters["prompt_tokens"] = compute + cache
        counters["prefix_queries"] = compute + cache
        counters["prefix_hits"] = cache
    elif "cached_prompt_tokens" in counters and "prompt_tokens" in counters:
        counters["prefix_queries"] = counters["prompt_tokens"]
        counters["prefix_hits"] = counters["cached_prompt_tokens"]
    # SGLang publishes the speculative gauges even without speculation, as zeros: a zero accept
    # length means "no speculative decoding", not "0 % accepted".
    if not gauges.get("spec_accept_length"):
        gauges.pop("spec_accept_rate", None)
        gauges.pop("spec_accept_length", None)
    for samples in ix.plain.values():
        if samples and samples[0].name.startswith("sglang:"):
            model = next((s.labels.get("model_name") for s in samples if s.labels.get("model_name")), None)
            if model:
                info["model"] = model
                break
    if "max_total_tokens" in gauges:
        info["kv_cache_tokens"] = int(gauges.pop("max_total_tokens"))


def conditions(server_info: Mapping[str, object]) -> dict[str, object]:
    """Condition keys from SGLang's server args and scheduler info."""
    fields = {FIELDS[k]: v for k, v in server_info.items() if k in FIELDS}
    if "disable_radix_cache" in server_info:
        fields["prefix_caching"] = not server_info["disable_radix_cache"]
    if not fields.get("model"):
        fields.pop("model", None)
    if fields.get("speculative_algorithm") in (None, "", "NONE"):
        fields.pop("speculative_algorithm", None)
    return fields


BUSY = "SGLang flushes only when no request is running or waiting"
FLUSH = CacheResetRoute(
    path="/flush_cache",
    hint="SGLang serves /flush_cache",
    body_refusal="fail",
    body_refusal_why=BUSY,
    absent_why="the server has no /flush_cache",
    other_why="SGLang refused the flush",
    status_whys={400: BUSY},
)

SGLANG = Runtime(
    name="sglang",
    label="SGLang",
    owned_by="sglang",
    info_paths=("/server_info", "/get_server_info"),
    info_keys=("version", "tp_size", "model_path"),
    identified_by=("owned_by", "info_keys", "metrics"),
    metrics=MetricNames("sglang:", GAUGES, COUNTERS, HISTOGRAMS, finish=finish),
    conditions=conditions,
    kv_capacity_key="max_total_num_tokens",
    cache_resets=(FLUSH,),
    launch=LaunchCommand("sglang.launch_server", "--model-path"),
)
