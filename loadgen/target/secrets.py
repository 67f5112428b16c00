"""The secrets ramp knows beyond its own key and the target URL's credentials (``loadgen.target.http``
holds those and ``scrub``): the values of a launched server's arguments that look like keys (``--api-key X``,
``--api-key=X``, ``--hf-token X``, ``HF_TOKEN=X``) and of ramp's environment variables named like keys,
which the server inherits and may log. And text scrubbed before it is cut (``scrub_cut``): a cut taken
first can split a secret, and a split secret no longer matches its mask (the head of a token was shown).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from loadgen.target.http import MASK, scrub

__all__ = ["arg_secrets", "env_secrets", "mask_cut_end", "scrub_cut"]

# A flag whose value is a credential: --api-key, --admin-api-key, --hf-token, --token, --password...
# (not --tokenizer, --max-num-batched-tokens or --ssl-keyfile: the name must end in the word).
_SECRET_FLAG = re.compile(r"^--?(?:[\w-]*[-_])?(?:api[-_]?key|token|secret|password|passwd)$", re.IGNORECASE)
# An environment variable holding one: OPENAI_API_KEY, HF_TOKEN, VLLM_API_KEY, DB_PASSWORD...
_SECRET_ENV = re.compile(r"^(?:[A-Za-z0-9_]*_)?(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD)$", re.IGNORECASE)
MIN_ENV_SECRET = 8  # shorter values (a flag like "1", "true") are not masked everywhere they appear
MIN_CUT_SECRET = 4  # the shortest head of a secret masked at a cut


def arg_secrets(argv: Sequence[str]) -> tuple[str, ...]:
    """The values of ``argv``'s secret flags (``--api-key X`` and ``--api-key=X``) and of its ``NAME=value``
    words whose name is a secret's (``HF_TOKEN=hf_x``, as ``env`` or a shell wrapper takes them)."""
    found: list[str] = []
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if arg.startswith("-") and _SECRET_FLAG.match(name):
            found.append(value if eq else (argv[i + 1] if i + 1 < len(argv) else ""))
        elif eq and _SECRET_ENV.match(name):
            found.append(value)
    return tuple(v for v in found if v)


def env_secrets(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The values of ``environ``'s variables named like credentials, of at least ``MIN_ENV_SECRET`` chars."""
    return tuple(v for k, v in environ.items() if _SECRET_ENV.match(k) and len(v) >= MIN_ENV_SECRET)


def mask_cut_end(text: str, secrets: Iterable[str]) -> str:
    """``text`` (itself cut from a longer text) with a secret's head at its very end masked: the rest of
    that secret was cut away, so ``scrub`` could not match it whole."""
    for secret in secrets:
        for k in range(min(len(secret) - 1, len(text)), MIN_CUT_SECRET - 1, -1):
            if text.endswith(secret[:k]):
                return text[:-k] + MASK
    return text


def scrub_cut(text: str, secrets: Sequence[str], chars: int, *, was_cut: bool = False) -> str:
    """``text`` scrubbed of ``secrets`` (and every pattern ``scrub`` knows), then cut to ``chars``;
    ``was_cut``: the text is the head of a longer one (a body read to a limit): a secret it ends in the
    middle of is masked too."""
    text = scrub(text, secrets)
    if was_cut:
        text = mask_cut_end(text, secrets)
    return text[:chars]
