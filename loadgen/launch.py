"""Starting an inference server as a child process for ``ramp launch``, and measuring its cold start.

Owns ``launch_server`` (builds the command line of vLLM or SGLang and starts it in a process group of
its own, its output going to a log file and a bounded in-memory tail), ``Launched`` (health wait with
progress, first-token measurement, stop with SIGTERM then SIGKILL, exit detection), ``launch_and_wait``
(the above plus a retry on another port when the picked one was taken meanwhile) and ``launch_main``, the
``ramp launch`` command: launch, wait, then the same flow as ``ramp run`` (console or ``--headless``) with a
cold first step and the cold-start figures in the record, and the server stopped on every way out.

    srv = launch_and_wait("vllm", "/models/tiny", ["--max-model-len", "2048"], python=venv_python)
    srv.measure_first_token()
    ... srv.url ...
    srv.stop()

A server command line never carries a secret into a log line or a record: values of ``--api-key``-like
flags are replaced by ``***`` (and the record writer also blanks any secret environment value).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import IO, Any

__all__ = [
    "KINDS",
    "LaunchError",
    "Launched",
    "PortInUse",
    "free_port",
    "launch_and_wait",
    "launch_main",
    "launch_server",
    "redact_argv",
    "server_argv",
]

# kind -> (python module run with -m, flag that names the model)
KINDS: Mapping[str, tuple[str, str]] = {
    "vllm": ("vllm.entrypoints.openai.api_server", "--model"),
    "sglang": ("sglang.launch_server", "--model-path"),
}
TAIL_LINES = 400
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
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        flag, eq, _ = arg.partition("=")
        if flag in _SECRET_FLAGS:
            if eq:
                out.append(f"{flag}=***")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
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
    _tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=TAIL_LINES))
    _lines_seen: int = 0
    _reader: threading.Thread | None = None
    _log: IO[str] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopped_by_us: bool = False

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
    def cold_start(self) -> dict[str, Any]:
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
        stream = self.proc.stdout
        assert stream is not None
        for raw in iter(stream.readline, b""):
            # Progress bars redraw with \r: keep the last state of each line.
            text = raw.decode("utf-8", "replace").rstrip("\r\n").rsplit("\r", 1)[-1]
            with self._lock:
                self._tail.append(text)
                self._lines_seen += 1
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

    @property
    def lines_seen(self) -> int:
        with self._lock:
            return self._lines_seen

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

    def _ready(self, client: Any) -> bool:
        import httpx

        try:
            if client.get(self.url + "/health").status_code != 200:
                return False
            # SGLang answers /health before its warm-up request is through; the model list is the
            # last thing both runtimes serve, and what the load needs.
            resp = client.get(self.url + "/v1/models")
            return resp.status_code == 200 and bool(resp.json().get("data"))
        except (httpx.HTTPError, ValueError, AttributeError):
            return False

    def measure_first_token(self, model: str | None = None, timeout: float = 120.0) -> float | None:
        """Stream one short completion and note when its first token arrives, in seconds since process
        start. ``None`` when the server would not produce one (the run goes on without the figure)."""
        import httpx

        try:
            with httpx.Client(timeout=httpx.Timeout(timeout), trust_env=False) as client:
                if not model:
                    models = client.get(self.url + "/v1/models").json().get("data") or []
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
                            doc = json.loads(line[5:])
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

    def stop(self, grace: float = 15.0) -> int | None:
        """SIGTERM to the server's process group, SIGKILL after ``grace`` seconds; the exit code."""
        if self.proc.poll() is None:
            self._stopped_by_us = True
            self._signal_group(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=10.0)
        # Children that outlived the main process (it exited on its own, or ignored TERM) go too.
        self._signal_group(signal.SIGKILL)
        self._join_reader()
        return self.proc.poll()

    def _join_reader(self) -> None:
        if self._reader is not None:
            self._reader.join(timeout=5.0)

    def __enter__(self) -> Launched:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def own_process_group() -> dict[str, Any]:
    """``Popen`` arguments that give a child its own process group but keep it in ramp's session.

    Its own group: Ctrl-C in ramp's terminal does not reach it, and one ``killpg`` stops it and all its
    children. The same session: Linux's scheduler autogroups (on by default on desktop and most server
    kernels) share CPU equally between *sessions*, not processes. A server in a session of its own, busy-
    spinning on every core (vLLM's CPU engine does), left ramp's mostly-idle workers waiting 0.3-1.6 s for a
    core (measured on 2 cores: TTFT p50 212-364 ms instead of 22-33 ms, half the throughput). In one session
    the scheduler is fair per process and a waking worker gets a core at once.
    """
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}


