"""The engine model driven on a fake clock by closed-loop users (``run_closed_loop``): how the presets are
checked against real step-time fits, in tests and in ``benchmarks/bench_sim.py``, without any socket.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .model import make_engine
from .params import EngineParams
from .sequences import Seq, Step
from .tokenizer import block_hashes


@dataclass(frozen=True)
class ClosedLoopResult:
    concurrency: int
    duration_s: float
    requests: int
    out_tok_s: float  # aggregate output tokens per second
    decode_tok_s_p50: float | None  # per-request decode speed, median
    ttft_ms_p50: float | None
    ttft_ms_p95: float | None
    preemptions: int
    kv_usage_max: float


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


@dataclass
class _Tally:
    """What the users saw after the warm-up: tokens, finished requests, TTFTs and decode speeds."""

    warm_ns: int
    tokens: int = 0
    done: int = 0
    decode: list[float] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)

    def count(self, step: Step, now: int) -> list[Seq]:
        """Tally one step ending at ``now``; return the requests it finished (their users resend)."""
        finished: list[Seq] = []
        for e in step.emits:
            if now >= self.warm_ns:
                self.tokens += e.tokens
            if not e.finished:
                continue
            s = e.seq
            if now >= self.warm_ns:
                self.done += 1
            if s.arrival_ns >= self.warm_ns:  # latencies only of requests sent after the warm-up
                if s.first_token_ns is not None:
                    self.ttft.append((s.first_token_ns - s.arrival_ns) / 1e6)
                if s.out > 1 and s.last_token_ns and s.first_token_ns and s.last_token_ns > s.first_token_ns:
                    self.decode.append((s.out - 1) * 1e9 / (s.last_token_ns - s.first_token_ns))
            finished.append(s)
        return finished


def run_closed_loop(
    params: EngineParams,
    concurrency: int,
    prompt_tokens: int,
    output_tokens: int,
    duration_s: float = 30.0,
    warmup_s: float = 5.0,
    shared_prefix_tokens: int = 0,
    seed: int = 0,
    stagger_s: float = 2.0,
) -> ClosedLoopResult:
    """Drive an engine on a fake clock with ``concurrency`` users that resend as soon as a reply ends.

    Users start spread over ``stagger_s`` (all at once, they would stay in lockstep). Aggregate tok/s is
    the output tokens produced after ``warmup_s`` divided by ``duration_s``; TTFT and decode percentiles
    cover the requests sent after the warm-up that finished within the run.
    """
    engine = make_engine(params, seed)
    rid = 0
    prefix = tuple(range(shared_prefix_tokens))

    def new_seq(now: int) -> Seq:
        nonlocal rid
        rid += 1
        ids = prefix + tuple(1_000_000 + rid * 100_000 + j for j in range(prompt_tokens - len(prefix)))
        hashes = block_hashes(ids, params.block_size)
        return Seq(rid, now, prompt_tokens, output_tokens, block_hashes=hashes)

    now = 0
    for i in range(concurrency):
        engine.add(new_seq(int(i * stagger_s * 1e9 / concurrency)))
    tally = _Tally(int(warmup_s * 1e9))
    end_ns = tally.warm_ns + int(duration_s * 1e9)
    kv_max = 0.0
    preempt_start = None
    while now < end_ns:
        if preempt_start is None and now >= tally.warm_ns:
            preempt_start = engine.stats.preemptions
        step = engine.step(now)
        now = step.end_ns
        kv_max = max(kv_max, engine.kv_usage())
        for _ in tally.count(step, now):
            engine.add(new_seq(now))
    return ClosedLoopResult(
        concurrency=concurrency,
        duration_s=duration_s,
        requests=tally.done,
        out_tok_s=tally.tokens / duration_s,
        decode_tok_s_p50=_pct(tally.decode, 0.5),
        ttft_ms_p50=_pct(tally.ttft, 0.5),
        ttft_ms_p95=_pct(tally.ttft, 0.95),
        preemptions=engine.stats.preemptions - (preempt_start or 0),
        kv_usage_max=kv_max,
    )
