"""What a server runtime is to ramp, typed once: ``Runtime`` and the parts it fills in.

A runtime says how to recognise it (``identify``: the ``owned_by`` of its ``/v1/models`` entries, its own
info endpoints and the keys that mark them, its version endpoint, the prefix of its ``/metrics`` names), what its metric names mean
(``MetricNames``: canonical name -> the runtime's names, how series combine, and a ``finish`` step for
what tables cannot say), which of its info document's fields are run conditions, under which name it
states its KV capacity, how its prefix cache is reset (``CacheResetRoute``: the endpoint and what each
answer means) and how it is started (``LaunchCommand``). Data (and two small pure functions) only: the
telemetry, target and launch modules read it; a leaf that imports nothing from the project.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, Protocol, get_args

if TYPE_CHECKING:  # the closed set of names sits beside the registry of runtimes (loadgen.runtimes)
    from loadgen.runtimes import RuntimeName

Combine = Literal["sum", "mean", "max"]  # how a metric's distinct series make one number
BreakdownKind = Literal["gauge", "counter"]
DEFAULT_KV_CAPACITY_KEY = "kv_cache_size_tokens"  # a capacity stated by --tag, or by an unnamed runtime
# What shows a server's runtime, the most specific first: a server is named by the runtime that claims it on
# the earliest rung (``loadgen.runtimes.identify``; on one rung, the first in ``RUNTIMES``' order). own_info:
# any JSON object at its info paths; owned_by: its /v1/models entries' owned_by; info_keys: its info document
# holds one of its keys; metrics: its /metrics names; version: a {"version": ...} at its version path;
# models: it serves /v1/models at all.
Evidence = Literal["own_info", "owned_by", "info_keys", "metrics", "version", "models"]
EVIDENCE: tuple[Evidence, ...] = get_args(Evidence)


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


def _text(value: object) -> str | None:
    return str(value) if value not in (None, "") else None


def _mapping(doc: object) -> Mapping[str, object] | None:
    return doc if isinstance(doc, Mapping) else None


@dataclass(frozen=True, slots=True)
class RuntimeDocs:
    """What a server answered at the endpoints that name its runtime, as ``Runtime.identify`` reads it: each
    runtime's own info document (the first of its ``info_paths`` that answered a JSON object) and its
    ``version_path``'s, by runtime name; the ``owned_by`` of its /v1/models entries (lowercased); and the
    runtime its /metrics names belong to, when the caller scraped it."""

    info: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    versions: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    owners: frozenset[str] = field(default_factory=frozenset)
    models_answered: bool = False  # /v1/models answered with a model list
    metrics_runtime: RuntimeName | None = None

    @classmethod
    def of(
        cls,
        info: Mapping[str, Sequence[object]] | None = None,
        versions: Mapping[str, object] | None = None,
        models: object | None = None,
        metrics_runtime: RuntimeName | None = None,
    ) -> RuntimeDocs:
        """From raw answers as the endpoints returned them (anything, or None): ``info`` maps a runtime's
        name to the answers of its info paths in its order (the first JSON object is its document),
        ``versions`` to its version path's, ``models`` is the /v1/models document. What is not a JSON
        object is left out."""
        own = {name: doc for name, docs in (info or {}).items() if (doc := _first_mapping(docs)) is not None}
        stated = {name: doc for name, raw in (versions or {}).items() if (doc := _mapping(raw)) is not None}
        entries = models.get("data") if isinstance(models, Mapping) else None
        listed = [e for e in entries if isinstance(e, Mapping)] if isinstance(entries, list) else []
        return cls(
            info=own,
            versions=stated,
            owners=frozenset(str(e.get("owned_by", "")).lower() for e in listed),
            models_answered=bool(listed),
            metrics_runtime=metrics_runtime,
        )

    def with_models(self, models: object | None) -> RuntimeDocs:
        """The same answers plus the ``/v1/models`` document's owners (fetched apart, e.g. by the probe)."""
        fresh = RuntimeDocs.of(models=models)
        return replace(self, owners=fresh.owners, models_answered=fresh.models_answered)

    def version(self) -> str | None:
        """The version a version path states (``{"version": ...}``), the first that does."""
        return next(
            (v for doc in self.versions.values() if (v := _text(doc.get("version"))) is not None), None
        )


def _first_mapping(docs: Sequence[object]) -> Mapping[str, object] | None:
    return next((doc for raw in docs if (doc := _mapping(raw)) is not None), None)


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
    identified_by: tuple[Evidence, ...] = ()  # the rungs of ``EVIDENCE`` it claims a server on
    claim_key: str | None = (
        None  # its info document may name another runtime, under this key, that it imitates
    )

    def identify(self, docs: RuntimeDocs) -> tuple[Evidence, str | None] | None:
        """The earliest rung of ``EVIDENCE`` on which ``docs`` show this runtime, and the version stated
        (its own info document's, else a version path's); None: nothing shows it."""
        info = docs.info.get(self.name)
        version = docs.versions.get(self.name)
        shows: dict[Evidence, bool] = {
            "own_info": info is not None,
            "owned_by": self.owned_by is not None and self.owned_by in docs.owners,
            "info_keys": info is not None and any(key in info for key in self.info_keys),
            "metrics": docs.metrics_runtime == self.name,
            "version": version is not None and _text(version.get("version")) is not None,
            "models": docs.models_answered,
        }
        rung = next((e for e in EVIDENCE if e in self.identified_by and shows[e]), None)
        if rung is None:
            return None
        return rung, (_text(info.get("version")) if info is not None else None) or docs.version()
