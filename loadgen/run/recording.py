"""The run's record (``--out``): its header — enough conditions to decide whether two runs may be
compared — then events and step lines as they happen, and an end line last. Without ``--out`` the same
calls write nothing.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import re
from collections.abc import Mapping

from loadgen.analysis.cost import Costs, step_cost, task_turns
from loadgen.config import SLO
from loadgen.record import RecordWriter
from loadgen.run.clock import ClockPair, read_clocks
from loadgen.run.config import RunConfig
from loadgen.run.detail import RequestDetail, detail_path
from loadgen.run.protocol import ControlCommand, Mark
from loadgen.run.replicas import replica_header
from loadgen.run.revision import local_commit
from loadgen.run.snapshots import SnapshotBuilder
from loadgen.run.state import Load, RunStatus
from loadgen.snapshot import StepSummary
from loadgen.target.connect import proxy_for
from loadgen.target.http import scrub

# A Hugging Face cache path names the commit it holds: .../models--org--name/snapshots/<40 hex digits>
_SNAPSHOT = re.compile(r"/snapshots/([0-9a-f]{40})(?:/|$)")


def model_revision(
    tags: Mapping[str, str], server_conditions: Mapping[str, object | None]
) -> tuple[str | None, str | None]:
    """The model's revision and where it was learnt: given (``--revision``, ``--tag revision=``, a launched
    server's ``--revision``), else the commit in the ``/v1/models`` root path, else the commit of that path
    as a local model directory (``loadgen.run.revision``); (None, None) when unknown."""
    given = tags.get("revision") or tags.get("model_revision")
    if given:
        return given, "given"
    path = server_conditions.get("model_path")
    if not isinstance(path, str):
        return None, None
    found = _SNAPSHOT.search(path)
    if found:
        return found.group(1), "/v1/models root"
    commit = local_commit(path)  # a model directory on this host (ramp launch, or a server beside ramp)
    return (commit, "local model directory") if commit else (None, None)


def _proxy(config: RunConfig) -> str | None:
    proxy = proxy_for(config.target)
    return scrub(proxy) if proxy is not None else None


def record_header(
    config: RunConfig,
    status: RunStatus,
    load: Load,
    slo: SLO,
    max_model_len: int | None,
    server_conditions: Mapping[str, object | None],
) -> dict[str, object]:
    """The record's first line."""
    tags = dict(config.tags)
    profile = config.profile
    plan = load.plan
    revision, revision_source = model_revision(tags, server_conditions)
    return {
        "model": status.model,
        "model_revision": revision,
        "model_revision_source": revision_source,
        "runtime": status.runtime,
        "runtime_version": status.runtime_version,
        "max_model_len": max_model_len,
        "tags": tags,
        "server_conditions": dict(server_conditions),
        "profile": profile.name,
        "profile_hash": profile.content_hash,
        "profile_content": profile.to_dict(),
        "target_url": config.target.base_url,
        "insecure": config.target.insecure,  # --insecure: the server's TLS certificate was not verified
        "proxy": _proxy(config),  # the proxy every call to the target went through, None when direct
        "api": config.api,  # the API the workers speak (flags over profile), not the profile's
        "mode": load.mode,
        "arrival": load.arrival_label(),
        "workers": config.workers,
        "transport": config.transport,
        # The prompts' seed: a fresh one per run unless --seed gave it (then the same prompts again, and a
        # server with a prefix cache may serve them from it).
        "seed": config.seed,
        "seed_source": config.seed_source,
        "fit_context": config.fit_context,  # requests clamped to the server's max_model_len
        "plan": None if plan is None else plan.as_dict(),
        "reset_prefix_cache": config.reset_prefix_cache,  # never / step (before each warm-up) / run (once)
        "find_max": None if config.find_max is None else list(config.find_max),
        "slo": slo.as_dict(),
        "cold_start": config.cold,
        # the profile's [pricing] with the price flags over it: what `ramp report` and `compare` cost with
        "pricing": None if config.pricing is None else config.pricing.to_dict(),
        "host": platform.node(),
        # where the workers run: local processes or Ray actors, each host's workers and share of the load
        "fleet": status.fleet or None,
        **replica_header(config.target),  # several replicas as one target: each one, and the spread policy
        # --save-requests-detail: the companion file of per-request rows (None: not asked for)
        "requests_detail": detail_path(config.out) if config.save_requests_detail and config.out else None,
        # --save-requests: every request as sent (loadgen.sources.requests), for --requests to replay; the
        # replayed source itself (a dataset, trace or request file: path, content hash) is profile_content.replay
        "requests_saved": config.save_requests,
        "metrics_url": config.metrics_url,  # --metrics-port: where ramp's own Prometheus metrics were served
        "otel": config.otel,  # --otel: a traceparent and a span per request (about 0.1 ms of client CPU each)
        # --replay-session RECORD: the session this run replays (loadgen.analysis.session), None otherwise
        "replay_of": None if config.replay_of is None else dict(config.replay_of),
    }


def timeline(summary: StepSummary, run_t0_ns: int, snapshots: SnapshotBuilder) -> dict[str, object]:
    """A step line's extra keys: the step's start (warm-up included) on the run's clock and the 1 Hz
    series since the last line — what ``ramp replay`` draws the throughput timeline and its boundaries
    from."""
    started_s = (summary.window_t0_ns - run_t0_ns) / 1e9 - summary.warmup_s
    return {"started_s": round(started_s, 3), "series": snapshots.take_series()}


