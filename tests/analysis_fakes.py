"""Small run records for the analysis tests (compare, conditions, cost, report): a header as
``run/recording.py`` writes it and step lines written through ``loadgen.record``'s writer, every figure chosen
by the test; header edits; ``ramp compare`` run in-process on its parsed command line. And figures made the real way: replies
(``tool_call``, ``plain_reply``) through a worker's ``Recorder`` and the controller's ``Accumulator`` into
one window's stats (``stats_of``), made a step (``summary_of``)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from loadgen.analysis.compare import compare_main
from loadgen.cli.commands import build_parser
from loadgen.config import SLO
from loadgen.metrics import Accumulator, Recorder
from loadgen.profile import parse_profile
from loadgen.record import RecordWriter
from loadgen.snapshot import METRICS, HistogramView, Percentiles, SLOVerdict, StepSummary, WindowStats
from loadgen.types import Outcome, RequestResult

PROFILE_TOML = """
name = "fake-chat"
description = "two buckets, a shared prefix"
[[prefix_group]]
name = "docs"
prefix_tokens = 512
count = 2
[[bucket]]
name = "short"
input = {min = 100, max = 200}
output = 64
prefix_group = "docs"
[[bucket]]
name = "long"
weight = 0.5
input = 800
output = {min = 100, max = 300}
[sampling]
temperature = 0.0
ignore_eos = true
[slo]
ttft_p95_ms = 1000
"""

SESSION_TOML = """
name = "fake-agent"
[[bucket]]
input = 100
output = 50
[session]
turns = 4
think_time_s = 0.5
"""


def profile_content(toml: str = PROFILE_TOML) -> dict[str, Any]:
    return parse_profile(toml, source="<fake>").to_dict()


def base_header() -> dict[str, Any]:
    """What ``record_header`` writes, for a matched pair of runs (each test changes what it varies)."""
    content = profile_content()
    return {
        "model": "llama-8b",
        "model_revision": "abc123",
        "runtime": "vllm",
        "runtime_version": "0.8.5",
        "max_model_len": 8192,
        "tags": {"interconnect": "nvlink"},
        "server_conditions": {
            "runtime": "vllm",
            "version": "0.8.5",
            "model": "llama-8b",
            "model_path": None,
            "max_model_len": 8192,
            "tp_size": 1,
            "pp_size": None,
            "dp_size": None,
            "ep_size": None,
            "dtype": "bfloat16",
            "quantization": None,
            "kv_cache_dtype": "auto",
            "block_size": 16,
            "kv_cache_tokens": 400000,
            "prefix_caching": True,
            "speculative_algorithm": None,
            "speculative_num_draft_tokens": None,
            "speculative_draft_model": None,
            "gpu_name": "NVIDIA H200",
            "gpu_count": 1,
            "gpu_mem_total_mib": 143771,
            "driver_version": "550.54",
        },
        "profile": content["name"],
        "profile_hash": "f00d" * 16,
        "profile_content": content,
        "target_url": "http://10.0.0.5:8000",
        "api": "chat",
        "mode": "closed",
        "arrival": "closed",
        "workers": 1,
        "transport": "h1",
        "seed": 1234,
        "seed_source": "fresh",
        "fit_context": False,
        "plan": {"levels": [1, 8], "step_s": 30.0, "warmup_s": 5.0, "early_stop": False},
        "slo": SLO(ttft_p95_ms=1000.0).as_dict(),
        "cold_start": False,
        "pricing": None,
    }


@dataclass(frozen=True)
class Fig:
    """One step's figures; anything not given reads as a plausible default."""

    level: int
    out_tok_s: float = 1000.0
    ttft_p50: float = 100.0
    ttft_p95: float = 200.0
    itl_p99: float = 30.0
    e2e_p95_ms: float = 4000.0
    decode_p50: float = 50.0
    ok: int = 100
    errors: int = 0
    met: bool | None = True
    client_bound: bool = False
    carried_share: float = 0.0
    mode: str = "closed"
    rate_rps: float | None = None
    window_s: float = 10.0
    input_tokens: int = 10_000
    output_tokens: int = 10_000
    cached_tokens: int = 0
    server: Mapping[str, float | None] = field(default_factory=dict)
    goodput_req_s: float | None = None
    goodput_tok_s: float | None = None
    extra: Mapping[str, object] = field(default_factory=dict)  # keys after the step line's own
    # which repeat of its level (the step line's ``repeat``); None: as --repeat numbers them, counting on
    # along consecutive steps at one level
    repeat: int | None = None


