"""The catalogue of measures: each per-request metric and each SLO clause, declared once.

Every table that names a metric or a clause is derived from ``METRICS`` and ``CLAUSES`` here: the HDR
layouts (``loadgen.metrics.hdr``), what a worker measures of each request (``loadgen.metrics.recorder``),
the histogram views (``loadgen.snapshot.METRICS``), the step line of a record (``loadgen.record``), the
report's columns and their JSON schema (``loadgen.analysis.steprows``, ``loadgen.report.schema``), compare's
figures (``loadgen.analysis.figures``), the console's titles and histogram choices (``tui.format``,
``tui.view``), the SLO's fields, its per-request test, its verdict and margin (``loadgen.config``,
``loadgen.slo``). A new metric is one ``Metric`` below; a new clause one ``Clause`` below and its field in
``config.SLO`` (a unit test holds the two equal).

The derived tables read the catalogue when asked, through ``derived``: a test that puts a fixture metric in
``METRICS`` (``monkeypatch.setattr(measures, "METRICS", ...)``) sees it everywhere at once.

Interval figures (a ``_lo``/``_hi`` beside a percentile) are derivation too: the step line's summaries and the
report's columns come from ``Metric.step_points`` and ``POINTS`` by functions over ``METRICS``, so a bound
beside each point is one more name per point there, not another table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, cast, overload


class RequestResult(Protocol):
    """What a metric's value reads of one request: the shape of ``loadgen.types.RequestResult``, named here so
    the catalogue stays a leaf (importing ``loadgen.types`` made a typing loop config → measures → types →
    config)."""

    @property
    def intended_ns(self) -> int: ...
    @property
    def sent_ns(self) -> int: ...
    @property
    def end_ns(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def input_tokens(self) -> int | None: ...
    @property
    def reasoning_tokens(self) -> int: ...
    @property
    def ttft_ns(self) -> int | None: ...
    @property
    def ttfat_ns(self) -> int | None: ...
    @property
    def ttftc_ns(self) -> int | None: ...
    @property
    def called_tool(self) -> bool: ...
    @property
    def tool_decode_tok_s(self) -> float | None: ...
    @property
    def reasoned(self) -> bool: ...
    @property
    def reasoning_ns(self) -> int | None: ...
    @property
    def answer_decode_tok_s(self) -> float | None: ...
    @property
    def decode_tok_s(self) -> float | None: ...


__all__ = [
    "CLAUSES",
    "METRICS",
    "POINTS",
    "SUBSET_NONE",
    "US_PER_HOUR",
    "QUALITY_AGREE",
    "TTFT_MS",
    "TTFAT_MS",
    "REASONING_MS",
    "TTFTC_MS",
    "ITL_MS",
    "DECODE_TOK_S",
    "ANSWER_DECODE_TOK_S",
    "TOOL_DECODE_TOK_S",
    "E2E_MS",
    "LAG_MS",
    "LATENCY_BUCKETS_MS",
    "ITL_BUCKETS_MS",
    "DECODE_BUCKETS_TOK_S",
    "Clause",
    "Compared",
    "Kind",
    "Live",
    "LiveMap",
    "Metric",
    "Side",
    "Split",
    "clause",
    "derived",
    "histogram_metrics",
    "line_metrics",
    "metric",
    "per_request_clauses",
    "side_metrics",
    "token_metrics",
]

# What a histogram holds, which fixes its integer unit and range: a latency (source ns, stored µs, shown
# ms), a rate (source tok/s, stored hundredths, shown tok/s), a per-request token count (tokens as they are).
Kind = Literal["latency", "rate", "tokens"]
Side = Literal["left", "right"]  # the console's histogram panels: latencies left, speeds right
Split = Literal["cache", "bucket"]  # class splits: the request's cache class, its profile bucket
Bound = Literal["at_most", "at_least"]
Subset = Literal["", "tool_call"]  # the requests a clause is judged over: all, or those that called a tool

# Every percentile field of a histogram's figures (``snapshot.Percentiles``), as the report's columns have
# them, in their order.
POINTS: tuple[str, ...] = ("mean", "p50", "p90", "p95", "p99", "p999", "min", "max")
US_PER_HOUR = 3_600_000_000

# The histogram metrics' names, for the code that treats one of them apart (a panel's default, the
# exporter's histograms): the only place a name is written out (a unit test holds the rest of the house to it).
TTFT_MS = "ttft_ms"
TTFAT_MS = "ttfat_ms"
REASONING_MS = "reasoning_ms"
TTFTC_MS = "ttftc_ms"
ITL_MS = "itl_ms"
DECODE_TOK_S = "decode_tok_s"
ANSWER_DECODE_TOK_S = "answer_decode_tok_s"
TOOL_DECODE_TOK_S = "tool_decode_tok_s"
E2E_MS = "e2e_ms"
LAG_MS = "lag_ms"

# Fixed bucket upper bounds (display units) for the cumulative counts a ``HistogramView`` carries in ``le``:
# what ramp's Prometheus exporter (``loadgen.observe.exporter``) publishes as histograms. Fine where LLM
# latencies live: ITL in single milliseconds, TTFT from tens of ms to a minute, decode from 1 to 1000 tok/s.
LATENCY_BUCKETS_MS: tuple[float, ...] = (
    1, 2, 5, 10, 15, 20, 30, 50, 75, 100, 150, 200, 300, 500, 750,
    1000, 1500, 2000, 3000, 5000, 7500, 10000, 15000, 20000, 30000, 60000, 120000,
)  # fmt: skip
ITL_BUCKETS_MS: tuple[float, ...] = (
    0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 25, 30, 40, 50, 75, 100, 150, 200, 300, 500, 1000, 2000, 5000,
)  # fmt: skip
DECODE_BUCKETS_TOK_S: tuple[float, ...] = (
    1, 2, 5, 10, 15, 20, 30, 40, 50, 75, 100, 150, 200, 300, 500, 750, 1000, 2000, 5000,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Compared:
    """One of a metric's figures in ``ramp compare`` (and the repeats table): its percentile and where it
    stands among compare's figures (``rank``; ``loadgen.analysis.figures`` ranks its own the same way)."""

    point: str
    rank: int = 105  # default: after the metric figures declared today, before goodput
    in_seconds: bool = False  # a latency read in s rather than ms (e2e)
    only_reasoned: bool = False  # only where the step's requests reasoned (n/a otherwise)


