"""The "fast" preset's engine: every request gets a fixed TTFT and a fixed time per token, independent of
load, kept on a heap so one wake-up serves every stream that is due. With ``fixed_ttft_sigma`` /
``fixed_tpot_sigma`` each request draws its own, lognormal around the fixed values as medians (seeded): a
server whose latencies are known random variables, still independent of the load.
"""

from __future__ import annotations

import heapq
import math
import random

from .params import EngineParams
from .sequences import Emit, Seq, Step, finish_reason
from .stats import EngineStats


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
        self._tpot_of: dict[int, int] = {}  # per request, when its time per token is drawn

    def _draw(self, median_ns: int, sigma: float) -> int:
        return (
            median_ns if sigma <= 0 else max(1, int(median_ns * math.exp(sigma * self.rng.gauss(0.0, 1.0))))
        )

    def add(self, seq: Seq) -> None:
        seq.state = "running"
        seq.admitted_ns = seq.arrival_ns
        seq.cached_tokens = 0
        seq.due_ns = seq.arrival_ns + self._draw(self._ttft_ns, self.params.fixed_ttft_sigma)
        if self.params.fixed_tpot_sigma > 0:
            self._tpot_of[seq.rid] = self._draw(self._tpot_ns, self.params.fixed_tpot_sigma)
        self.stats.queue.observe(0.0)
        self.stats.prompt_tokens += seq.prompt_len
        self.stats.prefix_queries += seq.prompt_len
        self._active += 1
        heapq.heappush(self._heap, (seq.due_ns, seq.rid, seq))

    def abort(self, seq: Seq) -> None:
        if seq.state == "running":
            seq.state = "aborted"  # its heap entry is skipped when popped
            self._tpot_of.pop(seq.rid, None)
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

    def reset_prefix_cache(self) -> int:
        """No cache to drop: the reset is only counted."""
        self.stats.prefix_cache_resets += 1
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
            own = self._tpot_of.get(rid, tpot)
            if seq.first_token_ns is None:
                seq.first_token_ns = due
                stats.ttft.observe((due - seq.arrival_ns) / 1e9)
            else:
                stats.itl.observe(own / 1e9)
            seq.last_token_ns = due
            done = seq.out >= seq.target_out
            emits.append(Emit(seq, 1, done))
            if done:
                self._finish(seq, due)
            else:
                seq.due_ns = due + own
                heapq.heappush(heap, (seq.due_ns, rid, seq))
        stats.generation_tokens += len(emits)
        stats.steps += 1
        stats.busy_ns += end_ns - start_ns
        return Step(start_ns, end_ns, emits, len(emits), 0)

    def _finish(self, seq: Seq, now_ns: int) -> None:
        seq.state = "finished"
        self._tpot_of.pop(seq.rid, None)
        seq.finish_reason = finish_reason(seq)
        self._active -= 1
        self.stats.finished[seq.finish_reason] += 1
        self.stats.e2e.observe((now_ns - seq.arrival_ns) / 1e9)
