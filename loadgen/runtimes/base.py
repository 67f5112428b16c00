"""What a server runtime is to ramp, typed once: ``Runtime`` and the parts it fills in.

A runtime says how to recognise it (the ``owned_by`` of its ``/v1/models`` entries, its own info
endpoints and the keys that mark them, the prefix of its ``/metrics`` names), what its metric names mean
(``MetricNames``: canonical name -> the runtime's names, how series combine, and a ``finish`` step for
what tables cannot say), which of its info document's fields are run conditions, under which name it
states its KV capacity, how its prefix cache is reset (``CacheResetRoute``: the endpoint and what each
answer means) and how it is started (``LaunchCommand``). Data (and two small pure functions) only: the
telemetry, target and launch modules read it; a leaf that imports nothing from the project.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:  # the closed set of names sits beside the registry of runtimes (loadgen.runtimes)
    from loadgen.runtimes import RuntimeName

Combine = Literal["sum", "mean", "max"]  # how a metric's distinct series make one number
BreakdownKind = Literal["gauge", "counter"]
DEFAULT_KV_CAPACITY_KEY = "kv_cache_size_tokens"  # a capacity stated by --tag, or by an unnamed runtime


class Series(Protocol):
    """One sample of a scrape, as a runtime's ``finish`` step sees it."""

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...


class MetricIndex(Protocol):
    """A scrape's samples of one runtime, grouped by base name (``loadgen.telemetry.exposition``)."""

    @property
    def plain(self) -> Mapping[str, Sequence[Series]]: ...

    def breakdown(self, name: str, label: str) -> dict[str, float]: ...


# A runtime's last step over a scrape: (index, gauges, counters, info), the three dicts filled in place.
Finish = Callable[[MetricIndex, dict[str, float], dict[str, float], dict[str, object]], None]


@dataclass(frozen=True, slots=True)
class MetricNames:
    """canonical -> (the runtime's base names in order of preference, how to combine series). Base names
    have no ``_total``; the first present in a scrape wins. Breakdowns are kept as "<canonical>.<label
    value>" beside the total: canonical prefix -> (base name, label, kind)."""

    prefix: str  # every name of the runtime starts with it ("<runtime>:")
    gauges: Mapping[str, tuple[tuple[str, ...], Combine]]
    counters: Mapping[str, tuple[str, ...]]
    histograms: Mapping[str, tuple[str, ...]]
    breakdowns: Mapping[str, tuple[str, str, BreakdownKind]] = field(default_factory=dict)
    finish: Finish | None = None


@dataclass(frozen=True, slots=True)
class CacheResetRoute:
    """One prefix-cache reset endpoint (POSTed) and what its answers mean."""

    path: str  # with any query string the runtime needs
    hint: str  # where the runtime serves it, for "the server offers no cache reset (...)"
    body_refusal: str  # a 2xx whose body (spaces removed, lowercased) holds this did not reset ...
    body_refusal_why: str  # ... for this reason
    absent_why: str  # a 404 or 405
    other_why: str  # any other refusal
    status_whys: Mapping[int, str] = field(default_factory=dict)  # refusals the runtime explains itself


@dataclass(frozen=True, slots=True)
class LaunchCommand:
    """``python -m <module> <model_flag> MODEL ...``: how ``ramp launch`` starts the runtime."""

    module: str
    model_flag: str


@dataclass(frozen=True, slots=True)
class Runtime:
    """One runtime's adapter: every fact about it that ramp uses, in one value."""

    name: RuntimeName
    label: str  # as people write it ("vLLM")
    owned_by: str | None = None  # the ``owned_by`` of its /v1/models entries
    info_paths: tuple[str, ...] = ()  # its own JSON info endpoints (GET), newest first
    info_keys: tuple[str, ...] = ()  # keys of that document that mark it as this runtime's
    version_path: str | None = None  # GET: ``{"version": ...}``
    metrics: MetricNames | None = None  # its /metrics names (None: it publishes none ramp reads)
    # The conditions its info document states (condition key -> value), None: it says none there.
    conditions: Callable[[Mapping[str, object]], dict[str, object]] | None = None
    kv_capacity_key: str = DEFAULT_KV_CAPACITY_KEY  # the name it states its KV capacity in tokens under
    cache_resets: tuple[CacheResetRoute, ...] = ()  # tried in turn, the next only after a 404 / 405
    launch: LaunchCommand | None = None  # None: ``ramp launch`` cannot start it
    tool_call_flags: str = ""  # what it must be started with to parse tool calls ("": none known)