@dataclass(frozen=True, eq=False)  # identity hash: derived tables are memoised on the catalogue
class Metric:
    """One per-request metric: a histogram of every request's value (or every token's, for ITL)."""

    name: str  # the histogram key, unit last: ttft_ms, decode_tok_s, input_tokens
    kind: Kind
    title: str  # how the console names it (a histogram's title)
    short: str  # the name in a figure's or a clause's label: "TTFT" in "TTFT p95 ms"
    doc: str  # one line: what it measures
    # the value of one request, in source units (ns, tok/s, tokens); None: the request has none. None here:
    # the recorder measures it itself (ITL: one value per token, from the chunk times).
    value: Callable[[RequestResult], float | None] | None
    every_sent: bool = False  # measured on every request sent (errors too), not only the successful ones
    step_points: tuple[str, ...] = ()  # the percentiles a step line carries at a glance
    console: frozenset[Side] = frozenset()  # the histogram panels that may show it
    higher_is_better: bool = False
    compared: tuple[Compared, ...] = ()
    splits: tuple[Split, ...] = ()  # class splits kept beside the whole (``ttft_ms|cache:hit``)
    curve: str = ""  # the percentile a report's throughput-latency curve plots of it ("": none)
    buckets: tuple[float, ...] = ()  # fixed bucket bounds (display units) it is exported with (Prometheus)
    # HDR range in stored integer units, and stored units per display unit
    lowest: int = 1
    highest: int = US_PER_HOUR
    display_div: float = 1000.0
    unit: str = "ms"

    @property
    def suffix(self) -> str:
        """The unit as a column name ends: ms, tok_s, tokens."""
        return self.unit.replace("/", "_")

    @property
    def source_per_unit(self) -> float:
        """Source units (``value``'s) in one display unit: 1e6 ns in a ms; 1 for a rate or a count."""
        return 1e6 if self.kind == "latency" else 1.0

    @property
    def stem(self) -> str:
        """The name less its unit: a report column's stem (ttft, answer_decode)."""
        return self.name.removesuffix("_" + self.suffix)


