"""A server process for ``ramp launch``: start vLLM or SGLang as a child, wait until it is healthy, measure
its cold start, keep a tail of its output, and stop it (and its children) on every way out.

Owns ``server_argv`` (the command line: ``python -m <module> <model flag> MODEL --host H --port P
[extra]``), ``launch_server`` (starts it in a process group of its own, inside ramp's session, its output
going to a log file and a bounded in-memory tail), ``Launched`` (health wait with progress, first-token
measurement, stop with SIGTERM then SIGKILL, exit detection) and ``launch_and_wait`` (the two, plus a retry
on another port when the picked one was taken meanwhile). Knows nothing of runs or faces.

    srv = launch_and_wait("vllm", "/models/tiny", ["--max-model-len", "2048"], python=venv_python)
    srv.measure_first_token()
    ... srv.url ...
    srv.stop()

A server command line never carries a secret into a log line or a record: values of ``--api-key``-like
flags are replaced by ``***`` (and the record writer also blanks any secret environment value). Its output
is scrubbed once, as read, of every secret ramp knows (``Launched.secrets``): tail and log file (0600) alike.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import InitVar, dataclass, field
from datetime import datetime, timezone
from secrets import token_hex
from typing import IO, TYPE_CHECKING

from loadgen import strict_json
from loadgen.childproc import LAUNCH_MARK, child_popen_args, ignores_signal, left_behind, signal_each
from loadgen.runtimes import LAUNCHABLE

if TYPE_CHECKING:
    import httpx

__all__ = [
    "KINDS",
    "LaunchError",
    "Launched",
    "PortInUse",
    "free_port",
    "launch_and_wait",
    "launch_server",
    "redact_argv",
    "server_argv",
]

# kind -> (python module run with -m, flag that names the model): each launchable runtime's own
KINDS: Mapping[str, tuple[str, str]] = {
    name: (runtime.launch.module, runtime.launch.model_flag)
    for name, runtime in LAUNCHABLE.items()
    if runtime.launch is not None
}
TAIL_LINES = 400
SAY_AFTER_S = 2.0  # a stop still waiting after this long is said (the operator sees why ramp has not exited)
_SECRET_FLAGS = ("--api-key", "--hf-token", "--token", "--admin-api-key")
_PORT_TAKEN = ("address already in use", "errno 98", "error while attempting to bind")


class LaunchError(Exception):
    """The server could not be started or never became healthy. The message is for the operator."""


class PortInUse(LaunchError):
    """The server exited because its port was taken (the free-port pick raced with someone else)."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (bind port 0, close). Racy by nature: see ``launch_and_wait``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def redact_argv(argv: Sequence[str]) -> list[str]:
    """The command line with the values of secret flags replaced by ``***``."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        flag, eq, _ = arg.partition("=")
        if flag in _SECRET_FLAGS and eq:
            out.append(f"{flag}=***")
        else:  # the word after a bare secret flag is its value
            out.append("***" if i and argv[i - 1] in _SECRET_FLAGS else arg)
    return out


def _flag_value(args: Sequence[str], flag: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def server_argv(
    kind: str, model: str, extra_args: Sequence[str], python: str, host: str, port: int
) -> list[str]:
    """``python -m <server module> <model flag> MODEL --host H --port P [extra]``.

    The host and port belong to ramp (it must know where to send the load): passing them in the extra
    arguments is refused rather than silently overridden.
    """
    if kind not in KINDS:
        raise LaunchError(f"unknown server kind {kind!r}: use one of {', '.join(KINDS)}")
    module, model_flag = KINDS[kind]
    for flag in ("--host", "--port", model_flag):
        if _flag_value(extra_args, flag) is not None or flag in extra_args:
            raise LaunchError(
                f"{flag} is set by ramp launch (use ramp's own --host/--port and the MODEL argument), "
                f"not after '--'"
            )
    return [python, "-m", module, model_flag, model, "--host", host, "--port", str(port), *extra_args]


@dataclass
class Launched:
    """A running server started by ``launch_server``. Stop it with ``stop()`` (or use it as a context)."""

    kind: str
    model: str
    argv: list[str]
    host: str
    port: int
    proc: subprocess.Popen[bytes]
    log_path: str | None
    started_ns: int  # monotonic, just before Popen
    started_at: str  # wall clock, ISO 8601, for the record
    port_picked: bool = False  # ramp chose the port (so a clash may be retried on another)
    healthy_after_s: float | None = None
    first_token_after_s: float | None = None
    log_file: InitVar[IO[str] | None] = None  # the open log (closed once the output ends)
    mark: str = ""  # LAUNCH_MARK's value in its environment: finds its processes that left its group
    secrets: tuple[str, ...] = ()  # masked in each line it prints; longest first (one may hold another)
    escaped_ended: int = 0  # processes outside its group (setsid, double fork) that stop() ended
    _tail: collections.deque[str] = field(
        init=False, default_factory=lambda: collections.deque(maxlen=TAIL_LINES)
    )
    _log: IO[str] | None = field(init=False, default=None)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _stopped_by_us: bool = field(init=False, default=False)
    _reader: threading.Thread = field(init=False)

    def __post_init__(self, log_file: IO[str] | None) -> None:
        # The output is read from the start: a server that fills its pipe would block.
        self._log = log_file
        self._reader = threading.Thread(target=self._read_output, name=f"{self.kind}-log", daemon=True)
        self._reader.start()

    # ---- identity -------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    @property
    def command_line(self) -> str:
        """The command as a shell line, secrets redacted: what the record and the log show."""
        return shlex.join(redact_argv(self.argv))

    @property
    def cold_start(self) -> dict[str, object]:
        """The cold-start figures, as the record's ``cold_start`` event carries them."""
        return {
            "server": self.kind,
            "model": self.model,
            "command": self.command_line,
            "pid": self.pid,
            "process_start": self.started_at,
            "healthy_after_s": self.healthy_after_s,
            "first_token_after_s": self.first_token_after_s,
            "log": self.log_path,
        }

    # ---- output ---------------------------------------------------------------------------------
    def _read_output(self) -> None:
        from loadgen.target.http import scrub  # here: `ramp --help` imports this module, not asyncio

        stream = self.proc.stdout
        assert stream is not None
        for raw in iter(stream.readline, b""):
            # Progress bars redraw with \r: keep the last state of each line, scrubbed once for tail and log.
            text = scrub(raw.decode("utf-8", "replace").rstrip("\r\n").rsplit("\r", 1)[-1], self.secrets)
            with self._lock:
                self._tail.append(text)
                if self._log is not None:
                    with contextlib.suppress(OSError, ValueError):
                        self._log.write(text + "\n")
                        self._log.flush()
        with self._lock:
            if self._log is not None:
                self._log.close()
                self._log = None

    def tail(self, n: int = 20) -> list[str]:
        """The last ``n`` lines the server printed (stdout and stderr together)."""
        with self._lock:
            return list(self._tail)[-n:] if n > 0 else []

    def last_line(self) -> str:
        with self._lock:
            for line in reversed(self._tail):
                if line.strip():
                    return line.strip()
        return ""

    # ---- state ----------------------------------------------------------------------------------
    def poll(self) -> int | None:
        """The exit code once the server process has exited, else None."""
        return self.proc.poll()

    @property
    def stopped_by_us(self) -> bool:
        return self._stopped_by_us

    def describe_exit(self, lines: int = 12) -> str:
        """One paragraph for the operator: how the process ended and what it said last."""
        code = self.proc.poll()
        if code is None:
            how = "is still running"
        elif code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            how = f"was killed by {name}"
        else:
            how = f"exited with code {code}"
        text = f"the {self.kind} server (pid {self.pid}) {how}"
        last = self.tail(lines)
        if last:
            text += "; its last output:\n    " + "\n    ".join(last)
        if self.log_path:
            text += f"\n  full log: {self.log_path}"
        return text

    def wait_healthy(
        self, timeout: float = 600.0, progress_cb: Callable[[float, str], None] | None = None
    ) -> float:
        """Poll ``/health`` (then ``/v1/models``) until both answer 200; seconds since process start.

        Raises ``LaunchError`` when the process exits first (``PortInUse`` when it says its port was
        taken) or when ``timeout`` passes. ``progress_cb(elapsed_s, last_log_line)`` is called about
        four times a second while waiting.
        """
        import httpx

        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=httpx.Timeout(2.0), trust_env=False) as client:
            while True:
                code = self.proc.poll()
                if code is not None:
                    self._join_reader()
                    said = "\n".join(self.tail(TAIL_LINES)).lower()
                    if self.port_picked and any(p in said for p in _PORT_TAKEN):
                        raise PortInUse(f"port {self.port} was taken: {self.describe_exit(4)}")
                    raise LaunchError(f"{self.describe_exit()}\n  before it answered {self.url}/health")
                if self._ready(client):
                    self.healthy_after_s = round((time.monotonic_ns() - self.started_ns) / 1e9, 3)
                    return self.healthy_after_s
                elapsed = (time.monotonic_ns() - self.started_ns) / 1e9
                if progress_cb is not None:
                    progress_cb(elapsed, self.last_line())
                if time.monotonic() > deadline:
                    raise LaunchError(
                        f"the {self.kind} server did not answer {self.url}/health within {timeout:g} s "
                        f"(raise --health-timeout?); its last output:\n    " + "\n    ".join(self.tail(8))
                    )
                # Bounded poll interval: the process is checked between tries, so exit is seen promptly.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=0.25)

    def _ready(self, client: httpx.Client) -> bool:
        import httpx

        try:
            if client.get(self.url + "/health").status_code != 200:
                return False
            # SGLang answers /health before its warm-up request is through; the model list is the
            # last thing both runtimes serve, and what the load needs.
            resp = client.get(self.url + "/v1/models")
            return resp.status_code == 200 and bool(strict_json.loads(resp.content).get("data"))
        except (httpx.HTTPError, ValueError, AttributeError):
            return False

    def measure_first_token(self, model: str | None = None, timeout: float = 120.0) -> float | None:
        """Stream one short completion and note when its first token arrives, in seconds since process
        start. ``None`` when the server would not produce one (the run goes on without the figure)."""
        import httpx

        try:
            with httpx.Client(timeout=httpx.Timeout(timeout), trust_env=False) as client:
                if not model:
                    models = strict_json.loads(client.get(self.url + "/v1/models").content).get("data") or []
                    model = models[0]["id"] if models else self.model
                body = {
                    "model": model,
                    "prompt": "Hello",
                    "max_tokens": 2,
                    "stream": True,
                    "temperature": 0.0,
                }
                with client.stream("POST", self.url + "/v1/completions", json=body) as resp:
                    if resp.status_code != 200:
                        return None
                    for line in resp.iter_lines():
                        if not line.startswith("data:") or line.strip() == "data: [DONE]":
                            continue
                        try:
                            doc = strict_json.loads(line[5:])
                        except ValueError:
                            continue
                        choices = doc.get("choices") or []
                        if choices and choices[0].get("text"):
                            self.first_token_after_s = round((time.monotonic_ns() - self.started_ns) / 1e9, 3)
                            break
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
            return None
        return self.first_token_after_s

    # ---- stopping -------------------------------------------------------------------------------
    def _signal_group(self, sig: int) -> None:
        # The server's engine runs in children of its own (vLLM's EngineCore): signal the whole group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def stop(self, grace: float = 15.0, say: Callable[[str], None] | None = None) -> int | None:
        """SIGTERM to the server's process group, SIGKILL after ``grace`` seconds; the exit code.
        ``say`` hears, once, why the stop waits: a server that ignores SIGTERM, or one still up after
        ``SAY_AFTER_S``. Its processes outside the group (a ``setsid`` and fork: ``left_behind``) get
        the same signals, and SIGKILL once the server is gone.

        Cut short (a second Ctrl-C while it waits out the grace), the group is killed before the
        interrupt goes on: no server outlives ramp."""
        escaped: dict[int, int] = {}
        try:
            if self.proc.poll() is None:
                self._stopped_by_us = True
                escaped = left_behind(self.pid, self.mark)  # while the tree is whole: its root lives
                self._signal_group(signal.SIGTERM)
                signal_each(escaped, signal.SIGTERM)
                self._wait_out(grace, say)
        finally:
            # Children that outlived the main process (it exited on its own, or ignored TERM) go too.
            self._signal_group(signal.SIGKILL)
            self.escaped_ended += signal_each({**escaped, **left_behind(self.pid, self.mark)}, signal.SIGKILL)
        self._join_reader()
        return self.proc.poll()

    def _wait_out(self, grace: float, say: Callable[[str], None] | None) -> None:
        """Wait up to ``grace`` for the server to end after SIGTERM (saying why, once), then SIGKILL it."""
        deadline, who = time.monotonic() + grace, f"the {self.kind} server (pid {self.pid})"
        if say is not None and ignores_signal(self.pid, signal.SIGTERM):
            say(f"{who} ignores SIGTERM; waiting {grace:g} s then SIGKILL")
        elif say is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=min(grace, SAY_AFTER_S))
            left = deadline - time.monotonic()
            if self.proc.poll() is None and left > 0:
                say(f"{who} is still up {SAY_AFTER_S:g} s after SIGTERM; SIGKILL in {left:.0f} s")
        try:
            self.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self._signal_group(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10.0)

    def _join_reader(self) -> None:
        self._reader.join(timeout=5.0)

    def __enter__(self) -> Launched:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _open_log(log_path: str | None, argv: Sequence[str]) -> IO[str] | None:
    """The server's log file, opened for appending, its owner's alone (0600: what a server prints may hold
    what ramp does not know to be a secret), headed by the (redacted) command line."""
    if not log_path:
        return None
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)  # a log already there (an earlier launch's, a file named by --server-log) too
    log = os.fdopen(fd, "a", encoding="utf-8")
    log.write(f"# ramp launch {datetime.now(timezone.utc).astimezone().isoformat(timespec='seconds')}: ")
    log.write(shlex.join(redact_argv(argv)) + "\n")
    log.flush()
    return log


