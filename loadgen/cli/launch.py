"""``ramp launch``: start vLLM or SGLang, wait until it is healthy (with progress), measure its cold start,
then ramp it like ``ramp run`` (console or ``--headless``), with a cold first step and the cold-start
figures in the record, and the server stopped on every way out (errors, Ctrl-C, SIGTERM, SIGHUP; and, if
ramp itself is killed, by the kernel: ``loadgen.childproc``).

Owns the subcommand's flags (``add_launch_flags``; ``--attach`` is dispatched by ``loadgen.cli.commands`` as a
plain run), the health wait's progress indicator and the run of a launched server (``launch_main``). The
server process itself is ``loadgen.serverproc``'s.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

from loadgen.cli.flags import Flags, RunFlags, add_run_flags
from loadgen.exits import EXIT_UNREACHABLE, UsageError
from loadgen.run.signals import StopSignals, exit_code, interrupted_by, signal_label
from loadgen.runtimes import LAUNCHABLE, VLLM
from loadgen.serverproc import KINDS, Launched, LaunchError, launch_and_wait, redact_argv, server_argv

if TYPE_CHECKING:
    from loadgen.run.config import RunConfig

__all__ = ["DESCRIPTION", "HELP", "LaunchFlags", "add_launch_flags", "launch_main"]

_LABELS = " or ".join(runtime.label for runtime in LAUNCHABLE.values())  # "vLLM or SGLang"
HELP = f"start {_LABELS}, measure its cold start, then ramp it (console or --headless)"
DESCRIPTION = (
    "Start a server as a child process, wait until it is healthy (showing progress), record its "
    "cold start (process start, health OK, first token), then ramp it like `ramp run`. The server "
    "is stopped when ramp exits. Arguments after `--` go to the server unchanged, e.g. "
    f"`ramp launch {VLLM.name} meta-llama/Llama-3.1-8B-Instruct --headless -- --max-model-len 8192`."
)


def add_launch_flags(p: argparse.ArgumentParser) -> None:
    """The ``launch`` subcommand's flags: the server's (a group of their own), then every flag of ``ramp run``."""
    server = p.add_argument_group("server")
    _add_server_flags(server)
    add_run_flags(p, url=False)


def _add_server_flags(p: Flags) -> None:
    p.add_argument("kind", nargs="?", choices=sorted(KINDS), help=f"server to start: {' or '.join(KINDS)}")
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


@dataclass(frozen=True, slots=True)
class LaunchFlags:
    """The server's side of ``ramp launch``'s command line."""

    kind: str
    server_model: str
    python: str
    host: str
    port: int | None
    health_timeout: float
    server_log: str | None
    server_args: tuple[str, ...] = ()  # after ``--``: passed to the server unchanged

    @property
    def planned_url(self) -> str:
        """The server's URL as far as it is known before it starts (a free port is chosen at the start)."""
        return f"http://{self.host}:{self.port or 1}"

    @classmethod
    def from_namespace(cls, args: argparse.Namespace, server_args: Sequence[str] = ()) -> LaunchFlags:
        if not args.kind or not args.server_model:
            raise UsageError(
                f"ramp launch {'|'.join(KINDS)} MODEL [flags] [-- server args], or ramp launch --attach URL"
            )
        if args.port is not None and not 0 < args.port < 65536:
            raise UsageError(f"--port must be 1..65535, got {args.port}")
        return cls(
            kind=args.kind,
            server_model=args.server_model,
            python=args.python,
            host=args.host,
            port=args.port,
            health_timeout=args.health_timeout,
            server_log=args.server_log,
            server_args=tuple(server_args),
        )


class _Progress:
    """The health wait's visible indicator: a spinner line on a terminal, a line every 10 s otherwise."""

    FRAMES = "|/-\\"

    def __init__(self, kind: str, stream: IO[str], check: Callable[[], None]) -> None:
        self.kind = kind
        self.stream = stream
        self.check = check  # raises when a stop signal came in (its own raise may have been swallowed)
        self.tty = stream.isatty()
        self.n = 0
        self.last_print = -1e9

    def __call__(self, elapsed: float, line: str) -> None:
        self.check()
        self.n += 1  # the server's line comes scrubbed (Launched scrubs each line as it reads it)
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
    """``ramp launch KIND MODEL``: the exit code of the run (3 when the server would not start)."""
    # the run's side is imported here, not with the flags: `ramp --help` builds this command's parser
    from loadgen.cli.headless import say
    from loadgen.cli.resolve import resolve

    launch = LaunchFlags.from_namespace(args, extra)
    flags = RunFlags.from_namespace(args)
    # The flags are resolved once, before paying for a server start (what cannot run is refused first); the
    # launched server's URL and cold start are filled in once it is up (``_launched_config``).
    try:
        server_argv(
            launch.kind, launch.server_model, launch.server_args, launch.python, launch.host, launch.port or 1
        )
    except LaunchError as exc:
        raise UsageError(str(exc)) from None
    config = resolve(flags, launch.planned_url, launch.server_args)  # the server's --revision is the run's
    log_path = launch.server_log or (
        os.path.splitext(config.out)[0] + f".{launch.kind}.log" if config.out else None
    )
    module = KINDS[launch.kind][0]
    print(
        f"ramp: starting {launch.kind}: {shlex.join(redact_argv([launch.python, '-m', module]))} "
        f"… (log: {log_path})",
        file=sys.stderr,
        flush=True,
    )
    # A stop signal (Ctrl-C, SIGTERM, SIGHUP) must still stop the server: while it starts (or between the
    # phases) it is raised like Ctrl-C and the server is stopped on the way out; during the run the run's
    # own handlers stop the run first (its record finished). Either way ramp exits with 128 + the signal.
    with StopSignals(raising=True) as stops:
        try:
            return _start_and_run(launch, flags, config, log_path, stops.check)
        except KeyboardInterrupt as exc:
            signum = interrupted_by(exc)
            say(f"ramp: interrupted ({signal_label(signum)}); the server has been stopped\n")
            return exit_code(signum)


