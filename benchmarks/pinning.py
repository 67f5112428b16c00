"""``--pin``: the simulator on one CPU and ramp (this process and the workers it spawns) on the others.

On a 2-core machine a simulator that shares its cores with the client is no longer the exact server its
truth describes: at 64 streams on the exact mock (TTFT 80 ms, 20 ms a token) the request's way in (ramp's
send to the simulator's handler) read p95 3.3 ms and p99 13.9 ms unpinned, in bursts the whole closed loop
shares, against 2.1 and 4.6 ms pinned; the way out (the simulator's write to ramp's read) 0.5 ms p95 either
way. A benchmark of the estimator wants the server it names; ``bench_parity`` pins the same way.
"""

from __future__ import annotations

import os

__all__ = ["pin_apart"]

_CPUS: list[int] = []  # the CPUs this process could use before it pinned itself (a second run spawns again)


def pin_apart(sim_pid: int) -> str:
    """The simulator ``sim_pid`` on CPU 0, this process (and what it spawns from now on) on the rest; what was
    done, for the benchmark's header. Nothing where affinity cannot be set or only one CPU is free."""
    if not hasattr(os, "sched_setaffinity"):
        return "not pinned (no CPU affinity on this system)"
    if not _CPUS:
        _CPUS.extend(sorted(os.sched_getaffinity(0)))
    cpus = _CPUS
    if len(cpus) < 2:
        return "not pinned (one CPU)"
    os.sched_setaffinity(sim_pid, {cpus[0]})
    os.sched_setaffinity(0, set(cpus[1:]))
    return f"simulator on CPU {cpus[0]}, ramp on CPU {','.join(map(str, cpus[1:]))}"