def _latency(name: str, title: str, short: str, doc: str, *args: Any, **kw: Any) -> Metric:
    # µs: from 1 µs to an hour
    return Metric(name, "latency", title, short, doc, *args, **kw)


def _rate(name: str, title: str, short: str, doc: str, *args: Any, **kw: Any) -> Metric:
    # centi-tok/s: two decimals of a speed, up to a million tok/s
    kw = {"higher_is_better": True, "highest": 10**8, "display_div": 100.0, "unit": "tok/s", **kw}
    return Metric(name, "rate", title, short, doc, *args, **kw)


def _tokens(name: str, doc: str, value: Callable[[RequestResult], float | None]) -> Metric:
    return Metric(
        name,
        "tokens",
        name,
        name,
        doc,
        value,
        step_points=("p50", "p95", "mean"),
        highest=10**8,
        display_div=1.0,
        unit="tokens",
    )


_LEFT: frozenset[Side] = frozenset({"left"})
_RIGHT: frozenset[Side] = frozenset({"right"})
_BOTH: frozenset[Side] = frozenset({"left", "right"})

# The order here is the order of a record's "pct" object and of the report's columns; a step line puts
# the latencies first, then the rates (``line_metrics``).
METRICS: tuple[Metric, ...] = (
    _latency(
        TTFT_MS, "TTFT", "TTFT", "time to first token, from the intended start",
        lambda r: r.ttft_ns, step_points=("p50", "p95", "p99"), console=_LEFT,
        compared=(Compared("p50", 20), Compared("p95", 21)), splits=("cache", "bucket"), curve="p95",
        buckets=LATENCY_BUCKETS_MS,
    ),
    _latency(
        TTFAT_MS, "TTFAT", "TTFAT",
        "time to first answer token (reasoning excluded), from the intended start",
        lambda r: r.ttfat_ns, step_points=("p50", "p95", "p99"), console=_LEFT,
        compared=(Compared("p50", 60), Compared("p95", 61)),
    ),
    _latency(
        REASONING_MS, "reasoning phase", "reasoning",
        "reasoning phase, first token to first answer token (requests that reasoned)",
        lambda r: r.reasoning_ns if r.reasoned else None, step_points=("p50", "p95"),
        compared=(Compared("p50", 70, only_reasoned=True),),
    ),
    _latency(
        TTFTC_MS, "TTFTC", "TTFTC",
        "time to the first tool-call delta, from the intended start (requests that called a tool)",
        lambda r: r.ttftc_ns, step_points=("p50", "p95", "p99"), console=_LEFT,
        compared=(Compared("p50", 90), Compared("p95", 91)),
    ),
    _latency(
        ITL_MS, "ITL", "ITL", "inter-token latency, per token",
        None, step_points=("p50", "p99"), console=_BOTH, compared=(Compared("p99", 30),), curve="p99",
        buckets=ITL_BUCKETS_MS,
    ),
    _rate(
        DECODE_TOK_S, "decode tok/s", "decode",
        "per-request decode speed, the whole output (reasoning included)",
        lambda r: r.decode_tok_s, step_points=("p50", "p95"), console=_RIGHT, compared=(Compared("p50", 10),),
        buckets=DECODE_BUCKETS_TOK_S,
    ),
    _rate(
        ANSWER_DECODE_TOK_S, "answer decode tok/s", "answer decode",
        "per-request decode speed of the answer alone",
        lambda r: r.answer_decode_tok_s, step_points=("p50", "p95"), console=_RIGHT,
        compared=(Compared("p50", 80, only_reasoned=True),),
    ),
    _rate(
        TOOL_DECODE_TOK_S, "tool args tok/s", "tool args",
        "per-request token rate of the tool-call arguments",
        lambda r: r.tool_decode_tok_s if r.called_tool else None, step_points=("p50", "p95"),
        console=_RIGHT, compared=(Compared("p50", 100),),
    ),
    _latency(
        E2E_MS, "e2e latency", "e2e", "end-to-end latency, from the intended start",
        lambda r: r.end_ns - r.intended_ns, step_points=("p50", "p95"), console=_BOTH,
        compared=(Compared("p95", 40, in_seconds=True),), splits=("cache",), curve="p95",
        buckets=LATENCY_BUCKETS_MS,
    ),
    _latency(
        LAG_MS, "schedule lag", "schedule lag", "schedule lag: actual send minus intended send",
        lambda r: r.sent_ns - r.intended_ns if r.sent_ns > 0 else None, every_sent=True,
        step_points=("p50", "p99"), console=_LEFT,
    ),
    # per-request token counts: summarised in a step line's ``<name>_per_req``, not drawn
    _tokens("input_tokens", "input tokens per request", lambda r: r.input_tokens),
    _tokens("output_tokens", "output tokens per request", lambda r: r.output_tokens),
    _tokens(
        "reasoning_tokens", "reasoning tokens per request", lambda r: r.reasoning_tokens if r.reasoned else None
    ),
)  # fmt: skip