def _view(metric: str, **pct: float) -> HistogramView:
    return HistogramView(metric=metric, unit=METRICS[metric], pct=Percentiles(count=100, **pct))


def step_of(index: int, fig: Fig, repeat: int = 0) -> StepSummary:
    stats = WindowStats(
        window="step",
        duration_s=fig.window_s,
        ok=fig.ok,
        errors={"http_status": fig.errors} if fig.errors else {},
        input_tokens=fig.input_tokens,
        output_tokens=fig.output_tokens,
        cached_tokens=fig.cached_tokens,
        out_tok_s=fig.out_tok_s,
        prefill_tok_s=fig.input_tokens / fig.window_s,
        req_s=fig.ok / fig.window_s,
        goodput_req_s=fig.goodput_req_s,
        goodput_tok_s=fig.goodput_tok_s,
        hist={
            "ttft_ms": _view("ttft_ms", p50=fig.ttft_p50, p95=fig.ttft_p95, p99=fig.ttft_p95 * 1.2),
            "itl_ms": _view("itl_ms", p50=fig.itl_p99 / 2, p99=fig.itl_p99),
            "e2e_ms": _view("e2e_ms", p50=fig.e2e_p95_ms / 2, p95=fig.e2e_p95_ms),
            "decode_tok_s": _view("decode_tok_s", p50=fig.decode_p50, p95=fig.decode_p50 * 1.5),
        },
    )
    failures = () if fig.met is not False else ("TTFT p95 2,000 ms > 1,000 ms",)
    return StepSummary(
        index=index,
        mode="open" if fig.mode == "open" else "closed",
        level=fig.level,
        rate_rps=fig.rate_rps,
        arrival="closed" if fig.mode == "closed" else "poisson",
        warmup_s=1.0,
        window_s=fig.window_s,
        duration_s=fig.window_s + 1.0,
        stats=stats,
        verdict=SLOVerdict(met=fig.met, failures=failures),
        client_bound=fig.client_bound,
        bound_reason="load worker at 97% CPU: add --workers" if fig.client_bound else "",
        server=dict(fig.server),
        carried_share=fig.carried_share,
        repeat=repeat,
    )


def write_record(
    path: Path, figs: Sequence[Fig], header: Mapping[str, Any] | None = None, end: bool = True
) -> Path:
    with RecordWriter(path) as writer:
        writer.write_header(copy.deepcopy(dict(header if header is not None else base_header())))
        repeat = 0
        for index, fig in enumerate(figs):
            again = index > 0 and (figs[index - 1].level, figs[index - 1].rate_rps) == (
                fig.level,
                fig.rate_rps,
            )
            repeat = fig.repeat if fig.repeat is not None else (repeat + 1 if again else 0)
            writer.write_step(step_of(index, fig, repeat), {}, **fig.extra)
        if end:
            writer.write_event("end", {"state": "finished"})
    return path


def header_with(**changes: Any) -> dict[str, Any]:
    header = base_header()
    header.update(changes)
    return header


# ---- pairs of records and ramp compare -------------------------------------------------------------------

Header = dict[str, Any]
PAIR = [Fig(level=1, out_tok_s=100.0), Fig(level=8, out_tok_s=700.0)]


