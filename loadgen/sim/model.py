"""The simulator's serving-engine model: pure, clock-driven, with no I/O and no event loop.

``GpuEngine`` is a continuous-batching scheduler shaped like vLLM v1's: each ``step(start_ns)`` picks the
batch (running requests first, chunked prefill under a per-step token budget, then admissions from the
waiting queue), allocates KV-cache blocks (evicting unreferenced prefix-cache blocks, preempting the newest
running request for recompute when the cache is full), prices the step with ``StepCost`` (a fit of real H200
step times for the h200 preset) and returns the step's end time with the tokens it produced. The caller
(the server, or a test with a fake clock) decides when to call the next step, so the same code drives real
time and simulated time.

``FixedLatencyEngine`` is the "fast" preset: every request gets a fixed TTFT and a fixed time per token,
independent of load, kept on a heap so one wake-up serves every stream that is due.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from .tokenizer import block_hashes

# Bucket bounds of vLLM's own histograms (copied from a real /metrics), so dashboards read them alike.
TTFT_BUCKETS_S = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS_S = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
REQUEST_BUCKETS_S = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
    960.0, 1920.0, 7680.0,
)  # fmt: skip


@dataclass(frozen=True)
class StepCost:
    """Time of one engine step, in milliseconds at speed 1.

    Decode: ``base_ms + per_seq_ms * B + per_kv_token_ms * (cached tokens read by the batch)``: reading the
    weights once, per-sequence compute, reading every sequence's KV cache (the h200 fit gives 29 ns per
    128 KiB token, i.e. ~4.5 TB/s, the H200's HBM bandwidth). Prefill: piecewise-linear in the step's prompt
    tokens through ``prefill_points``; in a mixed step the weights are read once, so ``base_ms`` is not
    counted twice. Speculative decoding adds the verification of ``k`` extra tokens per sequence and ``k``
    draft-model steps.
    """

    base_ms: float
    per_seq_ms: float
    per_kv_token_ms: float
    prefill_points: tuple[tuple[int, float], ...]  # (prompt tokens, ms), ascending, starting at (0, base)
    spec_draft_ms: float = 0.6

    def prefill_ms(self, tokens: int) -> float:
        pts = self.prefill_points
        if tokens <= 0:
            return 0.0
        i = bisect.bisect_left(pts, (tokens, -math.inf))
        if i == 0:
            return pts[0][1]
        if i >= len(pts):
            (t0, m0), (t1, m1) = pts[-2], pts[-1]
        else:
            (t0, m0), (t1, m1) = pts[i - 1], pts[i]
        return m0 + (m1 - m0) * (tokens - t0) / (t1 - t0)

    def step_ms(self, decode_seqs: int, kv_tokens: int, prefill_tokens: int, spec_tokens: int = 0) -> float:
        ms = 0.0
        if decode_seqs:
            ms = (
                self.base_ms
                + self.per_seq_ms * decode_seqs * (1 + spec_tokens)
                + self.per_kv_token_ms * kv_tokens
            )
            ms += self.spec_draft_ms * spec_tokens
        if prefill_tokens:
            pf = self.prefill_ms(prefill_tokens)
            ms += pf - self.base_ms if decode_seqs else pf
        return ms


@dataclass(frozen=True)
class EngineParams:
    """Everything that shapes the engine's behaviour. Presets fill it; overrides replace single fields."""

    kind: str = "gpu"  # "gpu" (continuous batching) | "fixed" (fixed TTFT and time per token)
    cost: StepCost = field(default_factory=lambda: StepCost(5.0, 0.02, 3e-5, ((0, 5.0), (1024, 35.0))))
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    block_size: int = 16
    kv_capacity_tokens: int = 1 << 20
    max_model_len: int = 8192
    enable_prefix_caching: bool = True
    num_speculative_tokens: int = 0
    spec_acceptance: float = 0.7  # probability that each draft token is accepted, given the ones before were
    # Without ignore_eos a request may stop early: after min_output_tokens, each token ends it with eos_prob.
    min_output_tokens: int = 16
    eos_prob: float = 0.004
    fixed_ttft_ms: float = 50.0
    fixed_tpot_ms: float = 10.0
    speed: float = 1.0  # simulated time runs this many times faster than the real GPU would
    # Simulated GPU (for DCGM-style telemetry).
    gpu_name: str = "NVIDIA H200 (simulated)"
    hbm_bytes: int = 143_771 * 1024 * 1024
    weights_bytes: int = 15_010_000_000
    activation_bytes: int = 2 * 1024**3
    kv_bytes_per_token: int = 131_072
    gpu_memory_utilization: float = 0.9
    idle_power_w: float = 78.0
    max_power_w: float = 700.0

    @property
    def num_blocks(self) -> int:
        return max(1, self.kv_capacity_tokens // self.block_size)


class Histogram:
    """Cumulative Prometheus-style histogram: a bisect and two additions per observation."""

    __slots__ = ("bounds", "counts", "total", "n")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0
        self.n = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.n += 1

    def cumulative(self) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        acc = 0
        for bound, c in zip(self.bounds, self.counts[:-1], strict=True):
            acc += c
            out.append((repr(float(bound)), acc))
        out.append(("+Inf", acc + self.counts[-1]))
        return out


@dataclass
class EngineStats:
    """Counters and histograms in the engine's own time (what vLLM's /metrics reports)."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    cached_prompt_tokens: int = 0
    spec_drafts: int = 0
    spec_draft_tokens: int = 0
    spec_accepted_tokens: int = 0
    finished: dict[str, int] = field(default_factory=lambda: {"stop": 0, "length": 0, "abort": 0, "error": 0})
    steps: int = 0
    busy_ns: int = 0  # simulated time the "GPU" spent in steps
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS_S))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS_S))
    queue: Histogram = field(default_factory=lambda: Histogram(REQUEST_BUCKETS_S))
    e2e: Histogram = field(default_factory=lambda: Histogram(REQUEST_BUCKETS_S))


class Seq:
    """One request inside the engine. ``stream`` is an opaque handle for whoever consumes the emits."""

    __slots__ = (
        "rid", "arrival_ns", "prompt_len", "block_hashes", "max_tokens", "target_out", "out", "computed",
        "num_blocks", "held_hashes", "admitted_ns", "first_token_ns", "last_token_ns", "cached_tokens",
        "preemptions", "finish_reason", "state", "due_ns", "stream",
    )  # fmt: skip

    def __init__(
        self,
        rid: int,
        arrival_ns: int,
        prompt_len: int,
        max_tokens: int,
        target_out: int | None = None,
        block_hashes: tuple[int, ...] = (),
        stream: Any = None,
    ) -> None:
        self.rid = rid
        self.arrival_ns = arrival_ns
        self.prompt_len = prompt_len
        self.block_hashes = block_hashes
        self.max_tokens = max_tokens
        self.target_out = max_tokens if target_out is None else max(0, min(target_out, max_tokens))
        self.out = 0
        self.computed = 0
        self.num_blocks = 0
        self.held_hashes: list[int] = []
        self.admitted_ns: int | None = None
        self.first_token_ns: int | None = None
        self.last_token_ns: int | None = None
        self.cached_tokens: int | None = None
        self.preemptions = 0
        self.finish_reason: str | None = None
        self.state = "new"  # new | waiting | running | finished | aborted
        self.due_ns = 0
        self.stream = stream


@dataclass(frozen=True, slots=True)
class Emit:
    seq: Seq
    tokens: int
    finished: bool


@dataclass(frozen=True, slots=True)
class Step:
    start_ns: int
    end_ns: int
    emits: list[Emit]
    decode_seqs: int = 0
    prefill_tokens: int = 0


class Engine(Protocol):
    params: EngineParams
    stats: EngineStats

    def add(self, seq: Seq) -> None: ...
    def abort(self, seq: Seq) -> None: ...
    def has_work(self) -> bool: ...
    def step(self, start_ns: int) -> Step: ...
    @property
    def num_running(self) -> int: ...
    @property
    def num_waiting(self) -> int: ...
    def kv_usage(self) -> float: ...
    def kv_used_tokens(self) -> int: ...


def sample_output_len(rng: random.Random, params: EngineParams, max_tokens: int, ignore_eos: bool) -> int:
    """How many tokens a request will produce: ``max_tokens`` with ignore_eos, else an EOS may come first."""
    if ignore_eos or params.eos_prob <= 0 or max_tokens <= params.min_output_tokens:
        return max_tokens
    extra = int(math.log(1.0 - rng.random()) / math.log(1.0 - params.eos_prob))
    return min(max_tokens, params.min_output_tokens + extra)


def _finish_reason(seq: Seq) -> str:
    return "length" if seq.out >= seq.max_tokens else "stop"


class GpuEngine:
    """Continuous batching with chunked prefill, paged KV cache, prefix cache, preemption and spec decode."""

    def __init__(self, params: EngineParams, seed: int = 0) -> None:
        self.params = params
        self.stats = EngineStats()
        self.rng = random.Random(seed)
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []
        self.free_blocks = params.num_blocks
        self.refcount: dict[int, int] = {}  # prefix-cache block hash -> requests holding it
        self.evictable: OrderedDict[int, None] = OrderedDict()  # cached blocks nobody holds, LRU first

    # -- queue ----------------------------------------------------------------------------------------
    def add(self, seq: Seq) -> None:
        seq.state = "waiting"
        self.waiting.append(seq)

    def abort(self, seq: Seq) -> None:
        if seq.state == "waiting":
            self.waiting.remove(seq)
        elif seq.state == "running":
            self.running.remove(seq)
            self._release(seq)
        else:
            return
        seq.state = "aborted"
        self.stats.finished["abort"] += 1

    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    def kv_usage(self) -> float:
        # Like vLLM: cached blocks nobody holds count as free (they are evicted on demand).
        total = self.params.num_blocks
        return (total - self.free_blocks - len(self.evictable)) / total

    def kv_used_tokens(self) -> int:
        return (self.params.num_blocks - self.free_blocks - len(self.evictable)) * self.params.block_size

    # -- KV blocks ------------------------------------------------------------------------------------
    def _available(self) -> int:
        return self.free_blocks + len(self.evictable)

    def _allocate(self, seq: Seq, blocks: int) -> None:
        for _ in range(blocks):
            if self.free_blocks == 0:
                victim, _ = self.evictable.popitem(last=False)
                del self.refcount[victim]
                self.free_blocks += 1
            self.free_blocks -= 1
        seq.num_blocks += blocks

    def _release(self, seq: Seq) -> None:
        for h in seq.held_hashes:
            n = self.refcount[h] - 1
            self.refcount[h] = n
            if n == 0:
                self.evictable[h] = None
        self.free_blocks += seq.num_blocks - len(seq.held_hashes)
        seq.held_hashes = []
        seq.num_blocks = 0

    def _lookup_prefix(self, seq: Seq) -> int:
        """Take references on the cached blocks that start ``seq``'s prompt; return how many."""
        bs = self.params.block_size
        usable = (seq.prompt_len - 1) // bs  # at least one prompt token is always computed
        hits = 0
        for h in seq.block_hashes[:usable]:
            n = self.refcount.get(h)
            if n is None:
                break
            if n == 0:
                del self.evictable[h]
            self.refcount[h] = n + 1
            seq.held_hashes.append(h)
            hits += 1
        seq.num_blocks = hits
        return hits

    def _register_blocks(self, seq: Seq, before: int) -> None:
        """Publish the prompt blocks ``seq`` has just filled, so later requests can share them."""
        bs = self.params.block_size
        first = before // bs
        last = min(seq.computed, seq.prompt_len) // bs
        for i in range(max(first, len(seq.held_hashes)), min(last, len(seq.block_hashes))):
            if i != len(seq.held_hashes):
                break  # only a contiguous prefix can be shared
            h = seq.block_hashes[i]
            if h in self.refcount:
                break  # someone else computed it too: keep ours private
            self.refcount[h] = 1
            seq.held_hashes.append(h)

    def _preempt(self, seq: Seq) -> None:
        self._release(seq)
        seq.computed = 0
        seq.state = "waiting"
        seq.preemptions += 1
        self.stats.preemptions += 1
        self.waiting.appendleft(seq)

    # -- one step -------------------------------------------------------------------------------------
    def _idle_step(self, start_ns: int, retry: bool) -> Step:
        """Nothing could be scheduled: wait for the next arrival, or fail a request that can never fit."""
        if self.waiting and self.waiting[0].arrival_ns > start_ns:
            return Step(start_ns, self.waiting[0].arrival_ns, [])
        emits: list[Emit] = []
        if self.waiting and not self.running and not retry:
            seq = self.waiting.popleft()  # larger than the whole KV cache: vLLM would refuse it too
            seq.state = "finished"
            seq.finish_reason = "error"
            self.stats.finished["error"] += 1
            emits.append(Emit(seq, 0, True))
        return Step(start_ns, start_ns + 1, emits)

    def step(self, start_ns: int) -> Step:
        p = self.params
        bs = p.block_size
        k = p.num_speculative_tokens
        budget = p.max_num_batched_tokens
        scheduled: list[tuple[Seq, int, bool]] = []  # (seq, new tokens, is_decode)
        preempted = False
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            remaining = seq.prompt_len + seq.out - seq.computed
            is_decode = remaining == 1
            n_new = min(remaining + k, budget) if is_decode else min(remaining, budget)
            need = -(-(seq.computed + n_new) // bs) - seq.num_blocks
            while need > self._available():
                victim = self.running.pop()
                self._preempt(victim)
                preempted = True
                if victim is seq:
                    break
            if seq.state != "running":
                break
            self._allocate(seq, max(0, need))
            scheduled.append((seq, n_new, is_decode))
            budget -= n_new
            i += 1

        if not preempted:
            while self.waiting and budget > 0 and len(self.running) < p.max_num_seqs:
                seq = self.waiting[0]
                if seq.arrival_ns > start_ns:
                    break  # it reached the server after this step began
                hits = self._lookup_prefix(seq) if p.enable_prefix_caching else 0
                seq.computed = hits * bs
                n_new = min(seq.prompt_len + seq.out - seq.computed, budget)
                need = -(-(seq.computed + n_new) // bs) - seq.num_blocks
                if need > self._available():
                    self._release(seq)
                    seq.computed = 0
                    break
                self.waiting.popleft()
                self._allocate(seq, need)
                seq.state = "running"
                self.running.append(seq)
                self.stats.prefix_queries += seq.prompt_len
                self.stats.prefix_hits += hits * bs
                if seq.admitted_ns is None:
                    seq.admitted_ns = start_ns
                    seq.cached_tokens = hits * bs
                    self.stats.prompt_tokens += seq.prompt_len
                    self.stats.cached_prompt_tokens += hits * bs
                    self.stats.queue.observe((start_ns - seq.arrival_ns) / 1e9)
                scheduled.append((seq, n_new, False))
                budget -= n_new

        decode_seqs = 0
        kv_tokens = 0
        prefill_tokens = 0
        for seq, n_new, is_decode in scheduled:
            if is_decode:
                decode_seqs += 1
                kv_tokens += seq.computed
            else:
                prefill_tokens += n_new
        spec = k if decode_seqs else 0
        ms = p.cost.step_ms(decode_seqs, kv_tokens, prefill_tokens, spec)
        end_ns = start_ns + max(1, int(ms * 1e6 / p.speed))
        if not scheduled:
            return self._idle_step(start_ns, retry=preempted)
        self.stats.steps += 1
        self.stats.busy_ns += end_ns - start_ns

        emits: list[Emit] = []
        finished: list[Seq] = []
        for seq, n_new, is_decode in scheduled:
            before = seq.computed
            if is_decode:
                accepted = 0
                drafts = n_new - 1
                if drafts > 0:
                    while accepted < drafts and self.rng.random() < p.spec_acceptance:
                        accepted += 1
                    self.stats.spec_drafts += 1
                    self.stats.spec_draft_tokens += drafts
                    self.stats.spec_accepted_tokens += accepted
                seq.computed += 1 + accepted
                produced = 1 + accepted
            else:
                seq.computed += n_new
                if p.enable_prefix_caching:
                    self._register_blocks(seq, before)
                if seq.computed < seq.prompt_len + seq.out:
                    continue  # chunked prefill: more prompt to go, no token yet
                produced = 1
            produced = min(produced, seq.target_out - seq.out)
            if produced <= 0:  # max_tokens == 0: the prompt was only scored
                finished.append(seq)
                emits.append(Emit(seq, 0, True))
                continue
            seq.out += produced
            seq.computed = min(seq.computed, seq.prompt_len + seq.out - 1)
            self.stats.generation_tokens += produced
            if seq.first_token_ns is None:
                seq.first_token_ns = end_ns
                self.stats.ttft.observe((end_ns - seq.arrival_ns) / 1e9)
            else:
                self.stats.itl.observe((end_ns - (seq.last_token_ns or end_ns)) / 1e9)
            seq.last_token_ns = end_ns
            done = seq.out >= seq.target_out
            if done:
                finished.append(seq)
            emits.append(Emit(seq, produced, done))

        for seq in finished:
            self.running.remove(seq)
            self._release(seq)
            seq.state = "finished"
            seq.finish_reason = _finish_reason(seq)
            self.stats.finished[seq.finish_reason] += 1
            self.stats.e2e.observe((end_ns - seq.arrival_ns) / 1e9)
        return Step(start_ns, end_ns, emits, decode_seqs, prefill_tokens)


class FixedLatencyEngine:
    """The "fast" preset: fixed TTFT and time per token for every request, whatever the load."""

    def __init__(self, params: EngineParams, seed: int = 0) -> None:
        self.params = params
        self.stats = EngineStats()
        self.rng = random.Random(seed)
        self._heap: list[tuple[int, int, Seq]] = []
        self._active = 0
        self._ttft_ns = int(params.fixed_ttft_ms * 1e6 / params.speed)
        self._tpot_ns = max(1, int(params.fixed_tpot_ms * 1e6 / params.speed))
        self._tick_ns = 1_000_000  # due times within one tick are served by the same wake-up

    def add(self, seq: Seq) -> None:
        seq.state = "running"
        seq.admitted_ns = seq.arrival_ns
        seq.cached_tokens = 0
        seq.due_ns = seq.arrival_ns + self._ttft_ns
        self.stats.queue.observe(0.0)
        self.stats.prompt_tokens += seq.prompt_len
        self.stats.prefix_queries += seq.prompt_len
        self._active += 1
        heapq.heappush(self._heap, (seq.due_ns, seq.rid, seq))

    def abort(self, seq: Seq) -> None:
        if seq.state == "running":
            seq.state = "aborted"  # its heap entry is skipped when popped
            self._active -= 1
            self.stats.finished["abort"] += 1

    def has_work(self) -> bool:
        return bool(self._heap)

    @property
    def num_running(self) -> int:
        return self._active

    @property
    def num_waiting(self) -> int:
        return 0

    def kv_usage(self) -> float:
        return 0.0

    def kv_used_tokens(self) -> int:
        return 0

    def step(self, start_ns: int) -> Step:
        heap = self._heap
        horizon = max(start_ns, heap[0][0]) + self._tick_ns
        emits: list[Emit] = []
        end_ns = start_ns
        stats = self.stats
        tpot = self._tpot_ns
        while heap and heap[0][0] <= horizon:
            due, rid, seq = heapq.heappop(heap)
            end_ns = max(end_ns, due)
            if seq.state != "running":
                continue
            if seq.target_out <= 0:
                emits.append(Emit(seq, 0, True))
                self._finish(seq, due)
                continue
            seq.out += 1
            if seq.first_token_ns is None:
                seq.first_token_ns = due
                stats.ttft.observe((due - seq.arrival_ns) / 1e9)
            else:
                stats.itl.observe(tpot / 1e9)
            seq.last_token_ns = due
            done = seq.out >= seq.target_out
            emits.append(Emit(seq, 1, done))
            if done:
                self._finish(seq, due)
            else:
                seq.due_ns = due + tpot
                heapq.heappush(heap, (seq.due_ns, rid, seq))
        stats.generation_tokens += len(emits)
        stats.steps += 1
        stats.busy_ns += end_ns - start_ns
        return Step(start_ns, end_ns, emits, len(emits), 0)

    def _finish(self, seq: Seq, now_ns: int) -> None:
        seq.state = "finished"
        seq.finish_reason = _finish_reason(seq)
        self._active -= 1
        self.stats.finished[seq.finish_reason] += 1
        self.stats.e2e.observe((now_ns - seq.arrival_ns) / 1e9)


def make_engine(params: EngineParams, seed: int = 0) -> GpuEngine | FixedLatencyEngine:
    if params.kind == "fixed":
        return FixedLatencyEngine(params, seed)
    if params.kind == "gpu":
        return GpuEngine(params, seed)
    raise ValueError(f"unknown engine kind {params.kind!r} (expected 'gpu' or 'fixed')")


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
    warm_ns = int(warmup_s * 1e9)
    end_ns = warm_ns + int(duration_s * 1e9)
    tokens = 0
    decode: list[float] = []
    ttft: list[float] = []
    done = 0
    kv_max = 0.0
    preempt_start = None
    while now < end_ns:
        if preempt_start is None and now >= warm_ns:
            preempt_start = engine.stats.preemptions
        step = engine.step(now)
        now = step.end_ns
        kv_max = max(kv_max, engine.kv_usage())
        for e in step.emits:
            if now >= warm_ns:
                tokens += e.tokens
            if e.finished:
                s = e.seq
                if now >= warm_ns:
                    done += 1
                if s.arrival_ns >= warm_ns:  # latencies only of requests sent after the warm-up
                    if s.first_token_ns is not None:
                        ttft.append((s.first_token_ns - s.arrival_ns) / 1e6)
                    if (
                        s.out > 1
                        and s.last_token_ns
                        and s.first_token_ns
                        and s.last_token_ns > s.first_token_ns
                    ):
                        decode.append((s.out - 1) * 1e9 / (s.last_token_ns - s.first_token_ns))
                engine.add(new_seq(now))
    return ClosedLoopResult(
        concurrency=concurrency,
        duration_s=duration_s,
        requests=done,
        out_tok_s=tokens / duration_s,
        decode_tok_s_p50=_pct(decode, 0.5),
        ttft_ms_p50=_pct(ttft, 0.5),
        ttft_ms_p95=_pct(ttft, 0.95),
        preemptions=engine.stats.preemptions - (preempt_start or 0),
        kv_usage_max=kv_max,
    )