def _parent_death_signal() -> Callable[[], None] | None:
    """Linux: a child hook asking the kernel to SIGTERM the server if ramp dies without stopping it
    (SIGKILL, a crash): a forgotten vLLM keeps gigabytes of memory and its cores busy."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here: the child only makes the call
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def hook() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)

    return hook


def _with_hook(kwargs: dict[str, Any], hook: Callable[[], None] | None) -> dict[str, Any]:
    """Add a child hook to ``Popen`` arguments, chained after a ``preexec_fn`` already there."""
    if hook is None:
        return kwargs
    first = kwargs.pop("preexec_fn", None)
    if first is None:
        return {**kwargs, "preexec_fn": hook}

    def both() -> None:
        first()
        hook()

    return {**kwargs, "preexec_fn": both}


def launch_server(
    kind: str,
    model: str,
    extra_args: Sequence[str] = (),
    python: str = sys.executable,
    host: str = "127.0.0.1",
    port: int | None = None,
    env: Mapping[str, str] | None = None,
    log_path: str | None = None,
) -> Launched:
    """Start the server (``python -m vllm.entrypoints.openai.api_server`` or ``python -m
    sglang.launch_server``) in a new process group. ``port=None`` picks a free one. ``env`` is added to
    this process's environment. Returns at once: call ``wait_healthy`` next."""
    picked = port is None
    use_port = free_port(host) if port is None else int(port)
    argv = server_argv(kind, model, extra_args, python, host, use_port)
    child_env = dict(os.environ)
    child_env.update(env or {})
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    log: IO[str] | None = None
    if log_path:
        os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
        log = open(log_path, "a", encoding="utf-8")
        log.write(f"# ramp launch {datetime.now(timezone.utc).astimezone().isoformat(timespec='seconds')}: ")
        log.write(shlex.join(redact_argv(argv)) + "\n")
        log.flush()
    preexec = _parent_death_signal()
    started_at = datetime.now(timezone.utc).astimezone().isoformat(timespec="milliseconds")
    t0 = time.monotonic_ns()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=child_env,
            # its own process group in ramp's session (see own_process_group); stop() signals the group
            **_with_hook(own_process_group(), preexec),
        )
    except OSError as exc:
        if log is not None:
            log.close()
        raise LaunchError(
            f"cannot start {shlex.join(redact_argv(argv[:3]))}: {exc.strerror or exc}"
        ) from None
    srv = Launched(
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
    )
    srv._log = log
    srv._reader = threading.Thread(target=srv._read_output, name=f"{kind}-log", daemon=True)
    srv._reader.start()
    return srv


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
) -> Launched:
    """``launch_server`` + ``wait_healthy``; a picked port that turns out taken is retried on a new one.
    The server is stopped before any exception leaves (KeyboardInterrupt included)."""
    for attempt in range(retries):
        srv: Launched | None = None
        try:  # a Ctrl-C the moment the process exists (before the health wait) must stop it too
            srv = launch_server(
                kind, model, extra_args, python=python, host=host, port=port, env=env, log_path=log_path
            )
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


# ---------------------------------------------------------------------------------------------------
# ramp launch


