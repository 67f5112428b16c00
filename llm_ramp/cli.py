"""The ``ramp`` command (pyproject.toml's ``[project.scripts]``): the same entry point in the wheel, where this
import reads ``llm_ramp.loadgen.cli`` (setup.py), and in an editable checkout."""

from loadgen.cli import main

__all__ = ["main"]
