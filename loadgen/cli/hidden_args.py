"""Secrets kept out of ``ramp``'s command line, which every local user reads (``ps``, ``/proc/PID/cmdline``)
for as long as the process lives: a URL's ``user:password@`` (or ``token@``), a secret query parameter
(``?api_key=``), and the value of a key-like flag (``--api-key X``, ``--hf-token=X``, as ``ramp launch``
passes on to a server after ``--``).

Python cannot rewrite its own argv memory, so the entry point re-executes itself once, before anything else
is imported (``reexec_without_secrets``): the same interpreter, flags and arguments, each secret masked
(``http://user:***@host``), the real arguments in the environment variable ``RAMP_HIDDEN_ARGS``. The new
process takes them back and removes the variable at once (``restored``): no child (a load worker, a launched
server) inherits it. A process's environment (``/proc/PID/environ``) is readable by its own user and root
only, like the ``OPENAI_API_KEY`` the docs prefer. Imports nothing beyond the standard library's lightest:
this runs before every command, ``ramp --version`` included.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence

__all__ = ["ENV", "MASK", "arguments", "masked", "reexec_without_secrets", "restored"]

ENV = "RAMP_HIDDEN_ARGS"
MASK = "***"
# scheme://userinfo@: the userinfo is the password (user:pw) or a token on its own (token@)
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/?#\s@,]+)@")
_SECRET_PARAM = re.compile(
    r"(?P<name>[?&;](?:api[_-]?key|key|token|access[_-]?token|auth|password|secret|sig|signature)=)[^&;#\s,]+",
    re.IGNORECASE,
)
# --api-key, --admin-api-key, --hf-token, --token, --password, --secret (not --api-key-env, --max-tokens)
_SECRET_FLAG = re.compile(r"--(?:[\w-]*-)?(?:api-key|token|password|passwd|secret)", re.IGNORECASE)


def _mask_userinfo(match: re.Match[str]) -> str:
    user, colon, _password = match["userinfo"].partition(":")
    return f"{match['scheme']}{user}:{MASK}@" if colon else f"{match['scheme']}{MASK}@"


def masked(args: Sequence[str]) -> list[str]:
    """``args`` as the command line may show them: each secret replaced by ``***``."""
    out: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        flag, eq, _value = arg.partition("=")
        if _SECRET_FLAG.fullmatch(flag):
            out.append(f"{flag}={MASK}" if eq else arg)
            hide_next = not eq
            continue
        if "@" in arg:
            arg = _USERINFO.sub(_mask_userinfo, arg)
        if "=" in arg:
            arg = _SECRET_PARAM.sub(lambda m: m["name"] + MASK, arg)
        out.append(arg)
    return out


def arguments(args: Sequence[str]) -> list[str]:
    """``ramp``'s arguments as typed, from ``args`` (``sys.argv[1:]``): put back from ``RAMP_HIDDEN_ARGS`` in
    the re-executed process; otherwise, when they hold a secret, this process is replaced by one whose command
    line masks it (``reexec_without_secrets``: no return). Masking is idempotent, so this cannot loop."""
    given = restored(args)
    if given == list(args):
        reexec_without_secrets(args)
    return given


def restored(args: Sequence[str]) -> list[str]:
    """The arguments as typed: ``args`` (this process's command line) with the secrets that
    ``reexec_without_secrets`` moved to ``RAMP_HIDDEN_ARGS`` put back, and the variable removed from the
    environment. A variable that does not fit ``args`` (a stray or forged one) is ignored."""
    given = os.environ.pop(ENV, None)
    out = list(args)
    if given is None:
        return out
    try:
        hidden = json.loads(given)
    except ValueError:
        return out
    if not isinstance(hidden, dict):
        return out
    for key, original in hidden.items():
        index = int(key) if isinstance(key, str) and key.isdigit() else -1
        if not (0 <= index < len(out) and isinstance(original, str)):
            return list(args)
        out[index] = original
    # the arguments put back must mask to exactly this command line
    return out if masked(out) == list(args) else list(args)


def reexec_without_secrets(args: Sequence[str]) -> None:
    """When ``args`` (``sys.argv[1:]``) hold a secret, run this same program again with each masked and the
    originals in ``RAMP_HIDDEN_ARGS``: does not return then. Returns when there is nothing to hide, when
    it cannot (no ``sys.orig_argv`` that ends with ``args``, Windows)."""
    if sys.platform == "win32":
        return
    shown = masked(args)
    hidden = {str(i): arg for i, (arg, mask) in enumerate(zip(args, shown, strict=True)) if arg != mask}
    if not hidden:
        return
    orig = list(getattr(sys, "orig_argv", []))
    n = len(args)
    if not sys.executable or len(orig) <= n or (n and orig[-n:] != list(args)):
        return
    # the interpreter's own flags and how it was started (a script's path, or -m loadgen.cli) stay as given
    prefix = orig[: len(orig) - n]
    os.environ[ENV] = json.dumps(hidden)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, *prefix[1:], *shown])
    except OSError:
        os.environ.pop(ENV, None)  # it runs on with the secrets on its command line, as before