def launch_server(
    kind: str,
    model: str,
    extra_args: Sequence[str] = (),
    python: str = sys.executable,
    host: str = "127.0.0.1",
    port: int | None = None,
    env: Mapping[str, str] | None = None,
    log_path: str | None = None,
    secrets: Sequence[str] = (),
) -> Launched:
    """Start the server (``python -m vllm.entrypoints.openai.api_server`` or ``python -m
    sglang.launch_server``) in a new process group. ``port=None`` picks a free one. ``env`` is added to
    this process's environment. ``secrets`` (the run's keys) are masked in its output with its arguments' and
    its environment's keys. Returns at once: call ``wait_healthy`` next."""
    from loadgen.target.secrets import arg_secrets, env_secrets  # here: `ramp --help` stays light

    picked = port is None
    use_port = free_port(host) if port is None else int(port)
    argv = server_argv(kind, model, extra_args, python, host, use_port)
    child_env = dict(os.environ)
    child_env.update(env or {})
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    mark = token_hex(8)  # inherited by everything it starts, in its group or not (stop())
    child_env[LAUNCH_MARK] = mark
    log = _open_log(log_path, argv)
    popen_args = child_popen_args()
    started_at = datetime.now(timezone.utc).astimezone().isoformat(timespec="milliseconds")
    t0 = time.monotonic_ns()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=child_env,
            # its own process group in ramp's session (see loadgen.childproc); stop() signals the group
            **popen_args,
        )
    except OSError as exc:
        if log is not None:
            log.close()
        raise LaunchError(
            f"cannot start {shlex.join(redact_argv(argv[:3]))}: {exc.strerror or exc}"
        ) from None
    return Launched(
        kind=kind,
        model=model,
        argv=argv,
        host=host,
        port=use_port,
        proc=proc,
        log_path=log_path,
        started_ns=t0,
        started_at=started_at,
        port_picked=picked,
        log_file=log,
        mark=mark,
        secrets=tuple(sorted({*secrets, *arg_secrets(argv), *env_secrets(child_env)}, key=len, reverse=True)),
    )


def launch_and_wait(
    kind: str,
    model: str,
    extra_args: Sequence[str] = (),
    python: str = sys.executable,
    host: str = "127.0.0.1",
    port: int | None = None,
    env: Mapping[str, str] | None = None,
    log_path: str | None = None,
    timeout: float = 600.0,
    progress_cb: Callable[[float, str], None] | None = None,
    retries: int = 3,
    secrets: Sequence[str] = (),
) -> Launched:
    """``launch_server`` + ``wait_healthy``; a picked port that turns out taken is retried on a new one.
    The server is stopped before any exception leaves (KeyboardInterrupt included)."""
    for attempt in range(retries):
        srv: Launched | None = None
        try:  # a Ctrl-C the moment the process exists (before the health wait) must stop it too
            srv = launch_server(kind, model, extra_args, python, host, port, env, log_path, secrets)
            srv.wait_healthy(timeout, progress_cb)
            return srv
        except PortInUse:
            if srv is not None:
                srv.stop()
            if attempt + 1 >= retries:
                raise
        except BaseException:
            if srv is not None:
                srv.stop()
            raise
    raise LaunchError("unreachable")  # pragma: no cover
