"""The live figures the health check reads: refused connections in the rolling window, counted from the
window itself (no snapshot has to be built first), and a target called silent only when nothing
succeeded for long enough."""

from __future__ import annotations

from loadgen.metrics import IntervalDelta, Recorder
from loadgen.run.live import LiveFigures
from loadgen.types import ErrorKind, Outcome, RequestResult

S = 1_000_000_000


def _delta(t1_ns: int, refused: int = 0, ok: int = 0) -> IntervalDelta:
    recorder = Recorder(worker_id=0)
    for _ in range(refused):
        recorder.record(
            RequestResult(
                outcome=Outcome.ERROR,
                intended_ns=t1_ns - S // 10,
                sent_ns=t1_ns - S // 10,
                end_ns=t1_ns - S // 10 + 1000,
                error_kind=ErrorKind.CONNECT,
                error_message="connection refused",
            )
        )
    for _ in range(ok):
        t = t1_ns - S // 2
        recorder.record(
            RequestResult(
                outcome=Outcome.OK,
                intended_ns=t,
                sent_ns=t,
                end_ns=t1_ns - S // 10,
                first_token_ns=t + S // 10,
                last_token_ns=t1_ns - S // 10,
                chunk_times_ns=(t + S // 10, t1_ns - S // 10),
                output_tokens=2,
                tokens_exact=True,
            )
        )
    return recorder.take(t1_ns - S // 4, t1_ns)


def test_refused_connections_are_counted_over_the_rolling_window_only() -> None:
    live = LiveFigures(rolling_s=10.0, t0_ns=0)
    live.add(0, _delta(1 * S, refused=3), current=True)
    live.add(0, _delta(5 * S, refused=2), current=True)
    assert live.connect_errors(6 * S) == 5
    assert live.connect_errors(12 * S) == 2  # the first delta left the 10 s window


def test_the_target_is_silent_only_after_long_enough_without_a_success() -> None:
    live = LiveFigures(rolling_s=10.0, t0_ns=0)
    live.add(0, _delta(1 * S, ok=1), current=True)
    live.add(0, _delta(8 * S, refused=4), current=True)
    assert live.last_ok_ns == 1 * S
    assert live.refused_while_silent(9 * S, silent_s=10.0) == 0  # refused, but a success 8 s ago
    assert live.refused_while_silent(12 * S, silent_s=10.0) == 4
    quiet = LiveFigures(rolling_s=10.0, t0_ns=0)
    quiet.add(0, _delta(1 * S, ok=1), current=True)
    assert quiet.refused_while_silent(12 * S, silent_s=10.0) == 0  # silent, but nothing refused
