"""The console's offer to clamp requests that cannot fit the server's context (issue 9).

The engine's pre-run check puts a warning in ``Snapshot.warnings`` when the profile can ask for more than
the server's max_model_len and the run does not clamp (it ends with "use --fit-context ..."). The console
asks once; yes restarts the run as if ``--fit-context`` had been given, into a new record (records are never
overwritten: ``run.jsonl`` -> ``run-fit.jsonl``, then ``run-fit-2.jsonl``...), the old record keeping what
it measured; no keeps the run going and says so in the errors panel (``DECLINED``).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from loadgen.config import fresh_seed
from loadgen.run.config import RunConfig
from loadgen.snapshot import Snapshot

UNCLAMPED = "use --fit-context"  # only the warning of a run that sends what cannot fit says this
DECLINED = "not clamped (you answered no): what cannot fit is sent and rejected; --fit-context clamps it"
CLAMP_HOW = "clamp them (max_tokens first, then the prompt)? [y/n]"
# '... against the server's max_model_len 8,192: about 3.1% of requests will be rejected as errors; ...'
CONTEXT_WARNING = re.compile(r"max_model_len (?P<limit>[\d,]+): (?P<share>.+?) will be rejected")


def unclamped_warning(snapshot: Snapshot) -> str | None:
    """The engine's context warning when requests that cannot fit are being sent, else None."""
    return next((text for text in snapshot.warnings if UNCLAMPED in text), None)


def fit_question(warning: str) -> str:
    """'About 3.1% of requests cannot fit max_model_len 8,192 — clamp them (...)? [y/n]'."""
    found = CONTEXT_WARNING.search(warning)
    if found is None:
        return f"Some requests cannot fit the server's max_model_len — {CLAMP_HOW}"
    share = found["share"]
    return f"{share[:1].upper()}{share[1:]} cannot fit max_model_len {found['limit']} — {CLAMP_HOW}"


def fit_out_path(out: str | None) -> str | None:
    """A path next to ``out`` that no record holds yet: 'run.jsonl' -> 'run-fit.jsonl' (or '-fit-2'...)."""
    if not out:
        return out
    path = Path(out)
    for number in range(1, 1000):
        suffix = "-fit" if number == 1 else f"-fit-{number}"
        candidate = path.with_name(f"{path.stem}{suffix}{path.suffix}")
        if not candidate.exists():
            return str(candidate)
    raise RuntimeError(f"no free record path next to {out}")  # a thousand restarts of one run


def fitted_config(config: RunConfig) -> RunConfig:
    """The same run with requests clamped to fit, into a new record. A fresh seed stays fresh (the
    restart must not replay the prompts the server has just cached); the server is no longer cold."""
    return dataclasses.replace(
        config,
        fit_context=True,
        out=fit_out_path(config.out),
        seed=fresh_seed() if config.seed_source == "fresh" else config.seed,
        cold=False,
        record_events=(
            *config.record_events,
            ("restart", {"reason": "fit_context", "previous_record": config.out}),
        ),
    )
