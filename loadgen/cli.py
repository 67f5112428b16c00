"""The ``ramp`` command: argument parsing and the headless face. The console lives in ``tui`` (imported lazily).

    ramp demo                                   console against the embedded simulator
    ramp URL [flags]                            console against a server
    ramp run URL --headless [flags]             headless ramp, step table, exit code
    ramp sim [--preset NAME] [--port N]         serve the simulator
    ramp profiles [show NAME]                   built-in workload profiles
    ramp report FILE                            step table of a record
    ramp selftest                               the client's own speed and accuracy ceiling

Exit codes: 0 = the SLO was met at some step, 1 = at none, 2 = usage error, 3 = target unreachable.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import os
import shutil
import sys
import time
from typing import Any

EXIT_OK, EXIT_SLO, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
SUBCOMMANDS = {"demo", "run", "sim", "profiles", "report", "selftest", "launch"}


class UsageError(Exception):
    pass


def _levels(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.replace(" ", "").split(",") if v)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected numbers separated by commas, like 1,2,4,8 — got {text!r}"
        ) from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"levels must be positive numbers, like 1,2,4,8 — got {text!r}")
    return values


def _tag(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--tag wants key=value (e.g. gpu=H200), got {text!r}")
    key, value = text.split("=", 1)
    if not key:
        raise argparse.ArgumentTypeError(f"--tag wants key=value (e.g. gpu=H200), got {text!r}")
    return key.strip(), value.strip()


def _add_run_flags(p: argparse.ArgumentParser, url: bool = True) -> None:
    if url:
        p.add_argument("url", help="base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000")
    p.add_argument("--profile", default="chat", help="built-in profile name or a .toml file (default: chat)")
    p.add_argument("--model", default="", help="model name (default: the profile's, else the server's first)")
    p.add_argument("--api", choices=["chat", "completions"], default=None, help="override the profile's API")
    p.add_argument(
        "--steps", type=_levels, default=None, help="ramp levels, e.g. 1,2,4,8,16 (rates in open loop)"
    )
    p.add_argument(
        "--step-seconds", type=float, default=None, help="seconds per step (default: profile or 30)"
    )
    p.add_argument(
        "--warmup", type=float, default=None, help="warm-up seconds per step, excluded (default 5)"
    )
    p.add_argument("--early-stop", action="store_true", help="stop at the first step that breaks the SLO")
    p.add_argument("--level", type=int, default=None, help="starting concurrency when no plan is given")
    p.add_argument("--open-loop", action="store_true", help="arrival-rate load instead of fixed concurrency")
    p.add_argument("--rate", type=float, default=None, help="open loop arrival rate, req/s")
    p.add_argument("--arrival", choices=["constant", "poisson", "gamma"], default="poisson")
    p.add_argument("--burstiness", type=float, default=1.0, help="gamma shape k (<1 bursty)")
    p.add_argument("--max-concurrency", type=int, default=0, help="open loop concurrency cap (0 = none)")
    p.add_argument("--cancel-on-lower", action="store_true", help="cancel surplus streams when lowering")
    p.add_argument("--workers", type=int, default=1, help="load worker processes (one per core at most)")
    p.add_argument("--out", default=None, help="JSONL record path (default runs/<time>-<profile>.jsonl)")
    p.add_argument("--tag", type=_tag, action="append", default=[], help="condition key=value, repeatable")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="env var holding the API key")
    p.add_argument(
        "--transport", choices=["h1", "aiohttp", "httpx"], default="h1", help="streaming HTTP client"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ttft-timeout", type=float, default=300.0)
    p.add_argument("--idle-timeout", type=float, default=120.0)
    p.add_argument("--total-timeout", type=float, default=1800.0)
    p.add_argument("--no-metrics", action="store_true", help="do not poll the server's /metrics")
    p.add_argument(
        "--gpu-cmd", default=None, help='command printing nvidia-smi CSV, e.g. "ssh gpu1 nvidia-smi ..."'
    )
    p.add_argument("--nvml", action="store_true", help="read local GPUs through NVML (extra: gpu)")
    p.add_argument("--dcgm-url", default=None, help="DCGM exporter metrics URL")
    p.add_argument(
        "--refresh",
        type=float,
        default=None,
        help="snapshot/console refresh rate, Hz (console 4, headless 1)",
    )
    p.add_argument("--rolling", type=float, default=10.0, help="rolling window, seconds")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ramp", description="Live load testing of LLM inference servers.")
    sub = parser.add_subparsers(dest="command")

    demo = sub.add_parser("demo", help="console against the embedded simulator")
    _add_run_flags(demo, url=False)
    demo.add_argument("--preset", default="h200-llama8b", help="simulator preset")
    demo.add_argument("--headless", action="store_true")

    run = sub.add_parser("run", help="ramp a server (console, or --headless)")
    _add_run_flags(run)
    run.add_argument("--headless", action="store_true", help="no console: progress, step table, exit code")

    sim = sub.add_parser("sim", help="serve the simulator")
    sim.add_argument("--preset", default="h200-llama8b")
    sim.add_argument("--host", default="127.0.0.1")
    sim.add_argument("--port", type=int, default=8000)

    prof = sub.add_parser("profiles", help="list built-in profiles, or show one")
    prof.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    prof.add_argument("name", nargs="?")

    rep = sub.add_parser("report", help="print the step table of a record")
    rep.add_argument("file")

    st = sub.add_parser("selftest", help="the client's own ceiling against the simulator's fast mode")
    st.add_argument("--streams", default="256,1024", help="stream counts, e.g. 64,256,1024")
    st.add_argument("--workers", default="1", help="worker counts, e.g. 1,2")
    st.add_argument("--seconds", type=float, default=8.0)
    st.add_argument("--transport", choices=["h1", "aiohttp", "httpx"], default="h1")

    from loadgen.launch import add_launch_parser

    add_launch_parser(sub, _add_run_flags)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `ramp URL ...` is the console against URL: same flags as `ramp run URL`.
    if argv and argv[0] not in SUBCOMMANDS and not argv[0].startswith("-"):
        argv = ["run", *argv]
    server_args: list[str] = []
    if argv and argv[0] == "launch" and "--" in argv:  # `ramp launch vllm M [flags] -- server args`
        cut = argv.index("--")
        argv, server_args = argv[:cut], argv[cut + 1 :]
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        if args.command == "profiles":
            return _profiles(args)
        if args.command == "report":
            from loadgen.report import report_main

            return report_main(args.file)
        if args.command == "sim":
            from loadgen.sim.__main__ import main as sim_main

            return sim_main(["--preset", args.preset, "--host", args.host, "--port", str(args.port)])
        if args.command == "selftest":
            from loadgen.selftest import selftest_main

            return selftest_main(args)
        if args.command == "demo":
            return _demo(args)
        if args.command == "run":
            return _run(args, args.url, headless=args.headless)
        if args.command == "launch":
            from loadgen.launch import launch_main

            return launch_main(args, server_args)
    except UsageError as exc:
        print(f"ramp: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    return EXIT_USAGE


def _profiles(args: argparse.Namespace) -> int:
    from loadgen.profile import ProfileError, builtin_profile_names, load_profile

    if args.action == "show" or args.name:
        name = args.name
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
    for name in builtin_profile_names():
        prof = load_profile(name)
        print(f"{name:<22} {prof.description}")
    return EXIT_OK


def build_config(args: argparse.Namespace, url: str) -> Any:
    """Flags → RunConfig, validating at the edge with messages that say what to do."""
    from loadgen.engine import RampPlan, RunConfig
    from loadgen.profile import ProfileError, load_profile
    from loadgen.types import Target

    if not (url.startswith("http://") or url.startswith("https://")):
        raise UsageError(f"URL must start with http:// or https:// — got {url!r}")
    try:
        profile = load_profile(args.profile)
    except ProfileError as exc:
        raise UsageError(str(exc)) from None
    if args.workers < 1:
        raise UsageError("--workers must be at least 1")
    api = args.api or getattr(profile, "api", "chat")
    target = Target(
        url=url,
        api=api,
        model=args.model or ("" if getattr(profile, "model", "auto") in ("", "auto") else profile.model),
        api_key_env=args.api_key_env,
        ttft_timeout_s=args.ttft_timeout,
        idle_timeout_s=args.idle_timeout,
        total_timeout_s=args.total_timeout,
    )
    base = profile.ramp
    # An explicit --level (or --rate) means manual steering: the profile's plan is not used.
    manual = args.steps is None and (args.level is not None or args.rate is not None)
    levels = args.steps or (base.levels if base is not None and not manual else None)
    # The mode travels with the levels: the profile's plan runs in the profile's mode, levels given
    # with --steps in the flags' mode (closed unless --open-loop).
    profile_open = base is not None and not manual and args.steps is None and base.mode == "open"
    open_loop = args.open_loop or args.rate is not None or profile_open
    plan = None
    if levels:
        plan = RampPlan(
            levels=tuple(levels),
            step_s=args.step_seconds if args.step_seconds is not None else (base.step_s if base else 30.0),
            warmup_s=args.warmup if args.warmup is not None else (base.warmup_s if base else 5.0),
            early_stop=args.early_stop or (base.early_stop if base else False),
            mode="open" if open_loop else "closed",
        )
    if open_loop and args.steps is None and args.rate is None and not profile_open:
        raise UsageError("open loop needs --rate R or --steps R1,R2,... (req/s)")
    out = args.out or os.path.join(
        "runs", f"{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-{getattr(profile, 'name', 'run')}.jsonl"
    )
    return RunConfig(
        target=target,
        profile=profile,
        plan=plan if not (open_loop and args.rate is not None and args.steps is None) else None,
        mode="open" if open_loop else "closed",
        level=args.level if args.level is not None else (args.max_concurrency if open_loop else 1),
        rate_rps=args.rate if args.rate is not None else (levels[0] if levels else 1.0),
        arrival=args.arrival,
        burstiness=args.burstiness,
        workers=args.workers,
        out=out,
        tags=tuple(args.tag),
        cancel_on_lower=args.cancel_on_lower,
        rolling_s=args.rolling,
        # Headless needs no 4 Hz picture: fewer snapshots leave more CPU to the streams (and, on a small
        # box, to the server under test).
        snapshot_hz=args.refresh or (1.0 if getattr(args, "headless", False) else 4.0),
        seed=args.seed,
        transport=args.transport,
        warmup_s=args.warmup if args.warmup is not None else 0.0,
        telemetry=not args.no_metrics,
        gpu_cmd=args.gpu_cmd,
        nvml=args.nvml,
        dcgm_url=args.dcgm_url,
    )


def _demo(args: argparse.Namespace) -> int:
    from loadgen.sim import build_config as sim_config
    from loadgen.sim import spawn_sim_process

    if args.steps is None and args.level is None:
        args.steps = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)
        if args.step_seconds is None:
            args.step_seconds = 15.0
        if args.warmup is None:
            args.warmup = 3.0
    handle = spawn_sim_process(sim_config(args.preset))
    try:
        return _run(args, handle.url, headless=args.headless)
    finally:
        handle.stop()


def _run(args: argparse.Namespace, url: str, headless: bool) -> int:
    from loadgen.engine import Engine
    from loadgen.probe import probe

    config = build_config(args, url)
    info = asyncio.run(probe(config.target))
    if not info.reachable:
        print(f"ramp: {info.error}", file=sys.stderr)
        return EXIT_UNREACHABLE
    if not headless:
        from tui.app import run_console

        outcome = run_console(config, refresh_hz=args.refresh or 4.0)
    else:
        engine = Engine(config)
        engine.start()
        outcome = _headless_wait(engine, config)
    return _finish(outcome)


def _finish(outcome: Any) -> int:
    from loadgen.report import format_step_table

    if outcome is None:
        return EXIT_UNREACHABLE
    if outcome.steps:
        width = max(80, shutil.get_terminal_size((120, 24)).columns)
        print(format_step_table(list(outcome.steps), outcome.best_step, width=width))
    if outcome.record_path:
        print(f"record: {outcome.record_path}")
    if outcome.message:
        print(f"ramp: {outcome.message}", file=sys.stderr)
    if outcome.unreachable and not outcome.steps:
        return EXIT_UNREACHABLE
    if outcome.state == "failed" and outcome.unreachable:
        return EXIT_UNREACHABLE
    if outcome.best_step is None:
        return EXIT_SLO
    return EXIT_OK


def _progress_line(snap: Any) -> str:
    from loadgen.format import fmt_ms_wide as fmt_ms
    from loadgen.format import fmt_num_wide as fmt_rate

    step = snap.windows.get("step")
    rolling = snap.windows.get("rolling")
    steps = f"{snap.step_index + 1}/{snap.step_count}" if snap.step_count else f"{snap.step_index + 1}"
    load = f"{snap.level} streams" if snap.mode == "closed" else f"{snap.rate_rps:g} req/s"
    phase = "warm-up" if snap.warming_up else "measuring"
    remaining = f" {snap.step_remaining_s:4.0f}s left" if snap.step_remaining_s is not None else ""
    ttft = rolling.pct("ttft_ms").p95 if rolling is not None else None
    errs = step.error_count if step is not None else 0
    ok = step.ok if step is not None else 0
    bound = "  CLIENT-BOUND" if snap.health.client_bound else ""
    out = rolling.out_tok_s if rolling is not None else None
    return (
        f"step {steps} · {load} · {phase}{remaining} · out {fmt_rate(out)} tok/s · "
        f"TTFT p95 {fmt_ms(ttft)} · ok {ok} err {errs} · in flight {snap.in_flight}{bound}"
    )


def _headless_wait(engine: Any, config: Any) -> Any:
    tty = sys.stderr.isatty()
    last_step = -1
    last_print = 0.0
    warned = 0
    try:
        while True:
            outcome = engine.wait(timeout=0.5)
            if outcome is not None:
                break
            snap = engine.latest()
            if snap is None or snap.state == "starting":
                continue
            for text in snap.warnings[warned:]:
                print(("\r\033[K" if tty else "") + f"ramp: warning: {text}", file=sys.stderr, flush=True)
            warned = len(snap.warnings)
            now = time.monotonic()
            if tty:
                sys.stderr.write("\r\033[K" + _progress_line(snap)[:200])
                sys.stderr.flush()
            elif snap.step_index != last_step or now - last_print > 10:
                print(_progress_line(snap), file=sys.stderr, flush=True)
                last_step, last_print = snap.step_index, now
    except KeyboardInterrupt:
        print("\nramp: stopping (Ctrl-C): finished steps are in the record", file=sys.stderr)
        engine.stop(cancel=True)
        outcome = engine.wait(timeout=10)
    if tty:
        sys.stderr.write("\n")
    return outcome


if __name__ == "__main__":
    sys.exit(main())
