"""Which server is this, and how was it started? Runtime detection and server conditions.

``discover(base_url)`` asks the endpoints each runtime answers (all at once, each with a short timeout)
and merges what comes back; what the server does not say stays ``None`` for ``--tag key=value``:

- the simulator: ``/_sim/info`` (any condition keys it returns are taken as they are);
- SGLang: ``/server_info`` or ``/get_server_info``, the server args plus scheduler info:
  ``tp_size``, ``dp_size``, ``ep_size``, ``pp_size``, ``dtype``, ``quantization``, ``kv_cache_dtype``,
  ``context_length``, ``speculative_algorithm``... (sgl-project/sglang ``entrypoints/http_server.py``);
- vLLM: ``/version``, ``/v1/models`` (``max_model_len``), and ``/metrics`` (``vllm:cache_config_info``
  labels: block size, KV cache dtype and size, prefix caching); vLLM exposes no parallel layout there.

Which runtime answered is ``loadgen.runtimes.identify``'s call (the probe's answer too);
which fields of its info document are conditions is the runtime's (``Runtime.conditions``,
``loadgen.runtimes``); this module asks them all at once and merges the answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from loadgen.runtimes import SIM, RuntimeName, identify, lookup
from loadgen.target.bounded import METRICS_BYTES, MODELS_BYTES, ReplyTooLarge, ReplyTooSlow, read_capped
from loadgen.target.connect import route
from loadgen.target.http import (
    auth_headers,
    describe_error,
    fetch_runtime_docs,
    get_json,
    server_root,
)
from loadgen.telemetry.exposition import detect_runtime, parse_samples, reading_from_samples
from loadgen.telemetry.reading import SourceError

if TYPE_CHECKING:  # httpx imports its CLI (rich, click) when imported: only on first use here
    import httpx

    from loadgen.types import Target

SERVER_KEYS = (
    "runtime",
    "version",
    "model",
    "model_path",
    "max_model_len",
    "tp_size",
    "pp_size",
    "dp_size",
    "ep_size",
    "dtype",
    "quantization",
    "kv_cache_dtype",
    "block_size",
    "kv_cache_tokens",
    "prefix_caching",
    "speculative_algorithm",
    "speculative_num_draft_tokens",
    "speculative_draft_model",
)

# Aliases a simulator (or a proxy) may use for the same conditions.
ALIASES = {
    "tensor_parallel_size": "tp_size",
    "pipeline_parallel_size": "pp_size",
    "data_parallel_size": "dp_size",
    "expert_parallel_size": "ep_size",
    "max_context": "max_model_len",
    "context_length": "max_model_len",
    "served_model_name": "model",
    "kv_cache_size_tokens": "kv_cache_tokens",
    "kv_capacity_tokens": "kv_cache_tokens",
    "enable_prefix_caching": "prefix_caching",
    "num_speculative_tokens": "speculative_num_draft_tokens",
}
SIM_KEYS = frozenset(SERVER_KEYS) - {"runtime"} | {"gpu_name"}


async def _get_text(client: httpx.AsyncClient, url: str, timeout_s: float) -> str | BaseException:
    import httpx

    try:
        r = await read_capped(client, "GET", url, max_bytes=METRICS_BYTES, total_s=timeout_s)
        if r.status_code != 200:
            return OSError(f"HTTP {r.status_code} from {url}")
        return r.text
    except (httpx.HTTPError, OSError, ReplyTooLarge, ReplyTooSlow) as exc:
        return exc


async def discover(
    base_url: str,
    *,
    api_key_env: str | None = None,
    timeout_s: float = 2.0,
    transport: httpx.AsyncBaseTransport | None = None,
    target: Target | None = None,  # the load's target: its proxy and TLS settings apply here too
) -> dict[str, object | None]:
    """Runtime and server conditions; every key in ``SERVER_KEYS`` is present (``None`` = unknown).

    Also ``reachable`` (bool) and ``error`` (one line naming the URL when nothing answered). The key is the
    value of the environment variable ``api_key_env``.
    """
    import httpx

    root = server_root(base_url)
    out: dict[str, object | None] = dict.fromkeys(SERVER_KEYS)
    proxy, verify = route(root, target)  # the one proxy rule of loadgen.target.connect
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(timeout_s),
        headers=auth_headers(api_key_env),
        transport=transport,
        follow_redirects=True,
        proxy=proxy,
        verify=verify,
        trust_env=False,
    ) as client:
        docs, models, metrics = await asyncio.gather(
            fetch_runtime_docs(client, root),
            get_json(client, root + "/v1/models", MODELS_BYTES),
            _get_text(client, root + "/metrics", timeout_s),
        )
    metrics_runtime = _metrics_conditions(out, metrics, root + "/metrics")
    _models_conditions(out, models)
    docs = replace(docs.with_models(models), metrics_runtime=metrics_runtime)
    runtime, version = identify(docs)
    out["runtime"] = runtime
    known = lookup(runtime)
    if (sim := docs.info.get(SIM.name)) is not None:  # a simulator's conditions, whatever runtime it imitates
        _override(out, _sim_conditions(sim))
    elif (
        known is not None and known.conditions is not None and (own := docs.info.get(known.name)) is not None
    ):
        _override(out, known.conditions(own))  # the server info document (the runtime's own)
    if out["version"] is None and version is not None:
        out["version"] = version
    answered = bool(docs.info) or bool(docs.versions) or models is not None or isinstance(metrics, str)
    out["reachable"] = answered
    out["error"] = None
    if not answered:
        out["error"] = (
            describe_error(metrics, root + "/metrics", timeout_s)
            if isinstance(metrics, BaseException)
            else f"no answer from {root}"
        )
    return out


def _metrics_conditions(
    out: dict[str, object | None], metrics: str | BaseException, url: str
) -> RuntimeName | None:
    """Fill what the /metrics page says (a runtime's ``*_info`` labels); return the runtime its names show."""
    if not isinstance(metrics, str):
        return None
    try:
        samples = parse_samples(metrics, url)
    except SourceError:
        return None
    _fill(out, reading_from_samples(samples, 0).info)
    return detect_runtime(samples)


def _models_conditions(out: dict[str, object | None], models: object | None) -> None:
    """Fill the served model, its path and context length from the /v1/models document."""
    if not (isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]):
        return
    first = models["data"][0]
    if isinstance(first, dict):
        _fill(out, {"model": first.get("id"), "max_model_len": first.get("max_model_len")})
        if first.get("root") and first.get("root") != first.get("id"):
            _fill(out, {"model_path": first.get("root")})


def _sim_conditions(info: Mapping[str, object]) -> dict[str, object]:
    """Known condition keys anywhere in the simulator's /_sim/info (top level first, then nested)."""
    found: dict[str, object] = {}
    pending: list[Mapping[str, object]] = [info]
    while pending:
        level = pending.pop(0)
        for k, v in level.items():
            if isinstance(v, Mapping):
                pending.append(v)
                continue
            key = ALIASES.get(str(k), str(k))
            if key in SIM_KEYS and key not in found and v not in (None, ""):
                found[key] = v
    if found.get("speculative_num_draft_tokens") == 0:
        del found["speculative_num_draft_tokens"]  # 0 draft tokens = no speculation, not a setting
    return found


def _fill(out: dict[str, object | None], values: Mapping[str, object]) -> None:
    for k, v in values.items():
        if k in out and out[k] is None and v not in (None, ""):
            out[k] = v


def _override(out: dict[str, object | None], values: Mapping[str, object]) -> None:
    for k, v in values.items():
        if v not in (None, ""):
            out[k] = v
