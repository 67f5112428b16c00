"""How every face of ``ramp`` ends: the exit codes (the same for ``run``, ``demo``, ``launch``, ``check``,
``report``, ``compare``, ``replay`` and the console) and ``UsageError``, the one error that means "the command
line cannot run as given" (exit 2). A leaf: the faces (``loadgen.cli``, ``loadgen.check``, ``loadgen.report``,
``tui``) import it, it imports nothing of the project.

0: the SLO was met at some clean step; 1: at none; 2: usage error; 3: target unreachable or unusable (a
launched server that would not start or died under the load included); 128 + N: stopped by signal N
(``loadgen.run.signals.exit_code``; 130 is Ctrl-C).
"""

from __future__ import annotations

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_SLO",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "EXIT_WORKER_LOST",
    "UsageError",
]

EXIT_OK, EXIT_SLO, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
EXIT_INTERRUPTED = 130
EXIT_WORKER_LOST = 4  # a load worker died during a step: that step is flagged worker_lost, never the best


class UsageError(Exception):
    """The command line cannot be run as given. The message says what to write instead."""