@dataclass(frozen=True, eq=False)
class Clause:
    """One clause of the SLO: a limit on one point of one metric over a step (or on the error rate)."""

    key: str  # its ``config.SLO`` field and its key in a profile's [slo] table: ttft_p95_ms
    metric: str  # the metric it reads ("" : the error rate, a count, not a histogram)
    point: str  # the percentile of it (p95), "" for the error rate
    bound: Bound  # the figure must be at most the limit (a latency) or at least it (a speed)
    label: str  # how a verdict names it: "TTFT p95"
    unit: str  # the limit's unit: ms, s, tok/s, % (the error rate's limit is a fraction, shown in %)
    per: float = 1.0  # the metric's display units in one unit of the limit (e2e: 1000 ms in a s)
    # judged per request too (goodput): a request's own value against the limit. ``yields_to``: the clause
    # of the same metric whose limit applies per request instead, when both are set.
    per_request: bool = False
    yields_to: str = ""
    subset: Subset = ""  # the requests it is judged over; with none in a step it is not judged (n/a)
    # a figure of the step itself rather than of a histogram (``metric`` ""): "quality_agree", the share of
    # its answer probes that matched their reference (loadgen.analysis.quality); "" otherwise
    step_figure: str = ""

    @property
    def error_rate(self) -> bool:
        """The error-rate clause: a count of the step's requests, neither a histogram nor a step figure."""
        return not self.metric and not self.step_figure

    @property
    def at_most(self) -> bool:
        return self.bound == "at_most"

    @property
    def scale(self) -> float:
        """The limit's units in one metric display unit (e2e: 1/1000 s in a ms): a figure times this."""
        return 1.0 / self.per


QUALITY_AGREE = "quality_agree"  # a step's answer agreement (``StepSummary.quality["agree"]``)

CLAUSES: tuple[Clause, ...] = (
    Clause("ttft_p95_ms", TTFT_MS, "p95", "at_most", "TTFT p95", "ms", per_request=True),
    Clause("ttft_p99_ms", TTFT_MS, "p99", "at_most", "TTFT p99", "ms", per_request=True, yields_to="ttft_p95_ms"),
    Clause("ttfat_p95_ms", TTFAT_MS, "p95", "at_most", "TTFAT p95", "ms", per_request=True),
    Clause("ttftc_p50_ms", TTFTC_MS, "p50", "at_most", "TTFTC p50", "ms", per_request=True, yields_to="ttftc_p95_ms", subset="tool_call"),
    Clause("ttftc_p95_ms", TTFTC_MS, "p95", "at_most", "TTFTC p95", "ms", per_request=True, subset="tool_call"),
    Clause("decode_p50_tok_s", DECODE_TOK_S, "p50", "at_least", "decode p50", "tok/s", per_request=True),
    Clause("itl_p99_ms", ITL_MS, "p99", "at_most", "ITL p99", "ms"),
    Clause("e2e_p95_s", E2E_MS, "p95", "at_most", "e2e p95", "s", per=1000.0, per_request=True),
    Clause("max_error_rate", "", "", "at_most", "error rate", "%"),
    # a step whose answers differ from the reference is not the best however fast (--quality)
    Clause("quality_agree_min", "", "", "at_least", "answer agreement", "", step_figure=QUALITY_AGREE),
)  # fmt: skip