def add_launch_parser(sub: Any, add_run_flags: Callable[..., None]) -> argparse.ArgumentParser:
    """The ``launch`` subcommand's flags: the server's, then every flag of ``ramp run``."""
    p: argparse.ArgumentParser = sub.add_parser(
        "launch",
        help="start vLLM or SGLang, measure its cold start, then ramp it (console or --headless)",
        description=(
            "Start a server as a child process, wait until it is healthy (showing progress), record its "
            "cold start (process start, health OK, first token), then ramp it like `ramp run`. The server "
            "is stopped when ramp exits. Arguments after `--` go to the server unchanged, e.g. "
            "`ramp launch vllm meta-llama/Llama-3.1-8B-Instruct --headless -- --max-model-len 8192`."
        ),
    )
    p.add_argument("kind", nargs="?", choices=sorted(KINDS), help="server to start: vllm or sglang")
    p.add_argument(
        "server_model", nargs="?", metavar="MODEL", help="model path or name, passed to the server"
    )
    p.add_argument(
        "--attach", default=None, metavar="URL", help="skip the launch: ramp a server already running"
    )
    p.add_argument(
        "--python",
        default=sys.executable,
        help="interpreter that has the server installed (default: this one)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address the server listens on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="server port (default: a free one)")
    p.add_argument(
        "--health-timeout", type=float, default=900.0, help="seconds to wait for health (default 900)"
    )
    p.add_argument("--server-log", default=None, help="server log file (default: beside the record)")
    p.add_argument("--headless", action="store_true", help="no console: progress, step table, exit code")
    add_run_flags(p, url=False)
    return p


class _Progress:
    """The health wait's visible indicator: a spinner line on a terminal, a line every 10 s otherwise."""

    FRAMES = "|/-\\"

    def __init__(self, kind: str, stream: IO[str]) -> None:
        self.kind = kind
        self.stream = stream
        self.tty = stream.isatty()
        self.n = 0
        self.last_print = -1e9

    def __call__(self, elapsed: float, line: str) -> None:
        self.n += 1
        if self.tty:
            frame = self.FRAMES[self.n % len(self.FRAMES)]
            text = f"{frame} starting {self.kind}: {elapsed:5.1f} s  {line}"
            self.stream.write("\r\033[K" + text[:150])
            self.stream.flush()
        elif elapsed - self.last_print >= 10.0:
            self.last_print = elapsed
            print(f"ramp: starting {self.kind}: {elapsed:.0f} s  {line[:120]}", file=self.stream, flush=True)

    def done(self) -> None:
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()


def launch_main(args: argparse.Namespace, extra: Sequence[str]) -> int:
    """``ramp launch``: returns the exit code of ``ramp run`` (3 when the server would not start)."""
    from loadgen import cli

    # Handled here, not left to cli.main: under `python -m loadgen.cli` that module is __main__, whose
    # UsageError is another class than the one loadgen.cli raises.
    try:
        return _launch(args, extra)
    except cli.UsageError as exc:
        print(f"ramp: {exc}", file=sys.stderr)
        return cli.EXIT_USAGE


def _launch(args: argparse.Namespace, extra: Sequence[str]) -> int:
    from loadgen import cli

    if args.attach:
        if extra:
            raise cli.UsageError(
                "server arguments after '--' make no sense with --attach (nothing is launched)"
            )
        return cli._run(args, args.attach, headless=args.headless)
    if not args.kind or not args.server_model:
        raise cli.UsageError(
            "ramp launch vllm|sglang MODEL [flags] [-- server args], or ramp launch --attach URL"
        )
    if args.port is not None and not 0 < args.port < 65536:
        raise cli.UsageError(f"--port must be 1..65535, got {args.port}")
    # Validate the flags before paying for a server start; the URL is filled in once it is known.
    try:
        server_argv(args.kind, args.server_model, extra, args.python, args.host, args.port or 1)
    except LaunchError as exc:
        raise cli.UsageError(str(exc)) from None
    config = cli.build_config(args, f"http://{args.host}:{args.port or 1}")
    log_path = args.server_log or (
        os.path.splitext(config.out)[0] + f".{args.kind}.log" if config.out else None
    )
    progress = _Progress(args.kind, sys.stderr)
    print(
        f"ramp: starting {args.kind}: {shlex.join(redact_argv([args.python, '-m', KINDS[args.kind][0]]))} "
        f"… (log: {log_path})",
        file=sys.stderr,
        flush=True,
    )
    old_term = signal.getsignal(signal.SIGTERM)

    def _term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    # A SIGTERM to ramp must still stop the server: turn it into the Ctrl-C path.
    with contextlib.suppress(ValueError):
        signal.signal(signal.SIGTERM, _term)
    srv: Launched | None = None
    try:
        try:
            srv = launch_and_wait(
                args.kind,
                args.server_model,
                extra,
                python=args.python,
                host=args.host,
                port=args.port,
                log_path=log_path,
                timeout=args.health_timeout,
                progress_cb=progress,
            )
        except LaunchError as exc:
            progress.done()
            print(f"ramp: {exc}", file=sys.stderr)
            return cli.EXIT_UNREACHABLE
        except KeyboardInterrupt:
            progress.done()
            print("ramp: interrupted while the server was starting; it has been stopped", file=sys.stderr)
            return 130
        progress.done()
        srv.measure_first_token(args.model or None)
        cold = srv.cold_start
        first = cold["first_token_after_s"]
        print(
            f"ramp: {args.kind} healthy after {cold['healthy_after_s']:.1f} s, first token after "
            + (f"{first:.1f} s" if first is not None else "n/a")
            + f" (pid {srv.pid}, {srv.url})",
            file=sys.stderr,
            flush=True,
        )
        return _run_launched(args, srv, cold)
    finally:
        if srv is not None:
            died = srv.poll() is not None and not srv.stopped_by_us
            code = srv.stop()
            if died:
                print(f"ramp: {srv.describe_exit()}", file=sys.stderr)
            else:
                print(f"ramp: stopped the {srv.kind} server (pid {srv.pid}, exit {code})", file=sys.stderr)
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGTERM, old_term)


