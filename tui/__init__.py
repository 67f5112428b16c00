"""The Textual console of llm-ramp: renders engine Snapshots, sends engine commands (see ``tui.app``)."""

from tui.app import RampApp, run_console

__all__ = ["RampApp", "run_console"]
