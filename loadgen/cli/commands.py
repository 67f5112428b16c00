"""The ``ramp`` command: its argument tree and the dispatch to the faces. The run flags and their merge with
the profile are ``loadgen.cli.flags`` and ``loadgen.cli.resolve``; the headless face is
``loadgen.cli.headless``; the console is ``tui`` (imported only when it is shown); ``ramp launch`` is
``loadgen.cli.launch``; the exit codes are ``loadgen.exits``'.

    ramp demo                                   console against the embedded simulator
    ramp URL [flags]                            console against a server
    ramp run URL --headless [flags]             headless ramp, step table, exit code
    ramp run URL --replay-session RECORD        a recorded session's steps again: a CI gate
    ramp launch vllm|sglang MODEL [flags]       start a server, measure its cold start, ramp it
    ramp sim [--preset NAME] [--port N]         serve the simulator
    ramp profiles [show NAME]                   built-in workload profiles
    ramp report RECORD... [--format F] [-o FILE] step table; csv, json, md, html, png, svg
    ramp compare A.jsonl B.jsonl [--vary KEY]   runs side by side, under matched conditions only
    ramp replay RECORD                          the console on a finished record (read-only)
    ramp attach HOST:PORT                       a read-only console on a running ramp (its --metrics-port)
    ramp selftest                               the client's own speed and accuracy ceiling
    ramp check URL [--model M] [--format json]  spot-check a deployment through the OpenAI SDK
    ramp completion bash|zsh|fish               a shell completion script (shtab, from this parser)
    ramp --version

Without a URL (and no --url), ``OPENAI_BASE_URL`` is the target. Without a terminal the console is not
drawn: the run is headless, and says so.

Exit codes: 0 = the SLO was met at some step, 1 = at none, 2 = usage error, 3 = target unreachable,
130 = interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from loadgen import __version__
from loadgen.check.flags import DESCRIPTION as CHECK_HELP
from loadgen.check.flags import add_check_flags
from loadgen.cli.flags import RunFlags, add_run_flags
from loadgen.cli.hidden_args import arguments, masked
from loadgen.cli.launch import DESCRIPTION as LAUNCH_DESCRIPTION
from loadgen.cli.launch import HELP as LAUNCH_HELP
from loadgen.cli.launch import add_launch_flags
from loadgen.exits import EXIT_INTERRUPTED, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, UsageError

# Everything that measures, draws or reaches a server (the engine, numpy, textual, the record) is imported
# inside the function that needs it: ``ramp --version``, ``ramp --help`` and a usage error start in a
# fraction of the time (tests/unit/test_cli_startup.py checks none of them is imported).

__all__ = [
    "SHELLS",
    "SUBCOMMANDS",
    "build_parser",
    "build_parsers",
    "completion_script",
    "main",
    "refuse_in_browser",
    "target_url",
]

SUBCOMMANDS = {
    "demo",
    "run",
    "sim",
    "profiles",
    "report",
    "compare",
    "selftest",
    "launch",
    "replay",
    "attach",
    "check",
    "completion",
}
SHELLS = ("bash", "zsh", "fish")
DEMO_LEVELS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)
DEMO_STEP_S, DEMO_WARMUP_S = 15.0, 3.0
# Measured headless on the 2-core VM: 212 s (135 s of steps, the rest each step draining its streams).
DEMO_HELP = (
    f"console against the embedded simulator: {len(DEMO_LEVELS)} steps of {DEMO_STEP_S:g} s, 1 → 256 streams; "
    "headless (the default without a terminal) it ends by itself after about 3.5 min"
)


def build_parser() -> argparse.ArgumentParser:
    """The ``ramp`` command line (``build_parsers``' first)."""
    return build_parsers()[0]


def build_parsers(
    sim: argparse.ArgumentParser | None = None, profile_names: Sequence[str] = ()
) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The ``ramp`` parser and each subcommand's, by name (``ramp completion`` and the tests read them).
    ``ramp completion`` gives the simulator's own parser (``sim``), whose flags ``ramp sim`` then shows, and
    the built-in profiles' names, which ``ramp profiles show`` then offers."""
    parser = argparse.ArgumentParser(prog="ramp", description="Live load testing of LLM inference servers.")
    parser.add_argument("--version", action="version", version=f"ramp {__version__}")
    sub = parser.add_subparsers(dest="command")
    # completing, a flag may be declared again with what to complete (`completion_script`): the later wins
    handler = "resolve" if profile_names else "error"

    def add_parser(name: str, **options: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, conflict_handler=handler, **options)

    demo = add_parser("demo", help=DEMO_HELP, description=DEMO_HELP)
    add_run_flags(demo, url=False)
    demo.add_argument_group("simulator").add_argument(
        "--preset", default="h200-llama8b", help="simulator preset (h200-llama8b, tiny-cpu, fast)"
    )

    run = add_parser("run", help="ramp a server (console, or --headless)")
    add_run_flags(run)

    sim_help = "serve the simulator (ramp sim --help: its engine and fault flags)"
    add_parser("sim", help=sim_help, parents=[sim] if sim else [], add_help=sim is None)

    prof = add_parser("profiles", help="list built-in profiles, or show one")
    prof.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    prof.add_argument("name", nargs="?", choices=list(profile_names) or None)

    _add_record_commands(add_parser)
    _add_selftest(add_parser)
    add_launch_flags(add_parser("launch", help=LAUNCH_HELP, description=LAUNCH_DESCRIPTION))
    check = add_parser("check", help="spot-check a deployment through the OpenAI SDK", description=CHECK_HELP)
    add_check_flags(check)

    replay = add_parser("replay", help="the console on a finished record: ← → between its steps")
    replay.add_argument("file", metavar="RECORD", help="a run record (JSONL)")
    attach = add_parser(
        "attach", help="a read-only console on a running ramp (its --metrics-port): steers nothing"
    )
    attach.add_argument(
        "target", metavar="TARGET", help="HOST:PORT (or http://HOST:PORT) of the run's --metrics-port"
    )
    completion = add_parser(
        "completion", help='shell completion: eval "$(ramp completion bash)" (zsh, fish alike)'
    )
    completion.add_argument(
        "shell", choices=SHELLS, help="the shell to complete ramp's commands and flags in"
    )
    return parser, dict(sub.choices)


def completion_script(shell: str) -> str:
    """``ramp completion SHELL``: shtab's script from this parser, with what parsing alone does not know —
    ``ramp sim``'s own flags (it parses them itself: ``loadgen.sim.__main__``) and the built-in profile
    names for ``--profile`` and ``ramp profiles show``. The parser built here completes and never parses."""
    import shtab

    from loadgen.profile import builtin_profile_names
    from loadgen.sim.__main__ import build_parser as sim_parser

    names = builtin_profile_names()
    parser, commands = build_parsers(sim=sim_parser(), profile_names=names)
    for command in commands.values():
        if command.get_default("profile") is not None:  # run, demo, launch, check
            # the same flag again, now with the names to complete (it replaces the first)
            command.add_argument("--profile", choices=names, help="a built-in profile (or a .toml file)")
    return str(shtab.complete(parser, shell=shell))


def _add_record_commands(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
    """The commands that read records: ``report`` and ``compare``."""
    rep = add_parser(
        "report", help="a record's step table, or CSV, JSON, Markdown, HTML, the curve as PNG/SVG"
    )
    rep.add_argument("files", nargs="+", metavar="RECORD", help="run records; several: rows/curves of each")
    rep.add_argument(
        "--format",
        choices=("text", "csv", "json", "md", "html", "png", "svg"),
        default=None,
        help="text (default, or from -o's extension), csv, json, md, html; png/svg: the curve alone",
    )
    rep.add_argument("-o", "--out", default=None, metavar="FILE", help="write to FILE instead of stdout")

    cmp = add_parser(
        "compare",
        help="runs side by side, level by level, refused unless only the varied conditions differ",
    )
    cmp.add_argument(
        "files", nargs="+", metavar="RECORD", help="two run records or more; the first is the baseline"
    )
    cmp.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="KEY",
        help="the variable under test (runtime, revision, gpu, profile, tag:NAME ...), repeatable",
    )
    cmp.add_argument(
        "--force", action="store_true", help="compare runs that differ in more (each table warns)"
    )
    cmp.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or json")


def _add_selftest(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
    st = add_parser("selftest", help="the client's own ceiling against the simulator's fast mode")
    st.add_argument("--streams", default="256,1024", help="stream counts, e.g. 64,256,1024")
    st.add_argument("--workers", default="1", help="worker counts, e.g. 1,2")
    st.add_argument("--seconds", type=float, default=8.0)
    st.add_argument("--transport", choices=["h1", "aiohttp"], default="h1")
    st.add_argument(
        "--per-worker", action="store_true", help="the stream counts are per worker (the scaling benchmark)"
    )
    st.add_argument(
        "--sims", type=int, default=None, help="simulator processes (default: one per core left over)"
    )
    st.add_argument(
        "--ray", nargs="?", const="", default=None, metavar="ADDRESS", help="the workers as Ray actors"
    )


def main(argv: list[str] | None = None) -> int:
    """``ramp``'s entry point. Given no ``argv``, the process's own arguments: those that hold a secret (a
    URL's password, ``--api-key X``) are first taken off the command line that ``ps`` shows, by running
    this program again with them masked (``loadgen.cli.hidden_args``)."""
    try:
        code = _main(arguments(sys.argv[1:]) if argv is None else list(argv))
        sys.stdout.flush()  # a reader that went away shows here, not as a traceback at exit
        return code
    except BrokenPipeError:
        # `ramp profiles | head -1`: the reader has what it wanted. Python flushes stdout again at exit:
        # point it at devnull so that flush cannot fail too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


def _main(argv: list[str]) -> int:
    # `ramp URL ...` is the console against URL: same flags as `ramp run URL`. A word close to a command's
    # name is a typo, not a host (`ramp reprot x.jsonl`).
    if argv and argv[0] not in SUBCOMMANDS and not argv[0].startswith("-"):
        near = difflib.get_close_matches(argv[0], sorted(SUBCOMMANDS), n=1, cutoff=0.6)
        if near and not _looks_like_a_target(argv[0]):
            print(
                f"ramp: no command {argv[0]!r}: did you mean 'ramp {near[0]}'? (ramp --help lists them)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        argv = ["run", *argv]
    if argv and argv[0] == "sim":  # every simulator flag (`ramp sim --help`), over the defaults of `ramp sim`
        from loadgen.sim.__main__ import main as sim_main

        return sim_main(["--preset", "h200-llama8b", "--port", "8000", *argv[1:]])
    server_args: list[str] = []
    if argv and argv[0] == "launch" and "--" in argv:  # `ramp launch vllm M [flags] -- server args`
        cut = argv.index("--")
        argv, server_args = argv[:cut], argv[cut + 1 :]
    # argparse would read `--api-key K` as an abbreviation of --api-key-env, and K as a variable's name
    if any(arg.partition("=")[0] == "--api-key" for arg in argv):
        print(f"ramp: {KEY_ON_COMMAND_LINE}", file=sys.stderr)
        return EXIT_USAGE
    parser, commands = build_parsers()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _unknown_arguments(commands.get(args.command or "", parser), unknown)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return _dispatch(args, server_args)
    except UsageError as exc:
        print(f"ramp: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _looks_like_a_target(word: str) -> bool:
    """A host, an address or a URL (``ramp gpu1:8000``, ``ramp 10.0.0.5``, ``ramp http://...``), not a
    mistyped command: a command's name holds none of these characters."""
    return any(ch in word for ch in ":/.@,")


def _unknown_arguments(parser: argparse.ArgumentParser, unknown: Sequence[str]) -> NoReturn:
    """Arguments the command does not take, said under that command's usage (exit 2), each unknown flag with
    the nearest one it has. A flag's value is masked when it may be a secret (``--api-key X``)."""
    # argparse has no public list of a parser's flags: they are the ones its --help prints
    known = sorted(set(re.findall(r"(?<![\w-])--?[A-Za-z][\w-]*", parser.format_help())))
    hints = []
    for arg in unknown:
        flag = arg.partition("=")[0]
        if flag.startswith("-"):
            hints += [(flag, near) for near in difflib.get_close_matches(flag, known, n=1, cutoff=0.6)]
    said = f"unrecognized arguments: {' '.join(masked(unknown))}"
    if len(hints) == 1:
        said += f"; did you mean {hints[0][1]}?"
    elif hints:
        said += "; did you mean " + ", ".join(f"{near} (for {flag})" for flag, near in hints) + "?"
    parser.error(said)


KEY_ON_COMMAND_LINE = (
    "ramp takes no --api-key: a key on the command line is seen by every local user (ps); "
    "put it in OPENAI_API_KEY, or in a variable named by --api-key-env NAME"
)


WEB_REFUSED = (
    "a load run under Textual's web driver (textual-serve) would start one load per browser tab: "
    "serve 'ramp attach HOST:PORT' instead (a read-only view of a run started with --metrics-port), "
    "or pass --allow-web to start a load from the browser anyway"
)


def refuse_in_browser(message: str) -> None:
    """The browser tab that started the command shows why it does not run (textual-serve's log gets the
    usage error's line as well)."""
    from tui.attach import show_notice

    show_notice(message)


def _dispatch(args: argparse.Namespace, server_args: list[str]) -> int:
    # A headless run draws nothing, so a TEXTUAL_DRIVER left in the environment does not refuse it.
    if args.command in ("demo", "run", "launch") and not args.headless:
        from loadgen.cli.headless import console_refused, say, under_web_driver

        if under_web_driver() and not args.allow_web:
            refuse_in_browser(WEB_REFUSED)
            raise UsageError(WEB_REFUSED)
        refused = console_refused()
        if refused is not None:  # a full-screen app into a pipe or a log is escape codes, and never ends
            say(f"ramp: {refused}: running headless (progress on stderr, the step table on stdout)\n")
            args.headless = True
    if args.command == "profiles":
        return _profiles(args.action, args.name)
    if args.command == "report":
        from loadgen.report import report_main

        return report_main(args.files, args.format, args.out)
    if args.command == "compare":
        from loadgen.analysis.compare import compare_main

        return compare_main(args.files, args.vary, args.force, args.format)
    if args.command == "replay":
        from tui.replay import replay_main

        return replay_main(args.file)
    if args.command == "attach":
        return _attach(args.target)
    if args.command == "check":
        from loadgen.check.main import check_main

        return check_main(args)
    if args.command == "completion":
        print(completion_script(args.shell))
        return EXIT_OK
    if args.command == "selftest":
        from loadgen.cli.selftest import selftest_main

        return selftest_main(args)
    if args.command == "demo":
        return _demo(RunFlags.from_namespace(args), args.preset)
    if args.command == "run":
        return _run(RunFlags.from_namespace(args), args.url)
    if args.command == "launch":
        if args.attach:
            if server_args:
                raise UsageError(
                    "server arguments after '--' make no sense with --attach (nothing is launched)"
                )
            return _run(RunFlags.from_namespace(args), args.attach)
        from loadgen.cli.launch import launch_main

        return launch_main(args, server_args)
    return EXIT_USAGE


def _attach(target: str) -> int:
    from loadgen.cli.headless import console_refused
    from tui.attach import attach_main

    return attach_main(target, console_refused())


def _profiles(action: str, name: str | None) -> int:
    from loadgen.profile import ProfileError, builtin_profile_names, load_profile

    if action == "show" or name:
        if not name:
            raise UsageError(
                "ramp profiles show NAME — NAME is one of: " + ", ".join(builtin_profile_names())
            )
        try:
            prof = load_profile(name)
        except ProfileError as exc:
            raise UsageError(str(exc)) from None
        with open(prof.source, encoding="utf-8") as fh:
            sys.stdout.write(fh.read())
        return EXIT_OK
    for builtin in builtin_profile_names():
        print(f"{builtin:<22} {load_profile(builtin).description}")
    return EXIT_OK


def _demo(flags: RunFlags, preset: str) -> int:
    from loadgen.sim import build_config as sim_config
    from loadgen.sim import spawn_sim_process

    if flags.steps is None and flags.level is None:
        flags = dataclasses.replace(
            flags,
            steps=DEMO_LEVELS,
            step_seconds=DEMO_STEP_S if flags.step_seconds is None else flags.step_seconds,
            warmup=DEMO_WARMUP_S if flags.warmup is None else flags.warmup,
        )
    handle = spawn_sim_process(sim_config(preset))
    try:
        return _run(flags, handle.url)
    finally:
        handle.stop()


def target_url(flags: RunFlags, url: str) -> str:
    """The URL given; without one (and no ``--url``), ``OPENAI_BASE_URL`` (the OpenAI SDK's convention),
    said in the run's first line."""
    from loadgen.cli.headless import say
    from loadgen.target.http import scrub

    if url or flags.urls:
        return url
    given = os.environ.get("OPENAI_BASE_URL", "").strip()
    if given:
        say(f"ramp: target {scrub(given)} (from OPENAI_BASE_URL)\n")
    return given


def _run(flags: RunFlags, url: str) -> int:
    """Probe, then the console (or the headless face) on a run of ``flags`` against ``url``."""
    from loadgen.cli.headless import finish, reachable, run_face
    from loadgen.cli.resolve import resolve

    if flags.replay_session is not None:  # a recorded session's steps, run again (loadgen.cli.session)
        from loadgen.cli.session import replay_session

        return replay_session(flags, target_url(flags, url))
    config = resolve(flags, target_url(flags, url))
    if not reachable(config):
        return EXIT_UNREACHABLE
    outcome = run_face(config, flags.metrics_host, flags.metrics_port, flags.headless)
    return finish(outcome, config)


if __name__ == "__main__":
    sys.exit(main())