def _start_and_run(
    launch: LaunchFlags, flags: RunFlags, config: RunConfig, log_path: str | None, check: Callable[[], None]
) -> int:
    from loadgen.target.http import scrub  # here, not with the flags: `ramp --help` stays light

    secrets = log_secrets(launch.server_args, config)
    progress = _Progress(launch.kind, sys.stderr, check)
    srv: Launched | None = None
    try:
        try:
            srv = launch_and_wait(
                launch.kind,
                launch.server_model,
                launch.server_args,
                python=launch.python,
                host=launch.host,
                port=launch.port,
                log_path=log_path,
                timeout=launch.health_timeout,
                progress_cb=progress,
                secrets=secrets,  # masked in each line the server prints, its log file's and its tail's
            )
        except LaunchError as exc:
            progress.done()
            print(f"ramp: {scrub(str(exc), secrets)}", file=sys.stderr)
            return EXIT_UNREACHABLE
        except KeyboardInterrupt as exc:
            progress.done()
            print("ramp: interrupted while the server was starting; it has been stopped", file=sys.stderr)
            return exit_code(interrupted_by(exc))
        progress.done()
        srv.measure_first_token(flags.model or None)
        check()  # a stop signal during that request (its raise swallowed) stops here, before the run
        first = srv.first_token_after_s
        print(
            f"ramp: {launch.kind} healthy after {srv.healthy_after_s or 0.0:.1f} s, first token after "
            + (f"{first:.1f} s" if first is not None else "n/a")
            + f" (pid {srv.pid}, {srv.url})",
            file=sys.stderr,
            flush=True,
        )
        return _run_launched(config, srv, flags)
    finally:
        if srv is not None:
            _stop(srv)


def _stop(srv: Launched) -> None:
    from loadgen.target.http import scrub

    died = _died(srv)
    code = srv.stop(say=lambda text: print(f"ramp: {text}", file=sys.stderr, flush=True))
    if died:
        print(f"ramp: {scrub(srv.describe_exit(), log_secrets(srv.argv))}", file=sys.stderr)
    else:
        print(f"ramp: stopped the {srv.kind} server (pid {srv.pid}, exit {code})", file=sys.stderr)
    if srv.escaped_ended:  # a setsid and fork: outside its process group, found by its environment mark
        print(f"ramp: ended {srv.escaped_ended} of its processes that had left its group", file=sys.stderr)


def _died(srv: Launched) -> bool:
    """The server process ended, and not because ramp stopped it."""
    return srv.poll() is not None and not srv.stopped_by_us


def _died_message(srv: Launched) -> str:
    return (
        f"the {srv.kind} server process exited during the run (code {srv.poll()}); "
        "finished steps are in the record"
    )


def _launched_config(config: RunConfig, srv: Launched) -> RunConfig:
    """The run's config (resolved before the start) against the launched server: its URL, cold, with the cold
    start in the record."""
    return dataclasses.replace(
        config,
        target=dataclasses.replace(config.target, url=srv.url),
        cold=True,
        record_events=(("cold_start", srv.cold_start),),
        server_log=lambda: srv.tail(40),  # shown, and shared by /snapshot: scrubbed as it was read
        server_exit=lambda: _died_message(srv) if _died(srv) else None,
    )


def log_secrets(argv: Sequence[str], config: RunConfig | None = None) -> tuple[str, ...]:
    """Every secret a launched server's output may hold: its arguments' keys (``--api-key X``), the keys in
    ramp's environment (which it inherits), and the run's own (``--api-key-env``, the URL's password)."""
    from loadgen.observe.share import target_secrets
    from loadgen.target.secrets import arg_secrets, env_secrets

    own = target_secrets(config.target) if config is not None else ()
    return (*arg_secrets(argv), *env_secrets(os.environ), *own)


def _run_launched(resolved: RunConfig, srv: Launched, flags: RunFlags) -> int:
    """A ``ramp run`` against the launched server; 3 when the server died under the load."""
    from loadgen.cli.headless import finish, reachable, run_face

    config = _launched_config(resolved, srv)
    if not reachable(config):
        return EXIT_UNREACHABLE
    # The engine itself watches the server (config.server_exit): the moment it exits under load the record
    # gets a mark and the run ends as failed (load on a dead server measures nothing).
    outcome = run_face(config, flags.metrics_host, flags.metrics_port, flags.headless)
    died = _died(srv)
    if outcome is not None and died:
        note = (outcome.message + "; " if outcome.message else "") + _died_message(srv)
        outcome = dataclasses.replace(outcome, message=note)
    code = finish(outcome, config)
    return EXIT_UNREACHABLE if died else code
