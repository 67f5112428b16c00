"""Command line of the simulator: ``python -m loadgen.sim --preset tiny-cpu --port 0`` prints
``READY http://127.0.0.1:PORT`` on its first stdout line and serves until SIGINT or SIGTERM.

``main(argv)`` is what ``ramp sim`` calls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Sequence
from typing import Any

from .config import SimConfig, build_config
from .presets import PRESETS
from .scenarios import BASE_PRESET, scenario_overrides, scenarios
from .server import SimServer

# flag -> (build_config key, type)
_OVERRIDES: dict[str, tuple[str, type]] = {
    "--seed": ("seed", int),
    "--model": ("model", str),
    "--speed": ("speed", float),
    "--max-num-seqs": ("max_num_seqs", int),
    "--max-num-batched-tokens": ("max_num_batched_tokens", int),
    "--kv-tokens": ("kv_capacity_tokens", int),
    "--max-model-len": ("max_model_len", int),
    "--stream-interval": ("stream_interval", int),
    "--reasoning-tokens": ("reasoning_tokens", int),
    "--reasoning-field": ("reasoning_field", str),
    "--tool-call-rate": ("tool_call_rate", float),
    "--num-speculative-tokens": ("num_speculative_tokens", int),
    "--spec-acceptance": ("spec_acceptance", float),
    "--answer-change-above": ("answer_change_above", int),
    "--answer-change-after-s": ("answer_change_after_s", float),
    "--answer-change-share": ("answer_change_share", float),
    "--drift-after-s": ("drift_after_s", float),
    "--drift-max-num-seqs": ("drift_max_num_seqs", int),
    "--fault-error-rate": ("error_rate", float),
    "--fault-429-rate": ("rate_429", float),
    "--fault-stall-rate": ("stall_rate", float),
    "--fault-stall-s": ("stall_s", float),
    "--fault-disconnect-rate": ("disconnect_rate", float),
    "--fault-slow-ttft-rate": ("slow_ttft_rate", float),
    "--fault-slow-ttft-s": ("slow_ttft_s", float),
    "--fault-malformed-rate": ("malformed_rate", float),
    "--fault-empty-rate": ("empty_rate", float),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ramp sim", description="Serve the simulated OpenAI-compatible LLM engine (vLLM-shaped)."
    )
    parser.add_argument(
        "--preset",
        default=None,
        choices=sorted(PRESETS),
        help="engine preset (tiny-cpu; with --scenario h200-llama8b)",
    )
    parser.add_argument(
        "--scenario",
        default=None,
        choices=sorted(scenarios()),
        help="stop scaling for one known reason (queue, kv, decode, prefill, network): each diagnosis end to end",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on READY)")
    for flag, (key, kind) in _OVERRIDES.items():
        parser.add_argument(flag, dest=key, type=kind, default=None)
    parser.add_argument("--no-prefix-caching", action="store_true", help="disable the prefix cache")
    parser.add_argument("--config-json", default=None, help="a whole SimConfig as JSON (overrides the rest)")
    return parser


def config_from_args(args: argparse.Namespace) -> SimConfig:
    if args.config_json:
        return SimConfig.from_dict(json.loads(args.config_json))
    given = vars(args)
    overrides: dict[str, Any] = scenario_overrides(args.scenario) if args.scenario else {}
    overrides.update({key: given[key] for key, _ in _OVERRIDES.values() if given[key] is not None})
    if args.no_prefix_caching:
        overrides["enable_prefix_caching"] = False
    preset = args.preset or (BASE_PRESET if args.scenario else "tiny-cpu")
    return build_config(preset, **overrides)


async def _serve(config: SimConfig, host: str, port: int) -> None:
    server = SimServer(config)
    url = await server.start(host, port)
    print(f"READY {url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # Windows: Ctrl-C raises KeyboardInterrupt instead
            pass
    try:
        await stop.wait()
    finally:
        await server.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = config_from_args(args)
    except (ValueError, TypeError) as exc:
        print(f"ramp sim: error: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_serve(config, args.host, args.port))
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        print(
            f"ramp sim: error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
