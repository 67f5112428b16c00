"""The run's handle on the server's telemetry (``loadgen.telemetry.TelemetryHub``): started from the run's
settings, sampled at the windows' edges, read for the snapshot, the step line and the record header.

Every call is best effort: a slow or failing source never stops the run or holds a step back for long,
and a run without telemetry reads "no server figures" (``None``, empty), never a fake zero.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from typing import TYPE_CHECKING

from loadgen.profile import Profile, context_spread
from loadgen.run.config import RunConfig
from loadgen.snapshot import KVHeadroom, ServerTelemetry

if TYPE_CHECKING:
    from loadgen.telemetry import TelemetryHub
    from loadgen.telemetry.reading import CumulativeHistogram

HUB_STOP_S = 10.0
FIRST_SCRAPE_S = 3.0
# Failed polls in a row, after a good one, that make a source lost (one slow scrape is not news).
LOST_AFTER = 2


class TelemetryLink:
    """A ``TelemetryHub`` once ``start`` found something to poll, else nothing; the same calls either way."""

    def __init__(self, hub: TelemetryHub | None = None) -> None:
        self.hub = hub
        # Several replicas as one target: a hub per replica after the first (``hub`` polls the first, and
        # the GPU sources), each polling that replica's /metrics for the per-replica KV-cache usage.
        self.replica_hubs: list[TelemetryHub] = []
        self.told: set[tuple[int, str]] = set()  # the sources whose trouble was said (``new_drops``)

    @property
    def active(self) -> bool:
        return self.hub is not None

    async def start(self, config: RunConfig) -> None:
        """Start polling what the settings ask for (the server's /metrics, GPU sources); none: stay inactive."""
        if not (config.telemetry or config.gpu_cmd or config.nvml or config.dcgm_url):
            return
        try:  # imported only when asked for: a run without telemetry never loads the pollers
            from loadgen.telemetry import TelemetryHub, build_sources, discover
        except ImportError:
            return
        env = config.target.api_key_env  # the key itself is read by target.http, never held here
        sources = build_sources(
            config.target.base_url if config.telemetry else None,
            metrics=config.telemetry,
            gpu_cmd=config.gpu_cmd,
            nvml=config.nvml,
            dcgm_url=config.dcgm_url,
            api_key_env=env,
            target=config.target,
        )
        if not sources:
            return
        conditions: dict[str, object] = {}
        if config.telemetry:
            try:
                conditions = dict(
                    await discover(config.target.base_url, api_key_env=env, target=config.target)
                )
            except Exception:  # discovery is best effort: the run does not depend on it
                conditions = {}
            conditions.pop("reachable", None)
            conditions.pop("error", None)
        # The server's "last N s" figures cover the client's rolling window.
        self.hub = TelemetryHub(sources, conditions=conditions, hist_window_s=config.rolling_s)
        await self.hub.start()
        # A moment for the first scrape, so the record's header has the GPU and server conditions.
        await self.hub.ready(FIRST_SCRAPE_S)
        if config.tags:
            self.hub.update_conditions(dict(config.tags))
        if config.telemetry:
            await self.start_replicas(config)

    async def start_replicas(self, config: RunConfig) -> None:
        """A hub for each replica after the first, polling only its /metrics (best effort, like the rest)."""
        from loadgen.telemetry import TelemetryHub, build_sources

        for target in config.target.replica_targets()[1:]:
            sources = build_sources(
                target.base_url, metrics=True, api_key_env=target.api_key_env, target=target
            )
            hub = TelemetryHub(sources, hist_window_s=config.rolling_s)
            await hub.start()
            self.replica_hubs.append(hub)
        for hub in self.replica_hubs:
            await hub.ready(FIRST_SCRAPE_S)

    def dropped(self) -> list[str]:
        """A notice for each source whose page was dropped for being too big or too slow (an endless or
        50 MB /metrics: ``loadgen.target.bounded``), so the run says why its server figures are n/a."""
        return [text for _, text in self.troubles() if text.endswith("(telemetry dropped)")]

    def troubles(self) -> list[tuple[tuple[int, str], str]]:
        """(key, notice) for each source in trouble now: a page dropped for its size or time, or a source
        that answered before and has failed ``LOST_AFTER`` polls in a row since (a server whose /metrics
        went slow, trickling or junk mid-run). A source that never answered (a server without /metrics)
        is not news: its panel says n/a from the start."""
        hubs = (self.hub, *self.replica_hubs) if self.hub is not None else ()
        out: list[tuple[tuple[int, str], str]] = []
        for number, hub in enumerate(hubs):
            for name, (text, failures, answered) in hub.failing().items():
                if text.endswith("(telemetry dropped)"):
                    out.append(((number, name), f"telemetry source {name}: {text}"))
                elif answered and failures >= LOST_AFTER:
                    lost = f"telemetry source {name} lost mid-run: {text}; server figures n/a while it fails"
                    out.append(((number, name), lost))
        return out

    def new_drops(self) -> list[str]:
        """``troubles``' notices not said before: the run says each source's once, when it is first seen
        (at the start, or at the controller's next tick after a page went too big, too slow or junk)."""
        fresh = [(key, text) for key, text in self.troubles() if key not in self.told]
        self.told.update(key for key, _ in fresh)
        return [text for _, text in fresh]

    def replica_kv(self, t0_ns: int, t1_ns: int) -> list[float | None]:
        """Each replica's mean KV-cache usage over a window (None where n/a); [] with one server."""
        if self.hub is None or not self.replica_hubs:
            return []
        out: list[float | None] = []
        for hub in (self.hub, *self.replica_hubs):
            try:
                out.append(hub.window_summary(t0_ns, t1_ns).get("kv_usage_mean"))
            except Exception:
                out.append(None)
        return out

    def replica_kv_now(self) -> list[float | None]:
        """Each replica's latest KV-cache usage (None where n/a); [] with one server."""
        if self.hub is None or not self.replica_hubs:
            return []
        return [hub.latest().kv_cache_usage for hub in (self.hub, *self.replica_hubs)]

    def poke(self) -> None:
        """Sample the server at a window's edge, so its counters cover the same seconds as the window."""
        for hub in (self.hub, *self.replica_hubs) if self.hub is not None else ():
            with contextlib.suppress(Exception):
                hub.poke()

    def settled(self, t_ns: int) -> bool:
        """The server has been sampled after ``t_ns`` (or there is nothing to wait for)."""
        if self.hub is None:
            return True
        try:
            return all(hub.settled(t_ns) for hub in (self.hub, *self.replica_hubs))
        except Exception:
            return True

    def window_summary(self, t0_ns: int, t1_ns: int) -> dict[str, float | None]:
        """A step line's server figures, with ``kv_headroom_seqs``: the sequences of this profile the KV
        cache holds at its mean context (beside the step's level, the record says whether it passed it)."""
        if self.hub is None:
            return {}
        try:
            out = dict(self.hub.window_summary(t0_ns, t1_ns))
        except Exception:
            return {}
        room = self.kv_headroom()
        out["kv_headroom_seqs"] = (
            None if room is None or room.seqs_at_mean is None else float(room.seqs_at_mean)
        )
        return out

    def ttft_histograms(self, t0_ns: int, t1_ns: int) -> dict[str, CumulativeHistogram]:
        """The server's TTFT, queue and prefill histograms over a step's window (empty: none, or no hub)."""
        if self.hub is None:
            return {}
        try:
            return self.hub.ttft_histograms(t0_ns, t1_ns)
        except Exception:
            return {}

    def window_doubt(self, t0_ns: int, t1_ns: int) -> str:
        """Why the server's figures over a window cannot be read as its own ('' without telemetry, or when
        nothing is wrong): its telemetry stopped, its counters went back, its buckets changed."""
        if self.hub is None:
            return ""
        try:
            return self.hub.window_doubt(t0_ns, t1_ns) or ""
        except Exception:
            return ""

    def latest(self, step_t0_ns: int | None) -> ServerTelemetry | None:
        """The server panel's figures; with the measured step's start, its TTFT over that step too."""
        if self.hub is None:
            return None
        try:
            server = self.hub.latest()
            if server is not None and step_t0_ns is not None:
                p50, p95 = self.hub.ttft_since(step_t0_ns)
                server = replace(server, step_ttft_ms_p50=p50, step_ttft_ms_p95=p95)
            return server
        except Exception:
            return None

    def plan_headroom(self, profile: Profile, turn_overhead: int = 0) -> None:
        """Give the hub the profile's mean and p95 context, the unit of its KV headroom (in sequences)."""
        if self.hub is None:
            return
        spread = context_spread(profile, turn_overhead)
        with contextlib.suppress(Exception):
            self.hub.set_context(spread.mean if spread else None, spread.p95 if spread else None)

    def kv_headroom(self) -> KVHeadroom | None:
        """The server's KV cache as sequences of this profile; None without telemetry or a stated size."""
        if self.hub is None:
            return None
        try:
            return self.hub.kv_headroom()
        except Exception:
            return None

    def conditions(self) -> dict[str, object | None]:
        if self.hub is None:
            return {}
        try:
            return dict(self.hub.conditions())
        except Exception:
            return {}

    async def wait_changed(self, timeout_s: float) -> bool:
        """Wait until a source reports; False at once without telemetry, or when none did in time."""
        return self.hub is not None and await self.hub.wait_changed(timeout_s)

    async def stop(self) -> None:
        for hub in (self.hub, *self.replica_hubs) if self.hub is not None else ():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(hub.stop(), HUB_STOP_S)
