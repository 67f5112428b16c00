"""Whether a run can go on, checked by the controller at each snapshot tick: a server ramp launched has not
exited, some load worker is still alive, and the target still answers (``LiveFigures.gone``). Each failure
ends the run through ``RunStatus.fail`` (run/state.py, the state's one writer); a dead launched server is
marked first, so the record says where it died.
"""

from __future__ import annotations

from collections.abc import Callable

from loadgen.run.config import RunConfig
from loadgen.run.fleet import Fleet
from loadgen.run.live import LiveFigures
from loadgen.run.state import RunStatus

UNREACHABLE_AFTER_S = 10.0  # every request refused or rejected the same way this long: the target is gone


class Vitals:
    """The run's vital signs; ``mark`` notes a line in the run (the controller's ``Mark`` command)."""

    def __init__(
        self,
        config: RunConfig,
        status: RunStatus,
        fleet: Fleet,
        live: LiveFigures,
        mark: Callable[[str], None],
    ) -> None:
        self.config, self.status, self.fleet, self.live, self.mark = config, status, fleet, live, mark

    def check(self, now: int) -> None:
        """Fail the run (at once, its finished steps kept) when it cannot go on."""
        status = self.status
        if status.state in ("running", "paused") and self.server_died():
            return
        if self.fleet.fatal and not self.fleet.any_alive():
            status.fail("all load workers died: " + self.fleet.fatal[0])
            return
        if status.state != "running":
            return
        gone = self.live.gone(now, self.config.target.base_url, UNREACHABLE_AFTER_S)
        if gone is not None:  # refused connections, or every request rejected the same way: exit 3
            status.fail(gone, unreachable=True)

    def server_died(self) -> bool:
        """A server ramp launched has exited: the run fails at once (marked), its finished steps kept."""
        if self.config.server_exit is None:
            return False
        try:
            died = self.config.server_exit()
        except Exception:
            died = None
        if not died:
            return False
        self.mark(died)
        self.status.fail(died, unreachable=True)
        return True