def _run_launched(args: argparse.Namespace, srv: Launched, cold: dict[str, Any]) -> int:
    """``cli._run`` against the launched server, with the cold start in the record."""
    import asyncio
    import dataclasses

    from loadgen import cli
    from loadgen.engine import Engine
    from loadgen.probe import probe

    config = cli.build_config(args, srv.url)
    # The served name, not the path the user typed, is what requests must carry (vLLM serves the path).
    config = dataclasses.replace(
        config,
        cold=True,
        record_events=(("cold_start", cold),),
        server_log=lambda: srv.tail(40),
        server_exit=lambda: (
            f"the {srv.kind} server process exited during the run (code {srv.poll()}); "
            "finished steps are in the record"
            if srv.poll() is not None and not srv.stopped_by_us
            else None
        ),
    )
    info = asyncio.run(probe(config.target))
    if not info.reachable:
        print(f"ramp: {info.error}", file=sys.stderr)
        return cli.EXIT_UNREACHABLE
    if not args.headless:
        from tui.app import run_console

        outcome = run_console(config, refresh_hz=args.refresh or 4.0)
    else:
        # The engine itself watches the server (config.server_exit): the moment it exits under load the
        # record gets a mark and the run ends as failed (load on a dead server measures nothing).
        engine = Engine(config)
        engine.start()
        outcome = cli._headless_wait(engine, config)
    died = srv.poll() is not None and not srv.stopped_by_us
    if outcome is not None and died:
        outcome = dataclasses.replace(
            outcome,
            message=(outcome.message + "; " if outcome.message else "")
            + f"the {srv.kind} server process exited during the run (code {srv.poll()}); "
            "finished steps are in the record",
        )
    code = int(cli._finish(outcome))
    return cli.EXIT_UNREACHABLE if died else code
