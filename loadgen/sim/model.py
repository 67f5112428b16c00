"""The simulator's serving-engine model: pure, clock-driven, with no I/O and no event loop.

``GpuEngine`` is a continuous-batching scheduler shaped like vLLM v1's: each ``step(start_ns)`` picks the
batch (running requests first, chunked prefill under a per-step token budget, then admissions from the
waiting queue), allocates KV-cache blocks (``KVBlocks``: evicting unreferenced prefix-cache blocks,
preempting the newest running request for recompute when the cache is full), prices the step with
``StepCost`` (a fit of real H200 step times for the h200 preset) and returns the step's end time with the
tokens it produced. The caller (the server, or a test with a fake clock) decides when to call the next step,
so the same code drives real time and simulated time.

``make_engine`` picks it or the "fast" preset's ``FixedLatencyEngine`` (fixed.py) from ``EngineParams.kind``.
"""

from __future__ import annotations

import random
from collections import deque

from .fixed import FixedLatencyEngine
from .kvcache import KVBlocks
from .params import EngineParams
from .sequences import Emit, Seq, Step, finish_reason
from .stats import EngineStats

# (seq, new tokens this step, is_decode): one entry of a step's batch
Scheduled = tuple[Seq, int, bool]


class GpuEngine:
    """Continuous batching with chunked prefill, paged KV cache, prefix cache, preemption and spec decode."""

    def __init__(self, params: EngineParams, seed: int = 0) -> None:
        self.params = params
        self.stats = EngineStats()
        self.rng = random.Random(seed)
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []
        self.blocks = KVBlocks(params.num_blocks, params.block_size)

    # -- queue ----------------------------------------------------------------------------------------
    def add(self, seq: Seq) -> None:
        seq.state = "waiting"
        self.waiting.append(seq)

    def abort(self, seq: Seq) -> None:
        if seq.state == "waiting":
            self.waiting.remove(seq)
        elif seq.state == "running":
            self.running.remove(seq)
            self.blocks.release(seq)
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
        return self.blocks.used() / self.params.num_blocks

    def kv_used_tokens(self) -> int:
        return self.blocks.used() * self.params.block_size

    def reset_prefix_cache(self) -> int:
        """Drop every cached prefix block nobody holds (vLLM's reset); return how many were dropped."""
        dropped = self.blocks.drop_evictable()
        self.stats.prefix_cache_resets += 1
        self.stats.prefix_blocks_dropped += dropped
        return dropped

    def _preempt(self, seq: Seq) -> None:
        self.blocks.release(seq)
        seq.computed = 0
        seq.state = "waiting"
        seq.preemptions += 1
        self.stats.preemptions += 1
        self.waiting.appendleft(seq)

    # -- one step -------------------------------------------------------------------------------------
    def step(self, start_ns: int) -> Step:
        p = self.params
        scheduled: list[Scheduled] = []
        budget, preempted = self._schedule_running(scheduled, p.max_num_batched_tokens)
        if not preempted:
            self._admit_waiting(scheduled, budget, start_ns)
        if not scheduled:
            return self._idle_step(start_ns, retry=preempted)
        decode_seqs = 0
        kv_tokens = 0
        prefill_tokens = 0
        for seq, n_new, is_decode in scheduled:
            if is_decode:
                decode_seqs += 1
                kv_tokens += seq.computed
            else:
                prefill_tokens += n_new
        spec = p.num_speculative_tokens if decode_seqs else 0
        ms = p.cost.step_ms(decode_seqs, kv_tokens, prefill_tokens, spec)
        end_ns = start_ns + max(1, int(ms * 1e6 / p.speed))
        self.stats.steps += 1
        self.stats.busy_ns += end_ns - start_ns
        emits = self._advance(scheduled, end_ns)
        return Step(start_ns, end_ns, emits, decode_seqs, prefill_tokens)

    def _schedule_running(self, scheduled: list[Scheduled], budget: int) -> tuple[int, bool]:
        """Running requests first: one decode token (plus drafts) or the next prefill chunk each, preempting
        the newest when the KV cache is full. Returns the budget left and whether anything was preempted."""
        bs = self.params.block_size
        k = self.params.num_speculative_tokens
        preempted = False
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            remaining = seq.prompt_len + seq.out - seq.computed
            is_decode = remaining == 1
            n_new = min(remaining + k, budget) if is_decode else min(remaining, budget)
            need = -(-(seq.computed + n_new) // bs) - seq.num_blocks
            while need > self.blocks.available():
                victim = self.running.pop()
                self._preempt(victim)
                preempted = True
                if victim is seq:
                    break
            if seq.state != "running":
                break
            self.blocks.allocate(seq, max(0, need))
            scheduled.append((seq, n_new, is_decode))
            budget -= n_new
            i += 1
        return budget, preempted

    def _admit_waiting(self, scheduled: list[Scheduled], budget: int, start_ns: int) -> None:
        """Admissions from the waiting queue, in order, while the budget, the batch and the KV cache allow."""
        p = self.params
        bs = p.block_size
        while self.waiting and budget > 0 and len(self.running) < p.max_num_seqs:
            seq = self.waiting[0]
            if seq.arrival_ns > start_ns:
                break  # it reached the server after this step began
            hits = self.blocks.lookup_prefix(seq) if p.enable_prefix_caching else 0
            seq.computed = hits * bs
            n_new = min(seq.prompt_len + seq.out - seq.computed, budget)
            need = -(-(seq.computed + n_new) // bs) - seq.num_blocks
            if need > self.blocks.available():
                self.blocks.release(seq)
                seq.computed = 0
                break
            self.waiting.popleft()
            self.blocks.allocate(seq, need)
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

    def _advance(self, scheduled: list[Scheduled], end_ns: int) -> list[Emit]:
        """Apply the step to every scheduled request: the tokens it produced, and who finished."""
        emits: list[Emit] = []
        finished: list[Seq] = []
        for seq, n_new, is_decode in scheduled:
            produced = self._decode(seq, n_new) if is_decode else self._prefill(seq, n_new)
            if produced is None:
                continue  # chunked prefill: more prompt to go, no token yet
            produced = min(produced, seq.target_out - seq.out)
            if produced <= 0:  # max_tokens == 0: the prompt was only scored
                finished.append(seq)
                emits.append(Emit(seq, 0, True))
                continue
            self._deliver(seq, produced, end_ns)
            done = seq.out >= seq.target_out
            if done:
                finished.append(seq)
            emits.append(Emit(seq, produced, done))
        for seq in finished:
            self._finish(seq, end_ns)
        return emits

    def _decode(self, seq: Seq, n_new: int) -> int:
        """One decode token, plus the draft tokens the verifier accepted (each given the ones before)."""
        accepted = 0
        drafts = n_new - 1
        if drafts > 0:
            while accepted < drafts and self.rng.random() < self.params.spec_acceptance:
                accepted += 1
            self.stats.spec_drafts += 1
            self.stats.spec_draft_tokens += drafts
            self.stats.spec_accepted_tokens += accepted
        seq.computed += 1 + accepted
        return 1 + accepted

    def _prefill(self, seq: Seq, n_new: int) -> int | None:
        """A prefill chunk; the first token once the whole prompt is computed (``None`` before that)."""
        before = seq.computed
        seq.computed += n_new
        if self.params.enable_prefix_caching:
            self.blocks.register(seq, before)
        if seq.computed < seq.prompt_len + seq.out:
            return None
        return 1

    def _deliver(self, seq: Seq, produced: int, end_ns: int) -> None:
        seq.out += produced
        seq.computed = min(seq.computed, seq.prompt_len + seq.out - 1)
        self.stats.generation_tokens += produced
        if seq.first_token_ns is None:
            seq.first_token_ns = end_ns
            self.stats.ttft.observe((end_ns - seq.arrival_ns) / 1e9)
            self.stats.prefill.observe((end_ns - (seq.admitted_ns or seq.arrival_ns)) / 1e9)
        else:
            self.stats.itl.observe((end_ns - (seq.last_token_ns or end_ns)) / 1e9)
        seq.last_token_ns = end_ns

    def _finish(self, seq: Seq, end_ns: int) -> None:
        self.running.remove(seq)
        self.blocks.release(seq)
        seq.state = "finished"
        seq.finish_reason = finish_reason(seq)
        self.stats.finished[seq.finish_reason] += 1
        self.stats.e2e.observe((end_ns - seq.arrival_ns) / 1e9)


def make_engine(params: EngineParams, seed: int = 0) -> GpuEngine | FixedLatencyEngine:
    if params.kind == "fixed":
        return FixedLatencyEngine(params, seed)
    if params.kind == "gpu":
        return GpuEngine(params, seed)
    raise ValueError(f"unknown engine kind {params.kind!r} (expected 'gpu' or 'fixed')")
