"""``ramp check``'s flags and help text, apart from the checks so that ``ramp`` starts without importing the
OpenAI SDK (``loadgen.check.main`` runs them).
"""

from __future__ import annotations

import argparse

from loadgen.config import APIS

__all__ = ["DESCRIPTION", "add_check_flags"]

DESCRIPTION = (
    "Spot-check an OpenAI-compatible deployment through the official OpenAI SDK: models, chat and "
    "completions (streamed and not), usage, max_tokens, stop, errors, /metrics, /tokenize, rate limits, a "
    "one-request baseline, the first request ramp run would send (--profile, --api) and a short ramp "
    "through ramp's own client. Exit 0 when every required check passes, 1 otherwise, 3 when the server "
    "cannot be reached."
)


def add_check_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("url", help="base URL of the server, e.g. http://127.0.0.1:8000 or https://api.openai.com")
    p.add_argument("--model", default="", help="model to check (default: the first /v1/models lists)")
    p.add_argument(
        "--profile",
        default="chat",
        help="the profile ramp run will use: its first request is sent as the run sends it (default: chat)",
    )
    p.add_argument("--api", choices=APIS, help="the API ramp run will use (--api)")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="env var holding the API key")
    p.add_argument("--format", choices=("text", "json"), default="text", help="text (default) or json")
    p.add_argument(
        "--ramp-seconds",
        type=float,
        default=10.0,
        help="length of the ramp to --streams (0 skips it; default 10)",
    )
    p.add_argument("--streams", type=int, default=8, help="the ramp's last level (default 8)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds each SDK call may take (default 60)")
    p.add_argument("--ca-cert", metavar="FILE", help="CA bundle (PEM) to verify an https server with")
    p.add_argument("--insecure", action="store_true", help="do not verify the server's TLS certificate")
    p.add_argument("--proxy", metavar="URL", help="HTTP proxy for every call (default: the environment's)")
    p.add_argument("--no-proxy", action="store_true", help="no proxy, whatever the environment says")
