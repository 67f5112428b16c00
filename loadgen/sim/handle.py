"""Ways to run the simulator beside a caller: in a daemon thread with its own event loop, or in a separate
process (``python -m loadgen.sim``) so that the caller's own work cannot perturb the simulator's timing.

Both return a ``SimHandle`` with ``url``, ``stop()``, ``ground_truth()``, ``info()`` and ``set_slots()``.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from loadgen.childproc import parent_death_signal, with_hook

from .config import SimConfig, build_config
from .server import SimServer

T = TypeVar("T")


class SimHandle:
    """A running simulator. Use as a context manager or call ``stop()``."""

    url: str

    def stop(self, timeout: float = 10.0) -> None:
        raise NotImplementedError

    def ground_truth(self) -> list[dict[str, Any]]:
        return self._get_json("/_sim/ground_truth")

    def info(self) -> dict[str, Any]:
        return self._get_json("/_sim/info")

    def set_slots(self, max_num_seqs: int) -> dict[str, Any]:
        """``POST /_sim/slots``: at most ``max_num_seqs`` sequences run at once from now on (the knee moves)."""
        body = json.dumps({"max_num_seqs": max_num_seqs}).encode()
        request = urllib.request.Request(
            self.url + "/_sim/slots", body, {"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as reply:  # noqa: S310 (our own 127.0.0.1 URL)
            answer: dict[str, Any] = json.loads(reply.read())
        return answer

    def _get_json(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as reply:  # noqa: S310 (our own 127.0.0.1 URL)
            return json.loads(reply.read())

    def __enter__(self) -> SimHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ThreadSimHandle(SimHandle):
    def __init__(
        self, server: SimServer, loop: asyncio.AbstractEventLoop, thread: threading.Thread, url: str
    ) -> None:
        self.server = server
        self.loop = loop
        self.thread = thread
        self.url = url

    def _call(self, fn: Callable[[], T], timeout: float = 10.0) -> T:
        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def ground_truth(self) -> list[dict[str, Any]]:
        # Read on the simulator's own loop: the deque must not change while it is copied.
        return self._call(self.server.ground_truth)

    def info(self) -> dict[str, Any]:
        return self._call(self.server.info)

    def stop(self, timeout: float = 10.0) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout)


@dataclass
class _Boot:
    """What the simulator's thread hands back once it is listening (or why it is not)."""

    server: SimServer | None = None
    loop: asyncio.AbstractEventLoop | None = None
    url: str = ""
    error: BaseException | None = None


def run_sim_in_thread(
    config: SimConfig | None = None, host: str = "127.0.0.1", port: int = 0, timeout: float = 10.0
) -> SimHandle:
    """Start a simulator on its own event loop in a daemon thread; return once it accepts connections."""
    config = config if config is not None else build_config()
    ready = threading.Event()
    box = _Boot()

    def main() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        server = SimServer(config)
        box.server, box.loop = server, loop
        try:
            box.url = loop.run_until_complete(server.start(host, port))
        except BaseException as exc:  # reported to the caller below
            box.error = exc
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(server.stop())
            loop.close()

    thread = threading.Thread(target=main, name="ramp-sim", daemon=True)
    thread.start()
    if not ready.wait(timeout):
        raise RuntimeError(f"the simulator did not start within {timeout} s")
    if box.error is not None or box.server is None or box.loop is None:
        raise RuntimeError(f"the simulator could not start on {host}:{port}: {box.error}")
    return ThreadSimHandle(box.server, box.loop, thread, box.url)


class ProcessSimHandle(SimHandle):
    def __init__(self, proc: subprocess.Popen[str], url: str, stderr_path: str) -> None:
        self.proc = proc
        self.url = url
        self._stderr_path = stderr_path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # on Windows this is terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        try:
            os.unlink(self._stderr_path)
        except OSError:
            pass


def spawn_sim_process(
    config: SimConfig | None = None, host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0
) -> ProcessSimHandle:
    """Run ``python -m loadgen.sim`` (``llm_ramp.loadgen.sim`` in the wheel) with exactly ``config`` in a
    child process; return once it is READY."""
    config = config if config is not None else build_config()
    # The folder that holds this module's top-level package: the checkout (loadgen.sim.handle) or, in the
    # wheel, site-packages (llm_ramp.loadgen.sim.handle), never a folder inside the package.
    package_root = str(Path(__file__).resolve().parents[__name__.count(".")])
    env = dict(os.environ)
    env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-m", "loadgen.sim", "--host", host, "--port", str(port)]
    cmd += ["--config-json", json.dumps(config.to_dict())]
    err = tempfile.NamedTemporaryFile(prefix="ramp-sim-", suffix=".err", delete=False)  # noqa: SIM115
    # The kernel stops the simulator if ramp dies without stopping it (kill -9): no server left behind.
    child = with_hook({}, parent_death_signal())
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env, **child)
    err.close()
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    try:
        first = lines.get(timeout=timeout)
    except queue.Empty:
        first = ""
    if not first.startswith("READY "):
        proc.kill()
        proc.wait()
        detail = Path(err.name).read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
        os.unlink(err.name)
        raise RuntimeError(f"the simulator process did not start ({' '.join(cmd[:4])} ...): {detail[0]}")
    return ProcessSimHandle(proc, first.split()[1], err.name)
