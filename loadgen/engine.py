"""Shim: the engine moved to ``loadgen.run.engine`` (its settings to ``loadgen.config``). Kept while callers
still import from here; the lead removes it once none does."""

from loadgen.config import RampPlan, RunConfig, RunOutcome, SetupError
from loadgen.run.engine import Engine, EngineControl

__all__ = ["Engine", "EngineControl", "RampPlan", "RunConfig", "RunOutcome", "SetupError"]