# What a step lacking a clause's subset says instead of a verdict on it.
SUBSET_NONE: dict[Subset, str] = {"tool_call": "no tool call in the step"}

T = TypeVar("T")


@dataclass
class _Memo:
    source: tuple[object, object] | None = None
    value: object = None


def derived(build: Callable[[tuple[Metric, ...], tuple[Clause, ...]], T]) -> Callable[[], T]:
    """A table derived from the catalogue, built on first use and again whenever ``METRICS`` or
    ``CLAUSES`` is replaced (a test's fixture metric): ``TABLE = derived(lambda ms, cs: ...)``, ``TABLE()``."""
    memo = _Memo()

    def get() -> T:
        seen = memo.source
        if seen is None or seen[0] is not METRICS or seen[1] is not CLAUSES:
            memo.source, memo.value = (METRICS, CLAUSES), build(METRICS, CLAUSES)
        return cast(T, memo.value)

    return get


_by_name = derived(lambda ms, _cs: {m.name: m for m in ms})
_clause_by_key = derived(lambda _ms, cs: {c.key: c for c in cs})


def metric(name: str) -> Metric:
    """The metric of a histogram key (``ttft_ms``, or a class split's ``ttft_ms|cache:hit``)."""
    return _by_name()[name.split("|", 1)[0]]


def clause(key: str) -> Clause:
    return _clause_by_key()[key]


def histogram_metrics() -> tuple[Metric, ...]:
    """The metrics drawn as distributions (every kind but the token counts), in catalogue order."""
    return _histogram_metrics()


_histogram_metrics = derived(lambda ms, _cs: tuple(m for m in ms if m.kind != "tokens"))
_token_metrics = derived(lambda ms, _cs: tuple(m for m in ms if m.kind == "tokens"))
_line_metrics = derived(
    lambda ms, _cs: tuple(m for kind in ("latency", "rate") for m in ms if m.kind == kind and m.step_points)
)


def per_request_clauses() -> tuple[Clause, ...]:
    """The clauses a single request is held to (goodput), in catalogue order."""
    return _per_request_clauses()


_per_request_clauses = derived(lambda _ms, cs: tuple(c for c in cs if c.per_request))


def token_metrics() -> tuple[Metric, ...]:
    """The per-request token counts, in catalogue order."""
    return _token_metrics()


def line_metrics() -> tuple[Metric, ...]:
    """The metrics a step line summarises at a glance: the latencies, then the rates."""
    return _line_metrics()


def side_metrics(side: Side) -> tuple[Metric, ...]:
    """What a console panel may show, in the order a key cycles through them: the left panel in catalogue
    order; the right one (the speeds' panel) its speeds first, then the latencies it may show too."""
    return (_left if side == "left" else _right)()


_left = derived(lambda ms, _cs: tuple(m for m in ms if "left" in m.console))
_right = derived(
    lambda ms, _cs: tuple(
        m for kind in ("rate", "latency") for m in ms if m.kind == kind and "right" in m.console
    )
)


class Live(Sequence[T]):
    """A tuple derived from the catalogue, rebuilt whenever it changes (see ``derived``): for a module's
    table (``STEP_COLUMNS``, ``FIGURES``) that its readers iterate, index and slice as a tuple."""

    __slots__ = ("_get",)

    def __init__(self, build: Callable[[tuple[Metric, ...], tuple[Clause, ...]], tuple[T, ...]]) -> None:
        self._get = derived(build)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        return self._get()[index]

    def __len__(self) -> int:
        return len(self._get())

    def __iter__(self) -> Iterator[T]:
        return iter(self._get())

    def __repr__(self) -> str:
        return repr(self._get())


K = TypeVar("K")
V = TypeVar("V")


class LiveMap(Mapping[K, V]):
    """A mapping derived from the catalogue, rebuilt whenever it changes (see ``derived``): for a module's
    table that its readers look up and iterate as a dict (``snapshot.METRICS``, ``tui.format.METRIC_TITLES``)."""

    __slots__ = ("_get",)

    def __init__(self, build: Callable[[tuple[Metric, ...], tuple[Clause, ...]], dict[K, V]]) -> None:
        self._get = derived(build)

    def __getitem__(self, key: K) -> V:
        return self._get()[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __repr__(self) -> str:
        return repr(self._get())
