"""The embedded serving simulator: an OpenAI-compatible server that behaves like a GPU serving engine.

Use it to test the load generator without a GPU, with known ground truth (queueing, TTFT, decode times)::

    from loadgen.sim import build_config, run_sim_in_thread
    handle = run_sim_in_thread(build_config("tiny-cpu", seed=1))
    ... point a client at handle.url ...
    truth = handle.ground_truth()
    handle.stop()
"""

from __future__ import annotations

from .closed_loop import ClosedLoopResult, run_closed_loop
from .config import FaultConfig, SimConfig, build_config
from .fixed import FixedLatencyEngine
from .handle import SimHandle, run_sim_in_thread, spawn_sim_process
from .model import GpuEngine
from .params import EngineParams, StepCost
from .presets import PRESETS
from .server import SimServer

__all__ = [
    "PRESETS",
    "ClosedLoopResult",
    "EngineParams",
    "FaultConfig",
    "FixedLatencyEngine",
    "GpuEngine",
    "SimConfig",
    "SimHandle",
    "SimServer",
    "StepCost",
    "build_config",
    "run_closed_loop",
    "run_sim_in_thread",
    "spawn_sim_process",
]
