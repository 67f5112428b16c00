"""GPU samples from ``nvidia-smi --query-gpu=... --format=csv`` output, and the source that runs such a
command (locally or through ``ssh``) on its own timer.

The command is the user's: it may be ``nvidia-smi ...`` or ``ssh gpu1 nvidia-smi ...``. Its columns are
read from ``--query-gpu=`` in the command, from a header line when ``--format=csv`` keeps one, or given
explicitly; ``[N/A]``/``[Not Supported]`` become ``None``. One call costs ~30 ms of the GPU host's CPU
(tests/fixtures/h200/query_cost.json), so it runs at most about once a second, and is killed (with its
process group) when it outlives its timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import os
import re
import signal
import time
from collections.abc import Sequence

from loadgen.snapshot import GPUSample
from loadgen.telemetry.reading import Reading, SourceError, SourceKind

DEFAULT_QUERY = ("index", "name", "memory.used", "memory.total", "utilization.gpu", "power.draw")
DEFAULT_GPU_CMD = (
    "nvidia-smi --query-gpu=" + ",".join(DEFAULT_QUERY) + ",driver_version --format=csv,noheader,nounits"
)
MISSING = {
    "",
    "n/a",
    "[n/a]",
    "[not supported]",
    "not supported",
    "[unknown error]",
    "[insufficient permissions]",
}

_QUERY_RE = re.compile(r"--query-gpu[= ]+['\"]?([A-Za-z0-9_.,]+)")
_NUMBER_RE = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")


def columns_from_command(cmd: str) -> tuple[str, ...] | None:
    match = _QUERY_RE.search(cmd)
    if not match:
        return None
    return tuple(c.strip().lower() for c in match.group(1).split(",") if c.strip())


def _header_name(cell: str) -> str:
    # "memory.used [MiB]" -> "memory.used"; nvidia-smi may print a query alias ("clocks.sm") under
    # its long name ("clocks.current.sm"), which does not matter for the columns read here.
    return cell.split("[", 1)[0].strip().lower()


def _number(cell: str) -> float | None:
    text = cell.strip()
    if text.lower() in MISSING:
        return None
    match = _NUMBER_RE.match(text)  # "78.31 W", "0 %", "143771 MiB" -> the number
    return float(match.group(1)) if match else None


def parse_query_csv(
    text: str, columns: Sequence[str] | None = None, *, source: str = "gpu command"
) -> tuple[tuple[GPUSample, ...], dict[str, str]]:
    """GPU samples (and ``driver_version`` if queried) from ``--query-gpu`` CSV, header or not."""
    rows = [r for r in csv.reader(text.splitlines(), skipinitialspace=True) if any(c.strip() for c in r)]
    if not rows:
        raise SourceError(f"{source} printed nothing")
    cols: tuple[str, ...] | None = tuple(c.lower() for c in columns) if columns else None
    first = [c.strip().lower() for c in rows[0]]
    if any(c.startswith(("index", "memory.", "name", "utilization.", "power.")) for c in first):
        cols = tuple(_header_name(c) for c in rows[0])
        rows = rows[1:]
    cols = cols or DEFAULT_QUERY
    pos = {name: i for i, name in enumerate(cols)}
    if "memory.used" not in pos and "utilization.gpu" not in pos and "power.draw" not in pos:
        raise SourceError(f"{source}: no memory.used/utilization.gpu/power.draw column in {','.join(cols)}")
    gpus: list[GPUSample] = []
    info: dict[str, str] = {}
    for line_no, row in enumerate(rows, start=1):
        if len(row) != len(cols):
            shown = ",".join(row)[:80]
            raise SourceError(f"{source} line {line_no}: {len(row)} fields, expected {len(cols)}: {shown!r}")

        def cell(name: str, row: list[str] = row) -> str | None:
            i = pos.get(name)
            return row[i] if i is not None else None

        index_text = cell("index")
        index_value = _number(index_text) if index_text is not None else None
        name = (cell("name") or "").strip()
        driver = (cell("driver_version") or "").strip()
        if driver and driver.lower() not in MISSING:
            info.setdefault("driver_version", driver)
        gpus.append(
            GPUSample(
                index=int(index_value) if index_value is not None else len(gpus),
                name="" if name.lower() in MISSING else name,
                mem_used_mib=_maybe(cell("memory.used")),
                mem_total_mib=_maybe(cell("memory.total")),
                util_pct=_maybe(cell("utilization.gpu")),
                power_w=_maybe(cell("power.draw")),
            )
        )
    return tuple(gpus), info


def _maybe(cell: str | None) -> float | None:
    return None if cell is None else _number(cell)


class CommandGPUSource:
    """Runs a command printing ``nvidia-smi --query-gpu`` CSV; at most about once a second."""

    kind: SourceKind = "gpu"

    def __init__(
        self,
        cmd: str,
        *,
        interval_s: float = 1.0,
        timeout_s: float = 5.0,
        columns: Sequence[str] | None = None,
        name: str = "gpu-cmd",
    ) -> None:
        if not cmd.strip():
            raise ValueError("--gpu-cmd is empty: give a command that prints nvidia-smi --query-gpu CSV")
        self.name = name
        self.cmd = cmd
        self.interval_s = max(1.0, interval_s)  # nvidia-smi costs ~30 ms of the GPU host's CPU a call
        self.timeout_s = timeout_s
        self.last_fetch_s: float | None = None  # spaced by its own interval: the hub times the whole poll
        self.columns = tuple(columns) if columns else columns_from_command(cmd)
        self._proc: asyncio.subprocess.Process | None = None

    async def poll(self) -> Reading:
        try:
            proc = await asyncio.create_subprocess_shell(
                self.cmd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # own process group, so a timeout kills ssh/sh and children
            )
        except OSError as exc:
            raise SourceError(f"cannot run gpu command: {exc}") from None
        self._proc = proc
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.timeout_s)
        except asyncio.TimeoutError:
            await self._kill(proc)
            raise SourceError(f"gpu command timed out after {self.timeout_s:g} s (killed)") from None
        finally:
            if proc.returncode is None:  # cancelled: leave nothing behind
                await self._kill(proc)
            self._proc = None
        t_ns = time.monotonic_ns()
        if proc.returncode != 0:
            message = _first_line(err) or _first_line(out) or "no output"
            raise SourceError(f"gpu command exit {proc.returncode}: {message}")
        gpus, info = parse_query_csv(out.decode(errors="replace"), self.columns)
        return Reading(t_ns=t_ns, gpus=gpus, info=info)

    async def _kill(self, proc: asyncio.subprocess.Process) -> None:
        if proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            if hasattr(os, "killpg"):
                os.killpg(proc.pid, signal.SIGKILL)
            else:  # pragma: no cover - Windows
                proc.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), 2.0)

    async def aclose(self) -> None:
        proc = self._proc
        if proc is not None:
            await self._kill(proc)


def _first_line(data: bytes) -> str:
    for line in data.decode(errors="replace").splitlines():
        if line.strip():
            return line.strip()[:160]
    return ""