def cost_keys(summary: StepSummary, config: RunConfig) -> dict[str, object]:
    """A priced run's step line: what the step cost (``loadgen.analysis.cost``), on each basis the pricing
    has: ``gpu`` (GPU hours over the window) and ``tokens`` (the bill for its requests), each in USD, per 1M
    output tokens and per task (a request, or a session of a multi-turn profile: ``task``)."""
    if config.pricing is None:
        return {}
    turns = task_turns({"profile_content": config.profile.to_dict()})
    found = step_cost(summary, config.pricing, turns)

    def basis(costs: Costs | None) -> dict[str, float | None] | None:
        if costs is None:
            return None
        return {"usd": costs.usd, "per_1m_output": costs.per_1m_output, "per_task": costs.per_task}

    task = "request" if turns is None else "session"
    return {"cost": {"gpu": basis(found.gpu), "tokens": basis(found.tokens), "task": task}}


class RunRecord:
    """A ``RecordWriter`` once ``open`` made one, else nothing; with ``--save-requests-detail`` its companion
    file of per-request rows (``detail``, written step by step with it)."""

    def __init__(
        self,
        writer: RecordWriter | None = None,
        path: str | None = None,
        detail: RequestDetail | None = None,
        clocks: ClockPair | None = None,
    ) -> None:
        self.writer = writer
        self.clocks = clocks if clocks is not None else read_clocks()
        self.path = path if writer is not None else None  # where the record is, None when there is none
        self.detail = detail if detail is not None else RequestDetail()
        self.closed = False  # the end line is written

    @classmethod
    def open(
        cls,
        path: str,
        header: Mapping[str, object],
        events: tuple[tuple[str, dict[str, object]], ...],
        detail_t0_ns: int | None = None,
    ) -> RunRecord:
        """Create the record at ``path`` (and its folder), write the header and the events asked for first;
        ``detail_t0_ns`` (the run's start): the per-request file beside it too."""
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        writer = RecordWriter(path)
        clocks = read_clocks()
        writer.write_header({**header, "clock": clocks.as_dict()})  # Unix time of any monotonic instant
        for kind, data in events:
            writer.write_event(kind, data)
        detail = RequestDetail.open(path, detail_t0_ns, clocks) if detail_t0_ns is not None else None
        return cls(writer, path, detail, clocks)

    def event(self, kind: str, data: Mapping[str, object]) -> None:
        if self.writer is not None:
            self.writer.write_event(kind, data)

    def command(self, cmd: ControlCommand, load: Load, elapsed_s: float, step: int) -> None:
        """An operator's command (a key, the Python API) as it was applied: ``command`` (its name, snake
        case: ``set_level``, ``change_level``, ``set_rate``, ``set_mode``, ``next_step``, ``pause``,
        ``resume``, ``set_auto``, ``stop``) and its arguments, when (``elapsed_s`` on the run's clock), the
        step the header named, and the load asked for after it (``load``). A mark has its own event."""
        if self.writer is None or self.closed or isinstance(cmd, Mark):
            return  # a stop that comes after the end line changes nothing the record says
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", type(cmd).__name__).lower()
        after = {"mode": load.mode, "level": load.level, "rate_rps": load.rate, "auto": load.auto}
        data = {"command": name, **dataclasses.asdict(cmd), "elapsed_s": round(elapsed_s, 3), "step": step}
        self.writer.write_event("command", {**data, "load": {**after, "paused": load.paused}})

    def step(
        self,
        summary: StepSummary,
        hists: Mapping[str, str],
        extra: Mapping[str, object] | None = None,
        window: int | None = None,
    ) -> None:
        """The step line, ``extra`` keys after its own (the 1 Hz ``series``, ``started_s``); then the rows
        of its measurement ``window``'s requests (``--save-requests-detail``)."""
        if self.writer is not None:
            self.writer.write_step(summary, hists, **(extra or {}), **self.unix_window(summary))
        if window is not None:
            self.detail.write_step(summary.index + 1, window)  # counted from 1, as the step line

    def unix_window(self, summary: StepSummary) -> dict[str, object]:
        """The step's measurement window in Unix nanoseconds (the header's ``clock`` applied to its
        ``window_t0_ns`` / ``window_t1_ns``): what lays a step over a dashboard or a server log."""
        return {
            "window_t0_unix_ns": self.clocks.unix_ns_of(summary.window_t0_ns),
            "window_t1_unix_ns": self.clocks.unix_ns_of(summary.window_t1_ns),
        }

    def close(self, end: Mapping[str, object]) -> None:
        """The end line, then the file is closed."""
        if self.writer is not None:
            self.writer.write_event("end", end)
            self.writer.close()
            self.closed = True
        self.detail.close()


def planned_header(config: RunConfig) -> dict[str, object]:
    """The record header the run will write, as far as it is known before the server is asked."""
    slo = config.slo if config.slo is not None else config.profile.slo
    status = RunStatus(model=config.target.model)
    return record_header(config, status, Load.of(config), slo, None, {})