def pair(tmp_path: Path, b_header: Header, a_header: Header | None = None) -> tuple[str, str]:
    a = write_record(tmp_path / "a.jsonl", PAIR, a_header)
    b = write_record(tmp_path / "b.jsonl", PAIR, b_header)
    return str(a), str(b)


def run_compare(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = compare_main(*parse(*args))
    out, err = capsys.readouterr()
    return code, out, err


def parse(*args: str) -> tuple[list[str], list[str], bool, str]:
    ns = build_parser().parse_args(["compare", *args])
    return ns.files, ns.vary, ns.force, ns.format


def changed(edit: Callable[[Header], None]) -> Header:
    header = base_header()
    edit(header)
    return header


def sc(key: str, value: object) -> Callable[[Header], None]:
    return lambda h: h["server_conditions"].__setitem__(key, value)


def top(key: str, value: object) -> Callable[[Header], None]:
    return lambda h: h.__setitem__(key, value)


def content(edit: Callable[[dict[str, Any]], None]) -> Callable[[Header], None]:
    return lambda h: edit(h["profile_content"])


def plan(key: str, value: object) -> Callable[[Header], None]:
    return lambda h: h["plan"].__setitem__(key, value)


MS = 1_000_000
S = 1_000_000_000


def tool_call(i: int, args: int = 5) -> RequestResult:
    """A reply that is one call: its opening delta (the name, no token) at 80 + i ms, then ``args``
    argument chunks of one token each, 10 ms apart."""
    t0 = i * 10 * MS
    head = t0 + (80 + i) * MS
    chunks = (head, *(head + (k + 1) * 10 * MS for k in range(args)))
    return RequestResult(
        outcome=Outcome.OK, intended_ns=t0, sent_ns=t0, end_ns=chunks[-1] + MS, first_token_ns=head,
        last_token_ns=chunks[-1], chunk_times_ns=chunks, chunk_tokens=(0, *(1,) * args), output_tokens=args,
        tokens_exact=True, first_answer_ns=head, first_tool_ns=head, tool_chunks=args + 1, tool_tokens=args,
        first_tool_args_ns=chunks[1], last_tool_args_ns=chunks[-1],
    )  # fmt: skip


def plain_reply(i: int) -> RequestResult:
    """A reply without a call: 5 chunks of one token, the first at 50 ms, 10 ms apart."""
    t0 = i * 10 * MS
    chunks = tuple(t0 + (50 + k * 10) * MS for k in range(5))
    return RequestResult(
        outcome=Outcome.OK, intended_ns=t0, sent_ns=t0, end_ns=chunks[-1], first_token_ns=chunks[0],
        last_token_ns=chunks[-1], chunk_times_ns=chunks, output_tokens=5, tokens_exact=True,
        first_answer_ns=chunks[0],
    )  # fmt: skip


def stats_of(items: list[RequestResult], slo: SLO | None = None) -> tuple[WindowStats, dict[str, str]]:
    """One 10 s window of ``items`` (goodput judged on ``slo``): its stats and its encoded histograms."""
    rec, acc = Recorder(slo=slo), Accumulator()
    for r in items:
        rec.record(r)
    acc.add(rec.take(0, 10 * S, live_tokens=sum(r.output_tokens for r in items)))
    return acc.stats("step", 10.0), acc.encoded()


def summary_of(
    stats: WindowStats, verdict: SLOVerdict | None = None, index: int = 0, **changes: Any
) -> StepSummary:
    """``stats`` as a closed-loop step at level 4 (1 s warm-up, a 10 s window), any other field given in
    ``changes``."""
    step = StepSummary(
        index=index, mode="closed", level=4, rate_rps=None, arrival="closed", warmup_s=1.0, window_s=10.0,
        duration_s=11.0, stats=stats, verdict=verdict or SLOVerdict(met=None), client_bound=False,
    )  # fmt: skip
    return dataclasses.replace(step, **changes)
